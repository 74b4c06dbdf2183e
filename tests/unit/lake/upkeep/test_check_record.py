"""`robolake check` on the record: a chunk gone, a chunk twice, bytes cut, stamps moved, an event lost."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from robolake.cli import main
from robolake.lake import IngestConfig, Lake, ingest
from robolake.lake.protocol.versions import LakeVersion, write_version
from robolake.lake.upkeep.check import check_lake
from robolake.testing.ros import Layout, write_ros2


def _extras(seed: int) -> dict:
    t = np.arange(200) / 200.0
    return {
        "/imu": ("imu", [(float(x), np.arange(10) * 0.1 + x) for x in t]),
        "/ticks": ("int64", [(float(x), 1000 * seed + i) for i, x in enumerate(np.arange(50) / 50.0)]),
        "/fault": ("bool", [(0.2, False), (0.5, True), (0.7, False)]),
        "/button": ("empty", [(0.33, None), (0.66, None)]),
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two episodes whose /imu is kept in chunks of 64 messages (4 chunks of one part)."""
    root = tmp_path_factory.mktemp("check_record")
    for seed in (1, 2):
        write_ros2(root / "src" / f"rig{seed}", Layout(seconds=1.0, seed=seed, extra=_extras(seed)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("robolake.lake.sources.record.CHUNK", 64)
        ingest(str(root / "src"), str(root / "lake"), IngestConfig(execution="local"))
    return root / "lake"


@pytest.fixture()
def lake(built: Path, tmp_path: Path) -> Lake:
    shutil.copytree(built, tmp_path / "lake")
    return Lake.open(str(tmp_path / "lake"))


def _first_episode(lake: Lake) -> str:
    return sorted(lake.episode_ids())[0]


def _publish(lake: Lake, table: str, change: Callable[[lance.LanceDataset], object]) -> None:
    """Change `table` with Lance directly and publish the result as the lake's next version."""
    lake = Lake.open(lake.uri)
    ds = lance.dataset(lake.table_uri(table))
    change(ds)
    version = lance.dataset(lake.table_uri(table)).version
    tables = {**lake.version_info.tables, table: version}
    write_version(lake.uri, LakeVersion(version=lake.version + 1, tables=tables, operation="bad", created_at=0.0))


def _replace_row(lake: Lake, eid: str, stream: str, chunk: int, edit: Callable[[dict], None]) -> None:
    """Write row (eid, stream, chunk) of signals again, changed by `edit` (it lands after the other episode's)."""
    where = (pc.field("episode_id") == eid) & (pc.field("stream") == stream) & (pc.field("chunk") == chunk)
    table = Lake.open(lake.uri).to_arrow("signals").filter(where)
    (row,) = table.to_pylist()
    edit(row)

    def change(ds: lance.LanceDataset) -> None:
        ds.delete(f"episode_id = '{eid}' AND stream = '{stream}' AND chunk = {chunk}")
        lance.write_dataset(pa.Table.from_pylist([row], schema=table.schema), ds.uri, mode="append")

    _publish(lake, "signals", change)


def _problems(lake: Lake, **kw) -> list[str]:
    return [str(p) for p in check_lake(lake.uri, **kw).problems]


def test_a_sound_record_checks_ok(lake: Lake, capsys):
    sig = lake.to_arrow("signals", columns=["episode_id", "stream", "chunk"])
    imu = sig.filter(pc.field("stream") == "/imu")
    assert sorted(imu.column("chunk").to_pylist()) == [0, 0, 1, 1, 2, 2, 3, 3]  # the chunks this test needs
    report = check_lake(lake.uri)
    assert report.ok, report.problems
    assert report.counts["signals"] == sig.num_rows and report.counts["events"] == 10
    assert main(["check", lake.uri]) == 0


def test_a_deleted_chunk_is_named(lake: Lake, capsys):
    eid = _first_episode(lake)
    _publish(lake, "signals", lambda ds: ds.delete(f"episode_id = '{eid}' AND stream = '/imu' AND chunk = 1"))
    problems = _problems(lake)
    assert any(f"episode {eid}, stream /imu: part 0 has chunks 0, 2, 3, not 0..2" in p for p in problems), problems
    assert any(f"episode {eid}, stream /imu: the signals rows give count 136 (metadata: 200)" in p for p in problems)
    assert all("restore the version before the ingest" in p for p in problems)
    assert main(["check", lake.uri]) == 1
    out = capsys.readouterr()
    assert "stream /imu" in out.out + out.err and "Traceback" not in out.out + out.err


def test_cut_bytes_are_named_and_quick_skips_them(lake: Lake):
    eid = _first_episode(lake)

    def cut(row: dict) -> None:
        row["data"] = [
            d[:-8] if f == "angular_velocity.x" else d for f, d in zip(row["fields"], row["data"], strict=True)
        ]

    _replace_row(lake, eid, "/imu", 2, cut)
    problems = _problems(lake)
    assert any(
        f"episode {eid}, stream /imu: chunk 2 field angular_velocity.x holds 504 bytes, not 64 x 1 x 8 (float64)" in p
        for p in problems
    ), problems
    assert check_lake(lake.uri, quick=True).ok  # --quick does not read the value bytes


def test_quick_compares_a_sample_and_says_so(lake: Lake, monkeypatch: pytest.MonkeyPatch, capsys):
    from robolake.lake.upkeep import _record_check

    monkeypatch.setattr(_record_check, "QUICK_EPISODES", 1)  # of the lake's 2 episodes
    (sampled,), total = _record_check.sample_episodes(lance.dataset(lake.table_uri("episodes")))
    other = next(e for e in lake.episode_ids() if e != sampled)
    assert total == 2
    _publish(lake, "signals", lambda ds: ds.delete(f"episode_id = '{other}' AND stream = '/imu' AND chunk = 1"))
    quick = check_lake(lake.uri, quick=True)
    assert quick.ok and any("compared the record (signals and events) of 1 of 2 episodes" in n for n in quick.notes)
    assert any(f"episode {other}, stream /imu" in p for p in _problems(lake))  # the full check reads every one
    assert main(["check", lake.uri, "--quick"]) == 0
    assert "without --quick to compare every episode's" in capsys.readouterr().out
    _publish(lake, "signals", lambda ds: ds.delete(f"episode_id = '{sampled}' AND stream = '/imu' AND chunk = 2"))
    problems = _problems(lake, quick=True)
    assert any(f"episode {sampled}, stream /imu: part 0 has chunks" in p for p in problems), problems


def test_moved_stamps_and_a_lying_count_are_named(lake: Lake):
    eid = _first_episode(lake)

    def late(row: dict) -> None:
        row["t_ns"] = [t + 2_000_000_000 for t in row["t_ns"]]  # the last chunk 2 s late: a gap that was not there

    _replace_row(lake, eid, "/imu", 3, late)
    problems = _problems(lake)
    assert any(f"episode {eid}, stream /imu: the signals rows give gaps 1 (metadata: 0)" in p for p in problems), (
        problems
    )

    def lie(row: dict) -> None:
        row["count"] = 7

    _replace_row(lake, eid, "/ticks", 0, lie)
    problems = _problems(lake)
    assert any(f"episode {eid}, stream /ticks: chunk 0 says 7 messages but holds 50 timestamps" in p for p in problems)


def test_a_lost_event_and_foreign_rows_are_named(lake: Lake):
    eid = _first_episode(lake)
    _publish(lake, "events", lambda ds: ds.delete(f"episode_id = '{eid}' AND stream = '/fault' AND value = 'true'"))
    problems = _problems(lake)
    assert any(f"episode {eid}, stream /fault: the events rows give count 2 (metadata: 3)" in p for p in problems), (
        problems
    )
    rows = Lake.open(lake.uri).to_arrow("events").slice(0, 1).to_pylist()
    rows[0]["episode_id"] = "someone-else/000000-abc"
    _publish(
        lake,
        "events",
        lambda ds: lance.write_dataset(pa.Table.from_pylist(rows, schema=ds.schema), ds.uri, mode="append"),
    )
    problems = _problems(lake)
    assert any("table events holds rows of 1 episodes the episodes table does not list" in p for p in problems)
