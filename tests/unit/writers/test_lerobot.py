"""The LeRobot writer on its own: the files it writes, and a round trip through the LeRobot reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robolake.lake.media.record import decode_runs
from robolake.lake.sources import LeRobotReader
from robolake.writers.lerobot import (
    PARTIAL_SUFFIX,
    V3_EPISODES_PATH,
    EpisodeArrays,
    LeRobotFeatures,
    LeRobotFiles,
    LeRobotWriter,
    write_lerobot_dataset,
)
from robolake.writers.synthetic import SyntheticConfig, synthetic_episodes
from robolake.writers.video import VideoOptions

av = pytest.importorskip("av")

FPS = 10
KEYS = ("observation.images.top", "observation.images.wrist")
# Frames within codec tolerance, on the frames of `_frames` (measured over three seeds: h264 crf 23
# min 30.8 dB, then the reader's JPEG q80 min 29.5 dB; AV1 crf 35 min 24.7 dB).
MIN_PSNR_DB = {"h264": 27.0, "av1": 22.0}


def _frames(rng: np.random.Generator, n: int, h: int = 48, w: int = 64) -> np.ndarray:
    """Smooth gradients with a square that moves: what a codec should keep within a few dB."""
    yy, xx = np.mgrid[0:h, 0:w]
    out = np.empty((n, h, w, 3), np.uint8)
    base = rng.integers(0, 100, 3)
    for t in range(n):
        img = np.stack([base[0] + xx * 2, base[1] + yy * 2, np.full_like(xx, base[2] + 4 * t)], -1)
        x0 = (3 * t) % (w - 12)
        img[10:22, x0 : x0 + 12] = (230, 40, 200)
        out[t] = np.clip(img, 0, 255)
    return out


def _episodes(seed: int = 0) -> list[dict]:
    """Three episodes: lengths 7, 12, 5; the second has two tasks, switching half way."""
    rng = np.random.default_rng(seed)
    eps = []
    for n, tasks in ((7, ["pick the cup"]), (12, ["open the drawer", "pick the cup"]), (5, ["wave"])):
        task_index = (np.arange(n) >= n // 2).astype(np.int64) if len(tasks) == 2 else np.zeros(n, np.int64)
        eps.append(
            {
                "state": rng.normal(size=(n, 3)).astype(np.float32),
                "action": rng.normal(size=(n, 2)).astype(np.float32),
                "timestamps": np.arange(n) / FPS + rng.uniform(0, 1e-6, n),
                "tasks": tasks,
                "task_index": task_index,
                "frames": {k: _frames(rng, n) for k in KEYS},
                "success": n != 5,
            }
        )
    return eps


def _features(**overrides: object) -> LeRobotFeatures:
    base: dict[str, object] = {
        "fps": FPS,
        "robot_type": "test_arm",
        "state_names": ("x", "y", "z"),
        "action_names": ("a", "b"),
        "video_keys": KEYS,
        "timestamp_dtype": "float64",
        "task_columns": ("annotation.human.action.task_description",),
        "done": True,
        "success": True,
    }
    return LeRobotFeatures(**{**base, **overrides})  # type: ignore[arg-type]


def _write(root: Path, episodes: list[dict], files: LeRobotFiles | None = None, **features: object) -> Path:
    with LeRobotWriter(root, _features(**features), files) as writer:
        for ep in episodes:
            writer.add_episode(**ep)
        return writer.finish(meta={"modality.json": {"state": {}}})


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    eps = _episodes()
    return _write(tmp_path_factory.mktemp("w") / "ds", eps), eps


def test_info_json(written: tuple[Path, list[dict]]) -> None:
    root, eps = written
    info = json.loads((root / "meta" / "info.json").read_text())
    assert (info["codebase_version"], info["robot_type"], info["fps"]) == ("v3.0", "test_arm", FPS)
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, 24, 3)
    assert (info["chunks_size"], info["data_files_size_in_mb"], info["video_files_size_in_mb"]) == (1000, 100, 200)
    assert info["splits"] == {"train": "0:3"}
    feats = info["features"]
    assert list(feats) == [
        *KEYS,
        "observation.state",
        "action",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
        "annotation.human.action.task_description",
        "next.done",
        "next.success",
    ]
    assert feats["observation.state"] == {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"], "fps": FPS}
    assert feats["timestamp"]["dtype"] == "float64" and feats["next.success"]["dtype"] == "bool"
    assert feats[KEYS[0]]["shape"] == [48, 64, 3]
    assert feats[KEYS[0]]["info"] == {
        "video.height": 48,
        "video.width": 64,
        "video.codec": "h264",
        "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False,
        "video.fps": FPS,
        "video.channels": 3,
        "has_audio": False,
    }
    assert json.loads((root / "meta" / "modality.json").read_text()) == {"state": {}}
    assert not root.with_name(root.name + PARTIAL_SUFFIX).exists()


def test_episodes_tasks_and_data_rows(written: tuple[Path, list[dict]]) -> None:
    root, eps = written
    rows = pq.read_table(root / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)).to_pylist()
    assert [r["tasks"] for r in rows] == [e["tasks"] for e in eps]
    assert [(r["dataset_from_index"], r["dataset_to_index"]) for r in rows] == [(0, 7), (7, 19), (19, 24)]
    for key in KEYS:
        assert [(r[f"videos/{key}/from_timestamp"], r[f"videos/{key}/to_timestamp"]) for r in rows] == [
            (0.0, 0.7),
            (0.7, 1.9),
            (1.9, 2.4),
        ]
    tasks = pq.read_table(root / "meta" / "tasks.parquet").to_pandas()
    assert tasks.index.name == "task"
    assert list(tasks.index) == ["pick the cup", "open the drawer", "wave"]  # first appearance
    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert data.schema.field("observation.state").type == pa.list_(pa.float32(), 3)
    assert data["task_index"].to_pylist()[7:19] == [1] * 6 + [0] * 6
    assert data["annotation.human.action.task_description"].equals(data["task_index"])
    assert data["next.done"].to_pylist() == [i in (6, 18, 23) for i in range(24)]
    assert data["next.success"].to_pylist() == [i in (6, 18) for i in range(24)]


def test_stats_are_exact(written: tuple[Path, list[dict]]) -> None:
    root, eps = written
    stats = json.loads((root / "meta" / "stats.json").read_text())
    state = np.concatenate([e["state"] for e in eps]).astype(np.float64)
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats["observation.state"]["std"], state.std(0), rtol=1e-12)
    for q in ("q01", "q10", "q50", "q90", "q99"):
        np.testing.assert_allclose(stats["observation.state"][q], np.quantile(state, int(q[1:]) / 100, axis=0))
    assert stats["observation.state"]["count"] == [24]
    assert stats["task_index"]["max"] == [2.0]
    pixels = np.concatenate([e["frames"][KEYS[1]] for e in eps]).reshape(-1, 3)
    img = stats[KEYS[1]]
    assert np.asarray(img["mean"]).shape == (3, 1, 1) and img["count"] == [24]
    np.testing.assert_allclose(np.asarray(img["mean"]).reshape(3), pixels.mean(0) / 255, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(img["std"]).reshape(3), pixels.std(0) / 255, rtol=1e-9)
    np.testing.assert_array_equal(np.asarray(img["min"]).reshape(3), pixels.min(0) / 255)
    np.testing.assert_array_equal(
        np.asarray(img["q50"]).reshape(3), np.quantile(pixels, 0.5, axis=0, method="inverted_cdf") / 255
    )
    rows = pq.read_table(root / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)).to_pylist()
    np.testing.assert_allclose(rows[1]["stats/action/mean"], eps[1]["action"].astype(np.float64).mean(0), rtol=1e-12)
    assert rows[2]["stats/observation.state/count"] == [5]


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_round_trip_through_the_lerobot_reader(tmp_path: Path, version: str) -> None:
    eps = _episodes(seed=1)
    timestamp_dtype = "float64" if version == "v3.0" else "float32"
    root = _write(tmp_path / "ds", eps, LeRobotFiles(version=version), timestamp_dtype=timestamp_dtype)
    reader = LeRobotReader(str(root))
    refs = reader.discover()
    assert [r.episode_index for r in refs] == [0, 1, 2]
    for ref, ep in zip(refs, eps, strict=True):
        tab = reader.read_tabular(ref)
        np.testing.assert_array_equal(tab.state, ep["state"])
        np.testing.assert_array_equal(tab.action, ep["action"])
        np.testing.assert_array_equal(tab.timestamps, ep["timestamps"].astype(timestamp_dtype))
        # The reader numbers an episode's tasks in the dataset's order; each step's task is the same.
        assert sorted(tab.tasks) == sorted(ep["tasks"])
        assert [tab.tasks[i] for i in tab.task_index] == [ep["tasks"][i] for i in ep["task_index"]]
        frames = {f.camera: f for f in reader.read_frames(tab)}
        assert sorted(frames) == ["top", "wrist"]
        for key in KEYS:
            got = frames[key.removeprefix("observation.images.")]
            assert len(got.images) == len(ep["state"])
            want = ep["frames"][key]
            stream = got.stream  # the record: the mp4's own packets, decoded through their stream
            decoded = [
                f.to_ndarray(format="rgb24")
                for _, f in decode_runs(stream, stream.runs(range(len(got.images))), got.images.__getitem__)
            ]
            for t, frame in enumerate(decoded):
                p = _psnr(frame, want[t])
                assert p >= MIN_PSNR_DB["h264"], f"{version} {key} step {t}: {p:.1f} dB"
                assert all(p > _psnr(frame, want[u]) for u in (t - 1, t + 1) if 0 <= u < len(want)), "frames shifted"


def test_files_roll_over_by_episodes_and_by_size(tmp_path: Path) -> None:
    eps = _episodes() + _episodes(seed=2)
    root = _write(tmp_path / "count", eps, LeRobotFiles(episodes_per_file=2, chunks_size=2))
    rows = pq.read_table(root / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)).to_pylist()
    expected = [(0, 0), (0, 0), (0, 1), (0, 1), (1, 0), (1, 0)]
    assert [(r["data/chunk_index"], r["data/file_index"]) for r in rows] == expected
    assert [(r[f"videos/{KEYS[0]}/chunk_index"], r[f"videos/{KEYS[0]}/file_index"]) for r in rows] == expected
    assert [r[f"videos/{KEYS[0]}/from_timestamp"] for r in rows][2:4] == [0.0, 0.5]  # 5 frames into file-001
    assert (root / f"videos/{KEYS[1]}/chunk-001/file-000.mp4").is_file()
    small = _write(tmp_path / "size", eps[:3], LeRobotFiles(data_files_size_in_mb=1e-4, video_files_size_in_mb=1e-4))
    rows = pq.read_table(small / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)).to_pylist()
    assert [r["data/file_index"] for r in rows] == [0, 1, 2]
    assert [r[f"videos/{KEYS[0]}/file_index"] for r in rows] == [0, 1, 2]
    assert [r[f"videos/{KEYS[0]}/from_timestamp"] for r in rows] == [0.0, 0.0, 0.0]
    assert len(list((small / "data").rglob("*.parquet"))) == 3


def test_tasks_given_first_keep_their_order(tmp_path: Path) -> None:
    eps = _episodes()
    with LeRobotWriter(tmp_path / "ds", _features(), tasks=["wave", "pick the cup"]) as w:
        for ep in eps:
            w.add_episode(**ep)
        assert w.tasks == ["wave", "pick the cup", "open the drawer"]
        assert (w.num_episodes, w.num_frames) == (3, 24)
        root = w.finish()
    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert data["task_index"].to_pylist()[:7] == [1] * 7 and data["task_index"].to_pylist()[-5:] == [0] * 5


def test_bad_input_is_refused_and_abort_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine").write_text("x")
    with pytest.raises(FileExistsError, match="not empty"):
        LeRobotWriter(tmp_path / "busy", _features())
    assert (tmp_path / "busy" / "mine").read_text() == "x"
    ep = _episodes()[0]
    partial = tmp_path / f"ds{PARTIAL_SUFFIX}"
    with pytest.raises(ValueError, match="one size"):
        with LeRobotWriter(tmp_path / "ds", _features()) as w:
            w.add_episode(**ep)
            assert partial.is_dir()
            w.add_episode(**{**ep, "frames": {KEYS[0]: ep["frames"][KEYS[0]][:, :32], KEYS[1]: ep["frames"][KEYS[1]]}})
    assert not partial.exists() and not (tmp_path / "ds").exists()
    w = LeRobotWriter(tmp_path / "ds", _features())
    with pytest.raises(ValueError, match="6 frames for 7 steps"):
        w.add_episode(**{**ep, "frames": {KEYS[0]: ep["frames"][KEYS[0]][:6], KEYS[1]: ep["frames"][KEYS[1]]}})
    with pytest.raises(ValueError, match="needs success"):
        w.add_episode(**{**ep, "success": None})
    with pytest.raises(ValueError, match="indices into its 1 tasks"):
        w.add_episode(**{**ep, "task_index": np.ones(7, np.int64)})
    with pytest.raises(ValueError, match=r"must be \[T, 3\]"):
        w.add_episode(**{**ep, "state": ep["state"][:, :2]})
    w.abort()
    assert not partial.exists()
    with pytest.raises(ValueError, match="version must be one of"):
        LeRobotFiles(version="v9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="file sizes must be > 0 MB"):
        LeRobotFiles(data_files_size_in_mb=0)


# --- the in-memory path -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["h264", "av1"])
def test_in_memory_pixels_round_trip(tmp_path: Path, codec: str) -> None:
    rng = np.random.default_rng(0)
    frames = _frames(rng, 17)
    ep = EpisodeArrays(
        state=rng.normal(size=(17, 3)),
        action=rng.normal(size=(17, 3)),
        task="push the cup",
        frames={"observation.images.cam": frames},
    )
    root = write_lerobot_dataset(tmp_path / "ds", episodes=[ep], fps=30, robot_type="test", video=codec)
    with av.open(str(root / "videos/chunk-000/observation.images.cam/episode_000000.mp4")) as c:
        decoded = [(f.to_ndarray(format="rgb24"), float(f.time), f.key_frame) for f in c.decode(video=0)]
    assert len(decoded) == 17 and decoded[0][2]
    np.testing.assert_allclose([d[1] for d in decoded], np.arange(17) / 30, atol=1e-9)
    assert min(_psnr(d[0], f) for d, f in zip(decoded, frames, strict=True)) >= MIN_PSNR_DB[codec]


def test_in_memory_v20_and_chunking(tmp_path: Path) -> None:
    eps = synthetic_episodes(SyntheticConfig.tiny(episodes_per_embodiment=5), "single_arm_7dof")
    v20 = write_lerobot_dataset(tmp_path / "v20", episodes=eps, fps=20, robot_type="r", version="v2.0", chunks_size=2)
    info = json.loads((v20 / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v2.0" and info["total_chunks"] == 3 and info["total_videos"] == 5
    assert "video_info" in info["features"]["observation.images.front"]
    assert not (v20 / "meta" / "episodes_stats.jsonl").exists()
    assert (v20 / "data/chunk-002/episode_000004.parquet").is_file()
    v3 = write_lerobot_dataset(
        tmp_path / "v3",
        episodes=eps,
        fps=20,
        robot_type="r",
        version="v3.0",
        episodes_per_file=1,
        chunks_size=2,
        video=VideoOptions(codec="h264", gop=5),
    )
    assert (v3 / "data/chunk-002/file-000.parquet").is_file()
    assert (v3 / "videos/observation.images.front/chunk-001/file-001.mp4").is_file()
    with pytest.raises(FileExistsError, match="already holds"):
        write_lerobot_dataset(v3, episodes=eps, fps=20, robot_type="r")


def test_in_memory_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="same T"):
        EpisodeArrays(state=np.zeros((4, 2)), action=np.zeros((5, 2)), task="x")
    odd = EpisodeArrays(
        state=np.zeros((2, 2)), action=np.zeros((2, 2)), task="x", frames={"c": np.zeros((2, 5, 4, 3), np.uint8)}
    )
    with pytest.raises(ValueError, match="needs even frame sizes"):
        write_lerobot_dataset(tmp_path / "odd", episodes=[odd], fps=20, robot_type="r")
    assert not (tmp_path / "odd").exists() and not (tmp_path / f"odd{PARTIAL_SUFFIX}").exists()
    ep = EpisodeArrays(state=np.zeros((2, 2)), action=np.zeros((2, 2)), task="x")
    with pytest.raises(ValueError, match="version must be one of"):
        write_lerobot_dataset(tmp_path / "a", episodes=[ep], fps=20, robot_type="r", version="v9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 dims but 3 names"):
        write_lerobot_dataset(tmp_path / "a", episodes=[ep], fps=20, robot_type="r", state_names=["a", "b", "c"])
    assert not (tmp_path / "a").exists()
