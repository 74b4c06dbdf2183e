"""The helpers the commands share (robolake.commands.common)."""

from __future__ import annotations

import argparse
import logging
import os

import pytest

from robolake.commands.common import (
    _StderrHandler,
    describe_error,
    lake_state,
    print_summary,
    quiet_logging,
    quiet_ray,
    tqdm_progress,
    train_progress_bar,
)

SUMMARY = {
    "uri": "/lakes/a",
    "version": 3,
    "num_versions": 4,
    "tables": {"episodes": {"rows": 6, "lance_version": 2}, "steps": {"rows": 120, "lance_version": 5}},
    "embodiments": {"bimanual_14dof": {"episodes": 6, "steps": 120, "cameras": ["left", "right"]}},
    "quarantine": {"nan_state": 2, "bad_file": 1},
}


def test_print_summary(capsys):
    print_summary(SUMMARY)
    assert capsys.readouterr().out.splitlines() == [
        "lake /lakes/a  version 3 (4 versions)",
        "  table              rows  lance version",
        "  episodes              6              2",
        "  steps               120              5",
        "  embodiment                episodes     steps  cameras",
        "  bimanual_14dof                   6       120  left, right",
        "  quarantine: bad_file=1, nan_state=2",
    ]


def test_print_summary_of_an_empty_lake(capsys):
    print_summary({**SUMMARY, "tables": {}, "embodiments": {}, "quarantine": {}})
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "  quarantine: empty" and not any("embodiment" in line for line in out)


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (ValueError("raise --max-tokens"), "raise --max-tokens"),
        (FileNotFoundError("no lake at x"), "no lake at x"),
        (KeyError("state"), "missing key 'state'"),
        (
            KeyError("the policy was not trained on embodiment 'sawyer'; it knows gr1"),
            "the policy was not trained on embodiment 'sawyer'; it knows gr1",
        ),
        (TypeError("bad type"), "TypeError: bad type"),
        (RuntimeError(), "RuntimeError"),
    ],
)
def test_describe_error(error, line):
    assert describe_error(error) == f"{line} (run with --debug for a traceback)"


def test_lake_state_names_the_version_a_writing_command_left(packed_data, tmp_path):
    from robolake.lake import Lake

    version = Lake.open(str(packed_data.lake)).version
    for command in ("ingest", "restore", "gc"):
        args = argparse.Namespace(command=command, lake=str(packed_data.lake))
        assert lake_state(args) == f"; the lake is still at version {version}; re-run to resume"
    assert lake_state(argparse.Namespace(command="info", lake=str(packed_data.lake))) == ""
    assert lake_state(argparse.Namespace(command="train", lake=None)) == ""
    fresh = argparse.Namespace(command="ingest", lake=str(tmp_path / "new"))
    assert lake_state(fresh) == "; no lake version was published; re-run to resume"


def test_tqdm_progress_draws_one_bar_per_stage(capsys):
    progress = tqdm_progress()
    progress("ingest", 1, 2)
    progress("ingest", 2, 2)
    progress("pack", 3, 3)
    err = capsys.readouterr().err
    assert "ingest" in err and "2/2" in err and " episodes" in err
    assert "  pack" in err and "3/3" in err and " sequences" in err


def test_train_progress_bar_draws_nothing_before_the_first_step(capsys):
    train_progress_bar(10, "train")
    assert capsys.readouterr().err == ""  # a run that fails while checking its inputs shows no empty bar


def test_checkpoint_state_names_the_newest_checkpoint(tmp_path):
    from robolake.commands.common import checkpoint_state

    args = argparse.Namespace(command="demo", out=str(tmp_path))
    assert checkpoint_state(args) == "; no checkpoint was written yet"
    for step in (3, 12):
        (tmp_path / "train_packed" / "checkpoints" / f"step_{step:08d}").mkdir(parents=True)
    newest = tmp_path / "train_packed" / "checkpoints" / "step_00000012"
    assert checkpoint_state(args) == f"; the newest checkpoint is {newest} (re-run to resume from it)"
    assert checkpoint_state(argparse.Namespace(command="info", out=str(tmp_path))) == ""


def test_train_progress_bar_shows_loss_and_rate(capsys):
    from robolake.training.trainer import TrainProgress

    progress = train_progress_bar(4, "train packed")
    progress(TrainProgress(step=1, total_steps=4, loss=0.5, samples_per_s=12.0, eta_s=3.0))
    progress(TrainProgress(step=4, total_steps=4, loss=0.25, samples_per_s=1234.5, eta_s=0.0, torch_threads=1))
    err = capsys.readouterr().err
    assert "train packed" in err and "4/4" in err and "loss 0.2500, 1,234.5 samples/s" in err and "1 thread" in err


def test_quiet_logging_keeps_one_handler_and_follows_verbose(monkeypatch, capsys):
    monkeypatch.delenv("LANCE_LOG", raising=False)
    log = logging.getLogger("robolake.some.module")
    try:
        quiet_logging(True)
        quiet_logging(True)
        root = logging.getLogger("robolake")
        # one handler of ours however often it runs (pytest may attach its own capture handlers)
        assert sum(isinstance(h, _StderrHandler) for h in root.handlers) == 1 and root.level == logging.INFO
        assert os.environ["LANCE_LOG"] == "info"
        log.info("seen")
        assert capsys.readouterr().err == "INFO robolake.some.module: seen\n"
    finally:
        quiet_logging(False)
    assert sum(isinstance(h, _StderrHandler) for h in logging.getLogger("robolake").handlers) == 1
    log.info("hidden")
    log.warning("shown")
    assert capsys.readouterr().err == "shown\n"
    assert logging.getLogger("ray").level == logging.ERROR


def test_quiet_ray_turns_off_ray_datas_own_bars():
    from ray.data import DataContext

    quiet_logging(False)
    logging.getLogger("ray").setLevel(logging.INFO)  # what `import ray` leaves
    quiet_ray()
    ctx = DataContext.get_current()
    assert ctx.enable_progress_bars is False and ctx.print_on_execution_start is False
    assert logging.getLogger("ray").level == logging.ERROR


def test_a_malformed_storage_option_never_echoes_its_value(capsys):
    # before: `robolake view` repeated the whole pair in its error, a credential included
    from robolake.cli import main

    assert main(["view", "some_lake", "--storage-option", "aws_secret_access_key:SUPERSECRET123"]) == 2
    err = capsys.readouterr().err
    assert "--storage-option must be KEY=VALUE" in err and "SUPERSECRET123" not in err
