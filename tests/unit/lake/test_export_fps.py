"""`export --fps F`: each episode rendered from its record at F Hz, as `align --fps F` would, unwritten.

The contract: the dataset is the one a plain export of `align_lake(copy, AlignSpec(fps=F))` gives
(same ticks, state, action, and frames by LeRobot's own lookup), the lake is left as it was, and
an episode that cannot be rendered at F is named, never exported at its own rate.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robolake.lake import AlignSpec, IngestConfig, Lake, align_lake, ingest
from robolake.lake.export import ExportConfig, export_lerobot
from robolake.testing.ros import Layout, write_ros2
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic
from tests.unit.lake.test_export import check_layout

FPS = 30.0


def _data(root: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in sorted((root / "data").rglob("*.parquet")))


def _steps(lake: Lake) -> pa.Table:
    return lake.to_arrow("steps", columns=["episode_id", "step_index", "timestamp", "state", "action"]).sort_by(
        [("episode_id", "ascending"), ("step_index", "ascending")]
    )


@pytest.fixture(scope="module")
def bag_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export_fps")
    write_ros2(root / "src" / "rig", Layout(seconds=1.0))
    ingest(str(root / "src" / "rig"), str(root / "lake"), IngestConfig(execution="local"))
    return root / "lake"


@pytest.fixture(scope="module")
def at_30(bag_lake: Path, tmp_path_factory: pytest.TempPathFactory):
    """The bag lake exported at 30 Hz, and a copy of it aligned at 30 Hz."""
    root = tmp_path_factory.mktemp("at_30")
    before = Lake.open(str(bag_lake))
    results = export_lerobot(str(bag_lake), root / "out", config=ExportConfig(fps=FPS))
    shutil.copytree(bag_lake, root / "aligned")
    align_lake(str(root / "aligned"), AlignSpec(fps=FPS))
    return before, results, Lake.open(str(root / "aligned"))


def test_export_at_another_rate_is_the_aligned_rendition(bag_lake: Path, at_30):
    before, results, aligned = at_30
    [r] = results
    info = json.loads((r.path / "meta" / "info.json").read_text())
    assert info["fps"] == FPS and r.refused == {}
    data = _data(r.path)
    n0 = before.count("steps")
    assert data.num_rows == r.frames and abs(data.num_rows - n0 * FPS / 100) <= 2
    np.testing.assert_array_equal(data["frame_index"].to_numpy(), np.arange(data.num_rows))
    np.testing.assert_allclose(data["timestamp"].to_numpy(), np.arange(data.num_rows) / FPS, atol=1e-9)
    want = _steps(aligned)
    np.testing.assert_array_equal(data["timestamp"].to_numpy(), want["timestamp"].to_numpy())
    for col in ("observation.state", "action"):
        got = np.stack(data[col].to_numpy(zero_copy_only=False))
        ref = np.stack(want["state" if col == "observation.state" else "action"].to_numpy(zero_copy_only=False))
        np.testing.assert_array_equal(got, ref)  # the same rendering, bit for bit
    # Every frame where info.json says, one per row, each the aligned lake's frame of that step.
    check_layout(r.path, aligned)
    lineage = json.loads((r.path / "meta" / "robolake_export.json").read_text())
    assert lineage["rendered_fps"] == FPS and lineage["refused"] == {} and lineage["frames_missing"] == 0
    after = Lake.open(str(bag_lake))  # the lake is only read
    assert after.version == before.version and after.count("steps") == n0


def test_the_video_has_one_frame_per_row(at_30):
    _, [r], _ = at_30
    [mp4] = sorted((r.path / "videos").rglob("*.mp4"))
    with av.open(str(mp4)) as c:
        decoded = sum(1 for _ in c.decode(video=0))
    assert decoded == r.frames == _data(r.path).num_rows


def test_an_episode_without_a_record_is_refused_by_name_and_the_rest_exported(bag_lake: Path, tmp_path: Path, capsys):
    from robolake.cli import main

    lake = tmp_path / "lake"
    shutil.copytree(bag_lake, lake)
    [bag] = Lake.open(str(lake)).episodes().to_pylist()
    # The same robot again, from a LeRobot dataset: an episode of the same embodiment with no topic record.
    export_lerobot(str(lake), tmp_path / "plain")
    ingest(str(tmp_path / "plain"), str(lake), IngestConfig(execution="local", embodiment=bag["embodiment"]))
    [other] = [
        e["episode_id"] for e in Lake.open(str(lake)).episodes().to_pylist() if e["episode_id"] != bag["episode_id"]
    ]
    [r] = export_lerobot(str(lake), tmp_path / "out", config=ExportConfig(fps=FPS))
    assert r.episodes == 1 and list(r.refused) == [other] and r.refused[other]
    assert json.loads((r.path / "meta" / "info.json").read_text())["fps"] == FPS
    lineage = json.loads((r.path / "meta" / "robolake_export.json").read_text())
    assert lineage["episode_ids"] == [bag["episode_id"]] and list(lineage["refused"]) == [other]
    assert main(["export", str(lake), str(tmp_path / "cli"), "--fps", "30", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "exported 1 episodes" in out and "rendered at 30 Hz" in out and f"refused {other}:" in out
    [r] = export_lerobot(str(lake), tmp_path / "own_rate")  # without --fps: both, at their own rate
    assert r.episodes == 2 and r.refused == {}


@pytest.fixture(scope="module")
def synthetic_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("no_record")
    cfg = SyntheticConfig.tiny(episodes_per_embodiment=2, embodiments=("single_arm_7dof",))
    generate_synthetic(root / "syn", cfg)
    ingest(str(root / "syn" / "single_arm_7dof"), str(root / "lake"), IngestConfig(execution="local"))
    return root / "lake"


def test_episodes_without_a_record_are_refused_with_fps_and_export_without(synthetic_lake: Path, tmp_path: Path):
    ids = Lake.open(str(synthetic_lake)).episode_ids()
    with pytest.raises(ValueError, match="none of the 2 selected episodes .* rendered from its record at 30 Hz") as e:
        export_lerobot(str(synthetic_lake), tmp_path / "fps", config=ExportConfig(fps=FPS))
    assert all(eid in str(e.value) for eid in ids) and "without --fps" in str(e.value)
    assert not (tmp_path / "fps").exists()  # refused before anything is written
    [r] = export_lerobot(str(synthetic_lake), tmp_path / "plain")
    assert r.episodes == 2 and r.refused == {}


def test_the_rate_must_be_positive():
    with pytest.raises(ValueError, match="positive rate"):
        ExportConfig(fps=0.0)
