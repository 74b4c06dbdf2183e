"""The synthetic generator writes real, readable LeRobot datasets, the same ones for the same seed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from robolake.schemas.embodiment import EmbodimentSpec
from robolake.writers.lerobot import V3_EPISODES_PATH
from robolake.writers.synthetic import (
    EMBODIMENT_NAMES,
    SyntheticConfig,
    generate_synthetic,
    make_instruction,
    synthetic_episodes,
)

av = pytest.importorskip("av")

DATA_COLUMNS = [
    "observation.state",
    "action",
    "timestamp",
    "frame_index",
    "episode_index",
    "index",
    "task_index",
]
WIDTHS = {"single_arm_7dof": (7, 1), "bimanual_14dof": (14, 3), "humanoid_44dof": (44, 1)}


def _decode(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frames uint8 [N, H, W, 3], timestamps [N], is-keyframe [N]) of an mp4."""
    with av.open(str(path)) as container:
        decoded = [(f.to_ndarray(format="rgb24"), float(f.time), f.key_frame) for f in container.decode(video=0)]
    frames, times, keys = zip(*decoded, strict=True)
    return np.stack(frames), np.array(times), np.array(keys)


def _info(root: Path) -> dict:
    return json.loads((root / "meta" / "info.json").read_text())


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def v21(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return generate_synthetic(tmp_path_factory.mktemp("v21"), SyntheticConfig.tiny(seed=3))


@pytest.fixture(scope="module")
def v30(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    cfg = SyntheticConfig.tiny(version="v3.0", codec="av1", episodes_per_embodiment=3, episodes_per_file=2)
    return generate_synthetic(tmp_path_factory.mktemp("v30"), cfg)


# --- v2.1 / h264 -------------------------------------------------------------------------


def test_v21_layout_files_exist_and_parse(v21: list[Path]) -> None:
    assert [p.name for p in v21] == list(EMBODIMENT_NAMES)
    for root in v21:
        info = _info(root)
        assert info["codebase_version"] == "v2.1"
        assert info["data_path"] == "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
        assert info["video_path"] == "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
        dim, cams = WIDTHS[root.name]
        video_keys = [k for k, f in info["features"].items() if f["dtype"] == "video"]
        assert len(video_keys) == cams and info["total_videos"] == cams * info["total_episodes"]
        assert info["features"]["observation.state"]["shape"] == [dim]
        assert info["features"][video_keys[0]]["info"]["video.codec"] == "h264"
        for ep in range(info["total_episodes"]):
            table = pq.read_table(root / info["data_path"].format(episode_chunk=0, episode_index=ep))
            assert table.column_names == DATA_COLUMNS
            assert table.schema.field("observation.state").type == pa.list_(pa.float32())
            assert table.schema.field("timestamp").type == pa.float32()
            for key in video_keys:
                assert (root / info["video_path"].format(episode_chunk=0, video_key=key, episode_index=ep)).is_file()
        spec = EmbodimentSpec.from_modality_json(
            json.loads((root / "meta" / "modality.json").read_text()),
            tag=root.name,
            state_dim=dim,
            action_dim=dim,
        )
        assert [spec.video_key(c) for c in spec.cameras] == video_keys
        stats = _jsonl(root / "meta" / "episodes_stats.jsonl")
        assert len(stats) == info["total_episodes"]
        assert np.array(stats[0]["stats"][video_keys[0]]["mean"]).shape == (3, 1, 1)
        assert set(json.loads((root / "meta" / "stats.json").read_text())["action"]) >= {
            "min",
            "max",
            "mean",
            "std",
            "q01",
            "q99",
        }


def test_v21_row_counts_match_info(v21: list[Path]) -> None:
    for root in v21:
        info = _info(root)
        episodes = _jsonl(root / "meta" / "episodes.jsonl")
        tasks = _jsonl(root / "meta" / "tasks.jsonl")
        tables = [pq.read_table(p) for p in sorted((root / "data").rglob("*.parquet"))]
        assert len(tables) == len(episodes) == info["total_episodes"]
        assert sum(t.num_rows for t in tables) == info["total_frames"] == sum(e["length"] for e in episodes)
        assert len(tasks) == info["total_tasks"]
        index = np.concatenate([t.column("index").to_numpy() for t in tables])
        np.testing.assert_array_equal(index, np.arange(info["total_frames"]))
        for ep, table in zip(episodes, tables, strict=True):
            assert table.num_rows == ep["length"]
            assert 20 <= ep["length"] <= 40
            assert tasks[table.column("task_index")[0].as_py()]["task"] == ep["tasks"][0]


def test_v21_decoded_frames_equal_rows(v21: list[Path]) -> None:
    for root in v21:
        info = _info(root)
        fps = info["fps"]
        for ep in _jsonl(root / "meta" / "episodes.jsonl"):
            for key, ft in info["features"].items():
                if ft["dtype"] != "video":
                    continue
                path = root / info["video_path"].format(
                    episode_chunk=0, video_key=key, episode_index=ep["episode_index"]
                )
                frames, times, _ = _decode(path)
                assert frames.shape == (ep["length"], *ft["shape"])
                np.testing.assert_allclose(times, np.arange(ep["length"]) / fps, atol=1e-9)


# --- v3.0 / av1 --------------------------------------------------------------------------


def test_v30_layout(v30: list[Path]) -> None:
    import pandas as pd

    for root in v30:
        info = _info(root)
        assert info["codebase_version"] == "v3.0"
        assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
        assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
        assert "total_chunks" not in info and "total_videos" not in info
        assert info["data_files_size_in_mb"] > 0 and info["video_files_size_in_mb"] > 0
        tasks = pd.read_parquet(root / "meta" / "tasks.parquet")
        assert list(tasks.columns) == ["task_index"] and len(tasks) == info["total_tasks"]
        eps = pq.read_table(root / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)).to_pylist()
        assert len(eps) == info["total_episodes"] == 3
        assert [e["data/file_index"] for e in eps] == [0, 0, 1]  # two episodes share file-000
        data = [pq.read_table(p) for p in sorted((root / "data").rglob("*.parquet"))]
        assert len(data) == 2 and sum(t.num_rows for t in data) == info["total_frames"]
        assert data[0].column_names == DATA_COLUMNS
        frames_so_far = 0
        for e in eps:
            assert e["dataset_from_index"] == frames_so_far
            frames_so_far = e["dataset_to_index"]
            assert e["dataset_to_index"] - e["dataset_from_index"] == e["length"]
            assert e["tasks"][0] in tasks.index
            assert e["stats/observation.state/count"] == [e["length"]]
            table = pq.read_table(
                root / info["data_path"].format(chunk_index=e["data/chunk_index"], file_index=e["data/file_index"])
            )
            rows = table.filter(pc.equal(table.column("episode_index"), e["episode_index"]))
            assert rows.num_rows == e["length"]
            assert rows.column("index").to_pylist() == list(range(e["dataset_from_index"], e["dataset_to_index"]))
        assert frames_so_far == info["total_frames"]


def test_v30_av1_timestamps_select_each_episode(v30: list[Path]) -> None:
    for root in v30:
        info = _info(root)
        eps = pq.read_table(root / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)).to_pylist()
        for key, ft in info["features"].items():
            if ft["dtype"] != "video":
                continue
            assert ft["info"]["video.codec"] == "av1"
            decoded: dict[tuple[int, int], tuple] = {}
            for e in eps:
                loc = (e[f"videos/{key}/chunk_index"], e[f"videos/{key}/file_index"])
                if loc not in decoded:
                    decoded[loc] = _decode(
                        root / info["video_path"].format(video_key=key, chunk_index=loc[0], file_index=loc[1])
                    )
                _, times, keyframes = decoded[loc]
                lo, hi = e[f"videos/{key}/from_timestamp"], e[f"videos/{key}/to_timestamp"]
                inside = np.flatnonzero((times >= lo - 1e-4) & (times < hi - 1e-4))
                assert len(inside) == e["length"]
                assert keyframes[inside[0]], "each episode starts on a keyframe"
            total = sum(len(d[1]) for d in decoded.values())
            assert total == info["total_frames"]


# --- synthetic content -------------------------------------------------------------------


def _assert_same_dataset(a: Path, b: Path) -> None:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files_a:
        if rel.suffix == ".parquet":
            assert pq.read_table(a / rel).equals(pq.read_table(b / rel)), rel
        elif rel.suffix == ".mp4":
            np.testing.assert_array_equal(_decode(a / rel)[0], _decode(b / rel)[0], err_msg=str(rel))
        else:
            assert (a / rel).read_text() == (b / rel).read_text(), rel


def test_same_seed_same_dataset(tmp_path: Path, v21: list[Path], v30: list[Path]) -> None:
    # Regenerating after other encoders ran (the v30 fixture) catches encoders whose output
    # depends on heap contents; x264's mbtree did (see writers/video.py).
    for a, b in zip(v21, generate_synthetic(tmp_path / "h264", SyntheticConfig.tiny(seed=3)), strict=True):
        _assert_same_dataset(a, b)
    cfg = SyntheticConfig.tiny(
        version="v3.0",
        codec="av1",
        episodes_per_embodiment=3,
        episodes_per_file=2,
        embodiments=("bimanual_14dof",),
    )
    (again,) = generate_synthetic(tmp_path / "av1", cfg)
    _assert_same_dataset(v30[EMBODIMENT_NAMES.index("bimanual_14dof")], again)
    other = synthetic_episodes(SyntheticConfig.tiny(seed=4), "single_arm_7dof")
    same = synthetic_episodes(SyntheticConfig.tiny(seed=3), "single_arm_7dof")
    assert not np.array_equal(other[0].state[:5], same[0].state[:5])


def test_trajectories_finite_smooth_and_learnable() -> None:
    cfg = SyntheticConfig(episodes_per_embodiment=4, image_size=32)
    for name in EMBODIMENT_NAMES:
        for ep in synthetic_episodes(cfg, name):
            s, a = ep.state, ep.action
            assert np.isfinite(s).all() and np.isfinite(a).all()
            assert 40 <= ep.length <= 160
            assert np.abs(np.diff(s, axis=0)).max() < 0.15  # per step, at 20 fps
            assert np.abs(np.diff(s, n=2, axis=0)).max() < 0.02
            offset = a[:-1] - s[1:]  # action = next state + a fixed small offset
            np.testing.assert_allclose(offset, np.broadcast_to(offset[0], offset.shape), atol=1e-6)
            assert np.abs(offset).max() <= 0.011
            frames = next(iter(ep.frames.values()))
            assert frames.shape == (ep.length, 32, 32, 3)
            assert np.abs(frames[-1].astype(int) - frames[0].astype(int)).sum() > 0  # frames follow the state


def test_instructions_vary_in_length() -> None:
    rng = np.random.default_rng(0)
    lengths = [len(make_instruction(rng).encode()) for _ in range(500)]
    assert min(lengths) >= 5 and max(lengths) <= 120
    assert min(lengths) < 15 and max(lengths) > 100


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="min_length"):
        SyntheticConfig(min_length=50, max_length=10)
    with pytest.raises(ValueError, match="image_size"):
        SyntheticConfig(image_size=33)
    with pytest.raises(ValueError, match="embodiments"):
        SyntheticConfig(embodiments=("quadruped",))
    with pytest.raises(ValueError, match="version"):
        SyntheticConfig(version="v1.6")  # type: ignore[arg-type]
    assert SyntheticConfig.tiny().episodes_per_embodiment == 2


def test_video_pool_copies_clips_and_keeps_the_rows(tmp_path: Path) -> None:
    """With `video_pool`, the parquet rows are those of the drawn dataset and every episode's
    video decodes to one frame a step, copied from a clip of its length (the same clip, the
    same packets)."""
    from robolake.lake.sources.lerobot.reader import LeRobotReader

    base = {
        "version": "v3.0",
        "episodes_per_embodiment": 5,
        "episodes_per_file": 5,
        "embodiments": ("single_arm_7dof",),
    }
    (drawn,) = generate_synthetic(tmp_path / "drawn", SyntheticConfig.tiny(min_length=20, max_length=21, **base))
    (pooled,) = generate_synthetic(
        tmp_path / "pooled", SyntheticConfig.tiny(min_length=20, max_length=21, video_pool=1, **base)
    )
    rows = [pq.read_table(p / "data" / "chunk-000" / "file-000.parquet") for p in (drawn, pooled)]
    assert rows[0].equals(rows[1])
    reader = LeRobotReader(str(pooled))
    by_length: dict[int, tuple[bytes, ...]] = {}
    for ref in reader.discover():
        ep = reader.read_tabular(ref)
        (video,) = reader.read_frames(ep)  # decodes every packet (ingest's check)
        assert len(video.images) == ep.num_steps
        assert by_length.setdefault(ep.num_steps, video.images) == video.images
    with pytest.raises(ValueError, match="video_pool"):
        SyntheticConfig(video_pool=-1)
