"""What robots publish, mapped as state or action (TF frames, odometry, IMU, twists, dotted and
indexed fields), and streams that used to block or vanish: one message, bursts on one stamp,
a trimmed span, a rounded rate, a camera dropped on request, counts metadata got wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources import SourceError, SourceOptions, discover_readers
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.lake.sources.topics.rosbag import Ros1Reader, Ros2Reader
from robolake.testing.ros import (
    T0_NS,
    Layout,
    joint_values,
    rgb_frame,
    write_mcap_json,
    write_ros1,
    write_ros2,
)

pytest.importorskip("rosbags")

LATENCY = 0.003  # the fixture's log time = header stamp + 3 ms


def _abs_ticks(ep) -> np.ndarray:
    return ep.timestamps + (ep.metadata["t0_ns"] - T0_NS) / 1e9


def _robot_bag(path: Path) -> None:
    """A mobile manipulator: joints, odometry, IMU, a TF tree, and a velocity command."""
    t50 = np.arange(0, 1.0, 0.02)
    tf = [
        (
            t,
            [("odom", "base_link", [t, 0, 0, 0, 0, 0, 1])]
            + ([("base_link", "gripper", [t, -t, 3 * t, 0, 0, 0, 1])] if i % 2 == 0 else []),
        )
        for i, t in enumerate(t50)
    ]
    extra = {
        "/odom": ("odometry", [(t, [t, 2 * t, 0, 0, 0, 0, 1, 1.0, 2.0, 0, 0, 0, 0.5]) for t in t50]),
        "/imu": ("imu", [(t, [0, 0, 0, 1, 0.1 * t, 0, 0, 0, 0, 9.81]) for t in np.arange(0, 1.0, 0.01)]),
        "/tf": ("tf", tf),
        "/cmd_vel": ("twist", [(t, [t, 0, 0, 0, 0, -t]) for t in np.arange(0, 1.0, 0.1)]),
        "/ee_pose": ("pose_stamped", [(t, [t, 2 * t, 3 * t, 0, 0, 0, 1]) for t in t50]),
    }
    write_ros1(path, Layout(seconds=1.0, cmd_hz=None, camera="none", jitter_s=0.0, extra=extra))


def test_tf_frame_odometry_imu_twist_and_dotted_fields_map_as_state_and_action(tmp_path: Path):
    _robot_bag(tmp_path / "robot.bag")
    mapping = mapping_from_dict(
        yaml.safe_load("""
state:
  - {source: /tf, child_frame: gripper}                       # x y z qx qy qz qw of that frame
  - {source: /odom}                                           # pose then twist, covariances skipped: 13
  - {source: /imu}                                            # orientation, angular velocity, linear acceleration: 10
  - {source: /ee_pose, field: pose.position}                  # a dotted path
  - {source: /joint_states, field: position.1}                # an indexed path: the second joint
action:
  - {source: /cmd_vel}                                        # linear xyz, angular xyz
cameras: {}
fps: 20
"""),
        "robot.yaml",
    )
    reader = Ros1Reader(str(tmp_path / "robot.bag"), SourceOptions(mapping=mapping))
    assert (reader.spec().state_dim, reader.spec().action_dim) == (7 + 13 + 10 + 3 + 1, 6)
    ep = reader.read_tabular(reader.discover()[0])
    t = _abs_ticks(ep)  # header clock; every stamped stream is linear in time, so interpolation is exact
    np.testing.assert_allclose(ep.state[:, 0:3], np.stack([t, -t, 3 * t], 1), atol=1e-5)  # the gripper, 25 Hz of /tf
    np.testing.assert_allclose(ep.state[:, 7:10], np.stack([t, 2 * t, 0 * t], 1), atol=1e-5)  # odometry position
    np.testing.assert_allclose(ep.state[:, 14:17], np.tile([1.0, 2.0, 0.0], (len(t), 1)), atol=1e-6)  # odometry twist
    np.testing.assert_allclose(ep.state[:, 24], 0.1 * t, atol=1e-5)  # IMU angular velocity x
    np.testing.assert_allclose(ep.state[:, 29], 9.81, atol=1e-5)  # IMU linear acceleration z
    np.testing.assert_allclose(ep.state[:, 30:33], np.stack([t, 2 * t, 3 * t], 1), atol=1e-5)
    np.testing.assert_allclose(ep.state[:, 33], joint_values(t)[:, 1], atol=1e-5)
    # a Twist has no header: it holds from its log time
    cmd_log = np.arange(0, 1.0, 0.1) + LATENCY
    held = np.arange(0, 1.0, 0.1)[np.searchsorted(cmd_log, t + 1e-7, side="right") - 1]  # ticks fall on command times
    np.testing.assert_allclose(ep.action[:, 0], held, atol=1e-6)
    np.testing.assert_allclose(ep.action[:, 5], -held, atol=1e-6)
    assert ep.metadata["clock"]["/tf[gripper]"] == "header" and ep.metadata["clock"]["/cmd_vel"] == "log"


def test_a_tf_stream_without_a_frame_says_which_frames_exist(tmp_path: Path):
    _robot_bag(tmp_path / "robot.bag")
    mapping = mapping_from_dict({"state": ["/tf"], "action_from_state": True, "cameras": {}})
    with pytest.raises(SourceError, match=r"child_frame.*base_link \(parent odom\)"):
        Ros1Reader(str(tmp_path / "robot.bag"), SourceOptions(mapping=mapping))
    mapping = mapping_from_dict(
        {"state": [{"source": "/tf", "child_frame": "nope"}], "action_from_state": True, "cameras": {}}
    )
    with pytest.raises(SourceError, match="no message of /tf holds it"):
        Ros1Reader(str(tmp_path / "robot.bag"), SourceOptions(mapping=mapping))


def test_a_camera_with_one_message_does_not_block_the_recording(tmp_path: Path):
    """A ROS 2 MCAP with one Image and 15 JointStates used to be quarantined whole as no_overlap."""
    extra = {"/snapshot/image_raw": ("rgb8", [(0.05, rgb_frame(0))])}
    write_ros2(tmp_path / "src" / "bag", Layout(seconds=0.15, cmd_hz=None, camera="none", extra=extra), storage="mcap")
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined, res.frames) == (1, 0, 0)
    assert any("/snapshot/image_raw has a single message" in n for n in res.notes), res.notes
    # a numeric stream of one message is a static value over the whole episode
    latched = {"/calibration": ("float64", [(0.5, 4.25)])}
    write_ros1(tmp_path / "cal.bag", Layout(seconds=1.0, camera="none", extra=latched))
    m = mapping_from_dict({"state": ["/joint_states", "/calibration"], "action": ["/arm/joint_command"], "cameras": {}})
    r = Ros1Reader(str(tmp_path / "cal.bag"), SourceOptions(mapping=m))
    ep = r.read_tabular(r.discover()[0])
    assert ep.num_steps > 90 and np.all(ep.state[:, 3] == np.float32(4.25))  # the window is not cut to t = 0.5
    assert ep.metadata["static"] == ["/calibration"]
    assert any("/calibration has a single message: held as a static value" in n for n in ep.metadata["notes"]), (
        ep.metadata["notes"]
    )


@pytest.mark.parametrize("how", ["state_only", "cameras_empty"])
def test_state_only_and_empty_cameras_really_drop_the_default_camera(tmp_path: Path, how: str):
    write_ros2(tmp_path / "bag", Layout(seconds=0.4), storage="sqlite3")
    opts = (
        SourceOptions(state_only=True)
        if how == "state_only"
        else SourceOptions(
            mapping=mapping_from_dict({"state": ["/joint_states"], "action": ["/arm/joint_command"], "cameras": {}})
        )
    )
    r = Ros2Reader(str(tmp_path / "bag"), opts)
    assert r.plan.cameras == () and r.spec().cameras == ()
    ep = r.read_tabular(r.discover()[0])
    assert list(r.read_frames(ep)) == [] and ep.num_steps > 30
    assert any("no camera ingested" in n for n in r.notes)
    # without the key, the mapping keeps the default camera
    keep = mapping_from_dict({"state": ["/joint_states"], "action": ["/arm/joint_command"]})
    assert [c.name for c in Ros2Reader(str(tmp_path / "bag"), SourceOptions(mapping=keep)).plan.cameras] == ["wrist"]


def test_messages_sharing_a_stamp_are_averaged_and_counted_or_all_kept(tmp_path: Path):
    """A simulator publishing 10 states per timestamp: 9 of 10 used to vanish without a word."""
    path = tmp_path / "src" / "cartpole.mcap"
    write_mcap_json(path, Layout(seconds=1.0, cam_hz=None, camera="none", cmd_hz=None, burst=10, jitter_s=0.0))
    m = mapping_from_dict({"state": ["/joint_states"], "action_from_state": True, "cameras": {}, "fps": 10})
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"), IngestConfig(mapping=m))
    assert res.ingested == 1
    assert any(
        "90 of 100 messages share a stamp with another (up to 10 on one stamp); averaged per stamp" in n
        for n in res.notes
    )
    ep = Lake.open(str(tmp_path / "lake")).episodes().to_pylist()[0]
    meta = yaml.safe_load(ep["metadata"])
    assert meta["stream_use"]["/joint_states"]["averaged_on_shared_stamps"] == 90
    steps = Lake.open(str(tmp_path / "lake")).to_arrow("steps").to_pylist()
    burst_t = np.arange(100)[:10] / 100.0  # the first burst's true times: stamped 0.0, averaged
    np.testing.assert_allclose(
        sorted(steps, key=lambda s: s["step_index"])[0]["state"], joint_values(burst_t).mean(0), atol=1e-6
    )
    # resample: none keeps every message as a step at its own (shared) stamp
    native = mapping_from_dict(
        {"state": ["/joint_states"], "action_from_state": True, "cameras": {}, "resample": "none"}
    )
    (r,) = discover_readers(str(path), options=SourceOptions(mapping=native)).readers
    ep_n = r.read_tabular(r.discover()[0])
    assert ep_n.num_steps == 100 and ep_n.metadata["resample"] == "none"
    np.testing.assert_allclose(ep_n.state, joint_values(np.arange(100) / 100.0), atol=1e-6)
    # --resample none on the command line wins over the mapping
    (r2,) = discover_readers(str(path), options=SourceOptions(mapping=m, resample="none")).readers
    assert r2.read_tabular(r2.discover()[0]).num_steps == 100


def test_a_trimmed_span_and_a_rate_are_recorded_and_said(tmp_path: Path):
    short_cmd = {"/arm/short_command": ("float64", [(t, t) for t in np.arange(0.3, 0.6, 0.02)])}
    write_ros1(tmp_path / "t.bag", Layout(seconds=1.0, camera="none", extra=short_cmd))
    m = mapping_from_dict({"state": ["/joint_states"], "action": ["/arm/short_command"], "cameras": {}})
    r = Ros1Reader(str(tmp_path / "t.bag"), SourceOptions(mapping=m))
    ep = r.read_tabular(r.discover()[0])
    span = ep.metadata["span"]
    assert span["starts_with"] == "/arm/short_command" and span["ends_with"] == "/arm/short_command"
    assert span["recording_s"][1] - span["recording_s"][0] > 0.95 and span["episode_s"][1] - span["episode_s"][0] < 0.3
    assert any("episode spans 0.3" in n and "/arm/short_command starts" in n for n in ep.metadata["notes"]), (
        ep.metadata["notes"]
    )
    assert ep.metadata["rate"]["measured_hz"] == pytest.approx(100, rel=0.01) and ep.metadata["rate"]["fps"] == 100.0
    assert any("measured at 99." in n or "measured at 100." in n for n in r.notes)  # snapped from the jittered measure


def test_a_rate_is_kept_exact(tmp_path: Path):
    write_ros1(tmp_path / "r.bag", Layout(seconds=1.0, joint_hz=62.5, cmd_hz=31.25, camera="none", jitter_s=0.0))
    r = Ros1Reader(str(tmp_path / "r.bag"), SourceOptions(state_only=True))
    assert r.fps == 62.5
    assert np.allclose(np.diff(r.read_tabular(r.discover()[0]).timestamps), 0.016)


def test_a_metadata_count_of_zero_is_checked_against_the_storage(tmp_path: Path):
    """metadata.yaml present and wrong: the storage's 50 messages used to read as 'no messages'."""
    bag = tmp_path / "bag"
    write_ros2(bag, Layout(seconds=0.5), storage="sqlite3")
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    for t in meta["rosbag2_bagfile_information"]["topics_with_message_count"]:
        t["message_count"] = 0
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))
    (r,) = discover_readers(str(bag)).readers
    assert any("metadata says /joint_states has no messages but its storage holds 50" in n for n in r.notes)
    assert [c.name for c in r.plan.cameras] == ["wrist"] and not r.plan.action_from_state
    assert r.read_tabular(r.discover()[0]).num_steps > 40


def test_an_indexed_tf_path_and_nested_odometry_fields_map(tmp_path: Path):
    """`transforms.0.transform` (the README's indexed path) used to be refused for want of a child_frame."""
    _robot_bag(tmp_path / "robot.bag")
    mapping = mapping_from_dict(
        yaml.safe_load("""
state:
  - {source: /tf, field: transforms.0.transform}        # the first transform of every message (odom -> base_link)
  - {source: /odom, field: pose.pose}                   # position and orientation: 7
  - {source: /odom, field: twist.twist.angular.z}       # one value
action_from_state: true
cameras: {}
fps: 20
"""),
        "robot.yaml",
    )
    reader = Ros1Reader(str(tmp_path / "robot.bag"), SourceOptions(mapping=mapping))
    assert reader.spec().state_dim == 7 + 7 + 1
    ep = reader.read_tabular(reader.discover()[0])
    t = _abs_ticks(ep)
    np.testing.assert_allclose(ep.state[:, 0], t, atol=1e-5)  # base_link x, stamped by the transform's header
    np.testing.assert_allclose(ep.state[:, 1:7], np.tile([0, 0, 0, 0, 0, 1], (len(t), 1)), atol=1e-6)
    np.testing.assert_allclose(ep.state[:, 7:9], np.stack([t, 2 * t], 1), atol=1e-5)
    np.testing.assert_allclose(ep.state[:, 14], 0.5, atol=1e-6)
    assert ep.metadata["clock"]["/tf.transforms.0.transform"] == "header"
