"""Sessions: topic-log files of one folder read as one recording (`--session`, `session:`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robolake.cli import main as cli_main
from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources import SourceOptions, discover_readers
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.lake.sources.registry import SessionFile, find_units
from robolake.lake.sources.topics.log import TopicLogReader
from robolake.lake.sources.topics.session import group_sessions
from robolake.testing.ros import Layout, Recorded, write_mcap_json, write_ros1

from .ros_expected import expected_episode, lake_frames, lake_steps, quarantine_rows

pytest.importorskip("rosbags")

JOINTS, CMD, CAM = "/joint_states", "/arm/joint_command", "/wrist/image_raw/compressed"


def _readers(src: Path, session: str | None = None) -> list[TopicLogReader]:
    """The topic-log readers discovery opens under `src` (with `session`, if given)."""
    found = discover_readers(str(src), options=SourceOptions(session=session))
    readers = [r for r in found if isinstance(r, TopicLogReader)]
    assert len(readers) == len(found)
    return readers


def _mapping(session: str | None = None, **more):
    return mapping_from_dict({"state": [JOINTS], "action": [CMD], **({"session": session} if session else {}), **more})


def _side_by_side(folder: Path, *, joints_in_camera_bag: bool = False) -> Recorded:
    """A take recorded as three bags (`rosbag record` once per topic group); what they hold together."""
    folder.mkdir(parents=True)
    joints = write_ros1(folder / "joints.bag", Layout(seconds=1.0, cmd_hz=None, cam_hz=None, seed=1))
    cmd = write_ros1(folder / "command.bag", Layout(seconds=1.0, joint_hz=0, cam_hz=None, seed=2))
    cam = write_ros1(
        folder / "camera.bag",
        Layout(seconds=1.0, joint_hz=100 if joints_in_camera_bag else 0, cmd_hz=None, seed=3),
    )
    return Recorded(
        joint_t=joints.joint_t,
        joint_v=joints.joint_v,
        cmd_t=cmd.cmd_t,
        cmd_v=cmd.cmd_v,
        cam_t=cam.cam_t,
        frames=cam.frames,
    )


def _split(folder: Path, name: str, indices: list[int], seconds: float = 1.0) -> list[Recorded]:
    """`rosbag record --split`: one take cut into numbered parts, each `seconds` long."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        write_ros1(folder / f"{name}_{i}.bag", Layout(seconds=seconds, offset_s=i * seconds, seed=i)) for i in indices
    ]


def _joined(parts: list[Recorded]) -> Recorded:
    return Recorded(
        joint_t=np.concatenate([p.joint_t for p in parts]),
        joint_v=np.concatenate([p.joint_v for p in parts]),
        cmd_t=np.concatenate([p.cmd_t for p in parts]),
        cmd_v=np.concatenate([p.cmd_v for p in parts]),
        cam_t=np.concatenate([p.cam_t for p in parts]),
        frames=[f for p in parts for f in p.frames],
    )


def test_bags_recorded_side_by_side_are_one_episode(tmp_path: Path):
    src = tmp_path / "src" / "take_01"
    rec = _side_by_side(src)
    # without sessions each bag is refused on its own, as before: no state, or no camera
    with pytest.raises(ValueError, match="3 unit\\(s\\) could not be opened") as e:
        discover_readers(str(src))
    assert all(f"{src}/{n}.bag" in str(e.value) for n in ("joints", "command", "camera"))

    (reader,) = _readers(src, "overlap")
    assert reader.recordings == [tuple(f"{src}/{n}.bag" for n in ("camera", "command", "joints"))]
    (ref,) = reader.discover()
    ep = reader.read_tabular(ref)
    exp = expected_episode(rec, 100.0)
    assert ep.num_steps == len(exp["ticks"])
    np.testing.assert_allclose(ep.state, exp["state"].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(ep.action, exp["action"].astype(np.float32), atol=1e-6)
    (frames,) = list(reader.read_frames(ep))
    assert list(frames.images) == [rec.frames[i] for i in exp["frame_index"]]

    # through ingest, with the session named in the mapping
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"), IngestConfig(mapping=_mapping("overlap")))
    assert (res.ingested, res.quarantined) == (1, 0), res.quarantine
    lake = Lake.open(str(tmp_path / "lake"))
    (row,) = lake.episodes().to_pylist()
    assert row["source_format"] == "ros1" and row["num_steps"] == len(exp["ticks"])
    np.testing.assert_allclose(lake_steps(lake)["state"], exp["state"].astype(np.float32), atol=1e-6)
    assert lake_frames(lake, "wrist") == [rec.frames[i] for i in exp["frame_index"]]


def test_ingest_session_option_on_the_command_line(tmp_path: Path, capsys):
    _side_by_side(tmp_path / "take")
    rc = cli_main(["ingest", str(tmp_path / "take"), str(tmp_path / "lake"), "--session", "overlap", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0 and "ingested 1 episodes" in out, out


def test_split_parts_are_one_episode_spanning_every_part(tmp_path: Path):
    src = tmp_path / "src"
    parts = _split(src, "run", [0, 1, 2])
    # without sessions: one episode per part
    alone = _readers(src)
    assert len(alone) == 3 and all(len(r.recordings[0]) == 1 for r in alone)
    one = ingest(str(src), str(tmp_path / "alone"))
    assert one.ingested == 3

    (reader,) = _readers(src, "split")
    assert reader.recordings == [tuple(str(src / f"run_{i}.bag") for i in range(3))]
    ep = reader.read_tabular(reader.discover()[0])
    exp = expected_episode(_joined(parts), 100.0)
    assert ep.num_steps == len(exp["ticks"]) and ep.num_steps > 290  # ~3 s at 100 Hz, not one part's ~1 s
    np.testing.assert_allclose(ep.state, exp["state"].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(ep.action, exp["action"].astype(np.float32), atol=1e-6)

    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(mapping=_mapping("split")))
    assert (res.ingested, res.quarantined) == (1, 0), res.quarantine
    (row,) = Lake.open(str(tmp_path / "lake")).episodes().to_pylist()
    assert row["num_steps"] == len(exp["ticks"])
    alone_steps = [e["num_steps"] for e in Lake.open(str(tmp_path / "alone")).episodes().to_pylist()]
    assert row["num_steps"] > sum(alone_steps) - 3  # the parts' seams add steps, they lose none


def test_a_missing_middle_part_is_named_and_the_rest_lands(tmp_path: Path):
    src = tmp_path / "src"
    _split(src, "run", [0, 1, 3])
    write_ros1(src / "other.bag", Layout(seconds=1.0, seed=7))  # not a part: read alone
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(mapping=_mapping("split")))
    assert (res.ingested, res.quarantined) == (1, 1), res.quarantine
    ((path, reason),) = res.quarantine
    assert path == str(src / "run_0.bag")
    assert f"{src}/run_2.bag missing" in reason and "--session split" in reason
    (row,) = quarantine_rows(Lake.open(str(tmp_path / "lake")))
    assert row["reason_code"] == "missing_part" and "run_2.bag" in row["reason"]
    (ep,) = Lake.open(str(tmp_path / "lake")).episodes().to_pylist()
    assert Path(ep["source_uri"]).name == "other.bag"


def test_the_same_topic_in_two_overlapping_files_is_named(tmp_path: Path):
    src = tmp_path / "take"
    _side_by_side(src, joints_in_camera_bag=True)
    (reader,) = _readers(src, "overlap")
    (note,) = [n for n in reader.notes if "over the same time" in n]
    # read from the first file (in path order) that holds it; the other copy is named and left out
    assert f"{JOINTS} is in both {src}/camera.bag and {src}/joints.bag" in note
    assert "left out of joints.bag" in note
    ep = reader.read_tabular(reader.discover()[0])
    assert ep.num_steps > 90
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(mapping=_mapping("overlap")))
    assert (res.ingested, res.quarantined) == (1, 0)
    assert any("left out of joints.bag" in n for n in res.notes), res.notes


def test_files_of_different_formats_do_not_mix_and_unrelated_files_stay_alone(tmp_path: Path):
    src = tmp_path / "src"
    _side_by_side(src / "take")
    write_mcap_json(src / "take" / "full.mcap", Layout(seconds=1.0))
    (src / "later").mkdir()
    write_ros1(src / "later" / "alone.bag", Layout(seconds=1.0, offset_s=100.0))
    scan = find_units(str(src), options=SourceOptions(session="folder"))
    assert [(s.paths, f.name) for s, f in scan.sessions] == [
        (tuple(str(src / "take" / f"{n}.bag") for n in ("camera", "command", "joints")), "ros1")
    ]
    assert sorted(Path(p).name for p, _ in scan.units) == ["alone.bag", "full.mcap"]
    readers = _readers(src, "folder")
    assert sorted((r.format_name, len(r.recordings[0])) for r in readers) == [
        ("mcap-json", 1),
        ("ros1", 1),
        ("ros1", 3),
    ]


def test_numbered_mcap_chunks_are_one_episode(tmp_path: Path):
    for i in range(3):
        write_mcap_json(tmp_path / f"log_{i}.mcap", Layout(seconds=0.5, offset_s=0.5 * i, seed=i))
    (reader,) = _readers(tmp_path, "split")
    assert reader.format_name == "mcap-json" and len(reader.recordings[0]) == 3
    ep = reader.read_tabular(reader.discover()[0])
    assert ep.num_steps > 140  # ~1.5 s at 100 Hz
    (frames,) = list(reader.read_frames(ep))
    assert len(frames.images) == ep.num_steps


def test_inspect_reports_the_sessions(tmp_path: Path, capsys):
    src = tmp_path / "src"
    _side_by_side(src / "take")
    _split(src / "runs", "run", [0, 1, 3], seconds=0.5)
    rc = cli_main(["inspect", str(src), "--session", "overlap", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0
    (session,) = report["sessions"]
    assert session["mode"] == "overlap" and session["duration_s"] == pytest.approx(0.99, abs=0.01)
    assert {Path(f["path"]).name: f["streams"] for f in session["files"]} == {
        "camera.bag": [CAM],
        "command.bag": [CMD],
        "joints.bag": [JOINTS],
    }
    (unit,) = [u for u in report["units"] if u.get("session")]
    assert unit["opens"] and unit["episodes"] == 1 and unit["cameras"] == ["wrist"]
    assert len([u for u in report["units"] if not u.get("session")]) == 3  # the split parts do not overlap

    rc = cli_main(["inspect", str(src), "--session", "split"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "session (split): 3 files" in out and f"ingest: quarantined (missing_part): split parts {src}/runs/" in out
    assert f"{src}/runs/run_2.bag missing" in out
    assert "sessions (split): 1 formed of 3 files, 1 of them cannot be ingested" in out


def test_split_names_with_rosbag_dates_and_restarted_numbering():
    """`rosbag record --split` puts a fresh date in each part's name; a second take restarts at 0."""
    t = 1_700_000_000 * 10**9
    names = {
        "/d/_2024-05-01-10-00-00_0.bag": 0,
        "/d/_2024-05-01-10-01-00_1.bag": 1,
        "/d/_2024-05-01-10-02-00_2.bag": 2,
        "/d/_2024-05-01-11-00-00_0.bag": 10,
        "/d/_2024-05-01-11-01-00_1.bag": 11,
        "/d/take_3.bag": 20,  # alone: a run of one
        "/d/notes.bag": 30,
    }

    def probe(path: str, options: SourceOptions) -> SessionFile:
        k = names[path]
        return SessionFile(path=path, start_ns=t + k * 10**9, end_ns=t + k * 10**9 + 5 * 10**8, streams={"/a": "T"})

    sessions = group_sessions(tuple(names), "split", SourceOptions(), probe=probe)
    assert [[Path(p).name[12:] for p in s.paths] for s in sessions] == [
        ["10-00-00_0.bag", "10-01-00_1.bag", "10-02-00_2.bag"],
        ["11-00-00_0.bag", "11-01-00_1.bag"],
    ]
    assert all(s.problem is None and not s.notes for s in sessions)
    # overlap: spans that touch form a session, the others stay alone
    near = {p: k for p, k in names.items() if k in (0, 1)}
    shifted = group_sessions(
        tuple(near),
        "overlap",
        SourceOptions(),
        probe=lambda p, o: SessionFile(
            path=p, start_ns=t + near[p] * 4 * 10**8, end_ns=t + 10**9, streams={f"/t{near[p]}": "T"}
        ),
    )
    assert [len(s.files) for s in shifted] == [2] and not shifted[0].notes


def test_session_options_are_checked():
    with pytest.raises(ValueError, match="session must be one of"):
        SourceOptions(session="together")
    with pytest.raises(ValueError, match="streams must be a non-empty tuple of glob patterns"):
        SourceOptions(streams=())
    with pytest.raises(ValueError, match="streams must be"):
        SourceOptions(streams=("/joint*", " "))
    assert SourceOptions(streams=["/joint*"]).streams == ("/joint*",)
    with pytest.raises(ValueError, match="session: expected one of folder, overlap, split"):
        _mapping("sideways")
    # the command line wins over the mapping
    assert SourceOptions(mapping=_mapping("split")).session_mode == "split"
    assert SourceOptions(mapping=_mapping("split"), session="overlap").session_mode == "overlap"
    assert SourceOptions().session_mode is None
