"""Checkpoints: every rank's loader state keyed by rank, tensors and JSON only, atomic writes,
legacy pickles loaded only by the restricted unpickler (or converted on the user's word)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from robolake.training import GrootModel, ModelConfig, TrainConfig, build_optimizer, build_scheduler
from robolake.training.checkpoint import (
    LegacyCheckpointError,
    convert_legacy_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    read_checkpoint,
    sample_ledger,
    save_checkpoint,
)


def _objects(seed: int = 0) -> tuple[GrootModel, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    torch.manual_seed(seed)
    model = GrootModel(ModelConfig.preset("tiny"))
    optimizer = build_optimizer(model, TrainConfig())
    return model, optimizer, build_scheduler(optimizer, warmup_steps=1, total_steps=10, min_lr_ratio=0.1)


def _stepped() -> tuple[GrootModel, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """Objects after one optimizer step, so AdamW has moments to save."""
    model, optimizer, scheduler = _objects()
    sum(p.sum() for p in model.parameters()).backward()
    optimizer.step()
    scheduler.step()
    return model, optimizer, scheduler


def _state(rank: int, world_size: int, batches_done: int) -> dict:
    return {"rank": rank, "world_size": world_size, "epoch": 1, "batches_done": batches_done, "source": "packed/"}


def test_every_rank_gets_back_the_loader_state_it_saved(tmp_path: Path) -> None:
    model, optimizer, scheduler = _objects()
    states = {0: _state(0, 2, 3), 1: _state(1, 2, 4)}
    path = save_checkpoint(
        tmp_path, step=7, model=model, optimizer=optimizer, scheduler=scheduler, loader_states=states
    )
    assert latest_checkpoint(tmp_path) == path
    restored = load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)
    assert restored.step == 7 and restored.world_size == 2
    assert restored.loader_states == states
    assert [restored.loader_state(r) for r in (0, 1)] == [states[0], states[1]]


def test_another_world_size_gets_the_saved_states_for_the_source_to_judge(tmp_path: Path) -> None:
    """Fewer ranks: each keeps its own; more ranks: the new ones get rank 0's (the batch source
    then accepts it only at an epoch boundary, see LoaderState.resume_from)."""
    model, optimizer, scheduler = _objects()
    states = {0: _state(0, 2, 3), 1: _state(1, 2, 3)}
    path = save_checkpoint(
        tmp_path, step=1, model=model, optimizer=optimizer, scheduler=scheduler, loader_states=states
    )
    restored = load_checkpoint(path, model=model)
    assert [restored.loader_source_rank(r) for r in range(4)] == [0, 1, 0, 0]
    assert restored.loader_state(3) == states[0]


def test_no_loader_states_and_bad_keys(tmp_path: Path) -> None:
    model, optimizer, scheduler = _objects()
    path = save_checkpoint(tmp_path, step=2, model=model, optimizer=optimizer, scheduler=scheduler)
    restored = load_checkpoint(path, model=model)
    assert restored.loader_states is None and restored.world_size is None and restored.loader_state(0) is None
    with pytest.raises(ValueError, match="every rank 0..n-1"):
        save_checkpoint(tmp_path, step=3, model=model, optimizer=optimizer, scheduler=scheduler, loader_states={1: {}})


def test_a_checkpoint_is_safetensors_and_json_and_loads_without_unpickling(tmp_path: Path, monkeypatch) -> None:
    model, optimizer, scheduler = _stepped()
    gen = torch.Generator().manual_seed(5)
    path = save_checkpoint(
        tmp_path,
        step=3,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        generator=gen,
        extra={"note": "x"},
        lineage={"lake_uri": "/lake", "lake_version": 2},
    )

    def draws(g: torch.Generator) -> tuple:
        return torch.rand(3), float(np.random.rand()), random.random(), torch.rand(2, generator=g)

    after_save = draws(gen)  # what every RNG gives next from the saved states
    assert path.name == "step_00000003" and path.is_dir()
    assert sorted(p.name for p in path.iterdir()) == ["checkpoint.json", "model.safetensors", "optimizer.safetensors"]
    meta = json.loads((path / "checkpoint.json").read_text())
    assert meta["format"] == "robolake-checkpoint" and meta["step"] == 3 and meta["extra"] == {"note": "x"}
    assert meta["lineage"] == {"lake_uri": "/lake", "lake_version": 2}

    # Reading it never reaches a pickle: torch.load and pickle's loaders are out of reach here.
    def refuse(*a, **k):
        raise AssertionError("a checkpoint load unpickled something")

    import pickle

    for owner, name in ((torch, "load"), (pickle, "load"), (pickle, "loads"), (pickle, "Unpickler")):
        monkeypatch.setattr(owner, name, refuse)
    model2, optimizer2, scheduler2 = _objects(seed=1)
    gen2 = torch.Generator()
    restored = load_checkpoint(path, model=model2, optimizer=optimizer2, scheduler=scheduler2, generator=gen2)
    assert restored.step == 3 and restored.lineage == {"lake_uri": "/lake", "lake_version": 2}
    for (name, a), b in zip(model.state_dict().items(), model2.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    s1, s2 = optimizer.state_dict(), optimizer2.state_dict()
    assert s1["param_groups"] == s2["param_groups"] and s1["state"].keys() == s2["state"].keys()
    for pid, st in s1["state"].items():
        for k, v in st.items():
            assert torch.equal(v, s2["state"][pid][k]), (pid, k)
    assert scheduler2.state_dict() == scheduler.state_dict()
    got = draws(gen2)
    assert torch.equal(got[0], after_save[0]) and got[1:3] == after_save[1:3] and torch.equal(got[3], after_save[3])


def test_tied_weights_are_saved(tmp_path: Path) -> None:
    model, optimizer, scheduler = _objects()
    state = model.state_dict()
    name = next(k for k, v in state.items() if v.ndim == 2)
    from robolake.training.checkpoint import write_checkpoint

    shared = {"a": state[name], "b": state[name], "c": state[name][0]}
    path = write_checkpoint(tmp_path, step=1, tensors={"model": shared}, meta={})
    back = read_checkpoint(path).model_state()
    assert all(torch.equal(back[k], v) for k, v in shared.items())


def test_a_killed_save_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    """A process killed (SIGKILL) while writing step 4's weights: step 2 is still the newest, whole,
    checkpoint, and the next save clears what the dead one left."""
    model, optimizer, scheduler = _objects()
    first = save_checkpoint(tmp_path, step=2, model=model, optimizer=optimizer, scheduler=scheduler)
    script = f"""
import os, safetensors.torch as st
from robolake.training import GrootModel, ModelConfig, TrainConfig, build_optimizer, build_scheduler
from robolake.training.checkpoint import save_checkpoint
real = st.save_file
def dying(tensors, path, *a, **k):
    real(tensors, path, *a, **k)
    os.kill(os.getpid(), 9)
st.save_file = dying
model = GrootModel(ModelConfig.preset("tiny"))
opt = build_optimizer(model, TrainConfig())
scheduler = build_scheduler(opt, warmup_steps=1, total_steps=10, min_lr_ratio=0.1)
save_checkpoint({str(tmp_path)!r}, step=4, model=model, optimizer=opt, scheduler=scheduler)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert latest_checkpoint(tmp_path) == first
    assert not (tmp_path / "step_00000004").exists()
    assert any(p.name.startswith(".step_00000004.tmp-") for p in tmp_path.iterdir())  # what the kill left
    assert read_checkpoint(first).step == 2 and load_checkpoint(first, model=model).step == 2
    save_checkpoint(tmp_path, step=6, model=model, optimizer=optimizer, scheduler=scheduler)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000002", "step_00000006"]


def test_resaving_a_step_killed_between_its_renames_is_put_back(tmp_path: Path) -> None:
    model, optimizer, scheduler = _objects()
    path = save_checkpoint(tmp_path, step=2, model=model, optimizer=optimizer, scheduler=scheduler)
    os.replace(path, tmp_path / ".step_00000002.old-0123456789ab")  # moved aside; the new copy never landed
    assert latest_checkpoint(tmp_path) is None
    save_checkpoint(tmp_path, step=3, model=model, optimizer=optimizer, scheduler=scheduler)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000002", "step_00000003"]
    assert read_checkpoint(tmp_path / "step_00000002").step == 2
    again = save_checkpoint(tmp_path, step=3, model=model, optimizer=optimizer, scheduler=scheduler, extra={"v": 2})
    assert read_checkpoint(again).extra == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000002", "step_00000003"]


def test_a_damaged_or_foreign_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    model, optimizer, scheduler = _objects()
    path = save_checkpoint(tmp_path, step=1, model=model, optimizer=optimizer, scheduler=scheduler)
    (path / "model.safetensors").write_bytes(b"\x00" * 16)
    with pytest.raises(ValueError, match="model.safetensors is not a readable safetensors file"):
        load_checkpoint(path, model=model)
    (path / "checkpoint.json").write_text("{")
    with pytest.raises(ValueError, match="checkpoint.json is not valid JSON"):
        read_checkpoint(path)
    (path / "checkpoint.json").write_text(json.dumps({"format": "something-else", "step": 1}))
    with pytest.raises(ValueError, match="not a robolake checkpoint"):
        read_checkpoint(path)


def test_a_symlinked_file_is_refused(tmp_path: Path) -> None:
    model, optimizer, scheduler = _objects()
    path = save_checkpoint(tmp_path / "a", step=1, model=model, optimizer=optimizer, scheduler=scheduler)
    outside = tmp_path / "outside.safetensors"
    os.replace(path / "model.safetensors", outside)
    (path / "model.safetensors").symlink_to(outside)
    with pytest.raises(ValueError, match="is a symlink"):
        load_checkpoint(path, model=model)


def _legacy_trainer_payload(model, optimizer, scheduler) -> dict:
    """What robolake's trainer pickled before checkpoints were safetensors + JSON."""
    return {
        "step": 5,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(),
            "python": random.getstate(),
            "generator": None,
        },
        "loaders": {"0": _state(0, 1, 5)},
        "extra": {"layout": "packed"},
    }


def test_a_legacy_trainer_pickle_is_refused_until_converted_with_trust(tmp_path: Path) -> None:
    model, optimizer, scheduler = _stepped()
    ckpts = tmp_path / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    legacy = ckpts / "step_00000005.pt"
    torch.save(_legacy_trainer_payload(model, optimizer, scheduler), legacy)
    assert latest_checkpoint(ckpts) == legacy
    fresh, fresh_opt, _ = _objects(seed=1)
    with pytest.raises(LegacyCheckpointError, match=r"robolake convert-checkpoint .*run --trust"):
        load_checkpoint(legacy, model=fresh)
    with pytest.raises(LegacyCheckpointError):
        convert_legacy_checkpoint(legacy)  # without trust, only the restricted unpickler
    out = convert_legacy_checkpoint(legacy, trust=True)
    assert out == ckpts / "step_00000005" and latest_checkpoint(ckpts) == out and legacy.exists()
    restored = load_checkpoint(tmp_path / "run", model=fresh, optimizer=fresh_opt)
    assert restored.step == 5 and restored.loader_state(0) == _state(0, 1, 5)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert torch.equal(fresh_opt.state_dict()["state"][0]["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])


def test_a_legacy_pickle_of_tensors_and_plain_values_loads_with_weights_only(tmp_path: Path) -> None:
    """An older RL policy checkpoint ({step, model, extra}) needs no trust: weights_only accepts it."""
    model, _, _ = _objects()
    legacy = tmp_path / "step_00000003.pt"
    torch.save({"step": 3, "model": model.state_dict(), "extra": {"rl_init": None}}, legacy)
    ckpt = read_checkpoint(tmp_path)
    assert ckpt.step == 3 and ckpt.extra == {"rl_init": None} and set(ckpt.model_state()) == set(model.state_dict())
    out = convert_legacy_checkpoint(legacy)
    assert read_checkpoint(out).extra == {"rl_init": None}


def test_sample_ledger_pins_the_record(tmp_path: Path) -> None:
    assert sample_ledger(None, 0) is None and sample_ledger(tmp_path, 0) is None
    (tmp_path / "rank1.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    ledger = sample_ledger(tmp_path, 1)
    assert ledger is not None and ledger["file"] == "rank1.jsonl" and ledger["lines"] == 2
    import hashlib

    assert ledger["sha256"] == hashlib.sha256((tmp_path / "rank1.jsonl").read_bytes()).hexdigest()


# --- [30] a run folder handed over cannot make robolake read or write outside it ---------------------------


def _linked_run(tmp_path: Path, *, link: str) -> tuple[Path, Path]:
    """(a run whose checkpoints/ or checkpoints/step_N is a symlink to a folder outside it, that folder)."""
    model, optimizer, scheduler = _objects()
    elsewhere = tmp_path / "someone_elses"
    save_checkpoint(elsewhere, step=1, model=model, optimizer=optimizer, scheduler=scheduler)
    run = tmp_path / "run"
    (run / "checkpoints").parent.mkdir(parents=True)
    if link == "checkpoints":
        (run / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    else:
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "step_00000001").symlink_to(elsewhere / "step_00000001", target_is_directory=True)
    return run, elsewhere


@pytest.mark.parametrize("link", ["checkpoints", "step"])
def test_a_linked_checkpoints_folder_is_refused_not_followed(tmp_path: Path, link: str) -> None:
    from robolake.storage import OutsideRootError

    run, elsewhere = _linked_run(tmp_path, link=link)
    before = sorted(p.name for p in elsewhere.rglob("*"))
    model, optimizer, scheduler = _objects()
    with pytest.raises(OutsideRootError, match="leads outside"):
        load_checkpoint(run, model=model)
    with pytest.raises(OutsideRootError, match="leads outside"):
        save_checkpoint(run / "checkpoints", step=1, model=model, optimizer=optimizer, scheduler=scheduler)
    assert sorted(p.name for p in elsewhere.rglob("*")) == before  # nothing written there


def test_train_fresh_and_resume_never_touch_a_linked_checkpoints_folder(packed_data, tmp_path: Path, capsys) -> None:
    from robolake.cli import main

    run, elsewhere = _linked_run(tmp_path, link="checkpoints")
    before = sorted(p.name for p in elsewhere.rglob("*"))
    for extra in (["--fresh"], []):
        args = ["train", "--shards", str(packed_data.packed), "--out", str(run), "--steps", "2", "--workers", "0"]
        rc = main([*args, "--device", "cpu", "--no-progress", *extra])
        err = capsys.readouterr().err
        assert rc == 2 and "leads outside" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in elsewhere.rglob("*")) == before  # --fresh deleted nothing there
