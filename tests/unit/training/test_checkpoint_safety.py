"""A crafted pickle checkpoint is refused by everything that loads a checkpoint, and never runs.

The crafted `step_00000001.pt` creates a marker file when it is unpickled (as a real attack would
run a shell). The first test proves it does; every other test hands it to one of robolake's
loaders (the Python API, `train` resume, `robolake eval`, `robolake train`, `robolake rl --init`,
`robolake lineage`, `robolake convert-checkpoint` without `--trust`) and checks the refusal is one
line naming the conversion command and that the marker never appears. (No command exports a
policy: `robolake export` writes lake data only.)
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from robolake.cli import main
from robolake.training import GrootModel, ModelConfig, TrainConfig, train
from robolake.training.checkpoint import LegacyCheckpointError, load_checkpoint, read_checkpoint


class _RunsCode:
    """Unpickling this opens (creates) `marker`: code of the file's author ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.marker, "w"))


def _crafted_run(root: Path, *, via: str = "torch") -> tuple[Path, Path]:
    """(run directory holding checkpoints/step_00000001.pt that runs code, the marker it would create)."""
    marker = root / "pwned.marker"
    ckpts = root / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    payload = {"step": 1, "model": {}, "extra": {"model_config": {}, "policy": _RunsCode(marker)}}
    path = ckpts / "step_00000001.pt"
    if via == "torch":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload))
    return root / "run", marker


@pytest.mark.parametrize("via", ["torch", "pickle"])
def test_the_crafted_checkpoint_runs_code_when_fully_unpickled(tmp_path: Path, via: str) -> None:
    run, marker = _crafted_run(tmp_path, via=via)
    path = run / "checkpoints" / "step_00000001.pt"
    if via == "torch":
        torch.load(path, weights_only=False)
    else:
        pickle.loads(path.read_bytes())
    assert marker.exists()  # the attack works against a plain torch.load: the tests below can fail


@pytest.mark.parametrize("via", ["torch", "pickle"])
def test_the_python_api_refuses_it(tmp_path: Path, via: str) -> None:
    from robolake.sim.learned import LearnedPolicy

    run, marker = _crafted_run(tmp_path, via=via)
    model = GrootModel(ModelConfig.preset("tiny"))
    for load in (
        lambda: read_checkpoint(run),
        lambda: load_checkpoint(run / "checkpoints" / "step_00000001.pt", model=model),
        lambda: LearnedPolicy.from_checkpoint(run),
    ):
        with pytest.raises(LegacyCheckpointError, match=r"robolake convert-checkpoint .*run --trust"):
            load()
    assert not marker.exists()


def test_train_resume_refuses_it(tmp_path: Path, batch_factory) -> None:
    run, marker = _crafted_run(tmp_path)
    config = TrainConfig(total_steps=2, warmup_steps=0, checkpoint_dir=str(run / "checkpoints"))
    with pytest.raises(LegacyCheckpointError, match="convert-checkpoint"):
        train(config, [batch_factory(n=2)])
    assert not marker.exists()


def test_rl_init_refuses_it_before_ray_starts(tmp_path: Path, capsys) -> None:
    from robolake.rl.setup import make_factories

    run, marker = _crafted_run(tmp_path)
    with pytest.raises(LegacyCheckpointError, match="convert-checkpoint"):
        make_factories("point", None, str(run))
    rc = main(["rl", "--sim", "point", "--init", str(run), "--out", str(tmp_path / "rl"), "--steps", "8"])
    err = capsys.readouterr().err
    assert rc == 2 and "convert-checkpoint" in err and len(err.strip().splitlines()) == 1
    assert not marker.exists()


def test_eval_refuses_it(tmp_path: Path, capsys) -> None:
    pytest.importorskip("metaworld")
    run, marker = _crafted_run(tmp_path)
    rc = main(
        ["eval", "--sim", "metaworld", "--checkpoint", str(run), "--episodes", "1", "--no-baselines", "--workers", "0"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "robolake convert-checkpoint" in err and len(err.strip().splitlines()) == 1, err
    assert not marker.exists()


def test_train_command_resume_refuses_it(packed_data, tmp_path: Path, capsys) -> None:
    run, marker = _crafted_run(tmp_path)
    rc = main(
        [
            "train",
            "--shards",
            str(packed_data.packed),
            "--out",
            str(run),
            "--steps",
            "3",
            "--workers",
            "0",
            "--device",
            "cpu",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "robolake convert-checkpoint" in err and len(err.strip().splitlines()) == 1, err
    assert not marker.exists()


def test_lineage_refuses_it(tmp_path: Path, capsys) -> None:
    run, marker = _crafted_run(tmp_path)
    rc = main(["lineage", str(run)])
    err = capsys.readouterr().err
    assert rc == 2 and "robolake convert-checkpoint" in err and len(err.strip().splitlines()) == 1, err
    assert not marker.exists()


def test_convert_without_trust_refuses_it(tmp_path: Path, capsys) -> None:
    run, marker = _crafted_run(tmp_path)
    assert main(["convert-checkpoint", str(run)]) == 1
    err = capsys.readouterr().err
    assert "--trust" in err and "step_00000001.pt" in err
    assert not marker.exists() and not (run / "checkpoints" / "step_00000001").exists()
