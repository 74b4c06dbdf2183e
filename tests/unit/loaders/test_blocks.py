"""Block shuffle and block reads (`loaders/blocks.py`): a global shuffle object storage serves cheaply."""

from __future__ import annotations

import json

import lance
import numpy as np
import pyarrow as pa
import pytest

from robolake.loaders import LakeStream, LoaderConfig
from robolake.loaders.blocks import BlockReads, block_order, block_reads_for, dataset_bytes, shuffle_quality
from robolake.loaders.order import plan_epoch
from robolake.loaders.shards import open_shards
from robolake.packers.lengths import TokenLengthConfig
from robolake.packers.spec import PackSpec

SPEC = PackSpec(
    max_tokens=1024, algorithm="window", window=64, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0)
)


@pytest.mark.parametrize(("num", "block", "window"), [(100, 7, 3), (64, 8, 2), (10, 20, 4), (50, 1, 50)])
def test_block_order_is_a_seeded_permutation_local_to_windows(num, block, window):
    order = block_order(num, seed=[3, 1], block=block, window=window)
    assert sorted(order.tolist()) == list(range(num))
    assert np.array_equal(order, block_order(num, seed=[3, 1], block=block, window=window))
    assert not np.array_equal(order, block_order(num, seed=[3, 2], block=block, window=window))
    if block < num:
        span = block * window
        for lo in range(num):  # every stretch of the order draws from two groups of `window` blocks at most
            assert len(np.unique(order[lo : lo + span] // block)) <= 2 * window
    q = shuffle_quality(num, block, window)
    assert 0 < q["window_fraction"] <= 1.0


def test_block_order_zero_is_uniform_and_bad_settings_say_so():
    assert sorted(block_order(20, seed=[0, 0], block=0, window=1).tolist()) == list(range(20))
    assert shuffle_quality(20, 0, 1) == {"kind": "uniform", "window_ids": 20, "window_fraction": 1.0}
    with pytest.raises(ValueError, match="block >= 0 and window >= 1"):
        block_order(20, seed=[0], block=4, window=0)
    with pytest.raises(ValueError, match="shuffle_block must be >= 0"):
        LoaderConfig(shuffle_block=-1)
    with pytest.raises(ValueError, match="read_cache_bytes must be >= 0"):
        LoaderConfig(read_cache_bytes=-1)


@pytest.mark.parametrize(("old", "new", "stop"), [(4, 2, 3), (2, 3, 5), (3, 1, 1)])
def test_a_block_order_resumes_on_another_world_size_exactly_once(old, new, stop):
    order = block_order(97, seed=[0, 0], block=5, window=4)
    plans = [plan_epoch(order, start=0, rank=r, world_size=old, per_rank=2, drop_last=False) for r in range(old)]
    head = [i for p in plans for b in p.batches[:stop] for i in b.tolist()]
    position = plans[0].position(stop)
    assert sorted(head) == sorted(order[:position].tolist())  # the world has read a prefix of the order
    rest = [plan_epoch(order, start=position, rank=r, world_size=new, per_rank=3, drop_last=False) for r in range(new)]
    tail = [i for p in rest for b in p.batches for i in b.tolist()]
    assert sorted(head + tail) == list(range(97))


def _table(tmp_path, rows=100):
    data = pa.table({"x": np.arange(rows), "b": [bytes([i % 256]) * (i % 7 + 1) for i in range(rows)]})
    return lance.write_dataset(data, str(tmp_path / "t.lance"), max_rows_per_file=30)


def test_block_reads_take_like_the_dataset_reading_each_block_once(tmp_path):
    ds = _table(tmp_path)
    reads = BlockReads(ds, block_rows=16, max_bytes=1 << 20, all_columns=True, prefetch_all=True)
    rng = np.random.default_rng(0)
    for _ in range(20):
        idx = rng.integers(0, 100, size=9)  # any order, repeats too
        assert reads.take(idx, columns=["b", "x"]).to_pydict() == ds.take(idx.tolist(), columns=["b", "x"]).to_pydict()
    assert reads.take([5]).schema.names == ds.schema.names and reads.take([]).num_rows == 0
    assert reads.fetches == 7  # ceil(100 / 16) blocks, each once
    assert reads.count_rows() == 100  # anything else goes to the dataset
    with pytest.raises(IndexError, match="out of range"):
        reads.take([100])
    reads.close()


def test_block_reads_under_a_small_budget_stay_correct_and_add_columns(tmp_path):
    ds = _table(tmp_path)
    reads = BlockReads(ds, block_rows=10, max_bytes=1)  # one block kept at a time
    for idx in ([1, 95, 3], [50, 51], [99, 0, 42]):
        assert reads.take(idx, columns=["x"]).to_pydict() == ds.take(idx, columns=["x"]).to_pydict()
        assert reads.take(idx, columns=["b"]).to_pydict() == ds.take(idx, columns=["b"]).to_pydict()
    reads.close()


def test_block_reads_only_where_they_pay(tmp_path):
    ds = _table(tmp_path)
    size = dataset_bytes(ds)
    assert size > 0
    assert isinstance(block_reads_for(ds, max_bytes=2 * size), BlockReads)  # fits: read once, whatever the order
    assert block_reads_for(ds, max_bytes=size) is None  # a uniform shuffle over more than fits: row by row
    assert isinstance(block_reads_for(ds, max_bytes=size, block_local=True), BlockReads)
    assert block_reads_for(ds, max_bytes=0, block_local=True) is None


def test_shards_read_the_same_rows_through_blocks(packed_data):
    shards = open_shards(str(packed_data.packed))
    plain = shards.with_reads(read_cache_bytes=0)
    idx = np.random.default_rng(1).permutation(shards.num_rows)[: min(7, shards.num_rows)]
    assert shards.block_reads() is not None and plain.block_reads() is None
    assert shards.read_rows(idx).to_pydict() == plain.read_rows(idx).to_pydict()
    local = shards.with_reads(read_cache_bytes=1, block_rows=2)  # block-local: blocks of the shuffle's rows
    reads = local.block_reads()
    assert reads is not None and reads.block_rows == 2
    assert local.read_rows(idx).to_pydict() == plain.read_rows(idx).to_pydict()


def test_lake_stream_block_shuffle_reads_every_sample_once_and_resumes_elsewhere(packed_data):
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=1, shuffle_block=4, shuffle_window=2)
    whole = LakeStream(str(packed_data.lake), SPEC, cfg)
    keys = [k for b in whole for k in b.sample_keys]
    assert len(keys) == len(set(keys)) == packed_data.num_samples
    first = LakeStream(str(packed_data.lake), SPEC, cfg)
    it = iter(first)
    head = [k for _ in range(2) for k in next(it).sample_keys]
    state = json.loads(json.dumps(first.state_dict()))
    two = [LakeStream(str(packed_data.lake), SPEC, cfg, rank=r, world_size=2) for r in range(2)]
    for s in two:
        s.load_state_dict(state)
    rest = [k for s in two for b in s for k in b.sample_keys]
    assert sorted(head + rest) == sorted(keys)
    uniform = LakeStream(str(packed_data.lake), SPEC, LoaderConfig(sequences_per_batch=1, image_size=8))
    with pytest.raises(ValueError, match="spec=.* but this loader has"):
        uniform.load_state_dict(state)  # another order of the epoch: refused


def test_the_lake_streams_reads_go_through_its_blocks(packed_data):
    """The materializer's takes reach the block reader: a take by offset that went to the Lance
    dataset behind it read row by row again (4,257 S3 requests an epoch against 40; found by
    `bench scale --sections s3` after reads were split by fragment)."""
    stream = LakeStream(str(packed_data.lake), SPEC, LoaderConfig(sequences_per_batch=2, image_size=8, num_workers=1))
    for _ in stream:
        pass
    fetched = {
        key[1].rstrip("/").rsplit("/", 1)[-1]: r.fetches for key, r in stream.materializer._tables.reads.items() if r
    }
    assert fetched["steps.lance"] > 0, fetched  # (frames here come from the pack's renditions)


def test_shard_loader_block_shuffle_reads_every_sample_once_and_resumes_elsewhere(packed_data):
    from robolake.loaders import PackedLoader

    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0, shuffle_block=2, shuffle_window=2)
    uniform_cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0)
    whole = [k for b in PackedLoader(str(packed_data.packed), cfg) for k in b.sample_keys]
    assert len(whole) == len(set(whole)) == packed_data.num_samples
    first = PackedLoader(str(packed_data.packed), cfg)
    assert first.shards.block_reads() is not None and first.shards.block_reads().block_rows == 2
    it = iter(first)
    head = [k for _ in range(2) for k in next(it).sample_keys]
    state = json.loads(json.dumps(first.state_dict()))
    two = [PackedLoader(str(packed_data.packed), cfg, rank=r, world_size=2) for r in range(2)]
    for s in two:
        s.load_state_dict(state)
    rest = [k for s in two for b in s for k in b.sample_keys]
    assert sorted(head + rest) == sorted(whole)
    with pytest.raises(ValueError, match="spec=.* but this loader has"):
        PackedLoader(str(packed_data.packed), uniform_cfg).load_state_dict(state)  # another order: refused


def test_epoch_order_is_the_canonical_order_unless_a_block_shuffle_is_asked_for():
    from robolake.loaders.blocks import epoch_order, order_identity
    from robolake.loaders.order import canonical_order

    uniform = epoch_order(30, seed=[0, 1], strata=None, shuffle_block=0, shuffle_window=4)
    assert np.array_equal(uniform, canonical_order(30, seed=[0, 1]))
    assert np.array_equal(epoch_order(30, seed=None, strata=None, shuffle_block=5, shuffle_window=4), np.arange(30))
    blocked = epoch_order(30, seed=[0, 1], strata=None, shuffle_block=5, shuffle_window=2)
    assert np.array_equal(blocked, block_order(30, seed=[0, 1], block=5, window=2))
    with pytest.raises(ValueError, match="mixed pack"):
        epoch_order(30, seed=[0, 1], strata=np.zeros(30, dtype=np.int64), shuffle_block=5, shuffle_window=2)
    assert order_identity({"a": 1}, 0, 16) == {"a": 1}  # uniform states of before stay valid
    assert order_identity({"a": 1}, 5, 2) == {"a": 1, "shuffle_block": [5, 2]}


def test_the_lake_streams_block_tables_pickle_with_their_settings_and_no_handles():
    import pickle

    from robolake.loaders.lake_stream import _BlockTables

    copy = pickle.loads(pickle.dumps(_BlockTables(123, block_local=True)))
    assert (copy.max_bytes, copy.block_local, copy.reads) == (123, True, {})
