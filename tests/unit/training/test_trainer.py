from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from robolake.schemas.batch import BatchSource, PackedBatch
from robolake.training import (
    GrootModel,
    ModelConfig,
    TrainConfig,
    TrainState,
    build_optimizer,
    build_scheduler,
    latest_checkpoint,
    train,
    train_step,
    warmup_cosine,
)


class StatefulBatches(BatchSource):
    """A minimal BatchSource over a list: endless, resumable by position."""

    rank, world_size, epoch = 0, 1, 0

    def __init__(self, batches: list[PackedBatch]) -> None:
        self.batches, self.position = batches, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def num_batches(self) -> int | None:
        return None

    @property
    def layout(self) -> Any:
        raise NotImplementedError

    def __iter__(self):
        while True:
            b = self.batches[self.position % len(self.batches)]
            self.position += 1
            yield b

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = state["position"]


def small_config(**kw: Any) -> TrainConfig:
    base = dict(lr=1e-3, warmup_steps=2, total_steps=6, weight_decay=0.01, seed=3)
    base.update(kw)
    return TrainConfig(**base)


def test_tiny_overfits_a_handful_of_samples(tiny_config: ModelConfig, batch_factory) -> None:
    torch.manual_seed(0)
    model = GrootModel(tiny_config)
    config = TrainConfig(lr=1e-3, warmup_steps=5, total_steps=100, weight_decay=0.0, min_lr_ratio=1.0)
    optimizer = build_optimizer(model, config)
    state = TrainState(
        model=model,
        optimizer=optimizer,
        scheduler=build_scheduler(optimizer, warmup_steps=5, total_steps=100, min_lr_ratio=1.0),
        generator=torch.Generator(),
        forward_context=contextlib.nullcontext,
        max_grad_norm=1.0,
    )
    batch = batch_factory(n=4, seed=0)
    losses = []
    for _ in range(100):
        state.generator.manual_seed(0)  # same noise and t every step: a pure memorisation task
        loss, _ = train_step(state, batch)
        losses.append(float(loss))
    assert losses[-1] < 0.1 * losses[0], losses[::10]


def test_tiny_learns_action_from_state_with_fresh_noise_every_step(tiny_config: ModelConfig, batch_factory) -> None:
    """The flow-matching head must learn a generalising rule, not memorise one (noise, t) draw.

    Every sample's action chunk is its state repeated over the horizon, over 50 different batches,
    with noise and t redrawn every step at the demo's learning rate: only reading the state token
    through the DiT's self-attention (and x_t through the action encoder) lowers the loss. Before
    the head's initialisation was fixed the loss stayed at ~2.0 (the noise's own variance).
    """
    config = dataclasses.replace(tiny_config, action_horizon=4, num_future_tokens=1)
    batches = []
    for seed in range(50):
        b = batch_factory(n=8, seed=seed, config=config, embodiments=[0] * 8)  # 7-dim state/action
        action = torch.zeros_like(b.action)
        action[..., :7] = b.state[:, None, :7]
        batches.append(dataclasses.replace(b, action=action))
    torch.manual_seed(0)
    model = GrootModel(config)
    train_config = TrainConfig(model=config, lr=3e-3, warmup_steps=10, total_steps=150)
    optimizer = build_optimizer(model, train_config)
    state = TrainState(
        model=model,
        optimizer=optimizer,
        scheduler=build_scheduler(optimizer, warmup_steps=10, total_steps=150, min_lr_ratio=1.0),
        generator=torch.Generator().manual_seed(0),  # never reseeded: fresh noise and t each step
        forward_context=contextlib.nullcontext,
        max_grad_norm=1.0,
    )
    losses = [float(train_step(state, batches[i % len(batches)])[0]) for i in range(150)]
    first, last = sum(losses[:20]) / 20, sum(losses[-20:]) / 20
    assert last < 0.5 * first, losses[::10]


def test_resumed_run_matches_uninterrupted(tmp_path: Path, batch_factory) -> None:
    batches = [batch_factory(n=3, seed=s) for s in range(4)]
    full = train(small_config(), StatefulBatches(batches))
    ckpt_cfg = small_config(checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=2)
    first = train(dataclasses.replace(ckpt_cfg, stop_at_step=4), StatefulBatches(batches))
    assert first.step == 4 and latest_checkpoint(tmp_path / "ckpt").name == "step_00000004"
    resumed = train(ckpt_cfg, StatefulBatches(batches))
    assert resumed.step == 6
    assert first.losses + resumed.losses == full.losses
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_resume_replays_a_plain_list(tmp_path: Path, batch_factory) -> None:
    batches = [batch_factory(n=2, seed=s) for s in range(3)]
    full = train(small_config(total_steps=5), batches)
    cfg = small_config(total_steps=5, checkpoint_dir=str(tmp_path), checkpoint_every=1)
    first = train(dataclasses.replace(cfg, stop_at_step=2), batches)
    resumed = train(cfg, batches)
    assert first.losses + resumed.losses == full.losses


def test_packed_and_padded_training_give_the_same_losses(batch_factory) -> None:
    batches = [batch_factory(n=4, seed=s) for s in range(2)]
    packed = train(small_config(total_steps=3), batches)
    padded = train(small_config(total_steps=3, layout="padded"), batches)
    for a, b in zip(packed.losses, padded.losses, strict=True):
        assert math.isclose(a, b, rel_tol=1e-4), (packed.losses, padded.losses)


def test_metrics_jsonl(tmp_path: Path, batch_factory) -> None:
    log_path = tmp_path / "metrics.jsonl"
    batches = [batch_factory(n=3, seed=1)]
    train(small_config(total_steps=3, layout="padded", log_path=str(log_path)), batches)
    rows = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    keys = {
        "loss",
        "lr",
        "grad_norm",
        "samples_per_s",
        "effective_tokens_per_s",
        "padding_fraction",
        "data_wait_s",
        "step_time_s",
    }
    assert keys <= rows[0].keys()
    assert 0.0 < rows[0]["padding_fraction"] < 1.0
    assert rows[0]["lr"] == pytest.approx(1e-3 * 0.5)  # first warmup step of 2


def test_one_shot_iterator_running_out_is_reported(batch_factory) -> None:
    with pytest.raises(StopIteration):
        train(small_config(total_steps=3), iter([batch_factory(n=2)]))


def test_schedule_shape() -> None:
    f = dict(warmup_steps=4, total_steps=14, min_lr_ratio=0.1)
    assert warmup_cosine(0, **f) == pytest.approx(0.25)
    assert warmup_cosine(3, **f) == pytest.approx(1.0)
    assert warmup_cosine(9, **f) == pytest.approx(0.55)
    assert warmup_cosine(14, **f) == pytest.approx(0.1)
    assert warmup_cosine(100, **f) == pytest.approx(0.1)


def test_train_config_validation() -> None:
    with pytest.raises(ValueError, match="layout"):
        TrainConfig(layout="ragged")
    with pytest.raises(ValueError, match="lr > 0"):
        TrainConfig(lr=0.0)
    with pytest.raises(ValueError, match="stop_at_step"):
        TrainConfig(stop_at_step=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    from tests.fixtures import random_batch

    cfg = ModelConfig.preset("tiny")
    batches = [random_batch(cfg, 2, seed=10 * rank + s) for s in range(2)]  # each rank its own shard
    result = train(TrainConfig(total_steps=3, warmup_steps=1, device="cpu"), batches)
    torch.save(result.model.state_dict(), Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.slow
def test_ddp_two_ranks_stay_in_sync(tmp_path: Path) -> None:
    torch.multiprocessing.spawn(_ddp_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    a, b = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    for name in a:
        torch.testing.assert_close(a[name], b[name], msg=name)


def test_throughput_is_a_total_over_a_total_and_progress_is_reported(tmp_path: Path, batch_factory) -> None:
    batches = [batch_factory(n=3, seed=1), batch_factory(n=5, seed=2)]
    seen = []
    result = train(small_config(total_steps=4, log_path=str(tmp_path / "m.jsonl")), batches, progress=seen.append)
    assert result.samples == 3 + 5 + 3 + 5
    assert result.samples_per_s == pytest.approx(result.samples / result.seconds)
    assert [p.step for p in seen] == [1, 2, 3, 4] and seen[-1].eta_s == 0.0
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert {r["fp8"] for r in rows} == {"none"}


def test_record_samples_writes_one_line_per_batch(tmp_path: Path, batch_factory) -> None:
    batches = [batch_factory(n=2, seed=1), batch_factory(n=3, seed=2)]
    train(small_config(total_steps=3, record_samples_dir=str(tmp_path / "samples")), batches)
    lines = [json.loads(x) for x in (tmp_path / "samples" / "rank0.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3]
    assert [len(x["keys"]) for x in lines] == [2, 3, 2]
    assert lines[0]["keys"][0] == [list(batches[0].sample_keys[0])[0], batches[0].sample_keys[0][1]]


def test_the_loop_reads_loss_and_grad_norm_from_the_device_only_at_syncs(
    tmp_path: Path, batch_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A per-step `float(loss)` would stall the CUDA stream every step: count every tensor read
    robolake's code makes (float(), .item(), .tolist()) while training 8 steps with log_every=4."""
    reads: list[str] = []
    for name in ("__float__", "item", "tolist"):
        original = getattr(torch.Tensor, name)

        def spy(self, *args, _original=original, _name=name):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("robolake."):
                reads.append(f"{_name} in {caller}")
            return _original(self, *args)

        monkeypatch.setattr(torch.Tensor, name, spy)
    batches = [batch_factory(n=2, seed=s) for s in range(3)]
    log_path = tmp_path / "m.jsonl"
    seen: list[Any] = []
    result = train(small_config(total_steps=8, log_every=4, log_path=str(log_path)), batches, progress=seen.append)
    monkeypatch.undo()
    assert len(reads) == 3, reads  # steps 1 (the first), 4 and 8 (the end), one transfer each
    rows = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 9))
    assert [r["loss"] for r in rows] == result.losses and all(math.isfinite(r["grad_norm"]) for r in rows)
    # Progress between syncs reports the newest synced loss.
    assert [p.loss for p in seen] == [result.losses[i] for i in (0, 0, 0, 3, 3, 3, 3, 7)]


def test_a_non_finite_loss_is_reported_at_the_next_sync_naming_its_step(tmp_path: Path, batch_factory) -> None:
    good = batch_factory(n=2, seed=0)
    bad = dataclasses.replace(good, state=torch.full_like(good.state, float("nan")))
    log_path = tmp_path / "m.jsonl"
    with pytest.raises(FloatingPointError, match="at step 3"):
        train(small_config(total_steps=6, log_every=4, log_path=str(log_path)), [good, good, bad, good])
    assert [json.loads(x)["step"] for x in log_path.read_text().splitlines()] == [1, 2]
