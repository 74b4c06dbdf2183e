"""Rank and world size: read from torchrun's environment once, by `open_batches`, and passed to the
loader classes, which take them as constructor arguments and never read the environment."""

from __future__ import annotations

import pytest

from robolake.loaders import LakeStream, LoaderConfig, PackedLoader, RayPackedStream, open_batches
from robolake.packers import PackSpec, TokenLengthConfig

SPEC = PackSpec(max_tokens=1024, algorithm="window", tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
CONFIG = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0)
RAY_CONFIG = LoaderConfig(sequences_per_batch=1, image_size=8)  # the Ray stream refuses worker settings


@pytest.fixture()
def torchrun_rank_1_of_2(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")


def test_loader_classes_take_the_rank_they_are_given(packed_data, torchrun_rank_1_of_2):
    shards, lake = str(packed_data.packed), str(packed_data.lake)
    for source in (PackedLoader(shards, CONFIG), LakeStream(lake, SPEC, CONFIG), RayPackedStream(shards, RAY_CONFIG)):
        assert (source.rank, source.world_size) == (0, 1)  # one process, whatever the environment says
    assert (
        PackedLoader(shards, CONFIG, rank=1, world_size=2).rank,
        LakeStream(lake, SPEC, CONFIG, rank=1, world_size=2).rank,
    ) == (1, 1)


def test_open_batches_reads_torchruns_environment_once(packed_data, torchrun_rank_1_of_2):
    for source, spec in ((str(packed_data.packed), None), (str(packed_data.lake), SPEC)):
        batches = open_batches(source, CONFIG, spec=spec)
        assert (batches.rank, batches.world_size) == (1, 2)  # type: ignore[attr-defined]
        mine = open_batches(source, CONFIG, spec=spec, rank=0, world_size=1)
        assert (mine.rank, mine.world_size) == (0, 1)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="does not shard across torchrun ranks"):
        open_batches(str(packed_data.packed), RAY_CONFIG, backend="ray")


@pytest.mark.parametrize("cls", ["shards", "lake", "ray"])
def test_a_rank_outside_the_world_is_refused(packed_data, cls):
    with pytest.raises(ValueError, match=r"rank must be in \[0, world_size\)"):
        if cls == "shards":
            PackedLoader(str(packed_data.packed), CONFIG, rank=2, world_size=2)
        elif cls == "lake":
            LakeStream(str(packed_data.lake), SPEC, CONFIG, rank=2, world_size=2)
        else:
            RayPackedStream(str(packed_data.packed), RAY_CONFIG, rank=-1, world_size=1)
