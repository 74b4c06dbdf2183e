"""`robolake inspect` describes every source it can open, whatever ingest would make of it."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from robolake.cli import main as cli_main
from robolake.lake import Lake
from robolake.lake.ingest import IngestConfig, ingest
from robolake.lake.sources.mapping import load_mapping, mapping_from_dict
from robolake.testing.ros import Layout, write_mcap_json, write_ros1

pytest.importorskip("rosbags")


def _inspect(capsys, *argv: str) -> tuple[int, str]:
    rc = cli_main(["inspect", *argv])
    return rc, capsys.readouterr().out


def test_a_bag_with_only_joint_states_is_described_and_gets_a_mapping(tmp_path: Path, capsys):
    bag = tmp_path / "arm.bag"
    write_ros1(bag, Layout(seconds=1.0, cmd_hz=None, camera="none"))
    rc, out = _inspect(capsys, str(bag))
    assert rc == 0, out
    assert "/joint_states" in out and "sensor_msgs/msg/JointState" in out and "100" in out  # count
    assert "2023-11-14T22:13:20" in out  # absolute times as ISO 8601, not 1.7e+09
    assert "quarantined (missing_video)" in out and "state[0] (position) with --state-only" in out
    rc, out = _inspect(capsys, str(bag), "--state-only", "--json")
    (unit,) = json.loads(out)["units"]
    assert unit["opens"] is True and unit["state_dim"] == 3 and unit["cameras"] == []
    row = unit["recordings"][0]["topics"]["/joint_states"]
    assert row["count"] == 100 and row["rate_hz"] == pytest.approx(100, rel=0.01) and row["shape"] == [3]
    assert row["start_s"] == 0 and row["end_s"] == pytest.approx(0.99, abs=0.005)
    # --suggest-map prints a mapping that loads and ingests as it is
    rc, text = _inspect(capsys, str(bag), "--suggest-map")
    assert rc == 0 and text.startswith("# mapping suggested")
    (tmp_path / "arm.yaml").write_text(text)
    m = load_mapping(str(tmp_path / "arm.yaml"))
    assert m.state[0].source == "/joint_states" and m.action_from_state and m.cameras_given and not m.cameras
    res = ingest(str(bag), str(tmp_path / "lake"), IngestConfig(mapping=m))
    assert (res.ingested, res.quarantined) == (1, 0)
    assert Lake.open(str(tmp_path / "lake")).episodes().to_pylist()[0]["num_steps"] > 90


def test_a_bag_without_joint_state_is_described_with_a_suggested_pose_state(tmp_path: Path, capsys):
    poses = [(t, [t, 2 * t, 0.0, 0.0, 0.0, 0.0, 1.0]) for t in np.arange(0, 1.0, 0.016)]  # 62.5 Hz
    twists = [(t, [0.5, 0, 0, 0, 0, 0.1]) for t in np.arange(0, 1.0, 0.1)]
    extra = {"/turtle1/pose": ("pose_stamped", poses), "/turtle1/cmd_vel": ("twist", twists)}
    bag = tmp_path / "turtle.bag"
    write_ros1(bag, Layout(seconds=1.0, joint_hz=0.0001, cmd_hz=None, camera="none", extra=extra))
    rc, out = _inspect(capsys, str(bag), "--json")
    assert rc == 0
    (unit,) = json.loads(out)["units"]
    assert unit["opens"] is False and "JointState" in unit["ingest"]
    topics = unit["recordings"][0]["topics"]
    assert topics["/turtle1/pose"]["rate_hz"] == pytest.approx(62.5, abs=0.05)  # measured, not rounded to 62
    assert topics["/turtle1/pose"]["shape"] == [7] and topics["/turtle1/pose"]["default_field"] == "pose"
    m = mapping_from_dict(yaml.safe_load(unit["suggested_mapping"]), "suggested.yaml")
    assert [s.source for s in m.state] == ["/turtle1/pose"] and [s.source for s in m.action] == ["/turtle1/cmd_vel"]


def test_long_topic_names_are_never_cut(tmp_path: Path, capsys):
    base = "/robot/arm_controller/follow_joint_trajectory/state/feedback/"
    extra = {base + "joint_position": ("float64", [(t, t) for t in np.arange(0, 0.5, 0.05)]),
             base + "joint_velocity": ("float64", [(t, 1.0) for t in np.arange(0, 0.5, 0.05)])}
    write_ros1(tmp_path / "long.bag", Layout(seconds=0.5, extra=extra))
    rc, out = _inspect(capsys, str(tmp_path / "long.bag"))
    assert rc == 0 and base + "joint_position" in out and base + "joint_velocity" in out


def test_inspect_exits_2_only_when_nothing_is_readable(tmp_path: Path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    assert cli_main(["inspect", str(tmp_path)]) == 2
    write_mcap_json(tmp_path / "broken.mcap", Layout(seconds=0.2))
    data = (tmp_path / "broken.mcap").read_bytes()
    (tmp_path / "broken.mcap").write_bytes(data[: len(data) // 2])
    rc, out = _inspect(capsys, str(tmp_path))
    assert rc == 0 and "quarantined (corrupt_file)" in out and "mcap recover" in out


def test_unknown_hdf5_layout_points_at_suggest_map(tmp_path: Path, capsys):
    with h5py.File(tmp_path / "odd.h5", "w") as f:
        f["robot/qpos"] = np.zeros((10, 6))
        f["robot/action"] = np.zeros((10, 6))
    rc, out = _inspect(capsys, str(tmp_path / "odd.h5"))
    assert rc == 0 and "--suggest-map" in out and "robot/qpos" in out
    rc, text = _inspect(capsys, str(tmp_path / "odd.h5"), "--suggest-map")
    m = mapping_from_dict(yaml.safe_load(text), "odd.yaml")
    assert m.state[0].source == "robot/qpos" and m.action[0].source == "robot/action" and m.fps == 20
