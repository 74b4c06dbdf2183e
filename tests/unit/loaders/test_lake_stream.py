from __future__ import annotations

import pytest

from robolake.lake import Lake
from robolake.loaders import LakeStream, LoaderConfig, PackedBatch, stream
from robolake.packers.lengths import TokenLengthConfig
from robolake.packers.spec import PackSpec

SPEC = PackSpec(max_tokens=1024, window=64, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))


def test_lake_stream_packs_every_sample_once(packed_data):
    s = LakeStream(str(packed_data.lake), SPEC, LoaderConfig(sequences_per_batch=2, image_size=8, num_workers=2))
    batches = list(s)
    keys = [k for b in batches for k in b.sample_keys]
    assert len(keys) == s.num_samples == packed_data.num_samples == len(set(keys))
    assert all(b.total_tokens <= 2 * SPEC.max_tokens for b in batches)
    assert batches[0].state.shape[1] == 44  # widest synthetic embodiment (humanoid)
    s.set_epoch(1)
    again = [k for b in s for k in b.sample_keys]
    assert sorted(again) == sorted(keys) and again != keys


def test_stream_dispatches_on_source(packed_data):
    cfg = LoaderConfig(sequences_per_batch=4, image_size=8, num_workers=0)
    from_shards = list(stream(str(packed_data.packed), config=cfg))
    assert sum(b.num_samples for b in from_shards) == packed_data.num_samples
    first_ray = next(stream(str(packed_data.packed), backend="ray", config=cfg))
    assert isinstance(first_ray, PackedBatch)
    first_lake = next(stream(Lake.open(str(packed_data.lake)), config=cfg, spec=SPEC))
    assert isinstance(first_lake, PackedBatch) and first_lake.tokens_per_view == 16


def test_stream_errors(packed_data, tmp_path):
    with pytest.raises(ValueError, match="backend must be"):
        stream(str(packed_data.packed), backend="jax")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="drop `spec`"):
        stream(str(packed_data.packed), spec=SPEC)
    with pytest.raises(ValueError, match="run `robolake pack` first"):
        stream(str(packed_data.lake), backend="ray")
    with pytest.raises(FileNotFoundError, match="neither a pack output"):
        stream(str(tmp_path))
