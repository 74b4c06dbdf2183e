"""The training loop: AdamW, warmup + cosine, grad clipping, JSONL metrics, exact resume, DDP.

Everything that varies between runs is decided once, before the loop: the device and process
group (set up by the entry point, `train_on`, and handed in), FP8 (a model conversion whose
forward context the step enters), bf16 autocast on CUDA, the layout (packed batches as they come,
or `to_padded()` for the baseline), DDP wrapping. The step itself is the same six lines for all
of them, and it never waits for the device: loss and grad norm stay there until the next sync,
every `log_every` steps (`metrics.py`).

Metrics, one JSON object per line and step: loss, lr, grad_norm, the step's samples/s and
effective tokens/s (real backbone tokens only, so packed and padded runs compare on useful work),
the padding fraction of the computed token grid, the time spent waiting for the next batch
(`data_wait_s`: the `next()` on the batch source alone) and its share of the step
(`data_wait_fraction`), the step time, the FP8 backend that actually ran, and torch's thread
counts (chosen by `train` from the cores left after the loader's workers, `threads.py`, and
restored afterwards). On CUDA a step's time is the host's, so the device's backlog lands in the
step that syncs; summed over steps it is the wall time. Summaries (`TrainResult.samples_per_s`,
the progress callback) are totals over totals: samples of all steps over their summed wall
time, never a mean of per-step rates (which over-weights fast steps).

With `record_samples_dir`, every rank appends one JSON line per batch to `rank{R}.jsonl` there
(`metrics.SampleRecords`), so a checkpoint can be traced to exactly the samples it saw.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from robolake.schemas.batch import BatchSource, PackedBatch, PaddedBatch
from robolake.training.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    sample_ledger,
    save_checkpoint,
)
from robolake.training.config import ModelConfig
from robolake.training.distributed import DistInfo, setup_distributed, teardown_distributed
from robolake.training.families import build_model
from robolake.training.fp8 import FP8Conversion, FP8Recipe, apply_fp8
from robolake.training.metrics import SampleRecords, StepMetrics
from robolake.training.schedule import build_scheduler
from robolake.training.threads import ThreadChoice, set_torch_threads

__all__ = ["TrainConfig", "TrainProgress", "TrainResult", "TrainState", "build_optimizer", "train", "train_step"]

log = logging.getLogger(__name__)
LAYOUTS = ("packed", "padded")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One training run.

    Attributes:
        model: Family and shape of the model built when `train` is not handed one.
        lr: Peak learning rate.
        warmup_steps: Linear warmup steps.
        total_steps: Steps of the whole run (the schedule's length).
        min_lr_ratio: Floor of the cosine decay, relative to `lr`.
        weight_decay: AdamW decay on matrices (not on biases, norms or vectors).
        betas: AdamW betas.
        grad_clip: Max global grad norm; 0 disables clipping.
        seed: Seeds model init and the Python/numpy/torch RNGs; flow noise is drawn from a generator
            reseeded from (seed, rank, step) every step.
        bf16: Autocast forward passes to bfloat16 on CUDA (ignored on CPU).
        layout: "packed" (varlen) or "padded" (baseline: `to_padded()` and dense attention).
        device: "auto", "cpu", "cuda" or "cuda:N".
        fp8: FP8 recipe applied as a model conversion, or None.
        log_path: JSONL metrics file (rank 0 writes it), or None.
        log_every: Steps between host syncs: loss and grad norm stay on the device in between,
            and are read (metrics.jsonl rows written, the loss checked to be finite, progress's
            loss updated) every `log_every` steps, at the first step, before a checkpoint and at the end.
        checkpoint_dir: Where checkpoints go, or None for none.
        checkpoint_every: Save every N steps (0: only at the end when checkpoint_dir is set).
        resume: Resume from the latest checkpoint in checkpoint_dir when there is one.
        stop_at_step: End this run after that step while the schedule still spans total_steps
            (time-boxed jobs, preemption tests); None runs to total_steps.
        record_samples_dir: Directory for per-rank `rank{R}.jsonl` sample records, or None.
        checkpoint_extra: JSON-able metadata saved in every checkpoint's `extra` (e.g. the
            policy card of `training/normalize.py`); the model config is always saved beside it.
        lineage: JSON-able record of the data trained on (lake URI, version and tag, the pack
            manifest's hash and spec; `training/lineage.py`), saved in every checkpoint with each
            rank's sample ledger (`checkpoint.sample_ledger`) when samples are recorded.
        torch_threads: torch intra-op threads while training; None chooses them from the cores
            left after `reserved_cores` (`training/threads.py`: ROBOLAKE_TORCH_THREADS and an
            explicit OMP_NUM_THREADS are honoured).
        reserved_cores: Cores the run's other busy processes use (the loader's worker processes).
    """

    model: ModelConfig = field(default_factory=lambda: ModelConfig.preset("tiny"))
    lr: float = 3e-4
    warmup_steps: int = 10
    total_steps: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    seed: int = 0
    bf16: bool = True
    layout: str = "packed"
    device: str = "auto"
    fp8: FP8Recipe | None = None
    log_path: str | None = None
    log_every: int = 10
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    resume: bool = True
    stop_at_step: int | None = None
    record_samples_dir: str | None = None
    checkpoint_extra: dict[str, Any] = field(default_factory=dict)
    lineage: dict[str, Any] = field(default_factory=dict)
    torch_threads: int | None = None
    reserved_cores: int = 0

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.total_steps < 1 or self.warmup_steps < 0:
            raise ValueError(
                "need lr > 0, total_steps >= 1, warmup_steps >= 0; "
                f"got {self.lr}, {self.total_steps}, {self.warmup_steps}"
            )
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.weight_decay < 0 or self.grad_clip < 0 or self.checkpoint_every < 0:
            raise ValueError("weight_decay, grad_clip and checkpoint_every must be >= 0")
        if not all(0.0 <= b < 1.0 for b in self.betas) or len(self.betas) != 2:
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.log_every < 1:
            raise ValueError(f"log_every must be >= 1, got {self.log_every}")
        if self.stop_at_step is not None and self.stop_at_step < 1:
            raise ValueError(f"stop_at_step must be >= 1, got {self.stop_at_step}")
        if (self.torch_threads is not None and self.torch_threads < 1) or self.reserved_cores < 0:
            raise ValueError(
                "need torch_threads >= 1 (or None) and reserved_cores >= 0; "
                f"got {self.torch_threads}, {self.reserved_cores}"
            )


@dataclass
class TrainState:
    """What `train_step` needs, assembled once by `train`."""

    model: nn.Module  # possibly DDP-wrapped
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    generator: torch.Generator
    forward_context: Callable[[], contextlib.AbstractContextManager]
    max_grad_norm: float


@dataclass(frozen=True)
class TrainResult:
    """Outcome of `train`.

    Attributes:
        model: The trained model (unwrapped from DDP).
        step: Steps completed.
        losses: Loss of every step run in this call.
        metrics_path: JSONL metrics file, if any.
        checkpoint: Last checkpoint written, if any.
        fp8_backend: FP8 backend that ran ("none" without FP8).
        threads: torch's thread counts while training, and the rule that chose them.
        data_wait_s: Seconds this call's steps spent waiting for their next batch.
    """

    model: nn.Module
    step: int
    losses: list[float]
    metrics_path: Path | None
    checkpoint: Path | None
    fp8_backend: str
    samples: int = 0
    seconds: float = 0.0
    first_step: int = 0
    threads: ThreadChoice | None = None
    data_wait_s: float = 0.0

    @property
    def samples_per_s(self) -> float:
        """Samples of this call's steps over their wall time (a total over a total)."""
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def data_wait_fraction(self) -> float:
        """Share of this call's wall time spent waiting for the next batch, in [0, 1]."""
        return min(1.0, self.data_wait_s / self.seconds) if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class TrainProgress:
    """What the progress callback sees after each step.

    Attributes:
        step: Steps completed.
        total_steps: Steps the run will end at.
        loss: Loss of the newest step read from the device (losses are read every
            `TrainConfig.log_every` steps, so the step's own loss reaches progress at the next sync).
        samples_per_s: Samples since this call started over the wall time since then.
        eta_s: Seconds left at that rate.
        torch_threads: torch intra-op threads the trainer set.
        data_wait_fraction: Share of the wall time since this call started spent waiting for
            the next batch (a total over a total), in [0, 1].
    """

    step: int
    total_steps: int
    loss: float
    samples_per_s: float
    eta_s: float
    torch_threads: int = 0
    data_wait_fraction: float = 0.0


ProgressFn = Callable[[TrainProgress], None]


def train_step(state: TrainState, batch: PackedBatch | PaddedBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step on `batch`; returns (loss, grad norm before clipping) as tensors."""
    with state.forward_context():
        loss = state.model(batch, generator=state.generator).loss
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(state.model.parameters(), state.max_grad_norm)
    state.optimizer.step()
    state.scheduler.step()
    state.optimizer.zero_grad(set_to_none=True)
    return loss.detach(), grad_norm


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with decay on matrices only."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _step_seed(seed: int, rank: int, step: int) -> int:
    """Noise seed of one step: a function of (seed, rank, step) only, so resuming needs no RNG replay."""
    return (seed * 1_000_003 + rank * 7919 + step * 104_729) % (2**63 - 1)


def _forward_context_factory(
    device: torch.device, bf16: bool, conversion: FP8Conversion
) -> Callable[[], contextlib.AbstractContextManager]:
    use_autocast = bf16 and device.type == "cuda"

    def make() -> contextlib.AbstractContextManager:
        stack = contextlib.ExitStack()
        if use_autocast:
            stack.enter_context(torch.autocast("cuda", dtype=torch.bfloat16))
        stack.enter_context(conversion.forward_context())
        return stack

    return make


class _BatchStream:
    """Iterates `batches` forever when it can be iterated again (epochs), counting what it yields."""

    def __init__(self, batches: Iterable[PackedBatch]) -> None:
        self.batches = batches
        self.it: Iterator[PackedBatch] = iter(batches)
        self.reiterable = self.it is not batches

    def __next__(self) -> PackedBatch:
        try:
            return next(self.it)
        except StopIteration:
            if not self.reiterable:
                raise
            self.it = iter(self.batches)
            return next(self.it)


def _restore(
    config: TrainConfig, state: TrainState, model: nn.Module, batches: Iterable[PackedBatch], dist_info: DistInfo
) -> tuple[int, int]:
    """Resume from the latest checkpoint; returns (step, batches to skip in a fresh stream)."""
    ckpt = latest_checkpoint(config.checkpoint_dir) if config.checkpoint_dir and config.resume else None
    if ckpt is None:
        return 0, 0
    restored = load_checkpoint(
        ckpt, model=model, optimizer=state.optimizer, scheduler=state.scheduler, generator=state.generator
    )
    log.info("resumed from %s at step %d", ckpt, restored.step)
    if restored.loader_states is None or not isinstance(batches, BatchSource):
        return restored.step, restored.step
    if restored.world_size != dist_info.world_size:
        log.warning(
            "%s was saved by %s ranks and this run has %d: the rest of the epoch is split over %d ranks "
            "(robolake's sources: every sample once, in the same global order)",
            ckpt,
            restored.world_size,
            dist_info.world_size,
            dist_info.world_size,
        )
    batches.load_state_dict(restored.loader_state(dist_info.rank))
    return restored.step, 0


def _build(
    config: TrainConfig, model: nn.Module | None, dist_info: DistInfo
) -> tuple[TrainState, nn.Module, FP8Conversion]:
    """The train state for `config` on this rank: (state, the unwrapped model, its FP8 conversion)."""
    device = dist_info.device
    _seed_everything(config.seed)
    model = (model if model is not None else build_model(config.model)).to(device)
    conversion = apply_fp8(model, config.fp8) if config.fp8 is not None else FP8Conversion(model, "none")
    model = conversion.model
    wrapped: nn.Module = model
    if dist_info.world_size > 1:
        wrapped = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    optimizer = build_optimizer(model, config)
    scheduler = build_scheduler(
        optimizer, warmup_steps=config.warmup_steps, total_steps=config.total_steps, min_lr_ratio=config.min_lr_ratio
    )
    state = TrainState(
        model=wrapped,
        optimizer=optimizer,
        scheduler=scheduler,
        generator=torch.Generator(device).manual_seed(config.seed + dist_info.rank),
        forward_context=_forward_context_factory(device, config.bf16, conversion),
        max_grad_norm=config.grad_clip if config.grad_clip > 0 else math.inf,
    )
    return state, model, conversion


def train(
    config: TrainConfig,
    batches: BatchSource | Iterable[PackedBatch],
    model: nn.Module | None = None,
    *,
    progress: ProgressFn | None = None,
    dist_info: DistInfo | None = None,
) -> TrainResult:
    """Train on `batches` (a BatchSource, or any iterable of PackedBatch; re-iterated for further
    epochs if it can be).

    Args:
        config: The run.
        batches: This rank's batches.
        model: The model to train; None builds `build_model(config.model)` (the config's family).
        progress: Called after every step (rank 0 only).
        dist_info: Where this process sits, from the entry point's `setup_distributed` (`train_on`
            passes its own; its device wins over `config.device`). None sets it up here from
            `config.device` and leaves the process group it created at the end.

    Raises:
        FloatingPointError: the loss became NaN or infinite (reported at the next sync).
        StopIteration: a one-shot iterator ran out before total_steps.
        ValueError: the batch source refused the checkpoint's loader state (other data or
            another plan, ranks' states that disagree, more ranks than sequences left).
    """
    owns_dist = dist_info is None
    dist_info = setup_distributed(config.device) if dist_info is None else dist_info
    try:
        previous = torch.get_num_threads()
        threads = set_torch_threads(reserved=config.reserved_cores, explicit=config.torch_threads)
        try:
            return _train(config, batches, model, progress, dist_info, threads)
        finally:
            torch.set_num_threads(previous)  # the caller's setting outlives the run (inter-op is set once per process)
    finally:
        if owns_dist:
            teardown_distributed(dist_info)


def _train(
    config: TrainConfig,
    batches: BatchSource | Iterable[PackedBatch],
    model: nn.Module | None,
    progress: ProgressFn | None,
    dist_info: DistInfo,
    threads: ThreadChoice,
) -> TrainResult:
    state, model, conversion = _build(config, model, dist_info)
    step, skip = _restore(config, state, model, batches, dist_info)
    stream = _BatchStream(batches)
    for _ in range(skip):
        next(stream)
    end = min(config.total_steps, config.stop_at_step or config.total_steps)
    metrics = StepMetrics(config.log_path, dist_info.is_main)
    records = SampleRecords(config.record_samples_dir, dist_info.rank)
    last_ckpt = None
    first_step, samples_seen, t_start = step, 0, time.perf_counter()
    waited = 0.0  # seconds spent in next(stream): the data wait
    model.train()
    try:
        while step < end:
            t0 = time.perf_counter()
            host = next(stream)  # read what the row needs on the host: no device sync for it
            wait = time.perf_counter() - t0
            waited += wait
            padded = host.to_padded() if config.layout == "padded" else None
            pad = padded.padding_fraction if padded is not None else 0.0
            batch = (padded or host).to(dist_info.device, non_blocking=True)
            lr = state.optimizer.param_groups[0]["lr"]
            state.generator.manual_seed(_step_seed(config.seed, dist_info.rank, step))
            loss, grad_norm = train_step(state, batch)
            step += 1
            metrics.add(step, loss, grad_norm, host.sample_keys)
            checkpoint = bool(config.checkpoint_dir) and (
                (config.checkpoint_every > 0 and step % config.checkpoint_every == 0) or step == end
            )
            if checkpoint or step == end or step == first_step + 1 or step % config.log_every == 0:
                metrics.sync()  # before a checkpoint: never save a model whose loss is not finite
            t2 = time.perf_counter()
            samples_seen += host.num_samples
            records.write(batches.epoch if isinstance(batches, BatchSource) else 0, step, host.sample_keys)
            metrics.row(
                {
                    "step": step,
                    "lr": lr,
                    "samples_per_s": host.num_samples / (t2 - t0),
                    "effective_tokens_per_s": host.total_tokens / (t2 - t0),
                    "padding_fraction": pad,
                    "data_wait_s": wait,
                    "data_wait_fraction": wait / (t2 - t0) if t2 > t0 else 0.0,
                    "step_time_s": t2 - t0,
                    "layout": config.layout,
                    "fp8": conversion.backend,
                    "torch_threads": threads.intra_op,
                    "interop_threads": threads.inter_op,
                }
            )
            if progress is not None and dist_info.is_main:
                elapsed = time.perf_counter() - t_start
                rate = samples_seen / elapsed if elapsed > 0 else 0.0
                per_step = elapsed / max(1, step - first_step)
                progress(
                    TrainProgress(
                        step=step,
                        total_steps=end,
                        loss=metrics.last_loss,
                        samples_per_s=rate,
                        eta_s=per_step * (end - step),
                        torch_threads=threads.intra_op,
                        data_wait_fraction=min(1.0, waited / elapsed) if elapsed > 0 else 0.0,
                    )
                )
            if checkpoint:
                last_ckpt = _save(config, dist_info, step, model, state, batches)
    finally:
        with contextlib.suppress(Exception):  # a no-op after a full run; after an error, the original propagates
            metrics.sync()  # an interrupted run still logs the steps it finished
        metrics.close()
        records.close()
    return TrainResult(
        model,
        step,
        metrics.losses,
        metrics.path,
        last_ckpt,
        conversion.backend,
        samples=samples_seen,
        seconds=time.perf_counter() - t_start,
        first_step=first_step,
        threads=threads,
        data_wait_s=waited,
    )


def _save(
    config: TrainConfig, dist_info: DistInfo, step: int, model: nn.Module, state: TrainState, batches: Any
) -> Path | None:
    """Rank 0 writes the checkpoint, with every rank's loader state and sample ledger (gathered to it)."""
    mine = batches.state_dict() if isinstance(batches, BatchSource) else None
    ledger = sample_ledger(config.record_samples_dir, dist_info.rank)
    gathered: list[Any] = [(mine, ledger)]
    if dist_info.world_size > 1:  # also the barrier: every rank has reached this step
        gathered = [None] * dist_info.world_size if dist_info.is_main else []
        torch.distributed.gather_object((mine, ledger), gathered if dist_info.is_main else None, dst=0)
    if not dist_info.is_main or config.checkpoint_dir is None:
        return None
    return save_checkpoint(
        config.checkpoint_dir,
        step=step,
        model=model,
        optimizer=state.optimizer,
        scheduler=state.scheduler,
        generator=state.generator,
        loader_states=None if mine is None else {r: g[0] for r, g in enumerate(gathered)},
        extra={"layout": config.layout, "model_config": dataclasses.asdict(config.model), **config.checkpoint_extra},
        lineage={
            **config.lineage,
            "samples": None if ledger is None else {str(r): g[1] for r, g in enumerate(gathered)},
        },
    )
