"""One call from data to a trained model: `train_on(source, RunConfig(...))`.

This is what `robolake train` and the demo run, in this order: join the process group (under
torchrun; the one `setup_distributed` of the run, handed on to `train`), read the data's layout
from its metadata and size the preset to it (`sizing.py`), open this rank's batch source once at
the model's widths with `open_batches` (packed shards, or a lake packed on the fly), and train.
The process group starts before any loader is built, and the loader is opened for this rank, so
every rank reads only its share. Checkpoints and metrics go under `out/`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from typing import Literal

from robolake.lake import Lake
from robolake.loaders import LoaderConfig, PackedShards, open_batches, open_shards
from robolake.loaders.open import is_pack_output
from robolake.packers import PackSpec, TokenLengthConfig
from robolake.packers.manifest import MANIFEST_NAME
from robolake.storage import under_root
from robolake.training.checkpoint import checkpoint_step, latest_checkpoint
from robolake.training.config import ModelConfig
from robolake.training.distributed import setup_distributed, teardown_distributed
from robolake.training.fp8 import FP8Recipe
from robolake.training.lineage import run_lineage
from robolake.training.normalize import (
    POLICY_CARD_KEY,
    policy_card_from_lake,
    policy_card_from_pack,
)
from robolake.training.sizing import data_layout, size_model_config
from robolake.training.trainer import ProgressFn, TrainConfig, TrainResult, train

__all__ = ["RunConfig", "train_on"]


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """A training run over robolake data.

    Attributes:
        out: Directory for metrics.jsonl and checkpoints.
        preset: Model preset ("tiny", "small", "n15").
        steps: Optimizer steps.
        layout: "packed" (varlen attention) or "padded" (baseline).
        lr: Peak learning rate.
        warmup_steps: Linear warmup steps.
        sequences_per_batch: Packed sequences per batch.
        max_tokens: Capacity of a packed sequence when streaming from a lake (shards fix their own).
        fp8: "none", or an FP8 backend for `apply_fp8` ("auto", "te", "torchao").
        num_workers: Loader worker processes.
        seed: Seed of the model, the loader shuffle and the flow noise.
        checkpoint_every: Save every N steps (0: only at the end).
        device: "auto", "cpu" or "cuda[:N]".
        resume: Continue from the newest checkpoint in `out/checkpoints` when there is one;
            False starts over (and removes that run's old checkpoints and metrics).
        record_samples: Write `out/samples/rank{R}.jsonl`, one line per batch with its samples.
        allow_stale: Train on packed shards even when a later lake version deleted episodes they hold.
        torch_threads: torch intra-op threads; None chooses them from the cores left after the
            loader's `num_workers` (`training/threads.py`; ROBOLAKE_TORCH_THREADS and an explicit
            OMP_NUM_THREADS are honoured).
    """

    out: str
    preset: str = "tiny"
    steps: int = 100
    layout: Literal["packed", "padded"] = "packed"
    lr: float = 3e-4
    warmup_steps: int = 10
    sequences_per_batch: int = 1
    max_tokens: int = 2048
    fp8: str = "none"
    num_workers: int = 2
    seed: int = 0
    checkpoint_every: int = 0
    device: str = "auto"
    resume: bool = True
    record_samples: bool = False
    allow_stale: bool = False
    torch_threads: int | None = None

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.fp8 not in ("none", "auto", "te", "torchao"):
            raise ValueError(f"fp8 must be none, auto, te or torchao, got {self.fp8!r}")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(
                f"torch_threads must be >= 1 (or None: chosen from the free cores), got {self.torch_threads}"
            )


def train_on(source: str | Lake, run: RunConfig, *, progress: ProgressFn | None = None) -> TrainResult:
    """Train the preset on packed shards (a `robolake pack` output) or a lake (packed on the fly).

    Args:
        source: A pack output URI, a lake URI, or a Lake.
        run: The run.
        progress: Called after every step with a `TrainProgress` (rank 0).

    Raises:
        FileNotFoundError: `source` is neither a pack output nor a lake.
        ValueError: the run in `run.out` already reached `run.steps` (pass more steps or resume=False).
    """
    _check_not_finished(run)
    dist = setup_distributed(run.device)  # before any loader: the loader is opened for this rank
    try:
        base = ModelConfig.preset(run.preset)
        spec = PackSpec(
            max_tokens=run.max_tokens,
            algorithm="window",
            horizon=base.action_horizon,
            tokens=TokenLengthConfig(tokens_per_view=base.tokens_per_view, state_tokens=0),
            seed=run.seed,
        )
        loader_config = LoaderConfig(
            sequences_per_batch=run.sequences_per_batch,
            image_size=base.image_size,
            seed=run.seed,
            num_workers=run.num_workers,
            allow_stale=run.allow_stale,
        )
        # Metadata only (a pack output's manifest and widths, or the lake handle): no loader yet.
        data: PackedShards | Lake = (
            open_shards(source) if isinstance(source, str) and is_pack_output(source) else _open_lake(source)
        )
        model_config = size_model_config(base, data_layout(data, spec, loader_config))
        loader_config = dataclasses.replace(  # the model rounds widths up: pad the batches to them
            loader_config, max_state_dim=model_config.max_state_dim, max_action_dim=model_config.max_action_dim
        )
        is_pack = isinstance(data, PackedShards)
        batches = open_batches(
            data, loader_config, rank=dist.rank, world_size=dist.world_size, spec=None if is_pack else spec
        )
        card = policy_card_from_pack(str(source)) if is_pack else policy_card_from_lake(data, spec)
        if not run.resume and dist.is_main:  # --fresh deletes only what lies inside the run folder
            shutil.rmtree(under_root(run.out, "checkpoints"), ignore_errors=True)
            shutil.rmtree(under_root(run.out, "samples"), ignore_errors=True)
            if os.path.exists(metrics := under_root(run.out, "metrics.jsonl")):
                os.remove(metrics)
        os.makedirs(run.out, exist_ok=True)
        config = TrainConfig(
            model=model_config,
            lr=run.lr,
            warmup_steps=min(run.warmup_steps, max(0, run.steps - 1)),
            total_steps=run.steps,
            seed=run.seed,
            layout=run.layout,
            device=run.device,
            fp8=None if run.fp8 == "none" else FP8Recipe(backend=run.fp8),  # type: ignore[arg-type]
            log_path=os.path.join(run.out, "metrics.jsonl"),
            checkpoint_dir=under_root(run.out, "checkpoints"),
            checkpoint_every=run.checkpoint_every,
            resume=run.resume,
            checkpoint_extra={POLICY_CARD_KEY: card.to_json()},  # what the policy needs to act
            lineage=run_lineage(data, None if is_pack else spec),  # what `robolake lineage RUN` walks back
            record_samples_dir=os.path.join(run.out, "samples") if run.record_samples else None,
            torch_threads=run.torch_threads,
            reserved_cores=run.num_workers,  # the loader's worker processes each keep a core busy
        )
        return train(config, batches, progress=progress, dist_info=dist)
    finally:
        teardown_distributed(dist)


def _open_lake(source: str | Lake) -> Lake:
    """`source` as a lake (it is not a pack output).

    Raises:
        FileNotFoundError: it is not a lake either.
    """
    if isinstance(source, Lake):
        return source
    try:
        return Lake.open(source)
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{source} is neither a pack output (no {MANIFEST_NAME}) nor a lake ({e}); pass the directory "
            "`robolake pack` wrote or one `robolake ingest` wrote"
        ) from e


def _check_not_finished(run: RunConfig) -> None:
    """A resumed run whose newest checkpoint is already at `run.steps` has nothing to do: say so."""
    if not run.resume:
        return
    ckpt = latest_checkpoint(under_root(run.out, "checkpoints"))
    if ckpt is None:
        return
    step = checkpoint_step(ckpt)
    if step >= run.steps:
        raise ValueError(
            f"{run.out} is already at step {step} (asked for {run.steps}); pass --steps N with N > {step} "
            "to continue, or --fresh to start over"
        )
