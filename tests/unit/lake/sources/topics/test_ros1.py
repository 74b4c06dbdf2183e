"""ROS 1 bags (v2.0) through ingest: defaults, embedded custom definitions, split by gap, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources import SourceOptions, discover_readers
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.lake.sources.topics.rosbag import Ros1Reader, is_ros1_bag
from robolake.testing.ros import Layout, write_ros1

from .ros_expected import expected_episode, lake_frames, lake_steps, quarantine_rows

pytest.importorskip("rosbags")


def test_ros1_bag_with_no_mapping_lands_resampled(tmp_path: Path):
    src = tmp_path / "src" / "day1"
    src.mkdir(parents=True)
    rec = write_ros1(src / "take_01.bag", Layout(seconds=1.0, seed=3))
    assert is_ros1_bag(str(src / "take_01.bag"))
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined) == (1, 0)
    lake = Lake.open(str(tmp_path / "lake"))
    exp = expected_episode(rec, 100.0)
    got = lake_steps(lake)
    np.testing.assert_allclose(got["state"], exp["state"].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(got["action"], exp["action"].astype(np.float32), atol=1e-6)
    assert lake_frames(lake, "wrist") == [rec.frames[i] for i in exp["frame_index"]]
    ep = lake.episodes().to_pylist()[0]
    assert ep["source_format"] == "ros1" and ep["num_steps"] == len(exp["ticks"])


def test_custom_type_decodes_from_the_bags_own_definition(tmp_path: Path):
    from rosbags.typesys import get_types_from_msg

    typs = get_types_from_msg("Header header\nfloat32[4] finger_pos\nbool engaged\n", "hand_msgs/msg/HandState")

    def hand(v: float):
        return lambda ts, header: ts.types["hand_msgs/msg/HandState"](
            header=header, finger_pos=np.full(4, v, np.float32), engaged=v > 0.5
        )

    entries = [(t, hand(float(t))) for t in np.arange(0, 1.0, 0.02)]
    write_ros1(
        tmp_path / "hand.bag",
        Layout(seconds=1.0, extra={"/hand": ("custom:hand_msgs/msg/HandState", entries)}),
        custom_types=typs,
    )
    mapping = mapping_from_dict(
        {"state": ["/joint_states", {"source": "/hand", "field": "finger_pos"}], "action": [{"source": "/hand"}]}
    )
    reader = Ros1Reader(str(tmp_path / "hand.bag"), SourceOptions(mapping=mapping))
    spec = reader.spec()
    assert (spec.state_dim, spec.action_dim) == (7, 5)  # 3 joints + 4 fingers; action: 4 fingers + engaged
    ep = reader.read_tabular(reader.discover()[0])
    # header stamps of /hand are on a 50 Hz grid: finger positions interpolate linearly in time
    t = ep.timestamps + ep.metadata["t0_ns"] / 1e9 - 1_700_000_000
    np.testing.assert_allclose(ep.state[:, 3], t, atol=1e-5)
    assert set(np.unique(ep.action[:, 4])) <= {0.0, 1.0}


def test_truncated_bag_is_quarantined_beside_a_good_one(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    write_ros1(src / "good.bag", Layout(seconds=0.5))
    write_ros1(src / "cut.bag", Layout(seconds=0.5, seed=1))
    data = (src / "cut.bag").read_bytes()
    (src / "cut.bag").write_bytes(data[: len(data) // 2])
    (src / "old.bag").write_bytes(b"#ROSBAG V1.2\n" + b"\0" * 64)  # not v2.0: reported, not read
    found = discover_readers(str(src))
    assert any("old.bag" in u for u in found.unrecognised)
    res = ingest(str(src), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined) == (1, 1)
    (row,) = quarantine_rows(Lake.open(str(tmp_path / "lake")))
    assert row["source_path"].endswith("cut.bag") and row["reason_code"] == "corrupt_file"
    assert "rosbag reindex" in row["reason"]


def test_split_by_gap_and_by_file(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    write_ros1(src / "session.bag", Layout(seconds=0.5, gaps=(3.0, 3.0)))
    write_ros1(src / "single.bag", Layout(seconds=0.5, seed=2))
    mapping = mapping_from_dict(
        {
            "state": ["/joint_states"],
            "action": ["/arm/joint_command"],
            "cameras": {"wrist": "/wrist/image_raw/compressed"},
            "split": {"by": "gap", "seconds": 1.5},
        }
    )
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(mapping=mapping))
    assert (res.ingested, res.quarantined) == (4, 0)
    eps = Lake.open(str(tmp_path / "lake")).episodes().to_pylist()
    assert sorted(Path(e["source_uri"]).name for e in eps) == ["session.bag"] * 3 + ["single.bag"]
    assert all(40 <= e["num_steps"] <= 50 for e in eps)


@pytest.mark.parametrize("compression", ["bz2", "lz4"])
def test_compressed_chunks(tmp_path: Path, compression: str):
    rec = write_ros1(tmp_path / "c.bag", Layout(seconds=0.4, camera="raw"), compression=compression)
    reader = Ros1Reader(str(tmp_path / "c.bag"))
    ep = reader.read_tabular(reader.discover()[0])
    exp = expected_episode(rec)
    np.testing.assert_allclose(ep.state, exp["state"].astype(np.float32), atol=1e-6)
    (frames,) = list(reader.read_frames(ep))
    assert frames.camera == "top" and len(frames.images) == ep.num_steps
