"""`--where` over the record: stream('S') facts from metadata, aggregates of event('S') from the events table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake.cli import main
from robolake.lake import IngestConfig, Lake, ingest
from robolake.lake.where import WhereError, parse_where, select_episode_ids
from robolake.testing.ros import Layout, write_ros2


def _imu(hz: float, skip: tuple[float, float] | None = None) -> tuple[str, list]:
    t = np.arange(int(hz)) / hz
    if skip is not None:
        t = t[(t < skip[0]) | (t >= skip[1])]
    return "imu", [(float(x), np.arange(10) * 0.1 + x) for x in t]


# Three rigs: a fault and two presses at 200 Hz; no fault, one press, a 100 Hz IMU with a pause;
# a fault stream that never fires.
RIGS = {
    "a": {
        "/imu": _imu(200),
        "/fault": ("bool", [(0.2, False), (0.5, True), (0.7, False)]),
        "/phase": ("string", [(0.1, "reach"), (0.6, "grasp")]),
        "/button": ("empty", [(0.33, None), (0.66, None)]),
    },
    "b": {
        "/imu": _imu(100, skip=(0.3, 0.6)),
        "/phase": ("string", [(0.1, "reach")]),
        "/button": ("empty", [(0.5, None)]),
    },
    "c": {
        "/imu": _imu(200),
        "/fault": ("bool", [(0.4, False)]),
        "/mode": ("int64", [(0.1, 3)]),
    },
}


@pytest.fixture(scope="module")
def record_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("where_record")
    for name, extra in RIGS.items():
        write_ros2(root / "src" / f"rig_{name}", Layout(seconds=1.0, extra=extra, seed=ord(name)))
    ingest(str(root / "src"), str(root / "lake"), IngestConfig(execution="local"))
    lake = Lake.open(str(root / "lake"))
    ids = {}
    for r in lake.episodes(columns=["episode_id", "source_uri", "metadata"]).to_pylist():
        rig = next(n for n in RIGS if f"rig_{n}" in r["metadata"])
        ids[rig] = r["episode_id"]
    assert len(ids) == 3
    return root / "lake", ids


def _rigs(lake_dir: Path, ids: dict[str, str], expr: str) -> str:
    got = set(select_episode_ids(Lake.open(str(lake_dir)), expr))
    return "".join(sorted(n for n, e in ids.items() if e in got))


def test_events_select_what_they_say(record_lake):
    lake_dir, ids = record_lake
    assert _rigs(lake_dir, ids, "any(event('/fault'))") == "ac"
    assert _rigs(lake_dir, ids, "any(event('/fault') == 'true')") == "a"
    assert _rigs(lake_dir, ids, "any(event('/fault') = true)") == "a"
    assert _rigs(lake_dir, ids, "all(event('/fault') = false)") == "bc"  # no events: all() holds
    assert _rigs(lake_dir, ids, "count(event('/button')) >= 2") == "a"
    assert _rigs(lake_dir, ids, "count(event('/button')) = 1") == "b"
    assert _rigs(lake_dir, ids, "any(event('/phase') in ('grasp', 'place'))") == "a"
    assert _rigs(lake_dir, ids, "any(like(event('/phase'), 're%'))") == "ab"
    assert _rigs(lake_dir, ids, "any(isnull(event('/button')))") == "ab"  # a trigger has no value
    assert _rigs(lake_dir, ids, "any(event('/fault') or true) and not any(event('/button'))") == "c"


def test_event_times_are_on_the_steps_axis(record_lake):
    lake_dir, ids = record_lake
    # the fault turns true 0.5 s into the recording, whose first joint message is t0 and step 0
    assert _rigs(lake_dir, ids, "any(event('/fault') = true and event('/fault').t < 0.45)") == ""
    assert _rigs(lake_dir, ids, "any(event('/fault') = true and event('/fault').t < 0.55)") == "a"
    assert _rigs(lake_dir, ids, "min(event('/button').t) < 0.4") == "a"
    assert _rigs(lake_dir, ids, "max(event('/button').t) - min(event('/button').t) > 0.3") == "a"


def test_streams_from_metadata(record_lake):
    lake_dir, ids = record_lake
    assert _rigs(lake_dir, ids, "stream('/imu').rate_hz >= 150") == "ac"
    assert _rigs(lake_dir, ids, "stream('/imu').count > 150") == "ac"
    assert _rigs(lake_dir, ids, "stream('/imu').gaps > 0") == "b"
    assert _rigs(lake_dir, ids, "stream('/imu').longest_gap_s > 0.25") == "b"
    assert _rigs(lake_dir, ids, "stream('/fault')") == "ac"
    assert _rigs(lake_dir, ids, "stream('/fault').count = 0") == "b"  # absent: no messages
    assert _rigs(lake_dir, ids, "stream('/fault').kind = 'bool'") == "ac"
    assert _rigs(lake_dir, ids, "stream('/imu').clock = 'header' and any(state[0] > 0)") == "abc"


def test_an_unknown_stream_names_the_streams_there_are(record_lake):
    lake = Lake.open(str(record_lake[0]))
    with pytest.raises(WhereError, match=r"no episode recorded a stream '/fault_flag'; the streams are .*/fault, "):
        select_episode_ids(lake, "any(event('/fault_flag'))")
    with pytest.raises(WhereError, match=r"no episode recorded a stream '/ft'"):
        select_episode_ids(lake, "stream('/ft').gaps > 0")
    with pytest.raises(WhereError, match=r"stream '/imu' is numeric, not events"):
        select_episode_ids(lake, "any(event('/imu'))")


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("event('/fault')", r"one value per event; wrap it in an aggregate"),
        ("any(event('/a') or event('/b'))", r"names the events of 2 streams"),
        ("any(event('/fault') and num_steps > 3)", r"only event\('S'\).*not 'num_steps'"),
        ("stream('/imu').hz > 1", r"stream\(\) has no \.hz; it has count"),
        ("stream(imu).count > 1", r"takes one quoted stream name"),
        ("max(stream('/imu').count)", r"one value per episode; use it outside"),
        ("event('/x').__class__", r"event\(\) has no \.__class__"),
        ("any(event('/x') == __import__('os'))", r"unknown function"),
    ],
)
def test_record_refs_outside_the_language_are_refused(expr: str, message: str):
    with pytest.raises(WhereError, match=message):
        parse_where(expr)


def test_select_on_the_command_line(record_lake, tmp_path: Path, capsys):
    import shutil

    lake_dir, ids = record_lake
    dst = tmp_path / "lake"
    shutil.copytree(lake_dir, dst)
    code = main(["select", str(dst), "--where", "any(event('/fault') = true)", "--reason", "faulted runs"])
    out, err = capsys.readouterr()
    assert code == 0 and "keeps 1 episodes" in out, err
    assert Lake.open(str(dst)).episode_ids() == [ids["a"]]
    code = main(["select", str(dst), "--where", "any(event('/fault_flag'))", "--reason", "x"])
    out, err = capsys.readouterr()
    assert code == 2 and "no episode recorded a stream '/fault_flag'" in err and err.count("\n") == 1
