"""The record of every stream: kept as recorded, read back bit for bit, steps derived from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake.lake import IngestConfig, Lake, ingest
from robolake.lake.sources.record import (
    RecordBuilder,
    flatten_message,
    read_record,
    record_tables,
    replay,
)
from robolake.testing.ros import Layout, write_ros2


def _extras(seconds: float = 1.0) -> dict:
    t_imu = np.arange(int(seconds * 200)) / 200.0
    return {
        "/imu": ("imu", [(t, np.arange(10) * 0.1 + t) for t in t_imu]),
        "/ticks": ("int64", [(t, 1_000_000_007 + i) for i, t in enumerate(np.arange(int(seconds * 50)) / 50.0)]),
        "/fault": ("bool", [(0.2, False), (0.5, True), (0.7, False)]),
        "/phase": ("string", [(0.1, "reach"), (0.6, "grasp")]),
        "/button": ("empty", [(0.33, None), (0.66, None)]),
    }


def test_messages_flatten_and_replay_as_recorded():
    msg = {"header": {"stamp": {"sec": 3, "nanosec": 5}, "frame_id": "base"}, "name": ["a", "b"], "position": [1.5, 2]}
    b = RecordBuilder()
    b.add("/js", msg, t_ns=10, log_ns=11)
    b.add("/js", {**msg, "position": [0.25, 7.0]}, t_ns=20, log_ns=21)
    rec = b.build()
    (part,) = rec.signals
    assert part.labels == {"header.frame_id": "base", "name": ["a", "b"]}
    got = [m for _, _, m in replay(part)]
    assert got[1]["header"] == {"stamp": {"sec": 3, "nanosec": 5}, "frame_id": "base"}
    assert got[1]["position"].tolist() == [0.25, 7.0]
    numeric, _ = flatten_message({"ticks": np.arange(3, dtype=np.int32), "x": 1.0, "ok": True})
    assert [(p, a.dtype.str, one) for p, a, one in numeric] == [
        ("ticks", "<i4", False),
        ("x", "<f8", True),
        ("ok", "|b1", True),
    ]


def test_changing_text_becomes_events_not_parts():
    b = RecordBuilder()
    for i in range(40):
        b.add("/status", {"code": i, "text": f"step {i}"}, t_ns=i, log_ns=i)
    rec = b.build()
    assert len(rec.parts("/status")) == 1
    ev = rec.event("/status/text")
    assert ev is not None and ev.values[7] == "step 7"


def test_tables_round_trip_bit_exact():
    b = RecordBuilder()
    rng = np.random.default_rng(0)
    vals = rng.standard_normal((1000, 6))
    for i in range(1000):
        b.add("/ft", {"wrench": vals[i], "seq": np.uint32(i)}, t_ns=i * 1_000_000, log_ns=i * 1_000_000 + 7)
    b.add("/flag", {"data": True}, t_ns=5, log_ns=6, event_kind="bool")
    rec = b.build()
    sig, ev = record_tables("ep", rec)
    back = read_record(sig, ev)
    (a,), (c,) = rec.signals, back.signals
    for x, y in zip(a.values, c.values, strict=True):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    assert c.values[1].dtype == np.uint32
    assert np.array_equal(a.t_ns, c.t_ns) and np.array_equal(a.log_ns, c.log_ns)
    assert back.event("/flag").values == ("true",)


@pytest.fixture(scope="module")
def imu_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("imu")
    bag = root / "src" / "rig"
    write_ros2(bag, Layout(seconds=1.0, extra=_extras()))
    ingest(str(bag), str(root / "lake"), IngestConfig(execution="local"))
    return bag, root / "lake"


def test_every_topic_lands_in_the_record_with_its_counts(imu_lake: tuple[Path, Path]):
    bag, lake_dir = imu_lake
    lake = Lake.open(str(lake_dir))
    sig = lake.to_arrow("signals")
    ev = lake.to_arrow("events")
    assert len(lake.episode_ids()) == 1
    rec = read_record(sig, ev)
    counts = rec.counts()
    assert counts["/imu"] == 200 and counts["/ticks"] == 50
    assert counts["/joint_states"] == 100 and counts["/arm/joint_command"] == 50
    assert counts["/wrist/image_raw/compressed"] == 15  # capture times of every frame
    assert counts["/fault"] == 3 and counts["/phase"] == 2 and counts["/button"] == 2
    ticks = next(p for p in rec.signals if p.stream == "/ticks")
    assert ticks.values[ticks.fields.index("data")].dtype == np.int64
    assert ticks.values[ticks.fields.index("data")][:3, 0].tolist() == [1_000_000_007, 1_000_000_008, 1_000_000_009]
    assert rec.event("/button").kind == "trigger" and rec.event("/button").values == (None, None)
    assert rec.event("/fault").values == ("false", "true", "false")
    assert rec.event("/phase").values == ("reach", "grasp")
    imu = next(p for p in rec.signals if p.stream == "/imu")
    assert imu.clock == "header" and len(imu.log_ns) == 200
    assert "angular_velocity.x" in imu.fields and "orientation_covariance" in imu.fields


def test_bad_streams_are_kept_and_named_and_the_rest_lands(tmp_path: Path):
    t = np.arange(100) / 100.0
    back = [(x - (0.5 if i == 40 else 0.0), np.arange(10.0), x + 0.001) for i, x in enumerate(t)]
    extra = {
        "/temp": ("imu", back),  # a header clock that jumps back once
        "/nan": ("float64", [(x, float("nan")) for x in t]),  # a stream of NaN
        "/dup": ("float64", [(0.3, 2.0), (0.3, 2.0), (0.4, 3.0)]),  # a duplicated message
    }
    bag = tmp_path / "src" / "bad"
    write_ros2(bag, Layout(seconds=1.0, extra=extra))
    res = ingest(str(bag), str(tmp_path / "lake"), IngestConfig(execution="local"))
    assert res.ingested == 1 and res.quarantined == 0
    text = "\n".join(res.notes)
    assert "/temp: its clock goes backwards 1 times" in text
    assert "/nan: 100 of 100 messages hold NaN/inf" in text
    assert "/dup: 1 messages repeat the one before" in text
    counts = read_record(*(Lake.open(str(tmp_path / "lake")).to_arrow(t) for t in ("signals", "events"))).counts()
    assert counts["/temp"] == 100 and counts["/nan"] == 100 and counts["/dup"] == 3


def test_a_record_past_the_read_budget_is_refused_by_name():
    from robolake.lake import SourceError

    b = RecordBuilder(budget=50_000, path="rig.bag")
    with pytest.raises(SourceError, match=r"read budget .* at stream /ft"):
        for i in range(10_000):
            b.add("/ft", {"data": np.zeros(6)}, t_ns=i, log_ns=i)


def test_a_lake_of_records_compacts(tmp_path: Path):
    from robolake.lake import optimize

    for seed in (1, 2):
        write_ros2(tmp_path / "src" / f"rig{seed}", Layout(seconds=0.5, seed=seed, extra=_extras(0.5)))
        ingest(str(tmp_path / "src" / f"rig{seed}"), str(tmp_path / "lake"), IngestConfig(execution="local"))
    before = read_record(*(Lake.open(str(tmp_path / "lake")).to_arrow(t) for t in ("signals", "events"))).counts()
    report = optimize(str(tmp_path / "lake"))
    assert report.version is not None
    lake = Lake.open(str(tmp_path / "lake"))
    assert len(lake.dataset("signals").get_fragments()) == 1 and len(lake.dataset("events").get_fragments()) == 1
    assert read_record(lake.to_arrow("signals"), lake.to_arrow("events")).counts() == before


def test_events_split_episodes_labels_and_triggers(tmp_path: Path):
    from robolake.lake import mapping_from_dict

    extra = {
        "/phase": ("string", [(0.05, "reach"), (0.3, "reach"), (0.4, "grasp"), (0.7, "lift")]),
        "/take": ("empty", [(0.1, None), (0.55, None)]),
    }
    write_ros2(tmp_path / "src" / "rig", Layout(seconds=1.0, extra=extra))
    by_label = mapping_from_dict(
        {
            "state": ["/joint_states"],
            "action": ["/arm/joint_command"],
            "split": {"by": "topic", "source": "/phase"},
            "task_from": "/phase",
        }
    )
    res = ingest(str(tmp_path / "src"), str(tmp_path / "a"), IngestConfig(execution="local", mapping=by_label))
    assert res.ingested == 3  # reach (two messages, one run), grasp, lift
    tasks = sorted(Lake.open(str(tmp_path / "a")).episodes(columns=["task"])["task"].to_pylist())
    assert tasks == ["grasp", "lift", "reach"]
    by_trigger = mapping_from_dict(
        {"state": ["/joint_states"], "action": ["/arm/joint_command"], "split": {"by": "topic", "source": "/take"}}
    )
    res = ingest(str(tmp_path / "src"), str(tmp_path / "b"), IngestConfig(execution="local", mapping=by_trigger))
    assert res.ingested == 2


def test_gaps_and_rate_equal_their_np_median_definition():
    """`gaps` and the summary's rate share one sort and a partition-based median: they must give
    exactly what np.median gives (check compares the metadata's rounded rate with a recomputed one)."""
    from robolake.lake.sources.record import Record, SignalPart, gaps, stream_summary

    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 3, 4, 5, 50, 51, 200):
        t = np.cumsum(rng.choice([0, 1, 1, 1, 2, 40], n)) * 3_333_333 + rng.integers(0, 9, n)
        t = rng.permutation(t)  # unsorted, with repeats
        dt = np.diff(np.sort(t)).astype(np.float64)
        pos = dt[dt > 0]
        want_rate = float(1e9 / np.median(pos)) if pos.size else 0.0
        limit = max(5.0 * float(np.median(pos / 1e9)), 0.05) if pos.size else None
        long = (dt / 1e9)[dt / 1e9 > limit] if limit is not None and n >= 3 else np.zeros(0)
        assert gaps(t) == (int(long.size), float(long.max()) if long.size else 0.0)
        part = SignalPart(stream="/s", part=0, kind="numeric", clock="log", t_ns=t, values=())
        assert stream_summary(Record(signals=(part,)))["/s"]["rate_hz"] == round(want_rate, 3)
