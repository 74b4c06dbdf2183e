"""Checkpoints keep every rank's loader state, keyed by rank, and hand each rank its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from robolake.training import GrootModel, ModelConfig, TrainConfig, build_optimizer, build_scheduler
from robolake.training.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint


def _objects() -> tuple[GrootModel, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    model = GrootModel(ModelConfig.preset("tiny"))
    optimizer = build_optimizer(model, TrainConfig())
    return model, optimizer, build_scheduler(optimizer, warmup_steps=1, total_steps=10, min_lr_ratio=0.1)


def _state(rank: int, world_size: int, batches_done: int) -> dict:
    return {"rank": rank, "world_size": world_size, "epoch": 1, "batches_done": batches_done, "source": "packed/"}


def test_every_rank_gets_back_the_loader_state_it_saved(tmp_path: Path) -> None:
    model, optimizer, scheduler = _objects()
    states = {0: _state(0, 2, 3), 1: _state(1, 2, 4)}
    path = save_checkpoint(tmp_path, step=7, model=model, optimizer=optimizer, scheduler=scheduler, loader_states=states)
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
    path = save_checkpoint(tmp_path, step=1, model=model, optimizer=optimizer, scheduler=scheduler, loader_states=states)
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
