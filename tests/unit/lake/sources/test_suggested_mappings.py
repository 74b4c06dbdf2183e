"""The recordings `inspect --suggest-map` used to get wrong (issue 24), each written with its format's writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from robolake.cli import main as cli_main
from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources.base import SourceError
from robolake.lake.sources.lerobot.meta import LeRobotMeta
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.lake.sources.topics.inspect import CANNOT_INGEST
from robolake.testing.ros import Layout, joint_values, write_ros1
from robolake.testing.suggestion_fixtures import FIXTURES, realsense_extra, unnamed_joints_extra

pytest.importorskip("rosbags")


def _suggest(capsys: pytest.CaptureFixture[str], src: Path) -> str:
    capsys.readouterr()
    assert cli_main(["inspect", str(src), "--suggest-map"]) == 0
    return capsys.readouterr().out


def _unit(capsys: pytest.CaptureFixture[str], src: Path) -> dict:
    capsys.readouterr()
    assert cli_main(["inspect", str(src), "--json"]) == 0
    (unit,) = json.loads(capsys.readouterr().out)["units"]
    return unit


def _bag(tmp_path: Path, extra: dict, camera: str = "none") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    bag = tmp_path / "rec.bag"
    write_ros1(bag, Layout(seconds=0.5, joint_hz=0.0001, cmd_hz=None, camera=camera, extra=extra))
    return bag


def test_joint_state_without_names_maps_by_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = _bag(tmp_path, unnamed_joints_extra(), camera="compressed")
    row = _unit(capsys, bag)["recordings"][0]["topics"]["/joint_states"]
    assert row["shape"] == [3] and "by index" in row["note"]
    m = mapping_from_dict(yaml.safe_load(_suggest(capsys, bag)), "suggested.yaml")
    assert [(s.source, s.field, s.names) for s in m.state] == [("/joint_states", "position", None)]
    for lake, mapping in (("default", None), ("suggested", m)):
        res = ingest(str(bag), str(tmp_path / lake), IngestConfig(execution="local", mapping=mapping))
        assert (res.ingested, res.quarantined) == (1, 0), res.quarantine
    steps = Lake.open(str(tmp_path / "suggested")).to_arrow("steps").sort_by("step_index")
    state = np.stack(steps["state"].to_numpy(zero_copy_only=False))
    assert state.shape[1] == 3
    np.testing.assert_allclose(state[0], joint_values(0.0), atol=1e-5)  # the values in the order published


def test_a_joint_state_that_gains_names_midway_is_refused(tmp_path: Path) -> None:
    extra = unnamed_joints_extra()
    kind, entries = extra["/joint_states"]
    entries[-1] = (entries[-1][0], (["a", "b", "c"], entries[-1][1][1]))  # the last message names its joints
    bag = _bag(tmp_path, {"/joint_states": (kind, entries)}, camera="compressed")
    res = ingest(str(bag), str(tmp_path / "lake"), IngestConfig(execution="local"))
    assert res.ingested == 0 and "joints change" in res.quarantine[0][1]


def test_a_camera_only_bag_says_in_its_first_line_why_it_cannot_be_ingested(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _suggest(capsys, FIXTURES["ros1/cameras-only"](tmp_path))
    first = text.splitlines()[0]
    assert first.startswith(CANNOT_INGEST) and "cameras only" in first and "/top/image_raw" in first


def test_realsense_metadata_topics_are_never_suggested_as_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d435 = _bag(tmp_path / "d435", realsense_extra(imu=False))
    text = _suggest(capsys, d435)
    assert "/device_0/info" not in text and text.startswith(CANNOT_INGEST)
    d435i = _bag(tmp_path / "d435i", realsense_extra())
    role = _unit(capsys, d435i)["recordings"][0]["topics"]["/device_0/info"]["role"]
    assert role.startswith("in the record only: metadata")
    m = mapping_from_dict(yaml.safe_load(_suggest(capsys, d435i)), "suggested.yaml")
    assert [s.source for s in m.state] == ["/device_0/sensor_2/Accel_0/imu/data"]
    res = ingest(str(d435i), str(tmp_path / "lake"), IngestConfig(execution="local", mapping=m))
    assert (res.ingested, res.quarantined) == (1, 0) and res.frames > 0


def test_the_clock_comment_agrees_with_the_clock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("ros1/cameras-only", "ros1", "mcap/json"):
        text = _suggest(capsys, FIXTURES[name](tmp_path / name))
        (line,) = [x for x in text.splitlines() if x.startswith("clock:")]
        assert ("no header stamps" in line) == line.startswith("clock: log"), line


def test_robosuite_six_demos_land_six_episodes_with_the_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("h5py")
    src = FIXTURES["hdf5/robosuite"](tmp_path)
    m = mapping_from_dict(yaml.safe_load(_suggest(capsys, src)), "suggested.yaml")
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local", mapping=m))
    assert (res.ingested, res.quarantined) == (6, 0), res.quarantine


def test_an_aborted_lerobot_v3_recording_is_called_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = FIXTURES["lerobot/v3.0"](tmp_path)
    # what LeRobot leaves when a recording is stopped before its first episode is saved
    for p in ("data", "videos", "meta/episodes", "meta/tasks.parquet", "meta/stats.json"):
        shutil.rmtree(root / p) if (root / p).is_dir() else (root / p).unlink(missing_ok=True)
    info = json.loads((root / "meta/info.json").read_text())
    info.update({k: 0 for k in info if k.startswith("total_")})
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(SourceError, match="empty LeRobot v3.0 dataset") as e:
        LeRobotMeta(str(root))
    assert e.value.reason_code == "empty" and "re-export" not in e.value.message
    capsys.readouterr()
    cli_main(["inspect", str(root)])
    assert "quarantined (empty): an empty LeRobot v3.0 dataset" in capsys.readouterr().out
