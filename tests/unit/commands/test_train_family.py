"""`robolake train --family pi0` trains the pi0-style model on the same shards and the checkpoint says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from robolake.cli import main


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("ROBOLAKE_TORCH_THREADS", "1")


def test_train_family_pi0_is_recorded_in_the_checkpoint(packed_data, tmp_path: Path, capsys) -> None:
    from robolake.training.checkpoint import read_checkpoint

    run = tmp_path / "run"
    args = ["train", "--shards", str(packed_data.packed), "--out", str(run), "--steps", "2", "--workers", "0"]
    assert main([*args, "--family", "pi0", "--no-progress"]) == 0
    assert "pi0 family" in capsys.readouterr().out
    assert read_checkpoint(str(run)).extra["model_config"]["family"] == "pi0"


def test_train_refuses_an_unknown_family(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--shards", "x", "--out", "y", "--family", "pi1"])
    assert "invalid choice: 'pi1'" in capsys.readouterr().err
