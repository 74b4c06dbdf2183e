"""One call from data to a trained model: `train_on(source, RunConfig(...))`.

This is what `robolake train` and the demo run: open packed shards (or stream straight from a
lake with on-the-fly packing), fit the preset to the data (`fit.py`), build a resumable loader,
and hand both to `train`. Checkpoints and metrics go under `out/`.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Literal

from robolake.lake import Lake
from robolake.lake.storage import exists, join_uri, normalize_uri
from robolake.loaders import LakeStream, LoaderConfig, PackedLoader, open_shards
from robolake.packers import PackSpec, TokenLengthConfig
from robolake.packers.manifest import MANIFEST_NAME
from robolake.training.config import ModelConfig
from robolake.training.fit import fit_model_config
from robolake.training.fp8 import FP8Recipe
from robolake.training.normalize import POLICY_CARD_KEY, policy_card_from_lake, policy_card_from_pack
from robolake.training.trainer import TrainConfig, TrainResult, train

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

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.fp8 not in ("none", "auto", "te", "torchao"):
            raise ValueError(f"fp8 must be none, auto, te or torchao, got {self.fp8!r}")


def train_on(source: str | Lake, run: RunConfig) -> TrainResult:
    """Train the preset on packed shards (a `robolake pack` output) or a lake (packed on the fly).

    Raises:
        FileNotFoundError: `source` is neither a pack output nor a lake.
    """
    base = ModelConfig.preset(run.preset)
    if isinstance(source, str) and exists(join_uri(normalize_uri(source), MANIFEST_NAME)):
        shards = open_shards(source)
        model_config = fit_model_config(
            base,
            tokens_per_view=shards.tokens_per_view,
            horizon=int(shards.manifest.spec["horizon"]),
            max_state_dim=shards.max_state_dim,
            max_action_dim=shards.max_action_dim,
            num_embodiments=len(shards.manifest.embodiments),
            max_seqlen=int(shards.manifest.spec["max_tokens"]),
        )
        loader_config = _loader_config(run, model_config)
        batches: PackedLoader | LakeStream = PackedLoader(shards, loader_config)
        card = policy_card_from_pack(source)
    else:
        lake = source if isinstance(source, Lake) else Lake.open(source)
        specs = lake.embodiments()
        spec = PackSpec(
            max_tokens=run.max_tokens,
            algorithm="window",
            horizon=base.action_horizon,
            tokens=TokenLengthConfig(tokens_per_view=base.tokens_per_view, state_tokens=0),
            seed=run.seed,
        )
        model_config = fit_model_config(
            base,
            tokens_per_view=base.tokens_per_view,
            horizon=base.action_horizon,
            max_state_dim=max(s.state_dim for s in specs.values()),
            max_action_dim=max(s.action_dim for s in specs.values()),
            num_embodiments=len(specs),
            max_seqlen=run.max_tokens,
        )
        batches = LakeStream(lake, spec, _loader_config(run, model_config))
        card = policy_card_from_lake(lake, spec)
    if not run.resume:
        shutil.rmtree(os.path.join(run.out, "checkpoints"), ignore_errors=True)
        if os.path.exists(os.path.join(run.out, "metrics.jsonl")):
            os.remove(os.path.join(run.out, "metrics.jsonl"))
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
        checkpoint_dir=os.path.join(run.out, "checkpoints"),
        checkpoint_every=run.checkpoint_every,
        resume=run.resume,
        checkpoint_extra={POLICY_CARD_KEY: card.to_json()},  # what the policy needs to act
    )
    return train(config, batches)


def _loader_config(run: RunConfig, model: ModelConfig) -> LoaderConfig:
    return LoaderConfig(
        sequences_per_batch=run.sequences_per_batch,
        image_size=model.image_size,
        seed=run.seed,
        max_state_dim=model.max_state_dim,
        max_action_dim=model.max_action_dim,
        num_workers=run.num_workers,
    )
