"""Size a model preset to the data it will train on (widths, horizon, embodiments, lengths).

A preset fixes the model's shape; the packed data fixes what it must accept: tokens per view,
the action horizon, the widest state and action vectors, how many embodiments there are and the
longest sample. `size_model_config` raises the data-facing sizes of a preset to fit a
`BatchLayout`, so a user picks "tiny" or "n15" and never hand-matches numbers with their pack spec.

`data_layout` reads that layout from the data's metadata before any loader exists: a pack
output's manifest and shard widths (what `open_shards` reads), or a lake's `embodiments` table and
the embodiments of the episodes a pack spec selects. The model rounds widths up, so the loader is
then opened once, at the model's widths.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from robolake.schemas.batch import BatchLayout
from robolake.training.config import ModelConfig

if TYPE_CHECKING:
    from robolake.lake import Lake
    from robolake.loaders import LoaderConfig, PackedShards
    from robolake.packers import PackSpec

__all__ = ["data_layout", "fit_model_config", "size_model_config"]


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
    history_streams: int = 0,
    history_width: int = 0,
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
        history_streams=max(base.history_streams, history_streams),
        history_width=max(base.history_width, history_width),
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
        history_streams=layout.history_streams,
        history_width=layout.history_width,
    )


def data_layout(data: PackedShards | Lake, spec: PackSpec, config: LoaderConfig) -> BatchLayout:
    """The layout of the batches `open_batches(data, config, spec=...)` would give, from metadata only.

    Args:
        data: Opened packed shards (`open_shards`), or a lake (streamed with `spec`).
        spec: How a lake is packed on the fly (ignored for shards: their manifest has the spec).
        config: The loader config (padded widths None: the data's widest).
    """
    from robolake.loaders import CollateConfig, PackedShards
    from robolake.loaders.config import batch_layout

    if isinstance(data, PackedShards):
        return batch_layout(data.manifest.pack_spec, data.manifest.embodiments, config.collate_config(data))
    # As LakeStream decides: embodiment ids over the selected episodes' tags, widths their widest.
    tags = sorted(set(data.episodes(spec.where, columns=["embodiment"])["embodiment"].to_pylist()))
    specs = data.embodiments()
    known = [specs[t] for t in tags if t in specs]
    collate = CollateConfig(
        tokens_per_view=spec.tokens.tokens_per_view,
        image_size=config.image_size,
        max_state_dim=config.max_state_dim or max((e.state_dim for e in known), default=1),
        max_action_dim=config.max_action_dim or max((e.action_dim for e in known), default=1),
        history_width=spec.history_width if spec.history else 0,
    )
    return batch_layout(spec, tags, collate)
