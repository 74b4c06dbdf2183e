"""Non-ROS MCAP (JSON + jsonschema) through ingest, and MCAP profile detection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.media.frames import decode_row
from robolake.lake.sources import SourceError, SourceOptions, discover_readers
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.lake.sources.topics.mcap_file import McapReader, is_non_ros_mcap
from robolake.lake.sources.topics.rosbag import is_ros2_storage_file, mcap_profile
from robolake.testing.ros import Layout, write_mcap_json, write_ros2

from .ros_expected import expected_episode, lake_frames, lake_steps, quarantine_rows

pytest.importorskip("mcap")


def test_json_mcap_with_no_mapping_lands_resampled(tmp_path: Path):
    path = tmp_path / "src" / "teleop_0001.mcap"
    rec = write_mcap_json(
        path, Layout(seconds=1.0, extra={"/task_instruction": ("string", [(0.0, "open the drawer")])})
    )
    assert mcap_profile(str(path)) == "" and is_non_ros_mcap(str(path)) and not is_ros2_storage_file(str(path))
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined) == (1, 0)
    lake = Lake.open(str(tmp_path / "lake"))
    exp = expected_episode(rec, 100.0)
    got = lake_steps(lake)
    np.testing.assert_allclose(got["state"], exp["state"].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(got["action"], exp["action"].astype(np.float32), atol=1e-6)
    assert lake_frames(lake, "wrist") == [rec.frames[i] for i in exp["frame_index"]]  # base64 JPEG passed through
    ep = lake.episodes().to_pylist()[0]
    assert ep["source_format"] == "mcap-json" and ep["task"] == "open the drawer"


def test_raw_image_and_inspect(tmp_path: Path):
    path = tmp_path / "raw.mcap"
    rec = write_mcap_json(path, Layout(seconds=0.5, camera="raw", cmd_hz=None))
    reader = McapReader(str(path), SourceOptions())
    info = reader.inspect()
    topics = info["recordings"][0]["topics"]
    assert topics["/top/image_raw"]["type"] == "foxglove.RawImage" and topics["/top/image_raw"]["count"] == len(
        rec.frames
    )
    assert info["mapping"]["action"] == "state one tick ahead" and info["state_dim"] == 3
    ep = reader.read_tabular(reader.discover()[0])
    (frames,) = list(reader.read_frames(ep))
    assert (frames.encoding, frames.height, frames.width) == ("ffv1;size=32x24", 24, 32)
    want = np.frombuffer(rec.frames[0], np.uint8).reshape(24, 32, 3)
    np.testing.assert_array_equal(decode_row(frames.images[0], frames.encoding), want)  # raw pixels: lossless


def test_ros2_profile_mcap_goes_to_the_ros2_reader(tmp_path: Path):
    write_ros2(tmp_path / "bag", Layout(seconds=0.3), storage="mcap")
    lone = tmp_path / "lone.mcap"
    (tmp_path / "bag" / "bag.mcap").rename(lone)
    assert mcap_profile(str(lone)) == "ros2" and not is_non_ros_mcap(str(lone))
    (reader,) = discover_readers(str(lone)).readers
    assert reader.format_name == "ros2-mcap"


def test_bad_mcaps_are_quarantined(tmp_path: Path):
    src = tmp_path / "src"
    write_mcap_json(src / "good.mcap", Layout(seconds=0.4))
    write_mcap_json(src / "proto.mcap", Layout(seconds=0.4, seed=1), foreign_topic="/odom")
    write_mcap_json(src / "cut.mcap", Layout(seconds=0.4, seed=2))
    data = (src / "cut.mcap").read_bytes()
    (src / "cut.mcap").write_bytes(data[: len(data) // 2])
    write_mcap_json(src / "nan.mcap", Layout(seconds=0.4, seed=3, nan_at=5))
    mapping = mapping_from_dict({"state": ["/joint_states"], "action": ["/arm/joint_command"]})
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(mapping=mapping))
    rows = {Path(r["source_path"]).name: r for r in quarantine_rows(Lake.open(str(tmp_path / "lake")))}
    assert res.ingested == 2  # good, and proto (its protobuf channel is not mapped)
    assert set(rows) == {"nan.mcap", "cut.mcap"}
    assert rows["nan.mcap"]["reason_code"] == "non_finite" and "/joint_states" in rows["nan.mcap"]["reason"]
    assert rows["cut.mcap"]["reason_code"] == "corrupt_file" and "mcap recover" in rows["cut.mcap"]["reason"]
    # mapping the protobuf channel: a reason naming the encoding
    mapping = mapping_from_dict({"state": ["/joint_states", "/odom"], "action": ["/arm/joint_command"]})
    with pytest.raises(SourceError, match="/odom uses message encoding 'flatbuffer'") as err:
        McapReader(str(src / "proto.mcap"), SourceOptions(mapping=mapping))
    assert err.value.reason_code == "missing_type"


def test_unmapped_json_stack_needs_a_state(tmp_path: Path):
    path = tmp_path / "odd.mcap"
    write_mcap_json(path, Layout(seconds=0.2))
    mapping = mapping_from_dict({"state": ["/nope"], "action_from_state": True})
    with pytest.raises(SourceError, match="names '/nope'.*it has: /arm/joint_command"):
        McapReader(str(path), SourceOptions(mapping=mapping))


IDL = """module my_msgs {
  module msg {
    struct Effort {
      sequence<double> values;
      float gain;
    };
  };
};
"""


def test_ros2_mcap_with_idl_definitions(tmp_path: Path):
    """A ROS 2 MCAP whose custom type is described in IDL (rosbag2 stores `ros2idl` schemas)."""
    from mcap.writer import Writer
    from rosbags.typesys import Stores, get_types_from_idl, get_typestore

    ts = get_typestore(Stores.LATEST)
    ts.register(get_types_from_idl(IDL))
    js_def, _ = ts.generate_msgdef("sensor_msgs/msg/JointState", ros_version=2)
    path = tmp_path / "idl.mcap"
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile="ros2", library="robolake-tests")
        s_js = w.register_schema(name="sensor_msgs/msg/JointState", encoding="ros2msg", data=js_def.encode())
        s_ef = w.register_schema(name="my_msgs/msg/Effort", encoding="ros2idl", data=IDL.encode())
        c_js = w.register_channel(topic="/joint_states", message_encoding="cdr", schema_id=s_js)
        c_ef = w.register_channel(topic="/effort", message_encoding="cdr", schema_id=s_ef)
        T = ts.types
        for i in range(50):
            t_ns = 1_700_000_000 * 10**9 + i * 10_000_000
            stamp = T["builtin_interfaces/msg/Time"](sec=t_ns // 10**9, nanosec=t_ns % 10**9)
            js = T["sensor_msgs/msg/JointState"](
                header=T["std_msgs/msg/Header"](stamp=stamp, frame_id=""),
                name=["a"],
                position=np.array([float(i)]),
                velocity=np.zeros(0),
                effort=np.zeros(0),
            )
            w.add_message(
                channel_id=c_js,
                log_time=t_ns,
                publish_time=t_ns,
                data=bytes(ts.serialize_cdr(js, "sensor_msgs/msg/JointState")),
            )
            ef = T["my_msgs/msg/Effort"](values=np.array([i, -i], np.float64), gain=0.5)
            w.add_message(
                channel_id=c_ef,
                log_time=t_ns,
                publish_time=t_ns,
                data=bytes(ts.serialize_cdr(ef, "my_msgs/msg/Effort")),
            )
        w.finish()
    mapping = mapping_from_dict({"state": ["/joint_states"], "action": [{"source": "/effort", "field": "values"}]})
    (reader,) = discover_readers(str(path), options=SourceOptions(mapping=mapping, state_only=True)).readers
    ep = reader.read_tabular(reader.discover()[0])
    assert reader.format_name == "ros2-mcap" and ep.num_steps == 50
    np.testing.assert_allclose(ep.state[:, 0], np.arange(50), atol=1e-4)
    np.testing.assert_allclose(ep.action, np.stack([np.arange(50), -np.arange(50)], 1), atol=1e-6)
