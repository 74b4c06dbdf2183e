"""The viewer app served by uvicorn on a free port, read over real HTTP (no browser: see
tests/integration/test_view_browser.py for the pages driven in Chromium)."""

from __future__ import annotations

import http.client
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.view import ViewServer, create_app


def _get(base: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(base + path, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("content-type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("content-type", ""), e.read()


def _raw(server: ViewServer, method: str, path: str) -> int:
    """Status of a request sent with its path exactly as given (urllib would normalise `..`)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.putrequest(method, path, skip_host=True)
    conn.putheader("Host", f"127.0.0.1:{server.port}")
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


def _embedded(html: bytes) -> dict:
    m = re.search(rb'<script id="robolake-data" type="application/json">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1))


def _q(**params: object) -> str:
    return urllib.parse.urlencode(params)


@pytest.fixture(scope="module")
def lake(view_lakes) -> Lake:
    return Lake.open(str(view_lakes.jpeg))


@pytest.fixture(scope="module")
def server(lake) -> Iterator[ViewServer]:
    with ViewServer(create_app(lake), port=0) as s:
        yield s


def test_every_page_renders_with_its_data(server, lake, view_lakes) -> None:
    for path in ("/", "/episodes", "/quarantine"):
        status, ctype, body = _get(server.url, path)
        assert status == 200 and ctype.startswith("text/html")
        assert _embedded(body)["lake"] == {"uri": lake.uri, "version": 3, "tag": None}
    eid = lake.episode_ids()[0]
    status, _, body = _get(server.url, "/episode?" + _q(id=eid))
    data = _embedded(body)["data"]
    assert (
        status == 200
        and data["episode_id"] == eid
        and data["task"] == lake.episodes(where=f"episode_id = '{eid}'")["task"][0].as_py()
    )
    for asset in (
        "common.js",
        "episode.js",
        "lake.js",
        "episodes.js",
        "quarantine.js",
        "view.css",
        "uPlot.iife.min.js",
        "uPlot.min.css",
    ):
        status, _, body = _get(server.url, f"/static/{asset}")
        assert status == 200 and body, asset


def test_api_answers_what_the_pages_draw(server, lake, view_lakes) -> None:
    status, _, body = _get(server.url, "/api/lake")
    assert status == 200 and json.loads(body)["counts"]["episodes"] == 2
    changes = json.loads(_get(server.url, "/api/versions")[2])
    assert changes[-1]["removed"] == 1 and "removed_ids" not in changes[-1]
    page = json.loads(_get(server.url, "/api/episodes?" + _q(sort="num_steps", desc=1, limit=1))[2])
    assert page["total"] == 2 and len(page["rows"]) == 1
    assert json.loads(_get(server.url, "/api/quarantine?reason=missing_video")[2])["total"] == 1
    status, _, body = _get(server.url, "/api/episodes?" + _q(where="import os"))
    assert status == 400 and "not" in json.loads(body)["error"]
    assert _get(server.url, "/api/episodes?sort=content_hash")[0] == 400
    assert _get(server.url, "/api/episodes?limit=many")[0] == 400
    eid = lake.episode_ids()[0]
    lineage = json.loads(_get(server.url, "/api/lineage?" + _q(id=eid))[2])
    assert [r["holds"] for r in lineage] == [False, True, True]


def test_frames_and_steps_are_the_lake_bytes(server, lake) -> None:
    reader = lake.frames()
    for r in lake.episodes(columns=["episode_id", "cameras", "num_steps"]).to_pylist():
        for cam in r["cameras"]:
            for step in (0, r["num_steps"] - 1):
                status, ctype, body = _get(server.url, "/api/frame?" + _q(id=r["episode_id"], camera=cam, step=step))
                assert status == 200 and ctype == "image/jpeg"
                assert body == reader.read_encoded([(r["episode_id"], cam, step)])[0]
        status, _, blob = _get(server.url, "/api/steps?" + _q(id=r["episode_id"]))
        n, s, a, _ = np.frombuffer(blob[:16], "<u4")
        state = np.frombuffer(blob[16 + 8 * n : 16 + 8 * n + 4 * n * s], "<f4").reshape(n, s)
        steps = lake.to_arrow("steps", where=f"episode_id = '{r['episode_id']}'").sort_by("step_index")
        np.testing.assert_array_equal(state, np.array(steps["state"].to_pylist(), dtype=np.float32))


def test_paths_outside_the_lake_and_unknown_names_answer_404(server, lake, view_lakes) -> None:
    eid = lake.episode_ids()[0]
    cam = lake.episodes(columns=["cameras"])["cameras"][0].as_py()[0]
    missing = [
        "/episode?" + _q(id="../../etc/passwd"),
        "/episode?" + _q(id=view_lakes.deleted),  # in an older version, not in this one
        "/episode",
        "/api/episode?" + _q(id="nope"),
        "/api/steps?" + _q(id="../" + eid),
        "/api/lineage?" + _q(id=eid + "/.."),
        "/api/frame?" + _q(id="../../../etc/passwd", camera=cam, step=0),
        "/api/frame?" + _q(id=eid, camera="../../media.lance", step=0),
        "/api/frame?" + _q(id=eid, camera=cam, step=10_000),
        "/api/frame?" + _q(id=eid, camera=cam, step=-1),
        "/static/..%2F..%2Flake%2Flake.py",
        "/static/%2e%2e/app.py",
        "/nothing-here",
    ]
    for path in missing:
        assert _get(server.url, path)[0] == 404, path
    for path in ("/static/../app.py", "/static/../../lake/lake.py", "/api/../../pyproject.toml"):
        assert _raw(server, "GET", path) == 404, path
    status, ctype, body = _get(server.url, "/episode?" + _q(id="../../etc/passwd"))
    assert ctype.startswith("text/html") and _embedded(body)["data"]["status"] == 404


def test_it_only_reads_and_only_answers_loopback_hosts(server, lake) -> None:
    assert _raw(server, "POST", "/api/lake") == 405
    assert _raw(server, "DELETE", "/") == 405
    assert _get(server.url, "/", headers={"Host": "attacker.example"})[0] == 400
    assert _get(server.url, "/", headers={"Host": f"localhost:{server.port}"})[0] == 200
    with ViewServer(create_app(lake, allowed_hosts=None), port=0) as open_server:
        assert _get(open_server.url, "/api/lake", headers={"Host": "viewer.lab.internal"})[0] == 200


def test_a_tag_shows_only_its_episodes(view_lakes) -> None:
    lake = Lake.open(str(view_lakes.jpeg), tag="picked")
    hidden = sorted(set(Lake.open(str(view_lakes.jpeg)).episode_ids()) - set(view_lakes.tagged))
    with ViewServer(create_app(lake), port=0) as s:
        page = json.loads(_get(s.url, "/api/episodes")[2])
        assert [r["episode_id"] for r in page["rows"]] == list(view_lakes.tagged)
        assert _get(s.url, "/episode?" + _q(id=view_lakes.tagged[0]))[0] == 200
        assert _get(s.url, "/episode?" + _q(id=hidden[0]))[0] == 404
        assert _embedded(_get(s.url, "/")[2])["lake"]["tag"] == "picked"


def test_h264_frames_arrive_as_png(view_lakes) -> None:
    lake = Lake.open(str(view_lakes.h264))
    r = lake.episodes(columns=["episode_id", "cameras"]).to_pylist()[0]
    with ViewServer(create_app(lake), port=0) as s:
        status, ctype, body = _get(s.url, "/api/frame?" + _q(id=r["episode_id"], camera=r["cameras"][0], step=5))
    assert status == 200 and ctype == "image/png" and body.startswith(b"\x89PNG")


# --- [30] damaged data answers the CLI's one line, never a 500 -------------------------------------------------


def _damaged_copy(view_lakes, tmp_path, how: str):
    import shutil

    dst = tmp_path / "lake"
    shutil.copytree(view_lakes.jpeg, dst)
    lake = Lake.open(str(dst))
    table = "media" if how == "truncate" else "steps"
    files = [
        dst / f"{table}.lance" / "data" / df.path
        for f in lake.dataset(table).get_fragments()
        for df in f.metadata.files
    ]
    if how == "truncate":
        for p in files:
            p.write_bytes(p.read_bytes()[:100])
    elif how == "delete":
        for p in files:
            p.unlink()
    else:
        (dst / "_robolake" / "tags" / "picked.json").write_text("{not json")
    return lake if how != "tag" else Lake.open(str(dst))


@pytest.mark.parametrize("how", ["truncate", "delete", "tag"])
def test_damaged_data_is_one_line_never_500(view_lakes, tmp_path, how, caplog) -> None:
    lake = _damaged_copy(view_lakes, tmp_path, how)
    ids = sorted(lake.episode_ids())
    with ViewServer(create_app(lake), port=0) as s:
        paths = ["/", "/episodes", f"/episode?{_q(id=ids[0])}", "/quarantine", "/api/lake", "/api/versions",
                 f"/api/episodes?{_q(where='num_steps > 0')}", f"/api/episode?{_q(id=ids[0])}",
                 f"/api/lineage?{_q(id=ids[0])}", f"/api/steps?{_q(id=ids[0])}", "/api/quarantine"]  # fmt: skip
        cams = lake.episodes(columns=["cameras"])["cameras"][0].as_py()
        paths.append(f"/api/frame?{_q(id=ids[0], camera=cams[0], step=0)}")
        statuses = {}
        for path in paths:
            status, ctype, body = _get(s.url, path)
            statuses[path] = status
            assert status != 500, (path, body[:300])
            if status >= 400 and path.startswith("/api/"):
                error = json.loads(body)["error"]
                assert "\n" not in error and "Traceback" not in error, error
    assert any(code == 503 for code in statuses.values()) or how == "tag", statuses
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records if r.exc_info]
