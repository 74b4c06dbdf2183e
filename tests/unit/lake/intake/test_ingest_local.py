"""Small sources ingest in this process, without Ray, through the same readers and commit: the lake
is the same whichever way the stages ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.testing.hdf5 import write_aloha
from robolake.testing.ros import Layout, write_ros1

pytest.importorskip("rosbags")


def _source(root: Path) -> Path:
    src = root / "src"
    src.mkdir()
    write_ros1(src / "take_1.bag", Layout(seconds=0.6, seed=1))
    write_ros1(src / "take_2.bag", Layout(seconds=0.6, seed=2, cmd_hz=None))
    write_ros1(src / "nan.bag", Layout(seconds=0.6, seed=3, nan_at=7))
    (src / "aloha").mkdir()
    write_aloha(src / "aloha" / "episode_0.hdf5")
    return src


def _lake_content(path: Path) -> dict:
    lake = Lake.open(str(path))
    eps = sorted(
        (e["episode_id"], e["content_hash"], e["num_steps"], e["fps"], e["embodiment"], tuple(e["cameras"]))
        for e in lake.episodes().to_pylist()
    )
    steps = sorted(
        (s["episode_id"], s["step_index"], s["timestamp"], tuple(s["state"]), tuple(s["action"]))
        for s in lake.to_arrow("steps").to_pylist()
    )
    media = sorted(
        (m["episode_id"], m["camera"], m["step_index"], m["data"]) for m in lake.to_arrow("media").to_pylist()
    )
    quarantine = sorted(
        (q["source_path"], q["reason_code"], q["reason"]) for q in lake.to_arrow("quarantine").to_pylist()
    )
    return {
        "episodes": eps,
        "steps": steps,
        "media": media,
        "quarantine": quarantine,
        "embodiments": sorted(lake.embodiments()),
    }


def test_in_process_and_ray_ingests_give_the_same_lake(tmp_path: Path, ray_session):
    src = _source(tmp_path)
    local = ingest(str(src), str(tmp_path / "local"), IngestConfig(execution="local"))
    on_ray = ingest(str(src), str(tmp_path / "ray"), IngestConfig(execution="ray"))
    assert (local.execution, on_ray.execution) == ("local", "ray")
    for r in (local, on_ray):
        assert (r.ingested, r.quarantined) == (3, 1)
    assert (local.steps, local.frames, sorted(local.notes)) == (on_ray.steps, on_ray.frames, sorted(on_ray.notes))
    assert _lake_content(tmp_path / "local") == _lake_content(tmp_path / "ray")
    # and a re-run in the other mode recognises every episode
    again = ingest(str(src), str(tmp_path / "local"), IngestConfig(execution="ray"))
    assert (again.ingested, again.skipped) == (0, 3)


def test_auto_runs_small_sources_in_process_and_large_ones_on_ray(tmp_path: Path, ray_session):
    src = _source(tmp_path)
    assert ingest(str(src), str(tmp_path / "a"), IngestConfig()).execution == "local"
    assert ingest(str(src), str(tmp_path / "b"), IngestConfig(local_below_bytes=1000)).execution == "ray"
    with pytest.raises(ValueError, match="execution='local' runs without Ray"):
        IngestConfig(execution="local", ray_address="ray://head:10001")
    with pytest.raises(ValueError, match="execution must be auto, local or ray"):
        IngestConfig(execution="threads")


def test_a_note_said_of_many_files_is_printed_once(tmp_path: Path):
    """Three bags with no command topic and no camera: each note once, naming how many files."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        write_ros1(src / f"take_{i}.bag", Layout(seconds=0.3, seed=i, cmd_hz=None, camera="none"))
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(state_only=True, execution="local"))
    assert res.ingested == 3
    said = [n for n in res.notes if n.startswith("no command topic")]
    assert len(said) == 1 and said[0].endswith(f"(3 files: {src / 'take_0.bag'} and 2 more)"), res.notes
    assert not any(n.startswith(str(src)) and "no command topic" in n for n in res.notes)
