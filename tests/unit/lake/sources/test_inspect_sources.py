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
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources.mapping import load_mapping, mapping_from_dict
from robolake.testing.hdf5 import write_aloha, write_robomimic
from robolake.testing.ros import Layout, write_mcap_json, write_ros1
from robolake.writers.lerobot import EpisodeArrays, write_lerobot_dataset

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
    assert topics["/turtle1/pose"]["start"] == "2023-11-14T22:13:20.003Z" and topics["/turtle1/pose"]["end"].startswith(
        "2023-11-14T22:13:2"
    )
    m = mapping_from_dict(yaml.safe_load(unit["suggested_mapping"]), "suggested.yaml")
    assert [s.source for s in m.state] == ["/turtle1/pose"] and [s.source for s in m.action] == ["/turtle1/cmd_vel"]
    # each topic says what the suggested mapping makes of it, not only that a mapping is missing
    assert topics["/turtle1/pose"]["role"] == "state[0] (pose) with --suggest-map"
    assert topics["/turtle1/cmd_vel"]["role"] == "action[0] with --suggest-map"


def test_long_topic_names_are_never_cut(tmp_path: Path, capsys):
    base = "/robot/arm_controller/follow_joint_trajectory/state/feedback/"
    extra = {
        base + "joint_position": ("float64", [(t, t) for t in np.arange(0, 0.5, 0.05)]),
        base + "joint_velocity": ("float64", [(t, 1.0) for t in np.arange(0, 0.5, 0.05)]),
    }
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


def test_an_unknown_hdf5_layout_with_an_epoch_clock_gets_exact_rates_iso_times_and_roles(tmp_path: Path, capsys):
    with h5py.File(tmp_path / "rig.h5", "w") as f:
        f["robot/qpos"] = np.zeros((10, 6))
        f["robot/action"] = np.zeros((10, 6))
        f["robot/t"] = 1_700_000_000.0 + np.arange(10) / 62.5  # seconds since the epoch
    rc, out = _inspect(capsys, str(tmp_path / "rig.h5"), "--json")
    (unit,) = json.loads(out)["units"]
    assert rc == 0 and unit["ingest"].startswith("quarantined (missing_key): HDF5 layout not recognised")
    clock = unit["keys"]["robot/t"]
    assert clock["rate_hz"] == 62.5 and clock["start_s"] == 0 and clock["end_s"] == pytest.approx(0.144)
    assert clock["start"] == "2023-11-14T22:13:20.000Z" and unit["start"] == clock["start"]
    assert unit["keys"]["robot/qpos"]["role"] == "state[0] with --suggest-map"
    assert unit["keys"]["robot/action"]["role"] == "action[0] with --suggest-map"
    assert clock["role"] == "stamps of state[0] with --suggest-map"


def test_bursts_on_one_stamp_suggest_the_stamp_rate_and_resample_none(tmp_path: Path, capsys):
    """10 states per stamp at 10 stamps a second: the message rate (110/s) is not the tick rate."""
    write_mcap_json(
        tmp_path / "cart.mcap", Layout(seconds=1.0, cam_hz=None, camera="none", cmd_hz=None, burst=10, jitter_s=0.0)
    )
    rc, out = _inspect(capsys, str(tmp_path / "cart.mcap"), "--json")
    row = json.loads(out)["units"][0]["recordings"][0]["topics"]["/joint_states"]
    assert rc == 0 and row["shared_stamps"] == 90 and row["most_on_one_stamp"] == 10
    assert row["distinct_stamps_hz"] == pytest.approx(10.0)
    rc, text = _inspect(capsys, str(tmp_path / "cart.mcap"), "--suggest-map")
    assert "# fps: 10 " in text and "# resample: none" in text


def test_hdf5_without_cameras_is_described_with_why_each_key_is_left_out(tmp_path: Path, capsys):
    write_aloha(tmp_path / "episode_0.hdf5", cams=())
    rc, out = _inspect(capsys, str(tmp_path / "episode_0.hdf5"), "--json")
    (unit,) = json.loads(out)["units"]
    assert rc == 0 and unit["cameras"] == [] and unit["ingest"].startswith("1 episode(s)")
    assert unit["keys"]["observations/qpos"]["role"] == "state[0]"
    assert unit["keys"]["observations/qvel"]["role"] == (
        "in the record only: not in the aloha layout's steps "
        "(map observations/qvel under state: or action: to include it)"
    )
    write_robomimic(tmp_path / "mimic.hdf5", demos=2, images=False, datagen_info=True)
    rc, out = _inspect(capsys, str(tmp_path / "mimic.hdf5"))
    assert (
        rc == 0
        and "in the record only: in a nested group under obs/ (map obs/datagen_info/eef_pose under state: to put it in "
        "the steps)"
        in out
    )
    assert "obs/datagen_info is a group (3 datasets)" in out


def test_a_lerobot_v20_camera_declared_without_videos_is_said_in_inspect_and_ingest(tmp_path: Path, capsys):
    rng = np.random.default_rng(0)
    eps = [
        EpisodeArrays(
            state=rng.normal(size=(10, 4)),
            action=rng.normal(size=(10, 3)),
            task="wave",
            frames={"observation.images.front": rng.integers(0, 255, (10, 16, 16, 3), dtype=np.uint8)},
        )
        for _ in range(2)
    ]
    root = write_lerobot_dataset(tmp_path / "ds", episodes=eps, fps=10, robot_type="bot", version="v2.0")
    for p in sorted((root / "videos").rglob("*"), reverse=True):  # the dataset as downloaded without its videos
        p.unlink() if p.is_file() else p.rmdir()
    rc, out = _inspect(capsys, str(root), "--json")
    (unit,) = json.loads(out)["units"]
    cam = unit["keys"]["observation.images.front"]
    assert rc == 0 and cam["count"] == 0 and cam["role"] == "camera: no video files"
    assert "no video file under videos/ (20 frames declared)" in cam["note"]
    assert unit["ingest"].startswith("quarantined (missing_video): observation.images.front")
    res = ingest(str(root), str(tmp_path / "lake"), IngestConfig(state_only=True))
    assert (res.ingested, res.frames) == (2, 0)
    assert any(
        "camera 'front' (observation.images.front) has no video files; --state-only: left out" in n for n in res.notes
    )
    res = ingest(str(root), str(tmp_path / "lake2"), IngestConfig())
    assert res.quarantined == 2 and all("video file is missing" in why for _, why in res.quarantine)


def test_a_declared_video_that_modality_json_does_not_use_is_not_said_to_block(tmp_path: Path, capsys):
    """The real GR00T dataset declares `egoview` (no files) beside the `ego_view` its modality.json names."""
    rng = np.random.default_rng(0)
    eps = [
        EpisodeArrays(
            state=rng.normal(size=(8, 4)),
            action=rng.normal(size=(8, 3)),
            task="wave",
            frames={
                k: rng.integers(0, 255, (8, 16, 16, 3), dtype=np.uint8)
                for k in ("observation.images.front", "observation.images.spare")
            },
        )
    ]
    modality = {
        "state": {"arm": {"start": 0, "end": 4}},
        "action": {"arm": {"start": 0, "end": 3}},
        "video": {"front": {"original_key": "observation.images.front"}},
    }
    root = write_lerobot_dataset(
        tmp_path / "ds", episodes=eps, fps=10, robot_type="bot", version="v2.0", modality=modality
    )
    for p in (root / "videos" / "chunk-000" / "observation.images.spare").iterdir():
        p.unlink()
    rc, out = _inspect(capsys, str(root), "--json")
    (unit,) = json.loads(out)["units"]
    spare = unit["keys"]["observation.images.spare"]
    assert (
        rc == 0 and spare["count"] == 0 and spare["role"].startswith("ignored: no video files, and not a camera here")
    )
    assert "nothing is lost" in spare["note"] and unit["ingest"].startswith("1 episode(s)")
    assert unit["keys"]["observation.images.front"]["role"] == "camera front"
    assert ingest(str(root), str(tmp_path / "lake"), IngestConfig()).ingested == 1
