from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections import Counter

import lance
import numpy as np
import pyarrow as pa
import pytest

from robolake.lake import Lake
from robolake.loaders import LoaderConfig, PackedLoader, epoch_batches, open_shards
from robolake.packers.manifest import LineageError, read_manifest, write_manifest


def _keys(loader, limit=None):
    out = []
    for i, batch in enumerate(loader):
        out.extend(batch.sample_keys)
        if limit is not None and i + 1 == limit:
            break
    return out


@pytest.mark.parametrize("n,world,b", [(18, 2, 2), (17, 2, 1), (7, 3, 2), (100, 8, 3), (5, 5, 4), (9, 4, 1)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_plan_is_exactly_once_with_equal_steps(n, world, b, drop_last):
    cfg = LoaderConfig(sequences_per_batch=b, drop_last=drop_last, seed=3)
    plans = [epoch_batches(n, epoch=1, rank=r, world_size=world, config=cfg) for r in range(world)]
    assert len({len(p) for p in plans}) == 1, "every rank takes the same number of steps"
    rows = np.concatenate([x for p in plans for x in p]) if plans[0] else np.zeros(0, int)
    assert len(rows) == len(set(rows.tolist()))
    if drop_last:
        assert all(len(x) == b for p in plans for x in p)
        assert len(rows) == n // (world * b) * world * b
    else:
        assert sorted(rows.tolist()) == list(range(n))
        assert all(len(x) >= 1 for p in plans for x in p)


def test_plan_rejects_fewer_rows_than_ranks():
    with pytest.raises(ValueError, match="cannot give each of 4 ranks a batch"):
        epoch_batches(3, epoch=0, rank=0, world_size=4, config=LoaderConfig(drop_last=False))


def test_loader_config_validates():
    with pytest.raises(ValueError, match="sequences_per_batch must be >= 1"):
        LoaderConfig(sequences_per_batch=0)
    with pytest.raises(ValueError, match="worker_start_method"):
        LoaderConfig(worker_start_method="thread")


def test_epoch_reads_every_sample_once_with_workers(packed_data):
    loader = PackedLoader(str(packed_data.packed), LoaderConfig(sequences_per_batch=2, image_size=16, num_workers=2))
    keys = _keys(loader)
    assert len(keys) == packed_data.num_samples == len(set(keys))
    assert len(loader) == -(-packed_data.num_sequences // 2)


def test_shuffle_differs_across_epochs_and_repeats_for_a_seed(packed_data):
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0, seed=7)
    a = PackedLoader(str(packed_data.packed), cfg)
    e0 = _keys(a)
    e1 = _keys(a)  # a finished epoch advances to the next
    assert a.epoch == 1
    assert sorted(e0) == sorted(e1) and e0 != e1
    b = PackedLoader(str(packed_data.packed), cfg)
    assert _keys(b) == e0
    b.set_epoch(1)
    assert _keys(b) == e1
    other = PackedLoader(str(packed_data.packed), dataclasses.replace(cfg, seed=8))
    assert _keys(other) != e0


def test_resume_mid_epoch_repeats_and_skips_nothing(packed_data):
    cfg = LoaderConfig(sequences_per_batch=2, image_size=8, num_workers=2, seed=1)
    full = PackedLoader(str(packed_data.packed), cfg)
    full.set_epoch(2)
    whole = _keys(full)
    first = PackedLoader(str(packed_data.packed), cfg)
    first.set_epoch(2)
    head = _keys(first, limit=3)
    state = first.state_dict()
    assert state["epoch"] == 2 and state["batches_done"] == 3
    assert state["loader"] == "torch" and state["source"] == str(packed_data.packed) and state["rank"] == 0
    second = PackedLoader(str(packed_data.packed), cfg)
    second.load_state_dict(json.loads(json.dumps(state)))  # checkpoints hold it as JSON
    tail = _keys(second)
    assert head + tail == whole
    assert Counter(head + tail) == Counter(whole) and len(set(whole)) == packed_data.num_samples


def test_resume_refuses_another_plan(packed_data, packed_copy):
    cfg = LoaderConfig(sequences_per_batch=2, image_size=8, num_workers=0)
    first = PackedLoader(str(packed_data.packed), cfg)
    _keys(first, limit=1)
    state = first.state_dict()  # mid-epoch
    with pytest.raises(ValueError, match="seed=0 but this loader has 8"):
        PackedLoader(str(packed_data.packed), dataclasses.replace(cfg, seed=8)).load_state_dict(state)
    with pytest.raises(ValueError, match="source=.* but this loader has .*start over"):
        PackedLoader(str(packed_copy), cfg).load_state_dict(state)
    same = PackedLoader(str(packed_data.packed), cfg)
    for key, value in [("version", state["version"] + 1), ("spec", "0" * 64)]:
        with pytest.raises(ValueError, match=f"{key}="):
            same.load_state_dict(state | {key: value})
    with pytest.raises(ValueError, match=r"missing \['loader'\]"):
        same.load_state_dict({k: v for k, v in state.items() if k != "loader"})
    with pytest.raises(ValueError, match=r"unknown keys \['shards_root'\]"):
        same.load_state_dict(state | {"shards_root": state["source"]})
    with pytest.raises(ValueError, match="packed sequences in epoch 0 but this loader plans"):
        same.load_state_dict(state | {"sequences": state["sequences"] + 1, "position": 2})
    assert (same.epoch, same.batches_done) == (0, 0), "a refused state changes nothing"


def test_another_world_size_resumes_mid_epoch(packed_data):
    """One rank's mid-epoch state, resumed on two ranks: the rest of the epoch, once, in its order."""
    cfg = LoaderConfig(sequences_per_batch=2, image_size=8, num_workers=0, seed=2)
    whole = _keys(PackedLoader(str(packed_data.packed), cfg))
    first = PackedLoader(str(packed_data.packed), cfg)
    head = _keys(first, limit=2)
    state = first.state_dict()
    assert state["position"] == 4 and state["world_size"] == 1
    rest = []
    for rank in range(2):
        resumed = PackedLoader(str(packed_data.packed), cfg, rank=rank, world_size=2)
        resumed.load_state_dict(state)
        assert (resumed.epoch, resumed.start, resumed.batches_done) == (0, 4, 0)
        rest.append(_keys(resumed))
    assert sorted(head + rest[0] + rest[1]) == sorted(whole) and len(set(whole)) == packed_data.num_samples


def test_another_world_size_resumes_at_the_next_epoch(packed_data):
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0, seed=2)
    alone = PackedLoader(str(packed_data.packed), cfg)
    _keys(alone)  # epoch 0 read to the end
    state = alone.state_dict()
    for rank in range(2):
        resumed = PackedLoader(str(packed_data.packed), cfg, rank=rank, world_size=2)
        resumed.load_state_dict(state)
        fresh = PackedLoader(str(packed_data.packed), cfg, rank=rank, world_size=2)
        fresh.set_epoch(1)
        assert resumed.epoch == 1
        assert _keys(resumed) == _keys(fresh)


def test_missing_fragment_is_a_clear_error(packed_copy):
    data = packed_copy / "shards.lance" / "data"
    os.remove(data / sorted(os.listdir(data))[0])
    with pytest.raises(FileNotFoundError, match="missing its data file.*re-run `robolake pack`"):
        PackedLoader(str(packed_copy), LoaderConfig(num_workers=0))


def test_fragment_lost_after_open_is_a_clear_error(packed_copy):
    shards = open_shards(str(packed_copy))
    data = packed_copy / "shards.lance" / "data"
    for f in os.listdir(data):
        os.remove(data / f)
    with pytest.raises(FileNotFoundError, match="cannot be read.*re-run `robolake pack`"):
        shards.read_rows([0])


def test_wrong_schema_is_a_clear_error(packed_copy):
    uri = str(packed_copy / "shards.lance")
    table = lance.dataset(uri).to_table().drop_columns(["frames"])
    table = table.set_column(table.schema.get_field_index("horizon"), "horizon", table["horizon"].cast(pa.int64()))
    version = lance.write_dataset(table, uri, mode="overwrite").version
    write_manifest(str(packed_copy), dataclasses.replace(read_manifest(str(packed_copy)), shards_version=version))
    with pytest.raises(
        ValueError, match=r"packed-shard schema: column 'horizon' is int64, expected int32; missing column 'frames'"
    ):
        open_shards(str(packed_copy))


def test_not_a_pack_output(tmp_path):
    with pytest.raises(FileNotFoundError, match="not the output of `robolake pack`"):
        PackedLoader(str(tmp_path))


def test_lineage_checks(packed_data, packed_copy, tmp_path):
    lake = Lake.open(str(packed_data.lake))
    PackedLoader(str(packed_data.packed), LoaderConfig(num_workers=0), lake=lake)  # the right lake: fine
    with pytest.raises(LineageError, match="packed from lake version 2, but the lake given is at version 1"):
        PackedLoader(str(packed_data.packed), lake=lake.checkout(1))
    other = tmp_path / "other_lake"
    shutil.copytree(packed_data.lake, other)
    with pytest.raises(LineageError, match="packed from lake .* not .*other_lake"):
        PackedLoader(str(packed_data.packed), lake=str(other))
    # the packed version was removed from the lake
    write_manifest(str(packed_copy), dataclasses.replace(read_manifest(str(packed_copy)), lake_uri=str(other)))
    for f in (other / "_robolake" / "versions").glob("*2.json"):
        f.unlink()
    with pytest.raises(LineageError, match="version 2, which no longer exists"):
        PackedLoader(str(packed_copy), lake=str(other))


def test_persistent_workers_follow_epochs_and_interrupted_iteration(packed_data):
    """One loader, workers started once: a broken-off iteration continues, later epochs reshuffle."""
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=2, seed=3)
    reference = PackedLoader(str(packed_data.packed), dataclasses.replace(cfg, num_workers=0))
    e0, e1 = _keys(reference), _keys(reference)
    loader = PackedLoader(str(packed_data.packed), cfg)
    head = _keys(loader, limit=2)
    tail = _keys(loader)  # the same object picks up at batch 2 of epoch 0
    assert head + tail == e0
    assert _keys(loader) == e1 and loader.epoch == 1
    loader.set_epoch(0)
    assert _keys(loader) == e0


def test_the_workers_stream_runs_on_across_epochs_and_restarts_only_where_moved(packed_data, monkeypatch):
    """Consecutive epochs come from one running stream (its prefetch carries over the boundary),
    with exactly the batches a fresh loader gives; set_epoch and load_state_dict restart it."""
    from torch.utils.data import DataLoader

    starts: list[int] = []
    real_iter = DataLoader.__iter__
    monkeypatch.setattr(DataLoader, "__iter__", lambda self: starts.append(1) or real_iter(self))
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=2, seed=3)
    reference = PackedLoader(str(packed_data.packed), dataclasses.replace(cfg, num_workers=0))
    epochs = [_keys(reference) for _ in range(3)]
    starts.clear()
    loader = PackedLoader(str(packed_data.packed), cfg)
    assert _keys(loader) == epochs[0] and _keys(loader) == epochs[1]
    head = _keys(loader, limit=1)
    state = loader.state_dict()
    assert head + _keys(loader) == epochs[2]
    assert len(starts) == 1  # three epochs and a broken-off iteration: one stream
    loader.load_state_dict(state)  # back to batch 1 of epoch 2: a restart from there
    assert _keys(loader) == epochs[2][len(head) :] and len(starts) == 2
    loader.set_epoch(1)
    assert _keys(loader) == epochs[1] and len(starts) == 3
