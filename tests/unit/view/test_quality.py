"""Quality in the viewer: a flags column in the episodes table, a panel on the episode page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from robolake.lake import Lake
from robolake.view import ViewServer, create_app
from robolake.view.catalog import LakeCatalog
from robolake.view.episodes import EpisodeCatalog, EpisodeQuery, _flags, _quality


def test_rows_and_detail_carry_the_quality(view_lakes) -> None:
    eps = EpisodeCatalog(LakeCatalog(Lake.open(str(view_lakes.jpeg))))
    rows = eps.page(EpisodeQuery())["rows"]
    assert rows and all(isinstance(r["quality_flags"], list) for r in rows)  # measured at ingest
    d = eps.detail(rows[0]["episode_id"])
    assert d is not None and d["quality"]["measured"] is True
    assert "idle_fraction" in d["quality"]["numbers"]
    assert {f["check"] for f in d["quality"]["findings"]} == set(rows[0]["quality_flags"])


def test_flags_follow_the_doctor_and_none_without_quality() -> None:
    row = {"episode_id": "e", "embodiment": "r", "task": "t", "num_steps": 50, "fps": 10.0}
    assert _flags(row, {}) is None
    assert _quality(row, {}) == {"measured": False, "findings": [], "numbers": {}}
    meta = {"quality": {"frozen_state": True, "state_min": [0, 0], "zero_rows": 2, "zero_row_steps": [0, 1]}}
    assert _flags(row, meta) == ["frozen_state", "zero_rows"]
    panel = _quality(row, meta)
    assert panel["numbers"]["zero_rows"] == 2 and [f["check"] for f in panel["findings"]] == [
        "frozen_state",
        "zero_rows",
    ]


@pytest.fixture(scope="module")
def server(view_lakes) -> Iterator[ViewServer]:
    with ViewServer(create_app(Lake.open(str(view_lakes.jpeg))), port=0) as s:
        yield s


def test_the_episode_page_embeds_the_quality_escaped(server, view_lakes) -> None:
    import urllib.parse
    import urllib.request

    eid = Lake.open(str(view_lakes.jpeg)).episode_ids()[0]
    with urllib.request.urlopen(server.url + "/episode?" + urllib.parse.urlencode({"id": eid}), timeout=30) as r:
        html = r.read()
    assert b'<div id="quality">' in html
    m = re.search(rb'<script id="robolake-data" type="application/json">(.*?)</script>', html, re.S)
    assert m is not None and json.loads(m.group(1))["data"]["quality"]["measured"] is True
    with urllib.request.urlopen(server.url + "/api/episodes", timeout=30) as r:
        assert all("quality_flags" in row for row in json.loads(r.read())["rows"])
    with urllib.request.urlopen(server.url + "/static/episode.js", timeout=30) as r:
        js = r.read().decode()
    assert "innerHTML" not in js  # the panel is built from text nodes (robolake.el): data is never markup
