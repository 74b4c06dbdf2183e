"""Each doctor check on a LeRobot v3.0 dataset with its fault planted in one episode, and the clean
episodes of the same dataset as the fixture without it: a check flags its planted episode and
nothing clean. The checks here are those test_doctor.py does not plant: timestamp gaps, action
jumps, identical columns, black and overexposed camera runs (found on a video's keyframes),
length outliers, out-of-range state, and near-duplicates by frames alone and by actions alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robolake.lake import IngestConfig, Lake, doctor, ingest
from robolake.lake.doctor import DoctorReport
from robolake.testing.faulty_lerobot import FaultySpec, write_faulty_lerobot

CLEAN = 6
PLANTED = (
    "timestamp_gap",
    "action_jump",
    "identical_dims",
    "black_camera",
    "overexposed_camera",
    "length_outlier",
    "out_of_range",
    "frame_duplicate",
    "action_duplicate",
)
EPISODE = {fault: CLEAN + i for i, fault in enumerate(PLANTED)}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[DoctorReport, dict[str, int]]:
    root = tmp_path_factory.mktemp("doctor-checks")
    # 60 steps at 10 fps: the writer's keyframes fall every 20 steps, so the camera runs
    # (steps 20..34) hold one keyframe each, and each episode gets a three-frame fingerprint
    data = write_faulty_lerobot(root / "faulty", FaultySpec(clean=CLEAN, length=60, faults=PLANTED))
    uri = str(root / "lake")
    ingest(str(data.root), uri, IngestConfig(execution="local"))
    lake = Lake.open(uri)
    index = {
        r["episode_id"]: int(r["source_episode_index"])
        for r in lake.episodes(columns=["episode_id", "source_episode_index"]).to_pylist()
    }
    return doctor(lake), index


def _flagged(report: DoctorReport, index: dict[str, int]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for f in report.findings:
        out.setdefault(f.check, set()).add(index[f.episode_id])
    return out


def test_every_episode_landed(checked: tuple[DoctorReport, dict[str, int]]) -> None:
    report, index = checked
    assert report.episodes == CLEAN + len(PLANTED) and sorted(index.values()) == list(range(report.episodes))


@pytest.mark.parametrize(
    ("check", "faults"),
    [
        ("timestamp_gap", {"timestamp_gap"}),
        ("action_jump", {"action_jump"}),
        ("identical_dims", {"identical_dims"}),
        ("dark_camera", {"black_camera", "overexposed_camera"}),
        ("length_outlier", {"length_outlier"}),
        # the action jump's spike also leaves its embodiment's action range: a second, true, finding
        ("out_of_range", {"out_of_range", "action_jump"}),
        ("near_duplicate", {"frame_duplicate", "action_duplicate"}),
    ],
)
def test_check_flags_its_planted_episode_and_no_clean_one(
    checked: tuple[DoctorReport, dict[str, int]], check: str, faults: set[str]
) -> None:
    report, index = checked
    assert _flagged(report, index).get(check, set()) == {EPISODE[f] for f in faults}


def test_clean_episodes_have_no_findings(checked: tuple[DoctorReport, dict[str, int]]) -> None:
    report, index = checked
    clean = {(f.check, index[f.episode_id]) for f in report.findings if index[f.episode_id] < CLEAN}
    assert clean == set()


def test_dark_and_overexposed_runs_are_named_by_camera(checked: tuple[DoctorReport, dict[str, int]]) -> None:
    report, index = checked
    dark = {index[f.episode_id]: f for f in report.findings if f.check == "dark_camera"}
    assert {f.camera for f in dark.values()} == {"front"}
    assert "black or overexposed" in dark[EPISODE["black_camera"]].detail


def test_near_duplicates_say_what_matched(checked: tuple[DoctorReport, dict[str, int]]) -> None:
    report, index = checked
    dups = {index[f.episode_id]: f for f in report.findings if f.check == "near_duplicate"}
    by_frames, by_actions = dups[EPISODE["frame_duplicate"]], dups[EPISODE["action_duplicate"]]
    first = next(e for e, i in index.items() if i == 0)
    assert by_frames.duplicate_of == first and by_actions.duplicate_of == first
    assert "same frames (camera front)" in by_frames.detail and "actions" not in by_frames.detail.split(" as ")[0]
    assert "same actions as" in by_actions.detail and "frames" not in by_actions.detail.split(" as ")[0]


def test_fingerprints_are_stored_per_camera(checked: tuple[DoctorReport, dict[str, int]]) -> None:
    report, index = checked
    lake = Lake.open(report.lake)
    for row in lake.episodes(columns=["episode_id", "metadata"]).to_pylist():
        fp = json.loads(row["metadata"])["quality"]["cameras"]["front"]["fingerprint"]
        if index[row["episode_id"]] < CLEAN:  # the writer's keyframes (x264 adds one at a scene cut)
            assert fp["steps"] == [0, 20, 40]
        assert len(fp["luma"]) == 4 * -(-len(fp["steps"]) * 64 // 3)  # base64 of 64 bytes a frame


def test_a_dataset_without_faults_has_no_findings(tmp_path: Path) -> None:
    data = write_faulty_lerobot(tmp_path / "clean", FaultySpec(clean=8, length=60, faults=()))
    uri = str(tmp_path / "lake")
    ingest(str(data.root), uri, IngestConfig(execution="local"))
    report = doctor(uri)
    assert report.episodes == 8 and report.findings == []
