"""ROS 2 bags (sqlite3 and MCAP storage) through ingest: defaults, mapping, versions, split bags, bad input."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.media.frames import decode_row
from robolake.lake.sources import SourceError, discover_readers
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.lake.sources.topics.rosbag import Ros2Reader, is_ros2_bag_dir, is_ros2_storage_file
from robolake.testing.ros import Layout, write_ros2

from .ros_expected import episode_ticks, expected_episode, lake_frames, lake_steps, quarantine_rows

pytest.importorskip("rosbags")


def _one_episode(lake: Lake) -> str:
    ids = lake.episode_ids()
    assert len(ids) == 1
    return ids[0]


def test_sqlite3_bag_with_no_mapping_lands_resampled(tmp_path: Path):
    rec = write_ros2(tmp_path / "src" / "rig_a", Layout(seconds=1.0), storage="sqlite3")
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined) == (1, 0)
    lake = Lake.open(str(tmp_path / "lake"))
    exp = expected_episode(rec, 100.0)
    got = lake_steps(lake)
    assert len(got["state"]) == len(exp["ticks"]) == res.steps
    np.testing.assert_allclose(got["state"], exp["state"].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(got["action"], exp["action"].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(got["timestamp"], exp["ticks"] - exp["ticks"][0], atol=1e-9)
    # JPEG bytes pass through unchanged: each step holds the latest frame at or before its tick
    frames = lake_frames(lake, "wrist")
    assert frames == [rec.frames[i] for i in exp["frame_index"]]
    ep = lake.episodes().to_pylist()[0]
    assert ep["source_format"] == "ros2-sqlite3" and ep["fps"] == 100.0 and list(ep["cameras"]) == ["wrist"]
    spec = lake.embodiments()[ep["embodiment"]]
    assert (spec.state_dim, spec.action_dim, spec.cameras) == (3, 3, ("wrist",))
    # idempotent: the same bag again is recognised by content hash
    again = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (again.ingested, again.skipped) == (0, 1)


def test_mcap_storage_raw_image_version_8_and_action_from_state(tmp_path: Path):
    rec = write_ros2(
        tmp_path / "src" / "bag", Layout(seconds=0.6, cmd_hz=None, camera="raw"), storage="mcap", version=8
    )
    reader = Ros2Reader(str(tmp_path / "src" / "bag"))
    assert reader.format_name == "ros2-mcap" and reader.plan.action_from_state
    ep = reader.read_tabular(reader.discover()[0])
    exp = expected_episode(rec, 100.0, action="state")
    np.testing.assert_allclose(ep.state, exp["state"].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(ep.action, exp["action"].astype(np.float32), atol=1e-6)
    assert ep.metadata["action_from_state"] is True
    (frames,) = list(reader.read_frames(ep))
    assert (frames.camera, frames.encoding, frames.height, frames.width) == ("top", "ffv1;size=32x24", 24, 32)
    assert len(frames.images) == len(exp["ticks"])
    raw = np.frombuffer(rec.frames[exp["frame_index"][-1]], np.uint8).reshape(24, 32, 3)
    np.testing.assert_array_equal(decode_row(frames.images[-1], frames.encoding), raw)  # rgb8 kept losslessly
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined) == (1, 0)
    assert '"action_from_state": true' in Lake.open(str(tmp_path / "lake")).episodes().to_pylist()[0]["metadata"]


def _to_v5(bag: Path) -> None:
    """Rewrite a bag's metadata.yaml as rosbag2 version 5 writes it (Galactic/Humble): no
    custom_data, ros_distro or type hashes; QoS as a YAML string."""
    import yaml

    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    info = meta["rosbag2_bagfile_information"]
    info["version"] = 5
    for key in ("custom_data", "ros_distro"):
        info.pop(key, None)
    for t in info["topics_with_message_count"]:
        t["topic_metadata"].pop("type_description_hash", None)
        t["topic_metadata"]["offered_qos_profiles"] = ""
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))


@pytest.mark.parametrize("variant", ["v9", "v8", "v5", "no_metadata", "broken_metadata", "zstd_message", "zstd_file"])
def test_metadata_versions_and_missing_metadata(tmp_path: Path, variant: str):
    bag = tmp_path / "rosbag2_2024_05_01-10_00_00"
    compression = variant.split("_")[1] if variant.startswith("zstd") else None
    rec = write_ros2(
        bag, Layout(seconds=0.4), storage="sqlite3", version=8 if variant == "v8" else 9, compression=compression
    )
    if variant == "v5":
        _to_v5(bag)
    if variant == "no_metadata":  # what `ros2 bag record` leaves when killed: <dir>_0.db3, no metadata.yaml
        (bag / "metadata.yaml").unlink()
        (bag / f"{bag.name}.db3").rename(bag / f"{bag.name}_0.db3")
    if variant == "broken_metadata":  # cut short by a full disk: the storage file is still read
        text = (bag / "metadata.yaml").read_text()
        (bag / "metadata.yaml").write_text(text[: len(text) // 2])
    assert is_ros2_bag_dir(str(bag))
    (reader,) = discover_readers(str(tmp_path)).readers
    assert (variant == "broken_metadata") == any("storage file(s) directly" in n for n in reader.notes)
    ep = reader.read_tabular(reader.discover()[0])
    np.testing.assert_allclose(ep.state, expected_episode(rec)["state"].astype(np.float32), atol=1e-6)


def _split_bag(tmp_path: Path, with_metadata: bool) -> Path:
    """Two storage files of one recording (what --max-bag-duration produces)."""
    import yaml

    bag = tmp_path / "src" / "split_bag"
    bag.mkdir(parents=True)
    metas = []
    for k in range(2):
        part = tmp_path / f"part{k}"
        write_ros2(part, Layout(seconds=0.5, seed=k, offset_s=0.5 * k), storage="sqlite3")
        shutil.move(str(part / f"part{k}.db3"), bag / f"split_bag_{k}.db3")
        metas.append(yaml.safe_load((part / "metadata.yaml").read_text()))
    if with_metadata:
        meta = metas[0]
        info = meta["rosbag2_bagfile_information"]
        info["relative_file_paths"] = ["split_bag_0.db3", "split_bag_1.db3"]
        info["files"] = []
        info["message_count"] *= 2
        info["duration"]["nanoseconds"] += 500_000_000
        for t in info["topics_with_message_count"]:
            t["message_count"] *= 2
        (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))
    return bag


@pytest.mark.parametrize("with_metadata", [True, False])
def test_split_bag_is_one_recording(tmp_path: Path, with_metadata: bool):
    bag = _split_bag(tmp_path, with_metadata)
    reader = Ros2Reader(str(bag))
    refs = reader.discover()
    assert len(refs) == 1
    ep = reader.read_tabular(refs[0])
    assert ep.metadata["streams"]["/joint_states"] == 100  # both files, one recording
    assert ep.num_steps >= 90
    np.testing.assert_allclose(
        ep.state[:, 1], 0.5 * (ep.timestamps + ep.metadata["t0_ns"] / 1e9 - 1_700_000_000), atol=2e-4
    )


def test_mapping_selects_joints_fields_task_and_splits_by_topic(tmp_path: Path):
    flags = [(0.0, True), (0.4, False), (0.5, True), (0.95, False)]
    poses = [(t, [t, 2 * t, 3 * t, 0.0, 0.0, 0.0, 1.0]) for t in np.arange(0, 1.0, 0.02)]
    grip = [(t, float(t > 0.5)) for t in np.arange(0, 1.0, 0.05)]
    extra = {
        "/episode_active": ("bool", flags),
        "/ee_pose": ("pose_stamped", poses),
        "/gripper": ("float64", grip),
        "/instruction": ("string", [(0.0, "stack the red cube")]),
    }
    rec = write_ros2(tmp_path / "src" / "bag", Layout(seconds=1.0, extra=extra), storage="mcap")
    mapping = mapping_from_dict(
        {
            "embodiment": "my_arm",
            "task_from": "/instruction",
            "state": [
                {"source": "/joint_states", "names": ["wrist", "shoulder"]},
                {"source": "/ee_pose", "field": "pose.position"},
                {"source": "/gripper"},
            ],
            "action": [{"source": "/arm/joint_command", "field": "position", "names": ["elbow"]}],
            "cameras": {"cam": "/wrist/image_raw/compressed"},
            "split": {"by": "topic", "source": "/episode_active"},
        }
    )
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"), IngestConfig(mapping=mapping))
    assert (res.ingested, res.quarantined) == (2, 0)
    lake = Lake.open(str(tmp_path / "lake"))
    eps = sorted(lake.episodes().to_pylist(), key=lambda e: e["source_episode_index"])
    assert [e["task"] for e in eps] == ["stack the red cube"] * 2
    assert {e["embodiment"] for e in eps} == {"my_arm"}
    spec = lake.embodiments()["my_arm"]
    assert (spec.state_dim, spec.action_dim) == (6, 1)
    steps = lake_steps(lake, eps[0]["episode_id"])
    # first episode: log window [0, 0.4 s) of /episode_active; state = [wrist, shoulder, x, y, z, gripper]
    n = len(steps["state"])
    assert 30 <= n <= 41
    t = episode_ticks(eps[0], steps["timestamp"])
    exp = expected_episode(rec, ticks=t)
    np.testing.assert_allclose(steps["state"][:, :2], exp["state"][:, [2, 0]].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(steps["state"][:, 2:5], np.stack([t, 2 * t, 3 * t], 1).astype(np.float32), atol=1e-5)
    np.testing.assert_allclose(steps["action"][:, 0], exp["action"][:, 1].astype(np.float32), atol=1e-6)
    second = lake_steps(lake, eps[1]["episode_id"])
    assert episode_ticks(eps[1], second["timestamp"])[0] >= 0.5  # starts when the flag turns true again
    grip_t = np.array([t for t, _ in grip]) + 0.003  # Float64 has no header: its clock is the log time
    grip_v = np.array([v for _, v in grip])
    np.testing.assert_allclose(
        second["state"][:, 5], np.interp(episode_ticks(eps[1], second["timestamp"]), grip_t, grip_v), atol=1e-6
    )


def test_split_by_gap(tmp_path: Path):
    write_ros2(tmp_path / "src" / "bag", Layout(seconds=0.5, gaps=(2.0,)), storage="sqlite3")
    mapping = mapping_from_dict(
        {"state": ["/joint_states"], "action": ["/arm/joint_command"], "split": {"by": "gap", "seconds": 1.0}}
    )
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"), IngestConfig(mapping=mapping))
    assert (res.ingested, res.quarantined) == (2, 0)
    lake = Lake.open(str(tmp_path / "lake"))
    assert sorted(e["num_steps"] for e in lake.episodes().to_pylist())[0] >= 40


def _custom_types() -> dict:
    from rosbags.typesys import get_types_from_msg

    return get_types_from_msg(
        "std_msgs/Header header\nfloat64[] torques\nfloat64 temperature\n", "my_robot_msgs/msg/ArmTelemetry"
    )


def _telemetry(values: list[tuple[float, list[float]]]) -> tuple[str, list]:
    def build(v: list[float]):
        return lambda ts, header: ts.types["my_robot_msgs/msg/ArmTelemetry"](
            header=header, torques=np.asarray(v), temperature=40.0
        )

    return ("custom:my_robot_msgs/msg/ArmTelemetry", [(t, build(v)) for t, v in values])


def _write_custom(bag: Path, storage: str, seed: int = 0) -> None:
    kind, entries = _telemetry([(t, [t, -t]) for t in np.arange(0, 0.5, 0.01)])
    extra = {"/telemetry": (kind, [(t, fn) for t, fn in entries])}
    write_ros2(bag, Layout(seconds=0.5, extra=extra, seed=seed), storage=storage, custom_types=_custom_types())


def test_custom_type_needs_a_definition_in_old_sqlite3_bags(tmp_path: Path):
    mapping = mapping_from_dict(
        {"state": ["/joint_states", {"source": "/telemetry", "field": "torques"}], "action": ["/arm/joint_command"]}
    )
    bag = tmp_path / "src" / "bag"
    _write_custom(bag, "sqlite3")
    con = sqlite3.connect(bag / "bag.db3")  # a Humble-era bag: no message definitions stored
    con.execute("DELETE FROM message_definitions")
    con.commit()
    con.close()
    _write_custom(tmp_path / "src" / "mcap_bag", "mcap", seed=1)  # MCAP storage embeds the definition
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"), IngestConfig(mapping=mapping))
    assert (res.ingested, res.quarantined) == (1, 1)
    (row,) = quarantine_rows(Lake.open(str(tmp_path / "lake")))
    assert row["source_path"] == str(bag)
    assert row["reason_code"] == "missing_type"
    assert "my_robot_msgs/msg/ArmTelemetry" in row["reason"] and "ROBOLAKE_ROS_MSG_PATH" in row["reason"]
    # give the definition beside the bag: it lands, torques decoded
    msg_dir = tmp_path / "src" / "msg" / "my_robot_msgs" / "msg"
    msg_dir.mkdir(parents=True)
    (msg_dir / "ArmTelemetry.msg").write_text("std_msgs/Header header\nfloat64[] torques\nfloat64 temperature\n")
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"), IngestConfig(mapping=mapping))
    assert res.ingested == 1  # the sqlite3 bag now; the MCAP one is already in the lake
    steps = lake_steps(Lake.open(str(tmp_path / "lake")))
    assert steps["state"].shape[1] == 5
    np.testing.assert_allclose(steps["state"][:, 3], -steps["state"][:, 4], atol=1e-6)


def test_custom_type_from_mcap_embedded_definition(tmp_path: Path):
    bag = tmp_path / "bag"
    _write_custom(bag, "mcap")
    mapping = mapping_from_dict(
        {
            "state": [{"source": "/telemetry"}],
            "action_from_state": True,
            "cameras": {"w": "/wrist/image_raw/compressed"},
        }
    )
    reader = Ros2Reader(str(bag), options=_opts(mapping))
    ep = reader.read_tabular(reader.discover()[0])
    assert ep.state.shape[1] == 3  # torques (2) + temperature, header skipped
    np.testing.assert_allclose(ep.state[:, 2], 40.0)


def _opts(mapping=None, state_only=False):
    from robolake.lake.sources import SourceOptions

    return SourceOptions(mapping=mapping, state_only=state_only)


def test_lone_storage_files_are_detected(tmp_path: Path):
    write_ros2(tmp_path / "a", Layout(seconds=0.3), storage="mcap")
    write_ros2(tmp_path / "b", Layout(seconds=0.3), storage="sqlite3")
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.move(str(tmp_path / "a" / "a.mcap"), loose / "take1.mcap")
    shutil.move(str(tmp_path / "b" / "b.db3"), loose / "take2.db3")
    assert is_ros2_storage_file(str(loose / "take1.mcap")) and is_ros2_storage_file(str(loose / "take2.db3"))
    found = discover_readers(str(loose))
    assert sorted(r.format_name for r in found) == ["ros2-mcap", "ros2-sqlite3"]
    assert len({r.tag for r in found}) == 1  # same layout -> same default embodiment
    info = found[0].inspect()
    topics = info["recordings"][0]["topics"]
    assert topics["/joint_states"]["count"] == 30 and abs(topics["/joint_states"]["rate_hz"] - 100) < 3
    assert topics["/wrist/image_raw/compressed"]["type"] == "sensor_msgs/msg/CompressedImage"
    assert (
        topics["/wrist/image_raw/compressed"]["shape"] == [24, 32]
        and topics["/wrist/image_raw/compressed"]["codec"] == "jpeg"
    )
    assert (
        topics["/joint_states"]["joints"] == ["shoulder", "elbow", "wrist"] and topics["/joint_states"]["header_stamp"]
    )
    assert "position" in topics["/joint_states"]["fields"]
    assert info["mapping"]["cameras"] == {"wrist": "/wrist/image_raw/compressed"}


def test_missing_camera_needs_state_only(tmp_path: Path):
    write_ros2(tmp_path / "bag", Layout(seconds=0.3, camera="none"), storage="sqlite3")
    with pytest.raises(SourceError, match="--state-only"):
        Ros2Reader(str(tmp_path / "bag"))
    reader = Ros2Reader(str(tmp_path / "bag"), options=_opts(state_only=True))
    ep = reader.read_tabular(reader.discover()[0])
    assert list(reader.read_frames(ep)) == [] and ep.num_steps > 20


# --- bad input: each lands in quarantine with file + reason; the good bag still lands -----------


def _truncate(bag: Path) -> None:
    db = next(bag.glob("*.db3"))
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


def test_bad_bags_are_quarantined_and_the_rest_lands(tmp_path: Path):
    src = tmp_path / "src"
    write_ros2(src / "good", Layout(seconds=0.4), storage="sqlite3")
    write_ros2(src / "nan", Layout(seconds=0.4, nan_at=10), storage="sqlite3")
    write_ros2(src / "backwards", Layout(seconds=0.4, backwards_at=20), storage="sqlite3")
    write_ros2(src / "widths", Layout(seconds=0.4, width_change_at=15), storage="mcap")
    write_ros2(src / "resized", Layout(seconds=0.4, image_resize_at=3), storage="sqlite3")
    write_ros2(src / "apart", Layout(seconds=0.4, camera_offset_s=5.0), storage="sqlite3")
    write_ros2(src / "nocmd", Layout(seconds=0.4, cmd_hz=None), storage="sqlite3")
    write_ros2(src / "truncated", Layout(seconds=0.4), storage="sqlite3")
    _truncate(src / "truncated")
    empty = src / "empty"
    write_ros2(empty, Layout(seconds=0.4), storage="sqlite3")
    con = sqlite3.connect(empty / "empty.db3")  # the command topic was advertised but never published
    con.execute("DELETE FROM messages WHERE topic_id = (SELECT id FROM topics WHERE name = '/arm/joint_command')")
    con.commit()
    con.close()
    mapping = mapping_from_dict(
        {
            "state": ["/joint_states"],
            "action": ["/arm/joint_command"],
            "cameras": {"wrist": "/wrist/image_raw/compressed"},
        }
    )
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(mapping=mapping))
    lake = Lake.open(str(tmp_path / "lake"))
    assert res.ingested == 1 and lake.episodes().to_pylist()[0]["source_uri"].endswith("good")
    rows = {
        Path(r["source_path"]).parts[-2]
        if r["source_path"].endswith((".db3", ".mcap"))
        else Path(r["source_path"]).name: r
        for r in quarantine_rows(lake)
    }
    expect = {
        "nan": ("non_finite", "NaN/inf"),
        "backwards": ("timestamps", "goes backwards at message 20"),
        "widths": ("shape", "joints change at message 15"),
        "resized": ("shape", "changes image size mid-episode"),
        "apart": ("no_overlap", "never overlap"),
        "nocmd": ("missing_key", "/arm/joint_command"),
        "truncated": ("corrupt_file", "truncated or corrupt"),
        "empty": ("empty", "/arm/joint_command has no messages"),
    }
    assert set(rows) == set(expect), sorted(rows)
    for name, (code, text) in expect.items():
        assert rows[name]["reason_code"] == code, (name, rows[name]["reason"])
        assert text in rows[name]["reason"], (name, rows[name]["reason"])
    assert "it has:" in rows["nocmd"]["reason"] and "/joint_states" in rows["nocmd"]["reason"]
    assert res.quarantined == len(expect)


def test_log_clock_literal_task_and_default_camera_choice(tmp_path: Path):
    """clock: log resamples on receive times; depth and raw twins of compressed topics are not default cameras."""
    from robolake.testing.ros import jpeg_frame, rgb_frame

    extra = {
        "/cam/image_raw": ("rgb8", [(t, rgb_frame(0)) for t in np.arange(0, 0.5, 1 / 15)]),
        "/cam/image_raw/compressed": ("jpeg", [(t, jpeg_frame(1)) for t in np.arange(0, 0.5, 1 / 15)]),
        "/cam/depth/image_raw": ("rgb8", [(t, rgb_frame(2)) for t in np.arange(0, 0.5, 1 / 15)]),
    }
    rec = write_ros2(tmp_path / "bag", Layout(seconds=0.5, extra=extra, jitter_s=0.0), storage="sqlite3")
    reader = Ros2Reader(str(tmp_path / "bag"))
    assert {c.name: c.source for c in reader.plan.cameras} == {
        "cam": "/cam/image_raw/compressed",
        "wrist": "/wrist/image_raw/compressed",
    }
    assert any("/cam/depth/image_raw, /cam/image_raw;" in n for n in reader.notes), reader.notes
    mapping = mapping_from_dict(
        {
            "state": ["/joint_states"],
            "action": ["/arm/joint_command"],
            "clock": "log",
            "task": "wipe the table",
            "fps": 20,
            "cameras": {"cam": "/cam/image_raw"},
        }
    )
    reader = Ros2Reader(str(tmp_path / "bag"), options=_opts(mapping))
    ep = reader.read_tabular(reader.discover()[0])
    assert ep.tasks == ("wipe the table",) and ep.fps == 20.0
    assert set(ep.metadata["clock"].values()) == {"log"}
    t = ep.timestamps + (ep.metadata["t0_ns"] - 1_700_000_000 * 10**9) / 1e9
    # log time = header time + 3 ms latency in the fixture
    exp = expected_episode(rec, ticks=t - 0.003)
    np.testing.assert_allclose(ep.state, exp["state"].astype(np.float32), atol=1e-6)
    assert np.allclose(np.diff(ep.timestamps), 0.05)


def test_multiarray_action_that_changes_width_is_rejected(tmp_path: Path):
    cmds = [(t, [t, t, t] if i < 10 else [t, t, t, t]) for i, t in enumerate(np.arange(0, 0.5, 0.02))]
    write_ros2(
        tmp_path / "bag",
        Layout(seconds=0.5, cmd_hz=None, extra={"/effort_cmd": ("multiarray", cmds)}),
        storage="sqlite3",
    )
    mapping = mapping_from_dict({"state": ["/joint_states"], "action": ["/effort_cmd"]})
    reader = Ros2Reader(str(tmp_path / "bag"), options=_opts(mapping))
    assert reader.spec().action_dim == 3
    with pytest.raises(SourceError, match="changes width mid-recording: 3 values until message 10, then 4") as err:
        reader.read_tabular(reader.discover()[0])
    assert err.value.reason_code == "shape"


def test_joint_state_topic_fed_by_two_publishers(tmp_path: Path):
    """An arm driver (3 joints, 100 Hz) and a gripper driver (1 joint, 20 Hz) both publish /joint_states."""
    grip = [(t, (["finger"], np.array([10 * t]))) for t in np.arange(0, 0.6, 0.05)]
    rec = write_ros2(tmp_path / "bag", Layout(seconds=0.6, extra={"/joint_states": ("joint", grip)}), storage="sqlite3")
    plain = Ros2Reader(str(tmp_path / "bag"))
    with pytest.raises(SourceError, match="several publishers share the topic: list the joints to keep under `names:`"):
        plain.read_tabular(plain.discover()[0])
    mapping = mapping_from_dict(
        {"state": [{"source": "/joint_states", "names": ["finger", "elbow", "shoulder"]}], "action_from_state": True}
    )
    reader = Ros2Reader(str(tmp_path / "bag"), options=_opts(mapping))
    assert reader.spec().state_dim == 3
    ep = reader.read_tabular(reader.discover()[0])
    t = ep.timestamps + (ep.metadata["t0_ns"] - 1_700_000_000 * 10**9) / 1e9
    exp = expected_episode(rec, ticks=t, action="state")
    np.testing.assert_allclose(ep.state[:, 0], 10 * t, atol=1e-5)  # linear in time: interpolation is exact
    np.testing.assert_allclose(ep.state[:, 1:], exp["state"][:, [1, 0]].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(ep.action[:-1], ep.state[1:])
