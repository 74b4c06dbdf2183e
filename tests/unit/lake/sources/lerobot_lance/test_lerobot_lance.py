"""LeRobot's Lance layout (lerobot-lancedb): export a lake to it, ingest it back, and the layout itself.

The layout is checked against what `lerobot-lancedb` 0.3.1's `convert.py` / `reader.py` define
(table and column names, the blob column, `storage_format`, row order); the slow test at the end
runs that package's own loader over an export, in the isolated Python 3.12 environment
`robolake.bench.peers` builds, and skips when that environment cannot be built.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from robolake.cli import main as cli_main
from robolake.lake import Lake
from robolake.lake.export import ExportConfig, export_lerobot
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources import SourceError, formats, register_format
from robolake.lake.sources.lerobot_lance import FORMAT, LeRobotLanceReader
from robolake.testing.images import frames
from robolake.writers.lerobot import EpisodeArrays, write_lerobot_dataset


@pytest.fixture(autouse=True, scope="module")
def _registered():
    if FORMAT.name not in {f.name for f in formats()}:
        register_format(FORMAT)


def _dataset(root: Path, episodes: int = 3) -> Path:
    rng = np.random.default_rng(0)
    eps = [
        EpisodeArrays(
            state=rng.normal(size=(8 + i, 4)).astype(np.float32),
            action=rng.normal(size=(8 + i, 3)).astype(np.float32),
            task=f"task {i % 2}",
            frames={"observation.images.wrist": frames(8 + i, 32, 48, seed=i)},
        )
        for i in range(episodes)
    ]
    return write_lerobot_dataset(root, episodes=eps, fps=10, robot_type="arm", version="v3.0")


def _lake(tmp_path: Path) -> str:
    result = ingest(str(_dataset(tmp_path / "v3")), str(tmp_path / "lake"))
    assert result.ingested == 3
    return str(tmp_path / "lake")


def _episodes(lake: str) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray, list[bytes]]]:
    """(task, steps) -> (state, action, frame cells) of every episode."""
    lk = Lake.open(lake)
    out = {}
    for e in lk.episodes().to_pylist():
        where = f"episode_id = '{e['episode_id']}'"
        steps = lk.to_arrow("steps", where=where).sort_by("step_index")
        media = lk.to_arrow("media", where=where).sort_by("step_index")
        out[(e["task"], e["num_steps"])] = (
            np.stack(steps["state"].to_numpy(zero_copy_only=False)),
            np.stack(steps["action"].to_numpy(zero_copy_only=False)),
            media["data"].to_pylist(),
        )
    return out


def test_export_to_lerobot_lance_and_ingest_it_back(tmp_path: Path):
    lake = _lake(tmp_path)
    (result,) = export_lerobot(lake, tmp_path / "ll", config=ExportConfig(format="lerobot-lance", copy_video=True))
    assert (result.episodes, result.frames, result.path) == (3, 27, tmp_path / "ll")
    assert sorted(p.name for p in (tmp_path / "ll").iterdir()) == ["frames.lance", "meta", "meta.lance", "videos.lance"]
    assert not list(tmp_path.glob(".ll.robolake-v3*"))  # the v3.0 staging is gone
    again = ingest(str(tmp_path / "ll"), str(tmp_path / "lake2"), IngestConfig(format="lerobot-lance"))
    assert (again.ingested, again.quarantined, again.steps, again.frames) == (3, 0, 27, 27)
    before, after = _episodes(lake), _episodes(str(tmp_path / "lake2"))
    assert sorted(before) == sorted(after)
    for k, (state, action, cells) in before.items():
        assert np.array_equal(state, after[k][0]) and np.array_equal(action, after[k][1])  # bit-exact
        assert cells == after[k][2]  # the recorded packets, copied out and read back as they are
    assert {e["source_format"] for e in Lake.open(str(tmp_path / "lake2")).episodes().to_pylist()} == {"lerobot-lance"}


def test_the_layout_is_lerobot_lancedb_s(tmp_path: Path):
    import lance

    root = tmp_path / "ll"
    export_lerobot(_lake(tmp_path), root, config=ExportConfig(format="lerobot-lance"))
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["storage_format"] == "lance" and info["codebase_version"] == "v3.0"
    frames_ds = lance.dataset(str(root / "frames.lance"))
    names = frames_ds.schema.names
    assert {"observation_state", "action", "timestamp", "episode_index", "index", "task_index"} <= set(names)
    assert str(frames_ds.schema.field("observation_state").type) == "fixed_size_list<item: float>[4]"
    assert frames_ds.count_rows() == info["total_frames"]
    assert frames_ds.to_table(columns=["index"])["index"].to_pylist() == list(range(info["total_frames"]))
    videos = lance.dataset(str(root / "videos.lance"))
    assert {"video_key", "chunk_index", "file_index", "file_size", "moov_offset", "moov_size"} <= set(
        videos.schema.names
    )
    assert str(videos.schema.field("video_bytes").type).startswith("extension<lance.blob.v2")
    row = videos.to_table(columns=["video_key", "file_size", "kf_indices"]).to_pylist()[0]
    assert row["video_key"] == "observation.images.wrist" and row["kf_indices"][0] == 0
    (blob,) = videos.take_blobs("video_bytes", indices=[0])
    data = blob.read()
    assert len(data) == row["file_size"] and data[4:8] == b"ftyp"
    meta = lance.dataset(str(root / "meta.lance")).to_table().to_pylist()
    assert {"info.json", "tasks.parquet", "stats.json"} <= {m["path"] for m in meta}


def test_cli_export_format_lerobot_lance_and_inspect(tmp_path: Path, capsys):
    lake = _lake(tmp_path)
    assert cli_main(["export", lake, str(tmp_path / "ll"), "--format", "lerobot-lance", "--no-progress"]) == 0
    assert "exported 3 episodes" in capsys.readouterr().out
    reader = LeRobotLanceReader(str(tmp_path / "ll"))
    info = reader.inspect()
    assert info["format"] == "lerobot-lance" and info["episodes"] == 3 and info["cameras"] == ["wrist"]
    assert info["keys"]["observation.images.wrist"]["role"] == "camera wrist"
    assert info["tables"]["frames.lance"]["rows"] == 27


def test_a_missing_video_row_is_the_episodes_missing_video(tmp_path: Path):
    import lance

    root = tmp_path / "ll"
    export_lerobot(_lake(tmp_path), root, config=ExportConfig(format="lerobot-lance"))
    lance.dataset(str(root / "videos.lance")).delete("true")
    result = ingest(str(root), str(tmp_path / "lake2"), IngestConfig(format="lerobot-lance"))
    assert (
        result.ingested == 0
        and {r for _, r in result.quarantine}
        and all("videos.lance has no row" in r for _, r in result.quarantine)
    )


def test_a_frames_table_short_of_info_json_is_refused(tmp_path: Path):
    import lance

    root = tmp_path / "ll"
    export_lerobot(_lake(tmp_path), root, config=ExportConfig(format="lerobot-lance"))
    lance.dataset(str(root / "frames.lance")).delete("episode_index = 2")
    with pytest.raises(SourceError, match="declares 27 frames"):
        LeRobotLanceReader(str(root))


def test_a_table_linked_out_of_the_dataset_is_never_opened(tmp_path: Path):
    import shutil

    root = tmp_path / "ll"
    export_lerobot(_lake(tmp_path), root, config=ExportConfig(format="lerobot-lance"))
    shutil.move(str(root / "videos.lance"), str(tmp_path / "elsewhere.lance"))
    (root / "videos.lance").symlink_to(tmp_path / "elsewhere.lance")
    result = ingest(str(root), str(tmp_path / "lake2"), IngestConfig(format="lerobot-lance"))
    assert result.ingested == 0 and result.quarantine
    assert all("videos.lance resolves outside the dataset" in r for _, r in result.quarantine)


@pytest.mark.slow
def test_lerobot_lancedb_loads_an_export(tmp_path: Path):
    """lerobot-lancedb's own LanceDBDataset reads robolake's export (Python 3.12 peer environment)."""
    from robolake.bench.peers import PeerEnv, PeerError, default_cache, ensure_env

    peer = PeerEnv(
        name="lerobot-lancedb",
        version="0.3.1",
        python="3.12",
        requirements=("lerobot[dataset]==0.6.1", "lerobot-lancedb==0.3.1"),
        script="",
        check="import lerobot_lancedb.reader, lancedb",
    )
    try:
        python = ensure_env(peer, default_cache(), log=lambda _: None)
    except (PeerError, OSError) as e:
        pytest.skip(f"no lerobot-lancedb environment: {e}")
    root = tmp_path / "ll"
    export_lerobot(_lake(tmp_path), root, config=ExportConfig(format="lerobot-lance"))
    script = (
        "import sys, json\n"
        "from lerobot_lancedb.reader import LanceDBDataset\n"
        "ds = LanceDBDataset(root=sys.argv[1], return_uint8=True)\n"
        "item = ds[len(ds) - 1]\n"
        "print(json.dumps({'n': len(ds), 'episodes': ds.num_episodes, 'task': item['task'],\n"
        "  'state': item['observation.state'].tolist(), 'shape': list(item['observation.images.wrist'].shape)}))\n"
    )
    proc = subprocess.run([str(python), "-c", script, str(root)], capture_output=True, text=True, timeout=600)
    if proc.returncode and "libtorchcodec" in proc.stderr:
        pytest.skip("LeRobot's torchcodec finds no FFmpeg libraries here (Debian: apt-get install ffmpeg)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (got["n"], got["episodes"], got["shape"]) == (27, 3, [3, 32, 48])
    last = Lake.open(str(tmp_path / "lake"))
    assert got["task"] in {e["task"] for e in last.episodes().to_pylist()}
