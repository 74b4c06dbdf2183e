"""The README's main job: `robolake demo` runs the whole flow and writes its report."""

from __future__ import annotations

import json

import pytest

from robolake.cli import main as cli_main
from robolake.demo import DemoConfig, run_demo


def test_demo_quick_writes_report(tmp_path, ray_session):
    out = tmp_path / "demo"
    fig = run_demo(DemoConfig(out=str(out), quick=True, steps=12, sim="off"))
    report = (out / "report.md").read_text()
    for png in ("lengths.png", "fill.png", "loss.png", "throughput.png"):
        assert (out / png).stat().st_size > 1000
        assert png in report
    assert fig["ingest"]["episodes"] == 12
    assert fig["pack"]["fill"]["bfd"] > fig["pack"]["padded_fill"]
    assert fig["train"]["packed_tokens_per_s"] > 0 and fig["train"]["padded_tokens_per_s"] > 0
    assert fig["eval"]["samples"] > 0 and fig["eval"]["baseline_mse"] > 0
    assert json.loads((out / "report.json").read_text())["pack"]["sequences"] == fig["pack"]["sequences"]

    # The same lake and shards through the CLI: train resumes nothing, runs 3 steps, writes metrics.
    assert cli_main(["train", "--shards", str(out / "packed_train"), "--out", str(tmp_path / "t"), "--steps", "3", "--workers", "0"]) == 0
    lines = (tmp_path / "t" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3 and "effective_tokens_per_s" in json.loads(lines[-1])
    # A second demo run over the same directory re-ingests nothing (idempotent) and still completes.
    again = run_demo(DemoConfig(out=str(out), quick=True, steps=3, sim="off"))
    assert again["ingest"]["new"] == 0


@pytest.mark.slow
def test_demo_closed_loop_quick(tmp_path, ray_session):
    """The closed-loop demo (sim extra): record -> ingest -> pack -> train -> evaluate, eval.json and a video."""
    pytest.importorskip("metaworld")
    out = tmp_path / "demo_sim"
    fig = run_demo(DemoConfig(out=str(out), quick=True, steps=20, sim="on"))
    result = json.loads((out / "eval.json").read_text())
    assert set(result["tasks"]) == {"reach", "push", "pick-place", "drawer-open", "button-press"}
    for t in result["tasks"].values():
        assert t["episodes"] == 2 and 0.0 <= t["success_rate"] <= 1.0 and len(t["ci95"]) == 2
    assert {"mean_success", "expert_mean_success", "floor_mean_success"} <= set(result)
    assert fig["ingest"]["episodes"] == fig["record"]["episodes"]
    report = (out / "report.md").read_text()
    assert "Closed loop" in report and "success.png" in report
    assert result["videos"] and all((out / "videos").glob("*.gif"))
