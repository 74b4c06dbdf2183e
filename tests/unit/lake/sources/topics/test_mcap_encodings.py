"""MCAP in the encodings tools write (ROS 1, protobuf, a mix of them with JSON) lands as the JSON one does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.media.frames import decode_row
from robolake.lake.sources import SourceError, SourceOptions, discover_readers
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.testing.ros import Layout

from .ros_expected import expected_episode, lake_frames, lake_steps

pytest.importorskip("mcap_ros1")
pytest.importorskip("mcap_protobuf")

from robolake.testing.mcap import write_mcap_mixed, write_mcap_protobuf, write_mcap_ros1  # noqa: E402


@pytest.mark.parametrize(
    ("writer", "fmt"),
    [(write_mcap_ros1, "mcap-ros1"), (write_mcap_protobuf, "mcap-protobuf"), (write_mcap_mixed, "mcap-mixed")],
)
def test_encoding_lands_resampled_with_no_mapping(tmp_path: Path, writer, fmt: str):
    path = tmp_path / "src" / "rec.mcap"
    extra = {} if writer is write_mcap_mixed else {"/task_instruction": ("string", [(0.0, "open the drawer")])}
    rec = writer(path, Layout(seconds=1.0, extra=extra))
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined) == (1, 0), res.quarantine
    lake = Lake.open(str(tmp_path / "lake"))
    exp = expected_episode(rec, 100.0)
    got = lake_steps(lake)
    np.testing.assert_allclose(got["state"], exp["state"].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(got["action"], exp["action"].astype(np.float32), atol=1e-6)
    assert lake_frames(lake, "wrist") == [rec.frames[i] for i in exp["frame_index"]]  # JPEG bytes as recorded
    ep = lake.episodes().to_pylist()[0]
    assert ep["source_format"] == fmt and ep["task"] == ("" if writer is write_mcap_mixed else "open the drawer")


def test_protobuf_raw_image_and_stamps(tmp_path: Path):
    path = tmp_path / "raw.mcap"
    rec = write_mcap_protobuf(path, Layout(seconds=0.5, camera="raw", cmd_hz=None))
    (reader,) = discover_readers(str(path)).readers
    info = reader.inspect()
    topics = info["recordings"][0]["topics"]
    assert (
        topics["/top/image_raw"]["type"] == "foxglove.RawImage" and topics["/top/image_raw"]["encoding"] == "protobuf"
    )
    assert (
        topics["/joint_states"]["header_stamp"] is True and topics["/joint_states"]["header_rate_hz"] > 90
    )  # from `timestamp`
    ep = reader.read_tabular(reader.discover()[0])
    np.testing.assert_allclose(
        ep.state, expected_episode(rec, 100.0, action="state")["state"].astype(np.float32), atol=1e-6
    )
    (frames,) = list(reader.read_frames(ep))
    want = np.frombuffer(rec.frames[0], np.uint8).reshape(24, 32, 3)
    assert (frames.height, frames.width) == (24, 32)
    np.testing.assert_array_equal(decode_row(frames.images[0], frames.encoding), want)  # raw pixels: lossless


def test_a_channel_of_another_encoding_is_named_when_mapped(tmp_path: Path):
    from robolake.lake.sources.topics.mcap_file import McapReader
    from robolake.testing.ros import write_mcap_json

    write_mcap_json(tmp_path / "f.mcap", Layout(seconds=0.3), foreign_topic="/odom")
    mapping = mapping_from_dict({"state": ["/joint_states", "/odom"], "action": ["/arm/joint_command"]})
    with pytest.raises(SourceError, match="/odom uses message encoding 'flatbuffer'.*json, ros1, cdr, protobuf") as err:
        McapReader(str(tmp_path / "f.mcap"), SourceOptions(mapping=mapping))
    assert err.value.reason_code == "missing_type"


def test_cdr_channels_outside_a_rosbag2_file(tmp_path: Path):
    """ROS 2 messages in an MCAP file whose profile is not ros2 (written by a non-rosbag2 tool)."""
    from mcap.writer import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.LATEST)
    text, _ = ts.generate_msgdef("sensor_msgs/msg/JointState", ros_version=2)
    path = tmp_path / "cdr.mcap"
    T = ts.types
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile="", library="robolake-tests")
        sid = w.register_schema(name="sensor_msgs/msg/JointState", encoding="ros2msg", data=text.encode())
        cid = w.register_channel(topic="/joint_states", message_encoding="cdr", schema_id=sid)
        for i in range(40):
            t_ns = 1_700_000_000 * 10**9 + i * 20_000_000
            stamp = T["builtin_interfaces/msg/Time"](sec=t_ns // 10**9, nanosec=t_ns % 10**9)
            js = T["sensor_msgs/msg/JointState"](
                header=T["std_msgs/msg/Header"](stamp=stamp, frame_id=""),
                name=["a", "b"],
                position=np.array([float(i), -2.0 * i]),
                velocity=np.zeros(0),
                effort=np.zeros(0),
            )
            w.add_message(
                channel_id=cid,
                log_time=t_ns,
                publish_time=t_ns,
                data=bytes(ts.serialize_cdr(js, "sensor_msgs/msg/JointState")),
            )
        w.finish()
    (reader,) = discover_readers(str(path), options=SourceOptions(state_only=True)).readers
    assert reader.format_name == "mcap-cdr" and reader.fps == 50.0
    ep = reader.read_tabular(reader.discover()[0])
    np.testing.assert_allclose(ep.state, np.stack([np.arange(40), -2.0 * np.arange(40)], 1), atol=1e-5)
