"""Sizing a preset from the data's metadata, before any loader is opened."""

from __future__ import annotations

import dataclasses

from robolake.lake import Lake
from robolake.lake.query import EpisodeFilter
from robolake.loaders import LakeStream, LoaderConfig, PackedLoader, open_shards
from robolake.packers import PackSpec, TokenLengthConfig
from robolake.training import ModelConfig
from robolake.training.sizing import data_layout, size_model_config


def test_data_layout_is_the_layout_the_loader_reports(packed_data) -> None:
    """`train_on` sizes the model from `data_layout` and opens the loader once; it must agree with
    the loader's own `layout`, for packed shards and for a lake (all episodes or a selection)."""
    config = LoaderConfig(num_workers=0, image_size=8)
    shards = open_shards(str(packed_data.packed))
    assert data_layout(shards, PackSpec(), config) == PackedLoader(shards, config, rank=0, world_size=1).layout

    lake = Lake.open(str(packed_data.lake))
    spec = PackSpec(max_tokens=1024, algorithm="window", tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
    tags = sorted(set(lake.episodes(columns=["embodiment"])["embodiment"].to_pylist()))
    assert len(tags) > 1
    for where in (None, EpisodeFilter(embodiment=tags[0])):
        s = dataclasses.replace(spec, where=where)
        layout = data_layout(lake, s, config)
        assert layout == LakeStream(lake, s, config, rank=0, world_size=1).layout
        assert layout.embodiments == (tuple(tags) if where is None else (tags[0],))

    # The model's widths are the data's rounded up; a loader opened at them pads to them.
    model = size_model_config(ModelConfig.preset("tiny"), data_layout(shards, PackSpec(), config))
    wide = dataclasses.replace(config, max_state_dim=model.max_state_dim, max_action_dim=model.max_action_dim)
    batch = next(iter(PackedLoader(shards, wide, rank=0, world_size=1)))
    assert batch.state.shape[1] == model.max_state_dim and batch.action.shape[2] == model.max_action_dim
