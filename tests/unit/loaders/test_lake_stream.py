from __future__ import annotations

import dataclasses
import json

import pytest

from robolake.lake import Lake
from robolake.loaders import LakeStream, LoaderConfig, PackedBatch, stream
from robolake.packers.lengths import TokenLengthConfig
from robolake.packers.spec import PackSpec

SPEC = PackSpec(
    max_tokens=1024, algorithm="window", window=64, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0)
)


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


def test_stream_dispatches_on_source(packed_data, ray_session):
    cfg = LoaderConfig(sequences_per_batch=4, image_size=8, num_workers=0)
    from_shards = list(stream(str(packed_data.packed), config=cfg))
    assert sum(b.num_samples for b in from_shards) == packed_data.num_samples
    first_ray = next(
        stream(str(packed_data.packed), backend="ray", config=LoaderConfig(sequences_per_batch=4, image_size=8))
    )
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


def test_lake_stream_shards_by_rank(packed_data):
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=1)
    ranks = [LakeStream(str(packed_data.lake), SPEC, cfg, rank=r, world_size=2) for r in range(2)]
    keys = [[k for b in s for k in b.sample_keys] for s in ranks]
    assert ranks[0].num_batches == ranks[1].num_batches > 0
    assert not set(keys[0]) & set(keys[1])
    assert len(keys[0]) + len(keys[1]) == packed_data.num_samples == len(set(keys[0]) | set(keys[1]))


def test_lake_stream_resumes_mid_epoch(packed_data):
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=1)
    whole = [b.sample_keys for b in LakeStream(str(packed_data.lake), SPEC, cfg)]
    first = LakeStream(str(packed_data.lake), SPEC, cfg)
    it = iter(first)
    head = [next(it).sample_keys for _ in range(2)]
    state = first.state_dict()
    assert state["loader"] == "lake" and state["batches_done"] == 2 and state["version"] == first.lake.version
    resumed = LakeStream(str(packed_data.lake), SPEC, cfg)
    resumed.load_state_dict(json.loads(json.dumps(state)))  # checkpoints hold it as JSON
    assert head + [b.sample_keys for b in resumed] == whole
    other = LakeStream(str(packed_data.lake), SPEC, LoaderConfig(sequences_per_batch=1, image_size=8, seed=5))
    with pytest.raises(ValueError, match="seed=0 but this loader has 5"):
        other.load_state_dict(state)
    repacked = LakeStream(str(packed_data.lake), dataclasses.replace(SPEC, window=32), cfg)
    with pytest.raises(ValueError, match="spec=.* but this loader has"):
        repacked.load_state_dict(state)
    with pytest.raises(ValueError, match="version=.* but this loader has"):
        resumed.load_state_dict(state | {"version": state["version"] - 1})
    two = [LakeStream(str(packed_data.lake), SPEC, cfg, rank=r, world_size=2) for r in range(2)]
    for s in two:
        s.load_state_dict(state)  # another world size, mid-epoch: the rest of the epoch, split two ways
    rest = [k for s in two for b in s for k in b.sample_keys]
    flat = [k for b in whole for k in b]
    assert sorted([k for b in head for k in b] + rest) == sorted(flat) and len(set(flat)) == len(flat)
    with pytest.raises(ValueError, match=r"missing \['num_batches'\]"):
        resumed.load_state_dict({k: v for k, v in state.items() if k != "num_batches"})


def test_sources_refuse_what_they_cannot_honour(packed_data):
    from robolake.loaders import open_batches

    with pytest.raises(ValueError, match="window packer"):
        LakeStream(str(packed_data.lake), PackSpec(max_tokens=1024, algorithm="bfd"))
    with pytest.raises(ValueError, match="num_workers"):
        open_batches(str(packed_data.packed), LoaderConfig(num_workers=0), backend="ray")
    with pytest.raises(ValueError, match="does not shard across torchrun ranks"):
        open_batches(str(packed_data.packed), backend="ray", rank=0, world_size=2)


def test_ray_stream_resumes_only_at_epoch_boundaries(packed_data, ray_session):
    from robolake.loaders import PackedLoader, RayPackedStream

    s = RayPackedStream(str(packed_data.packed), LoaderConfig(sequences_per_batch=2, image_size=8))
    state = s.state_dict() | {"batches_done": 1}
    with pytest.raises(ValueError, match="cannot resume mid-epoch"):
        RayPackedStream(str(packed_data.packed), LoaderConfig(sequences_per_batch=2, image_size=8)).load_state_dict(
            state
        )
    done = s.state_dict() | {"batches_done": s.num_batches}
    again = RayPackedStream(str(packed_data.packed), LoaderConfig(sequences_per_batch=2, image_size=8))
    again.load_state_dict(json.loads(json.dumps(done)))
    assert again.epoch == 1
    keys = [k for b in again for k in b.sample_keys]
    assert again.epoch == 1 and len(keys) == len(set(keys)) == packed_data.num_samples
    with pytest.raises(ValueError, match="seed=0 but this loader has 3"):
        RayPackedStream(
            str(packed_data.packed), LoaderConfig(sequences_per_batch=2, image_size=8, seed=3)
        ).load_state_dict(done)
    torch_state = PackedLoader(str(packed_data.packed), LoaderConfig(sequences_per_batch=2, image_size=8)).state_dict()
    with pytest.raises(ValueError, match="loader='torch' but this loader has 'ray'"):
        again.load_state_dict(torch_state)
