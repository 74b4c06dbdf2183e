"""Size a model preset to the data it will train on (widths, horizon, embodiments, lengths).

A preset fixes the model's shape; the packed data fixes what it must accept: tokens per view,
the action horizon, the widest state and action vectors, how many embodiments there are and the
longest sample. `size_model_config` raises the data-facing sizes of a preset to fit a batch
source's `BatchLayout`, so a user picks "tiny" or "n15" and never hand-matches numbers with their
pack spec.
"""

from __future__ import annotations

import dataclasses

from robolake.schemas.batch import BatchLayout
from robolake.training.config import ModelConfig

__all__ = ["fit_model_config", "size_model_config"]


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def fit_model_config(
    base: ModelConfig,
    *,
    tokens_per_view: int,
    horizon: int,
    max_state_dim: int,
    max_action_dim: int,
    num_embodiments: int,
    max_seqlen: int,
) -> ModelConfig:
    """`base` with its data-facing sizes set from the data.

    Raises:
        ValueError: `tokens_per_view` exceeds the preset's patches per view (pick a larger
            image_size or a smaller tokens_per_view when packing).
    """
    return dataclasses.replace(
        base,
        tokens_per_view=tokens_per_view,
        action_horizon=horizon,
        max_state_dim=max(base.max_state_dim, _round_up(max_state_dim, 8)),
        max_action_dim=max(base.max_action_dim, _round_up(max_action_dim, 8)),
        num_embodiments=max(base.num_embodiments, num_embodiments),
        max_positions=max(base.max_positions, _round_up(max_seqlen, 64)),
    )


def size_model_config(base: ModelConfig, layout: BatchLayout) -> ModelConfig:
    """`base` sized to the batches of a batch source (`BatchSource.layout`)."""
    return fit_model_config(
        base,
        tokens_per_view=layout.tokens_per_view,
        horizon=layout.horizon,
        max_state_dim=layout.max_state_dim,
        max_action_dim=layout.max_action_dim,
        num_embodiments=layout.num_embodiments,
        max_seqlen=layout.max_seqlen,
    )
