"""The README's main job: `robolake demo` runs the whole flow and writes its report."""

from __future__ import annotations

import json

import pytest

from robolake.cli import main as cli_main
from robolake.demo import DemoConfig, run_demo


class _CtrlCAt:
    """A train_progress factory that presses Ctrl-C once the packed run reaches `step`."""

    def __init__(self, step: int) -> None:
        self.step = step

    def __call__(self, total: int, desc: str):
        def progress(p) -> None:
            if desc == "train packed" and p.step >= self.step:
                raise KeyboardInterrupt

        return progress


def test_demo_quick_writes_report(tmp_path, ray_session):
    out = tmp_path / "demo"
    # Interrupted during training: the checkpoints written so far (every fifth of the steps) stay...
    with pytest.raises(KeyboardInterrupt):
        run_demo(DemoConfig(out=str(out), quick=True, steps=12, sim="off"), train_progress=_CtrlCAt(7))
    ckpts = sorted(p.name for p in (out / "train_packed" / "checkpoints").iterdir())
    assert ckpts and ckpts[-1] == "step_00000006"
    # ...and the next run continues from the newest one, then keeps only its last checkpoint.
    fig = run_demo(DemoConfig(out=str(out), quick=True, steps=12, sim="off"))
    assert fig["train"]["resumed_from_step"] == 6 and fig["ingest"]["new"] == 0  # and re-ingested nothing
    assert sorted(p.name for p in (out / "train_packed" / "checkpoints").iterdir()) == ["step_00000012"]
    report = (out / "report.md").read_text()
    assert fig["checkpoint"].endswith("step_00000012") and "train_packed/checkpoints/step_00000012" in report
    padded = fig["train"]["batch_padding_fraction"] >= 0.01
    for png in ("lengths.png", "fill.png", "loss.png", *(["throughput.png"] if padded else [])):
        assert (out / png).stat().st_size > 1000
        assert png in report
    assert fig["ingest"]["episodes"] == 12
    assert fig["pack"]["fill"]["bfd"] > fig["pack"]["padded_fill"]
    assert fig["train"]["packed_tokens_per_s"] > 0
    assert ("padded_tokens_per_s" in fig["train"]) == padded
    if padded:
        assert fig["train"]["padded_tokens_per_s"] > 0 and fig["train"]["padded_padding_fraction"] > 0
    assert fig["eval"]["samples"] > 0 and fig["eval"]["baseline_mse"] > 0
    assert json.loads((out / "report.json").read_text())["pack"]["sequences"] == fig["pack"]["sequences"]

    # The same lake and shards through the CLI: train resumes nothing, runs 3 steps, writes metrics.
    assert (
        cli_main(
            [
                "train",
                "--shards",
                str(out / "packed_train"),
                "--out",
                str(tmp_path / "t"),
                "--steps",
                "3",
                "--workers",
                "0",
            ]
        )
        == 0
    )
    lines = (tmp_path / "t" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3 and "effective_tokens_per_s" in json.loads(lines[-1])


def test_no_padding_no_claim_about_padding():
    from robolake.demo import _throughput_note, _throughput_row

    tr = {"packed_tokens_per_s": 9000.0, "batch_padding_fraction": 0.0}
    row, note = _throughput_row(tr), _throughput_note(tr)
    assert "no padded baseline" in row and "0.0%" in row and "x padded" not in row
    assert "the padding" not in note.replace("padding them", "") and "runs none" in note
    tr = {
        **tr,
        "batch_padding_fraction": 0.3,
        "padded_tokens_per_s": 6000.0,
        "padded_padding_fraction": 0.3,
        "speedup_packed_vs_padded": 1.5,
    }
    assert "1.50x padded" in _throughput_row(tr) and "30.0% of the padded token grid" in _throughput_row(tr)
    assert "30.0% of its token grid is padding" in _throughput_note(tr)


def test_quick_demo_runs_episodes_to_each_tasks_own_limit():
    from robolake.demo import eval_config

    for quick in (True, False):
        assert eval_config(DemoConfig(quick=quick)).rollout.max_steps is None  # no cap that cuts the expert off


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
    # episodes run to each task's own limit: the scripted expert succeeds on every task
    assert result["expert_mean_success"] == 1.0, result["baselines"]["expert"]["tasks"]
    assert "step limit" in report and fig["checkpoint"] in report or "checkpoints/step_" in report
