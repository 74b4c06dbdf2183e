"""Export to LeRobot v3.0: the layout LeRobot expects, and a re-ingest that gives the same lake.

The round trip is the contract: ingesting an export again gives the same state, action,
timestamps, tasks and success exactly, and every frame within video codec tolerance: PSNR
against the lake's frame >= MIN_PSNR_DB = 26 dB on the tiny synthetic data. Its 32x32 frames of
sharp coloured discs are the worst case for h264 in yuv420p (chroma at half resolution); measured
at the default crf 23: min 27.3, median 29.9 dB (crf 18: min 30.2, median 32.4). The real 256x256
GR00T frames are held to a tighter bound in tests/integration/test_export_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from robolake.lake import EpisodeFilter, Lake
from robolake.lake.export import ExportConfig, export_lerobot
from robolake.lake.intake.ingest import ingest
from robolake.lake.lerobot_layout import task_order as _task_order
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

MIN_PSNR_DB = 26.0
LEROBOT_TOLERANCE_S = 1e-4  # LeRobotDataset's default tolerance_s for video frame lookup


# --- checks shared with tests/integration/test_export_real.py ---------------------------------


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def episode_content(lake: Lake, episode: dict[str, Any]) -> dict[str, Any]:
    steps = lake.to_arrow("steps", where=EpisodeFilter(episode_ids=[episode["episode_id"]])).sort_by("step_index")
    tasks = json.loads(episode["metadata"]).get("tasks") or [episode["task"]]
    ti = steps["task_index"].to_numpy()
    return {
        "state": np.stack(steps["state"].to_numpy(zero_copy_only=False)),
        "action": np.stack(steps["action"].to_numpy(zero_copy_only=False)),
        "timestamp": steps["timestamp"].to_numpy(),
        "task_index": ti,
        "tasks": list(tasks),
        "step_tasks": [tasks[i] for i in ti],
    }


def exported_pairs(lake: Lake, lake2: Lake, root: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(lake episode, re-ingested episode) of one exported dataset, in export order."""
    ids = json.loads((root / "meta" / "robolake_export.json").read_text())["episode_ids"]
    back = {e["source_episode_index"]: e for e in lake2.episodes().to_pylist() if e["source_uri"] == str(root)}
    assert sorted(back) == list(range(len(ids))), f"re-ingest of {root} is missing episodes"
    first = {e["episode_id"]: e for e in lake.episodes(EpisodeFilter(episode_ids=ids)).to_pylist()}
    return [(first[eid], back[i]) for i, eid in enumerate(ids)]


def assert_round_trip(
    lake: Lake, lake2: Lake, root: Path, *, frame_steps: int | None = None, min_psnr: float = MIN_PSNR_DB
) -> float:
    """Same numbers and tasks exactly, frames within MIN_PSNR_DB; returns the worst frame PSNR."""
    frames1, frames2 = lake.frames(), lake2.frames()
    worst = float("inf")
    for a, b in exported_pairs(lake, lake2, root):
        assert (b["embodiment"], b["num_steps"], b["task"], b["success"], b["fps"]) == (
            a["embodiment"],
            a["num_steps"],
            a["task"],
            a["success"],
            a["fps"],
        )
        assert b["cameras"] == a["cameras"]
        ca, cb = episode_content(lake, a), episode_content(lake2, b)
        np.testing.assert_array_equal(cb["state"], ca["state"])
        np.testing.assert_array_equal(cb["action"], ca["action"])
        np.testing.assert_array_equal(cb["timestamp"], ca["timestamp"])
        assert cb["tasks"] == ca["tasks"] and cb["step_tasks"] == ca["step_tasks"]
        np.testing.assert_array_equal(cb["task_index"], ca["task_index"])
        n = a["num_steps"]
        steps = range(n) if frame_steps is None else np.linspace(0, n - 1, frame_steps).astype(int)
        for cam in a["cameras"]:
            for t in steps:
                p = psnr(frames1.read(a["episode_id"], cam, int(t)), frames2.read(b["episode_id"], cam, int(t)))
                assert p >= min_psnr, f"{a['episode_id']} {cam} step {t}: PSNR {p:.1f} dB < {min_psnr}"
                worst = min(worst, p)
    return worst


def _frame_times(path: Path) -> np.ndarray:
    """Presentation times of every frame of an mp4, from its packets (no decode)."""
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        base = stream.time_base  # read while the container is open
        assert base is not None, f"{path} has no time base"
        pts = sorted(p.pts for p in c.demux(stream) if p.pts is not None)
    return np.array([float(t * base) for t in pts])


def _decode_some(path: Path, wanted: set[int]) -> dict[int, np.ndarray]:
    """Frames number `wanted` of an mp4, decoded in one pass."""
    out = {}
    with av.open(str(path)) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i in wanted:
                out[i] = f.to_ndarray(format="rgb24")
            if len(out) == len(wanted):
                break
    return out


def check_layout(root: Path, lake: Lake, *, min_psnr: float = MIN_PSNR_DB) -> dict[str, Any]:
    """The v3.0 files are where info.json says, index ranges and video segments are right."""
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    meta_files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    rows = [r for f in meta_files for r in pq.read_table(f).to_pylist()]
    assert [r["episode_index"] for r in rows] == list(range(info["total_episodes"]))
    assert sum(r["length"] for r in rows) == info["total_frames"]
    tasks = pq.read_table(root / "meta" / "tasks.parquet").to_pandas()
    assert len(tasks) == info["total_tasks"] and list(tasks["task_index"]) == list(range(len(tasks)))
    task_of = dict(zip(tasks["task_index"], tasks.index, strict=True))
    ids = json.loads((root / "meta" / "robolake_export.json").read_text())["episode_ids"]
    video_keys = [k for k, v in info["features"].items() if v["dtype"] == "video"]
    fps = float(info["fps"])
    data_cache: dict[Path, Any] = {}
    times_of: dict[Path, np.ndarray] = {}
    held: dict[Path, int] = {}
    lookups: dict[Path, list[tuple[int, str, str, int, int]]] = {}  # file -> (frame, episode, camera, step, far step)
    expected_from = 0
    for r in rows:
        # dataset_{from,to}_index are contiguous and select exactly the episode's parquet rows.
        assert (r["dataset_from_index"], r["dataset_to_index"]) == (expected_from, expected_from + r["length"])
        expected_from = r["dataset_to_index"]
        path = root / info["data_path"].format(chunk_index=r["data/chunk_index"], file_index=r["data/file_index"])
        assert path.is_file(), f"info.json data_path does not resolve for episode {r['episode_index']}: {path}"
        table = data_cache.setdefault(path, pq.read_table(path))
        mine = table.filter(pc.equal(table["episode_index"], r["episode_index"]))
        np.testing.assert_array_equal(
            mine["index"].to_numpy(), np.arange(r["dataset_from_index"], r["dataset_to_index"])
        )
        np.testing.assert_array_equal(mine["frame_index"].to_numpy(), np.arange(r["length"]))
        assert sorted({task_of[t] for t in mine["task_index"].to_pylist()}) == sorted(r["tasks"])
        ts = mine["timestamp"].to_numpy()
        n = r["length"]
        for key in video_keys:
            vpath = root / info["video_path"].format(
                video_key=key, chunk_index=r[f"videos/{key}/chunk_index"], file_index=r[f"videos/{key}/file_index"]
            )
            assert vpath.is_file(), f"info.json video_path does not resolve: {vpath}"
            times = times_of.setdefault(vpath, _frame_times(vpath))
            held[vpath] = held.get(vpath, 0) + n
            lo, hi = r[f"videos/{key}/from_timestamp"], r[f"videos/{key}/to_timestamp"]
            inside = (times >= lo - 0.5 / fps) & (times < hi - 0.5 / fps)
            assert int(inside.sum()) == n, f"{vpath} [{lo}, {hi}) holds {inside.sum()} frames, the episode {n}"
            for k in sorted({0, n // 3, n - 1}):
                # LeRobot's lookup: the frame nearest from_timestamp + timestamp, within tolerance.
                j = int(np.argmin(np.abs(times - (lo + ts[k]))))
                assert abs(times[j] - (lo + ts[k])) < LEROBOT_TOLERANCE_S
                cam = key.removeprefix("observation.images.")
                lookups.setdefault(vpath, []).append((j, ids[r["episode_index"]], cam, k, (k + n // 2) % n))
    # Every frame of every file belongs to exactly one episode segment.
    assert held == {p: len(t) for p, t in times_of.items()}
    frames = lake.frames()
    for vpath, checks in lookups.items():
        decoded = _decode_some(vpath, {c[0] for c in checks})
        for j, eid, cam, k, far_k in checks:
            want = frames.read(eid, cam, k).astype(np.int16)
            assert psnr(decoded[j], want) >= min_psnr, f"{vpath} frame {j} is not step {k} of {eid}"
            if far_k != k:  # the segment is aligned: step k matches better than a step far away
                far = frames.read(eid, cam, far_k).astype(np.int16)
                assert np.abs(decoded[j] - want).mean() < np.abs(decoded[j] - far).mean()
    for table in data_cache.values():
        assert set(table.column_names) == {k for k, v in info["features"].items() if v["dtype"] != "video"}
    return info


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Synthetic data of three embodiments in two ingests (lake versions 2 and 3), exported whole."""
    root = tmp_path_factory.mktemp("export")
    cfg = SyntheticConfig.tiny(episodes_per_embodiment=3, version="v2.1")
    generate_synthetic(root / "syn", cfg)
    ingest(str(root / "syn" / "single_arm_7dof"), str(root / "lake"))
    ingest(str(root / "syn"), str(root / "lake"))
    lake = Lake.open(str(root / "lake"))
    results = export_lerobot(lake, root / "out")
    back = ingest(str(root / "out"), str(root / "lake2"))
    return root, lake, results, back, Lake.open(str(root / "lake2"))


def test_one_dataset_per_embodiment(exported):
    root, lake, results, back, _ = exported
    assert [r.embodiment for r in results] == ["bimanual_14dof", "humanoid_44dof", "single_arm_7dof"]
    assert [r.path for r in results] == [root / "out" / r.embodiment for r in results]
    assert all(r.episodes == 3 and r.lake_version == 3 for r in results)
    assert sum(r.frames for r in results) == lake.count("steps")
    assert (back.ingested, back.quarantined) == (9, 0)
    assert not list((root / "out").glob("*.robolake-partial"))


def test_round_trip_is_exact(exported):
    root, lake, results, _, lake2 = exported
    for r in results:
        assert assert_round_trip(lake, lake2, r.path) >= MIN_PSNR_DB


def test_layout_is_what_lerobot_reads(exported):
    _, lake, results, _, _ = exported
    for r in results:
        info = check_layout(r.path, lake)
        spec = lake.embodiments()[r.embodiment]
        assert info["robot_type"] == r.embodiment
        assert info["features"]["observation.state"]["shape"] == [spec.state_dim]
        assert info["features"]["timestamp"]["dtype"] == "float64"
        assert sorted(k for k, v in info["features"].items() if v["dtype"] == "video") == sorted(
            f"observation.images.{c}" for c in spec.cameras
        )


def test_modality_and_stats(exported):
    _, lake, results, _, lake2 = exported
    for r in results:
        spec = lake.embodiments()[r.embodiment]
        modality = json.loads((r.path / "meta" / "modality.json").read_text())
        assert modality == spec.to_modality_json()  # synthetic specs map the task to task_index
        assert lake2.embodiments()[r.embodiment].to_modality_json() == modality
        stats = json.loads((r.path / "meta" / "stats.json").read_text())
        steps = lake.to_arrow("steps", columns=["state"], where=EpisodeFilter(embodiment=r.embodiment))
        state = np.stack(steps["state"].to_numpy(zero_copy_only=False)).astype(np.float64)
        np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(0), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(stats["observation.state"]["q99"], np.quantile(state, 0.99, axis=0), rtol=1e-9)
        assert stats["observation.state"]["count"] == [len(state)]
        cam = spec.cameras[0]
        eids = lake.episode_ids(EpisodeFilter(embodiment=r.embodiment))
        frames = lake.frames()
        pixels = np.stack(
            [
                frames.read(e, cam, t)
                for e in eids
                for t in range(lake.episodes(EpisodeFilter(episode_ids=[e]))["num_steps"][0].as_py())
            ]
        )
        img = stats[f"observation.images.{cam}"]
        np.testing.assert_allclose(np.asarray(img["mean"]).reshape(3), pixels.reshape(-1, 3).mean(0) / 255.0, atol=1e-9)
        np.testing.assert_allclose(np.asarray(img["max"]).reshape(3), pixels.reshape(-1, 3).max(0) / 255.0)
        assert img["count"] == [len(pixels)]
        meta = pq.read_table(next((r.path / "meta" / "episodes").glob("*/*.parquet")))
        assert "stats/observation.state/mean" in meta.column_names
        assert "stats/observation.state/q01" in meta.column_names


def test_older_version_filter_and_single_embodiment_layout(exported, tmp_path):
    root, lake, _, _, _ = exported
    # Lake version 2 holds only the first ingest; with one embodiment OUT is the dataset itself.
    (r,) = export_lerobot(str(root / "lake"), tmp_path / "v2", version=2)
    assert (r.embodiment, r.episodes, r.lake_version, r.path) == ("single_arm_7dof", 3, 2, tmp_path / "v2")
    assert (tmp_path / "v2" / "meta" / "info.json").is_file()
    task = lake.episodes(EpisodeFilter(embodiment="bimanual_14dof"))["task"][1].as_py()
    (r,) = export_lerobot(lake, tmp_path / "one", filter=EpisodeFilter(task=task))
    assert (r.embodiment, r.episodes, r.tasks) == ("bimanual_14dof", 1, 1)
    back = ingest(str(tmp_path / "one"), str(tmp_path / "lake_one"))
    assert back.ingested == 1
    assert assert_round_trip(lake, Lake.open(str(tmp_path / "lake_one")), tmp_path / "one") >= MIN_PSNR_DB


def test_small_files_roll_over_like_lerobot(exported, tmp_path):
    _, lake, _, _, _ = exported
    config = ExportConfig(data_files_size_in_mb=0.004, video_files_size_in_mb=0.004, chunks_size=2)
    (r,) = export_lerobot(lake, tmp_path / "small", filter=EpisodeFilter(embodiment="humanoid_44dof"), config=config)
    meta = pq.read_table(next((tmp_path / "small" / "meta" / "episodes").glob("*/*.parquet"))).to_pylist()
    data_files = [(m["data/chunk_index"], m["data/file_index"]) for m in meta]
    video_files = [
        (m["videos/observation.images.ego_view/chunk_index"], m["videos/observation.images.ego_view/file_index"])
        for m in meta
    ]
    for files in (data_files, video_files):
        assert len(set(files)) > 1, f"files did not roll over: {files}"
        assert files == sorted(files) and all(f < 2 for _, f in files)  # file index wraps at chunks_size
    assert max(c for c, _ in data_files) >= 1
    check_layout(tmp_path / "small", lake)
    ingest(str(tmp_path / "small"), str(tmp_path / "lake_small"))
    assert assert_round_trip(lake, Lake.open(str(tmp_path / "lake_small")), tmp_path / "small") >= MIN_PSNR_DB


def test_refuses_a_non_empty_destination_and_an_empty_selection(exported, tmp_path):
    _, lake, _, _, _ = exported
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        export_lerobot(lake, tmp_path / "busy")
    assert (tmp_path / "busy" / "x").read_text() == "mine"
    with pytest.raises(ValueError, match="no episode .* matches"):
        export_lerobot(lake, tmp_path / "none", filter=EpisodeFilter(task_contains="no such task"))
    assert not (tmp_path / "none").exists()


def test_task_order_keeps_each_episodes_order():
    order = _task_order([["c"], ["a", "c"], ["b"], ["a", "b"]])
    assert order.index("a") < order.index("c") and order.index("a") < order.index("b")
    assert sorted(order) == ["a", "b", "c"]
    assert _task_order([["a", "b"], ["b", "a"]]) == ["a", "b"]  # contradicting orders: first appearance


def test_a_lake_built_from_ros_bags_exports_and_comes_back(tmp_path):
    pytest.importorskip("rosbags")
    from robolake.testing.ros import Layout, write_ros2

    for i in range(2):
        write_ros2(tmp_path / "bags" / f"rec_{i}", Layout(seconds=0.6, seed=i), storage="sqlite3")
    ingest(str(tmp_path / "bags"), str(tmp_path / "lake"))
    lake = Lake.open(str(tmp_path / "lake"))
    (r,) = export_lerobot(lake, tmp_path / "out")
    assert r.episodes == 2
    info = check_layout(r.path, lake)
    assert info["fps"] == lake.episodes()["fps"][0].as_py()
    back = ingest(str(tmp_path / "out"), str(tmp_path / "lake2"))
    assert (back.ingested, back.quarantined) == (2, 0)
    assert assert_round_trip(lake, Lake.open(str(tmp_path / "lake2")), r.path) >= MIN_PSNR_DB
    assert (
        lake.episodes()["embodiment"][0].as_py()
        == Lake.open(str(tmp_path / "lake2")).episodes()["embodiment"][0].as_py()
    )


def test_cli_export(exported, tmp_path, capsys):
    from robolake.cli import main

    root, _, _, _, _ = exported
    lake = str(root / "lake")
    assert (
        main(
            ["export", lake, str(tmp_path / "cli"), "--embodiment", "humanoid_44dof", "--version", "3", "--no-progress"]
        )
        == 0
    )
    assert "exported 3 episodes" in capsys.readouterr().out
    assert json.loads((tmp_path / "cli" / "meta" / "info.json").read_text())["total_episodes"] == 3
    assert main(["export", lake, str(tmp_path / "cli"), "--no-progress"]) == 2  # not empty: one-line error
    assert "not empty" in capsys.readouterr().err


# --- copying the record's packets (--copy-video) ------------------------------------------------


def test_copy_video_writes_the_source_packets_and_a_re_ingest_is_bit_exact(exported, tmp_path):
    _, lake, _, _, _ = exported
    results = export_lerobot(lake, tmp_path / "out", config=ExportConfig(copy_video=True))
    for r in results:
        lineage = json.loads((r.path / "meta" / "robolake_export.json").read_text())
        assert lineage["copied_videos"] == lineage["videos_total"] > 0
        check_layout(r.path, lake)
    ingest(str(tmp_path / "out"), str(tmp_path / "back"))
    back = Lake.open(str(tmp_path / "back"))
    worst = min(assert_round_trip(lake, back, r.path, frame_steps=None, min_psnr=0.0) for r in results)
    assert worst == float("inf")  # every frame of every episode: max abs difference 0
    # the copied packets are the lake's own bytes
    a = lake.episodes().to_pylist()[0]
    b = next(e for e in back.episodes().to_pylist() if e["num_steps"] == a["num_steps"] and e["task"] == a["task"])
    cam = a["cameras"][0]
    keys = [(a["episode_id"], cam, t) for t in range(a["num_steps"])]
    assert lake.frames().read_encoded(keys) == back.frames().read_encoded(
        [(b["episode_id"], cam, t) for t in range(b["num_steps"])]
    )


def test_without_copy_video_the_record_is_decoded_and_re_encoded(exported, tmp_path):
    _, lake, _, _, _ = exported
    (r, *_) = export_lerobot(lake, tmp_path / "out", filter=EpisodeFilter(embodiment=["single_arm_7dof"]))
    assert json.loads((r.path / "meta" / "robolake_export.json").read_text())["copied_videos"] == 0


def _renamed(lake_root: Path, tmp_path: Path, *, tag: str | None = None, camera: str | None = None) -> Lake:
    """A copy of the lake with an embodiment tag or a camera name changed in its tables (what a
    crafted or careless lake may hold)."""
    import shutil

    import lance
    import pyarrow as pa

    dst = tmp_path / "crafted"
    shutil.copytree(lake_root, dst)
    lake = Lake.open(str(dst))
    with lake.begin() as tx:
        eps = tx.dataset("episodes").to_table()
        emb = tx.dataset("embodiments").to_table()
        if tag is not None:  # the first embodiment re-tagged; the others stay, so the export has several
            rows = emb.to_pylist()
            old_tag = rows[0]["embodiment"]
            eps = eps.set_column(
                eps.schema.get_field_index("embodiment"),
                "embodiment",
                pa.array([tag if e == old_tag else e for e in eps["embodiment"].to_pylist()]),
            )
            rows[0]["embodiment"] = tag
            spec = json.loads(rows[0]["spec_json"])
            spec["tag"] = tag
            rows[0]["spec_json"] = json.dumps(spec)
            emb = pa.Table.from_pylist(rows, schema=emb.schema)
        if camera is not None:
            old = eps["cameras"][0].as_py()[0]
            eps = eps.set_column(
                eps.schema.get_field_index("cameras"),
                "cameras",
                pa.array([[camera if c == old else c for c in cs] for cs in eps["cameras"].to_pylist()]),
            )
            rows = emb.to_pylist()
            for r in rows:
                spec = json.loads(r["spec_json"])
                spec["cameras"] = [camera if c == old else c for c in spec.get("cameras", [])]
                r["spec_json"] = json.dumps(spec)
            emb = pa.Table.from_pylist(rows, schema=emb.schema)
        tx.overwrite("episodes", eps)
        tx.overwrite("embodiments", emb)
        tx.commit("crafted", {})
    del lance
    return Lake.open(str(dst))


@pytest.mark.parametrize("camera", ["../../escaped", "/abs/path", "nul\x00byte"])
def test_a_camera_name_that_would_leave_out_is_refused_naming_it(exported, tmp_path, camera):
    _, lake, _, _, _ = exported
    crafted = _renamed(Path(lake.uri), tmp_path, camera=camera)
    with pytest.raises(ValueError, match=r"camera .* is not a safe file name"):
        export_lerobot(crafted, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "escaped").exists()


def test_an_embodiment_tag_that_would_leave_out_is_refused_and_a_symlinked_dataset_dir_too(exported, tmp_path):
    _, lake, _, _, _ = exported
    crafted = _renamed(Path(lake.uri), tmp_path, tag="../../escaped")
    tags = sorted(crafted.embodiments())
    assert "../../escaped" in tags and len(tags) > 1
    with pytest.raises(ValueError, match=r"embodiment tag '../../escaped' is not a safe directory name"):
        export_lerobot(crafted, tmp_path / "out")
    assert not (tmp_path / "escaped").exists()
    out = tmp_path / "linked"
    out.mkdir()
    (tmp_path / "elsewhere").mkdir()
    first = sorted(lake.embodiments())[0]
    (out / first).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):  # OUT is not empty: nothing is written through the link
        export_lerobot(lake, out)
    assert not any((tmp_path / "elsewhere").iterdir())
