"""The v3.0 reader reads a data file once for all the episodes it holds, and gives each episode the
rows a filter on `episode_index` would (in file order, interleaved or not, nulls matching none)."""

from __future__ import annotations

import glob
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from robolake.lake.sources.lerobot import reader as reader_mod
from robolake.lake.sources.lerobot.reader import LeRobotReader, _DataFile
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("v3")
    (path,) = generate_synthetic(
        root,
        SyntheticConfig.tiny(
            version="v3.0", episodes_per_embodiment=6, episodes_per_file=6, embodiments=("single_arm_7dof",)
        ),
    )
    return str(path)


def test_a_data_file_is_read_once_for_its_episodes(dataset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = pq.read_table

    def counting(path: str, *args: object, **kwargs: object) -> pa.Table:
        reads.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(pq, "read_table", counting)
    reader = LeRobotReader(dataset)
    refs = reader.discover()  # lists each file's episode_index column once (unlisted episodes)
    reads.clear()
    eps = [reader.read_tabular(ref) for ref in refs]
    assert len(eps) == 6
    data_reads = [p for p in reads if "/data/" in p]
    assert len(data_reads) == 1, data_reads
    # and each episode has exactly its own rows
    table = real(f"{dataset}/{refs[0].get('data_path')}")
    for ref, ep in zip(refs, eps, strict=True):
        mine = table.filter(pc.equal(table["episode_index"], ref.episode_index))
        assert ep.num_steps == mine.num_rows
        assert np.array_equal(ep.timestamps, mine["timestamp"].to_numpy().astype(np.float64))


def test_the_cache_is_not_shipped_with_the_reader(dataset: str) -> None:
    reader = LeRobotReader(dataset)
    reader.read_tabular(reader.discover()[0], record=False)
    assert reader._file is not None
    assert pickle.loads(pickle.dumps(reader))._file is None


def test_the_reader_keeps_no_episode_statistics(dataset: str) -> None:
    """Issue 37: v3.0's meta/episodes rows carry every feature's statistics, which no reader
    reads; shipped to each of an ingest's tasks, a 50k-episode dataset's rows cost each task
    about 10 s of unpickling. They are dropped when the rows are read."""
    meta_rows = pq.read_table(sorted(glob.glob(f"{dataset}/meta/episodes/*/*.parquet"))[0])
    assert any(c.startswith("stats/") for c in meta_rows.column_names)  # the source has them
    reader = LeRobotReader(dataset)
    kept = next(iter(reader.meta.episodes.values()))
    assert not any(k.startswith("stats/") for k in kept) and "length" in kept and "data/file_index" in kept
    assert len(pickle.dumps(reader)) < 0.4 * len(pickle.dumps(meta_rows.to_pylist()))


def test_a_rewritten_file_is_read_again(dataset: str, tmp_path: object) -> None:
    reader = LeRobotReader(dataset)
    ref = reader.discover()[0]
    first = reader._data_file(f"{dataset}/{ref.get('data_path')}")
    assert reader._data_file(f"{dataset}/{ref.get('data_path')}") is first
    reader._file = _DataFile(("other", 0, 0), first.table)  # another file's (or an older stat's) table
    assert reader._data_file(f"{dataset}/{ref.get('data_path')}") is not first


@pytest.mark.parametrize("with_nulls", [False, True])
def test_rows_of_equals_a_filter_on_interleaved_rows(with_nulls: bool) -> None:
    rng = np.random.default_rng(0)
    values = rng.integers(0, 5, size=200).tolist()
    if with_nulls:
        values = [None if i % 7 == 0 else v for i, v in enumerate(values)]
    table = pa.table({"episode_index": pa.array(values, pa.int64()), "x": pa.array(np.arange(200))})
    cached = _DataFile(("f", 0, 0), table)
    for e in range(-1, 6):
        want = table.filter(pc.equal(table["episode_index"], e))
        assert cached.rows_of(e).equals(want), e


def test_rows_of_a_contiguous_episode_is_a_slice() -> None:
    table = pa.table({"episode_index": pa.array([3, 3, 4, 4, 4, 5], pa.int64())})
    got = _DataFile(("f", 0, 0), table).rows_of(4)
    assert got["episode_index"].to_pylist() == [4, 4, 4]


def test_a_non_integer_episode_index_is_compared_as_a_filter_does() -> None:
    table = pa.table({"episode_index": pa.array([0.0, 1.0, 1.0], pa.float64())})
    assert _DataFile(("f", 0, 0), table).rows_of(1).num_rows == 2


def test_a_file_without_episode_index_names_the_file(
    dataset: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = LeRobotReader(dataset)
    ref = reader.discover()[0]
    monkeypatch.setattr(reader_mod, "_read_parquet", lambda path: pa.table({"x": [1]}))
    with pytest.raises(reader_mod.SourceError) as e:
        reader.read_tabular(ref)
    assert e.value.reason_code == "missing_column" and str(ref.get("data_path")) in e.value.path


def _same_record(a: object, b: object) -> bool:
    sa, sb = a.stream, b.stream  # type: ignore[attr-defined]
    return (
        a.images == b.images  # type: ignore[attr-defined]
        and (a.height, a.width, a.encoding) == (b.height, b.width, b.encoding)  # type: ignore[attr-defined]
        and np.array_equal(sa.packet_pts, sb.packet_pts)
        and np.array_equal(sa.packet_dts, sb.packet_dts)
        and np.array_equal(sa.packet_key, sb.packet_key)
        and np.array_equal(sa.packet_step, sb.packet_step)
        and sa.extra == sb.extra
        and sa.extradata == sb.extradata
    )


def test_a_video_kept_open_gives_the_packets_a_fresh_open_gives(dataset: str) -> None:
    from robolake.lake.sources import video

    reader = LeRobotReader(dataset)
    refs = reader.discover()
    (cam,) = reader.cameras
    path = f"{dataset}/{refs[0].get(f'video:{cam}')}"

    def record(ref: object, keep: bool) -> object:
        return video.read_record(
            path,
            start_s=ref.get(f"from:{cam}"),  # type: ignore[attr-defined]
            end_s=ref.get(f"to:{cam}"),  # type: ignore[attr-defined]
            fps=reader.fps,
            source_path="v",
            digest="d",
            keep_open=keep,
        )

    fresh = [record(ref, False) for ref in refs]
    order = [3, 1, 5, 2, 4, 0, 5]  # backwards too: each segment seeks afresh in the kept file
    kept = [record(refs[i], True) for i in order]
    assert all(_same_record(fresh[i], k) for i, k in zip(order, kept, strict=True))
    held = video._kept.video
    assert held is not None and held[0][0] == path
    reader.release_files()
    assert video._kept.video is None


def test_frames_read_by_the_reader_are_those_of_a_fresh_open(dataset: str) -> None:
    reader = LeRobotReader(dataset)
    refs = reader.discover()
    eps = [reader.read_tabular(ref) for ref in refs]
    kept = [next(iter(reader.read_frames(ep))) for ep in eps]
    reader.release_files()
    fresh = []
    for ep in eps:
        fresh.append(next(iter(reader.read_frames(ep))))
        reader.release_files()  # nothing kept between episodes
    assert all(_same_record(a, b) for a, b in zip(kept, fresh, strict=True))
