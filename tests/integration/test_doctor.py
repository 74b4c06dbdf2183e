"""Quality at ingest, `--where quality.*`, and `robolake doctor` on a LeRobot dataset with planted faults."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from robolake.cli import main
from robolake.lake import IngestConfig, Lake, doctor, ingest
from robolake.writers.lerobot import EpisodeArrays, write_lerobot_dataset
from robolake.writers.synthetic import SyntheticConfig, synthetic_episodes

GR00T = Path(__file__).resolve().parents[3] / "shared" / "data" / "gr00t_pick_n_place"
ROBOT = "single_arm_7dof"


def _faulty(root: Path) -> Path:
    """Seven episodes of 60 steps: 0 and 6 clean, 1 frozen state, 2 a zeroed first action row,
    3 a near-duplicate of 0, 4 a camera stuck for 30 steps, 5 an idle head of 30 steps."""
    eps = synthetic_episodes(SyntheticConfig.tiny(min_length=60, max_length=60, episodes_per_embodiment=7), ROBOT)
    out = []
    for i, e in enumerate(eps):
        state, action, frames = e.state.copy(), e.action.copy(), {k: v.copy() for k, v in e.frames.items()}
        if i == 1:
            state[:] = state[0]
        if i == 2:
            action[0] = 0
        if i == 3:
            state, action = eps[0].state + np.float32(1e-4), eps[0].action + np.float32(1e-4)
            frames = {k: v.copy() for k, v in eps[0].frames.items()}
        if i == 4:
            for v in frames.values():
                v[15:45] = v[15]
        if i == 5:
            state = np.concatenate([np.repeat(state[:1], 30, 0), state[:30]])
            action = np.concatenate([np.repeat(action[:1], 30, 0), action[:30]])
        out.append(EpisodeArrays(state=state, action=action, task=e.task, frames=frames))
    return write_lerobot_dataset(root / "faulty", episodes=out, fps=20, robot_type=ROBOT)


def _index(episode_id: str) -> int:
    return int(episode_id.split("/")[-1].split("-")[0])


@pytest.fixture(scope="module")
def faulty_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("doctor")
    src = _faulty(root)
    uri = str(root / "lake")
    ingest(str(src), uri, IngestConfig(execution="local"))
    return uri


def test_doctor_finds_each_planted_fault_and_nothing_on_the_clean_episodes(faulty_lake: str) -> None:
    report = doctor(faulty_lake)
    found: dict[str, set[int]] = {}
    for f in report.findings:
        found.setdefault(f.check, set()).add(_index(f.episode_id))
    assert 1 in found["frozen_state"]
    assert 2 in found["zero_rows"]
    assert found["near_duplicate"] == {3}
    assert 4 in found["frozen_camera"]
    assert 5 in found["idle_head"]
    clean = {c: eps & {0, 6} for c, eps in found.items() if eps & {0, 6}}
    assert clean == {}, clean
    cams = [f for f in report.findings if f.check == "frozen_camera"]
    assert cams[0].camera == "front" and "step" in cams[0].detail


def test_where_on_quality_through_select(faulty_lake: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["select", faulty_lake, "--where", "quality.frozen_state", "--tag", "frozen", "--json"]) == 0
    capsys.readouterr()
    lake = Lake.open(faulty_lake).checkout(tag="frozen")
    assert [_index(e) for e in lake.episode_ids()] == [1]
    assert main(["select", faulty_lake, "--where", "quality.nonsense > 1", "--tag", "x"]) != 0
    assert "the quality names are frozen_state" in capsys.readouterr().err


def test_doctor_json_and_fail_on(faulty_lake: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", faulty_lake, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    f = next(f for f in out["findings"] if f["check"] == "zero_rows")
    assert {"check", "episode_id", "stream", "camera", "detail", "where"} <= set(f)
    assert main(["doctor", faulty_lake, "--fail-on", "frozen_state"]) == 1
    assert main(["doctor", faulty_lake, "--fail-on", "timestamp_gap"]) == 0
    capsys.readouterr()


def test_doctor_html(faulty_lake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main(["doctor", faulty_lake, "--html", str(out)]) == 0
    capsys.readouterr()
    assert "frozen_state" in out.read_text() and "data:image/png" in out.read_text()


def test_update_adds_quality_to_an_older_lake(tmp_path: Path) -> None:
    src = _faulty(tmp_path)
    uri = str(tmp_path / "lake")
    ingest(str(src), uri, IngestConfig(execution="local", quality=False))
    before = doctor(uri)
    assert before.without_quality == 7 and before.findings == []
    from robolake.lake.where import select_episode_ids  # noqa: PLC0415 (the test reads the room directly)

    assert select_episode_ids(Lake.open(uri), "quality.frozen_state or quality.idle_fraction >= 0") == []
    v = Lake.open(uri).version
    after = doctor(uri, update=True)
    assert after.updated == 7 and after.version == v + 1 and after.without_quality == 0
    assert {_index(f.episode_id) for f in after.findings if f.check == "frozen_state"} == {1}
    assert {_index(f.episode_id) for f in after.findings if f.check == "frozen_camera"} == {4}
    assert doctor(uri, update=True).updated == 0


def test_update_in_worker_processes_measures_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    doctor_module = importlib.import_module("robolake.lake.doctor_update")  # where the update pass lives
    src = _faulty(tmp_path)
    uris = [str(tmp_path / "one"), str(tmp_path / "two")]
    for uri in uris:
        ingest(str(src), uri, IngestConfig(execution="local", quality=False))
    monkeypatch.setattr(doctor_module, "_UPDATE_BATCH", 3)  # three batches, two of them in each worker
    alone, pooled = doctor(uris[0], update=True, workers=1), doctor(uris[1], update=True, workers=2)
    assert alone.updated == pooled.updated == 7
    assert [(f.check, f.episode_id) for f in alone.findings] == [(f.check, f.episode_id) for f in pooled.findings]
    with pytest.raises(ValueError, match="workers must be >= 1"):
        doctor(uris[0], update=True, workers=0)  # (nothing left to measure: refused before it looks)


def test_no_false_positive_on_the_real_gr00t_data(tmp_path: Path) -> None:
    if not GR00T.is_dir():
        pytest.skip(f"{GR00T} is absent")
    src = tmp_path / "gr00t"
    shutil.copytree(GR00T, src)
    uri = str(tmp_path / "lake")
    ingest(str(src), uri, IngestConfig(execution="local"))
    report = doctor(uri)
    # What doctor reports on this real data is real, and a person should see it:
    # - identical_dims: the GR1 right hand's action dims 29-32 are commanded together (one value for four
    #   fingers) in every episode;
    # - action_jump: every episode's action steps once, at step 6, by most of a barely moving left arm's range
    #   (the controller taking over after the first frames).
    # Nothing else: no frozen, idle, camera, gap, length, range or duplicate findings. Episodes 1 and 2 are
    # both 470 steps long, so the near-duplicate search compares them; their ego-view fingerprints (the
    # keyframes at steps 0 and 250, a keyframe every 250 frames) differ by 90 or more of 255 in some cell
    # where a duplicate stays within 8.
    assert {f.check for f in report.findings} <= {"identical_dims", "action_jump"}
    for row in Lake.open(uri).episodes(columns=["metadata"]).to_pylist():
        assert json.loads(row["metadata"])["quality"]["cameras"]["ego_view"]["fingerprint"]["steps"] == [0, 250]
    assert all(f.detail.count("action[29]") for f in report.findings if f.check == "identical_dims")
    assert any("never change" in n for n in report.notes)  # the fixed legs and neck, an embodiment note
