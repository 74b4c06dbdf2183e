"""bench scale's issue-26 parts on tiny data: the verbs table, its ratios and flatness, the table
rows, and the task hold point the node-loss runs use."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from robolake.bench._scale_verbs import METADATA_VERBS, verbs
from robolake.bench.scale import _rows
from robolake.ray_tasks import HOLD_ENV, _JsonTask, fan_out, hold_point


class _Stage:
    def __call__(self, index: int) -> dict[str, int]:
        return {"twice": 2 * index}


def test_hold_point_is_inert_without_its_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HOLD_ENV, raising=False)
    hold_point("_Stage", 0)
    monkeypatch.setenv(HOLD_ENV, str(tmp_path))  # named, but no hold-_Stage file: not held either
    hold_point("_Stage", 0)
    assert os.listdir(tmp_path) == []


def test_a_held_task_marks_where_it_is_and_goes_on_when_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOLD_ENV, str(tmp_path))
    (tmp_path / "hold-_Stage").touch()
    (tmp_path / "go-_Stage").touch()  # already let go: the task returns at once
    row = _JsonTask(_Stage())({"chunk": 3})
    assert json.loads(row["result"]) == {"twice": 6}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("held-")] == [f"held-_Stage-3-{os.getpid()}"]


def test_fan_out_in_process_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HOLD_ENV, raising=False)
    assert dict(fan_out(_Stage(), 3, local=True)) == {0: {"twice": 0}, 1: {"twice": 2}, 2: {"twice": 4}}


@pytest.mark.slow  # about 20 s: two lakes ingested, every verb once
def test_verbs_on_two_tiny_lakes_written_by_ingest(tmp_path: Path) -> None:
    res = verbs(str(tmp_path), {"a": 6, "b": 12}, steps=10, repeats=1)
    key = res["ratio_key"]
    assert key == "ratio_b_over_a"
    assert {"info", "check", "select", "delete", "tag", "diff", "lineage", "doctor", "pack_plan"} <= set(res["verbs"])
    assert {
        "view_lake_first_byte",
        "view_episodes_first_byte",
        "view_api_first_page",
        "view_api_deep_page",
        "check_quick",
        "open_batches_first_batch",
    } <= set(res["verbs"])
    for name, v in res["verbs"].items():
        assert v["metadata"] == (name in METADATA_VERBS)
        assert v[key] > 0 and v[f"{key}_range"][0] <= v[key] <= v[f"{key}_range"][1]
        assert ("flat" in v) == v["metadata"] and ("episodes_per_s" in v) != v["metadata"]
    assert res["lakes"]["a"]["episodes"] == 6 and res["lakes"]["b"]["episodes"] == 12
    # the verbs leave each lake as it was (select and delete are restored), and the build is reused
    from robolake.bench._scale_verbs import build_ingested_lake
    from robolake.lake import Lake

    assert all(Lake.open(build_ingested_lake(str(tmp_path), n, 10)).count("episodes") == n for n in (6, 12))
    rows = dict(_rows({"layout": "x", "verbs": res["verbs"], "verb_lakes": res}))
    assert any(k.startswith("verb select:") for k in rows)
