"""Write LeRobot datasets to disk in the real v2.0, v2.1 and v3.0 layouts.

The synthetic generator and the test fixtures both need datasets that a LeRobot reader accepts
byte-for-byte, so this module writes exactly what LeRobot (and GR00T on top of it) writes, not
a look-alike. Everything is written in one pass from in-memory `EpisodeArrays`; tests that need
a corrupt dataset write a good one and then break it themselves.

v2.0 / v2.1 (checked against the shared GR00T PickNPlace dataset, a real v2.0 file set, and
LeRobot's `LEGACY_*` constants in `lerobot/datasets/utils.py`)::

    meta/info.json             codebase_version, robot_type, total_episodes, total_frames,
                               total_tasks, total_videos, total_chunks, chunks_size, fps, splits,
                               data_path, video_path, features
    meta/episodes.jsonl        {"episode_index", "tasks": [str], "length"}
    meta/tasks.jsonl           {"task_index", "task"}
    meta/episodes_stats.jsonl  v2.1 only: {"episode_index", "stats": {feature: {min,max,mean,std,count}}}
    meta/stats.json            aggregated stats (+ q01/q99 for numeric features, as GR00T's file has)
    meta/modality.json         optional GR00T slice map
    data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet
    videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4

  Video features carry `video_info` in v2.0 (as the real GR00T file does) and `info` (with
  video.height/width/channels too) in v2.1 and v3.0, as LeRobot's `update_video_info` writes.

v3.0 (checked against huggingface/lerobot `src/lerobot/datasets/utils.py` constants,
`lerobot_dataset.py` `save_episode`/`_save_episode_data`/`_save_episode_video`/
`_save_episode_metadata`, and `v30/convert_dataset_v21_to_v30.py` `convert_info`)::

    meta/info.json             as v2.1 minus total_chunks/total_videos, plus data_files_size_in_mb
                               and video_files_size_in_mb; fps is an int; non-video features
                               carry "fps"
    meta/tasks.parquet         pandas frame: index = task string, column task_index
    meta/stats.json
    meta/episodes/chunk-000/file-000.parquet, one row per episode, columns in this order:
        episode_index, tasks (list<string>), length,
        data/chunk_index, data/file_index, dataset_from_index, dataset_to_index,
        videos/{key}/chunk_index, videos/{key}/file_index,
        videos/{key}/from_timestamp, videos/{key}/to_timestamp      (per video key)
        stats/{feature}/{min,max,mean,std,count}                    (per feature)
        meta/episodes/chunk_index, meta/episodes/file_index
    data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet       many episodes per file
    videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4   many episodes per file

  Files are numbered like LeRobot's `update_chunk_file_indices`: file_index counts up to
  chunks_size - 1 inside a chunk, then the chunk index moves on. An episode's frames in a shared
  mp4 are those with from_timestamp <= t < to_timestamp; each episode starts on a keyframe, as in
  LeRobot's concatenation of per-episode mp4s.

Data parquet columns (all versions): observation.state list<float32>, action list<float32>,
timestamp float32, frame_index, episode_index, index, task_index (int64). Video frames are
encoded with PyAV (libx264 or libsvtav1, yuv420p) with pts = frame number in a 1/fps time base,
so decoded frame timestamps are exactly i/fps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robolake.writers._lerobot_stats import aggregate_stats, episode_stats, to_jsonable
from robolake.writers._video_encode import VideoCodec, VideoOptions, encode_video

__all__ = [
    "EpisodeArrays",
    "LeRobotVersion",
    "VERSIONS",
    "VideoCodec",
    "VideoOptions",
    "encode_video",
    "write_lerobot_dataset",
    "V2_DATA_PATH",
    "V2_VIDEO_PATH",
    "V3_DATA_PATH",
    "V3_VIDEO_PATH",
    "V3_EPISODES_PATH",
]

LeRobotVersion = Literal["v2.0", "v2.1", "v3.0"]
VERSIONS: tuple[str, ...] = ("v2.0", "v2.1", "v3.0")

V2_DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
V2_VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
V3_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
V3_VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
V3_EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
_V3_DATA_MB, _V3_VIDEO_MB = 100, 500  # LeRobot's DEFAULT_{DATA,VIDEO}_FILE_SIZE_IN_MB


@dataclass(frozen=True, kw_only=True, eq=False)
class EpisodeArrays:
    """One episode in memory, ready to be written.

    Attributes:
        state: `observation.state`, float32 [T, Ds].
        action: `action`, float32 [T, Da].
        task: The language instruction.
        frames: Video key (`observation.images.<camera>`) -> uint8 RGB frames [T, H, W, 3],
            H and W even (yuv420p).
        timestamps: Seconds from episode start, [T]; None means i / fps.
    """

    state: np.ndarray
    action: np.ndarray
    task: str
    frames: Mapping[str, np.ndarray] = field(default_factory=dict)
    timestamps: np.ndarray | None = None

    def __post_init__(self) -> None:
        state = np.ascontiguousarray(self.state, dtype=np.float32)
        action = np.ascontiguousarray(self.action, dtype=np.float32)
        if state.ndim != 2 or action.ndim != 2 or len(state) != len(action) or len(state) == 0:
            raise ValueError(
                f"state {state.shape} and action {action.shape} must be 2-D [T, D] with the same T >= 1"
            )
        if not isinstance(self.task, str) or not self.task:
            raise ValueError(f"task must be a non-empty string, got {self.task!r}")
        for key, video in self.frames.items():
            if video.dtype != np.uint8 or video.ndim != 4 or video.shape[3] != 3:
                raise ValueError(
                    f"frames[{key!r}] must be uint8 [T, H, W, 3], got {video.dtype} {video.shape}"
                )
            if len(video) != len(state) or video.shape[1] % 2 or video.shape[2] % 2:
                raise ValueError(
                    f"frames[{key!r}] has shape {video.shape}; need T={len(state)} and even H, W (yuv420p)"
                )
        if self.timestamps is not None:
            ts = np.asarray(self.timestamps, dtype=np.float32)
            if ts.shape != (len(state),):
                raise ValueError(f"timestamps must have shape ({len(state)},), got {ts.shape}")
            object.__setattr__(self, "timestamps", ts)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "frames", dict(self.frames))

    @property
    def length(self) -> int:
        """Number of frames T."""
        return len(self.state)


def write_lerobot_dataset(
    root: str | Path,
    *,
    episodes: Sequence[EpisodeArrays],
    fps: int | float,
    robot_type: str,
    version: LeRobotVersion = "v2.1",
    video: VideoOptions | VideoCodec = "h264",
    modality: Mapping[str, Any] | None = None,
    state_names: Sequence[str] | None = None,
    action_names: Sequence[str] | None = None,
    episodes_per_file: int = 50,
    chunks_size: int = 1000,
) -> Path:
    """Write `episodes` as one LeRobot dataset under `root`.

    Args:
        root: Dataset directory; created, and must not already hold a `meta/info.json`.
        episodes: The episodes, in episode_index order; all with the same widths and video keys.
        fps: Recording rate.
        robot_type: `robot_type` in info.json.
        version: "v2.0", "v2.1" or "v3.0".
        video: Codec ("h264" or "av1") or full `VideoOptions`.
        modality: GR00T `meta/modality.json` content, written verbatim when given.
        state_names: Names of the state dims (default `motor_<i>`, like the GR00T file).
        action_names: Names of the action dims.
        episodes_per_file: v3.0 only: episodes per data parquet file and per mp4 file.
        chunks_size: Files per chunk directory (LeRobot's `chunks_size`, 1000 by default).

    Returns:
        The dataset root.

    Raises:
        ValueError: inconsistent episodes or an unknown version/codec.
        FileExistsError: `root` already holds a dataset.
    """
    root = Path(root)
    options = video if isinstance(video, VideoOptions) else VideoOptions(codec=video)
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    if not episodes:
        raise ValueError("need at least one episode")
    if fps <= 0 or episodes_per_file < 1 or chunks_size < 1:
        raise ValueError(
            "need fps > 0, episodes_per_file >= 1 and chunks_size >= 1, "
            f"got {fps}, {episodes_per_file}, {chunks_size}"
        )
    if (root / "meta" / "info.json").exists():
        raise FileExistsError(f"{root} already holds a LeRobot dataset; write to a new directory")
    _check_consistent(episodes)
    tasks = list(dict.fromkeys(ep.task for ep in episodes))
    task_index = {t: i for i, t in enumerate(tasks)}
    tables, stats, start = [], [], 0
    for i, ep in enumerate(episodes):
        table = _episode_table(ep, i, start, task_index[ep.task], fps)
        tables.append(table)
        stats.append(episode_stats(table, ep.frames))
        start += ep.length
    plan = _Plan(
        root=root, version=version, episodes=episodes, tables=tables, stats=stats, tasks=tasks,
        fps=fps, options=options, per_file=episodes_per_file, chunks_size=chunks_size,
    )  # fmt: skip
    info = _info(plan, robot_type, state_names, action_names)
    (root / "meta").mkdir(parents=True, exist_ok=True)
    if version == "v3.0":
        _write_v3(plan)
    else:
        _write_v2(plan)
    _write_json(root / "meta" / "stats.json", to_jsonable(aggregate_stats(stats, tables)))
    if modality is not None:
        _write_json(root / "meta" / "modality.json", dict(modality))
    _write_json(root / "meta" / "info.json", info)  # last: a dataset without it is unfinished
    return root


@dataclass(frozen=True, kw_only=True)
class _Plan:
    """Everything the layout writers need, computed once."""

    root: Path
    version: str
    episodes: Sequence[EpisodeArrays]
    tables: list[pa.Table]
    stats: list[dict[str, Any]]
    tasks: list[str]
    fps: float
    options: VideoOptions
    per_file: int
    chunks_size: int

    @property
    def video_keys(self) -> list[str]:
        return list(self.episodes[0].frames)


def _check_consistent(episodes: Sequence[EpisodeArrays]) -> None:
    first = episodes[0]
    widths = (first.state.shape[1], first.action.shape[1])
    shapes = {k: v.shape[1:] for k, v in first.frames.items()}
    for i, ep in enumerate(episodes):
        if (ep.state.shape[1], ep.action.shape[1]) != widths:
            raise ValueError(
                f"episode {i} has state/action widths {ep.state.shape[1]}/{ep.action.shape[1]}, "
                f"episode 0 has {widths[0]}/{widths[1]}"
            )
        if {k: v.shape[1:] for k, v in ep.frames.items()} != shapes:
            raise ValueError(
                f"episode {i} has video keys/shapes different from episode 0 ({shapes})"
            )


def _episode_table(
    ep: EpisodeArrays, episode_index: int, start: int, task: int, fps: float
) -> pa.Table:
    n = ep.length
    ts = ep.timestamps if ep.timestamps is not None else (np.arange(n) / fps).astype(np.float32)
    columns = {
        "observation.state": _list_column(ep.state),
        "action": _list_column(ep.action),
        "timestamp": pa.array(ts, pa.float32()),
        "frame_index": pa.array(np.arange(n, dtype=np.int64)),
        "episode_index": pa.array(np.full(n, episode_index, dtype=np.int64)),
        "index": pa.array(np.arange(start, start + n, dtype=np.int64)),
        "task_index": pa.array(np.full(n, task, dtype=np.int64)),
    }
    return pa.table(columns)


def _list_column(x: np.ndarray) -> pa.ListArray:
    offsets = np.arange(0, x.size + 1, x.shape[1], dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(x.reshape(-1), pa.float32()))


def _info(
    plan: _Plan,
    robot_type: str,
    state_names: Sequence[str] | None,
    action_names: Sequence[str] | None,
) -> dict[str, Any]:
    version, fps, episodes = plan.version, plan.fps, plan.episodes
    v3 = version == "v3.0"
    fps_out: int | float = int(fps) if float(fps).is_integer() else float(fps)
    features: dict[str, Any] = {}
    for key in plan.video_keys:
        h, w, c = episodes[0].frames[key].shape[1:]
        vinfo: dict[str, Any] = {"video.height": h, "video.width": w, "video.channels": c}
        if version == "v2.0":  # the real v2.0 (GR00T) file: no sizes, key "video_info"
            vinfo = {}
        vinfo.update({"video.fps": float(fps), "video.codec": plan.options.codec,
                      "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "has_audio": False})  # fmt: skip
        features[key] = {
            "dtype": "video",
            "shape": [h, w, c],
            "names": ["height", "width", "channels"],
            ("video_info" if version == "v2.0" else "info"): vinfo,
        }
    for key, width, names in (
        ("observation.state", episodes[0].state.shape[1], state_names),
        ("action", episodes[0].action.shape[1], action_names),
    ):
        names = list(names) if names is not None else [f"motor_{i}" for i in range(width)]
        if len(names) != width:
            raise ValueError(f"{key} has {width} dims but {len(names)} names were given")
        features[key] = {"dtype": "float32", "shape": [width], "names": names}
    for key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        dtype = "float32" if key == "timestamp" else "int64"
        features[key] = {"dtype": dtype, "shape": [1], "names": None}
    if v3:
        for ft in features.values():
            if ft["dtype"] != "video":
                ft["fps"] = fps_out
    n_eps = len(episodes)
    info: dict[str, Any] = {
        "codebase_version": version,
        "robot_type": robot_type,
        "total_episodes": n_eps,
        "total_frames": sum(ep.length for ep in episodes),
        "total_tasks": len(plan.tasks),
    }
    if not v3:
        info["total_videos"] = n_eps * len(plan.video_keys)
        info["total_chunks"] = -(-n_eps // plan.chunks_size)
    info["chunks_size"] = plan.chunks_size
    if v3:
        info["data_files_size_in_mb"] = _V3_DATA_MB
        info["video_files_size_in_mb"] = _V3_VIDEO_MB
    info["fps"] = fps_out
    info["splits"] = {"train": f"0:{n_eps}"}
    info["data_path"] = V3_DATA_PATH if v3 else V2_DATA_PATH
    info["video_path"] = (V3_VIDEO_PATH if v3 else V2_VIDEO_PATH) if plan.video_keys else None
    info["features"] = features
    return info


def _write_v2(plan: _Plan) -> None:
    root, episodes = plan.root, plan.episodes
    for i, (ep, table) in enumerate(zip(episodes, plan.tables, strict=True)):
        chunk = i // plan.chunks_size
        path = root / V2_DATA_PATH.format(episode_chunk=chunk, episode_index=i)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        for key, video in ep.frames.items():
            vpath = root / V2_VIDEO_PATH.format(episode_chunk=chunk, video_key=key, episode_index=i)
            encode_video(vpath, [video], fps=plan.fps, options=plan.options)
    meta = root / "meta"
    _write_jsonl(
        meta / "episodes.jsonl",
        [
            {"episode_index": i, "tasks": [e.task], "length": e.length}
            for i, e in enumerate(episodes)
        ],
    )
    _write_jsonl(
        meta / "tasks.jsonl", [{"task_index": i, "task": t} for i, t in enumerate(plan.tasks)]
    )
    if plan.version == "v2.1":
        _write_jsonl(
            meta / "episodes_stats.jsonl",
            [{"episode_index": i, "stats": to_jsonable(s)} for i, s in enumerate(plan.stats)],
        )


def _write_v3(plan: _Plan) -> None:
    root, episodes, fps = plan.root, plan.episodes, plan.fps
    rows: list[dict[str, Any]] = [
        {"episode_index": i, "tasks": [e.task], "length": e.length} for i, e in enumerate(episodes)
    ]
    start = 0
    for g, lo in enumerate(range(0, len(episodes), plan.per_file)):
        chunk, file = divmod(g, plan.chunks_size)  # LeRobot's update_chunk_file_indices order
        group = range(lo, min(lo + plan.per_file, len(episodes)))
        path = root / V3_DATA_PATH.format(chunk_index=chunk, file_index=file)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.concat_tables([plan.tables[i] for i in group]), path)
        for i in group:
            n = episodes[i].length
            rows[i]["data/chunk_index"], rows[i]["data/file_index"] = chunk, file
            rows[i]["dataset_from_index"], rows[i]["dataset_to_index"] = start, start + n
            start += n
        for key in plan.video_keys:
            vpath = root / V3_VIDEO_PATH.format(video_key=key, chunk_index=chunk, file_index=file)
            encode_video(
                vpath, [episodes[i].frames[key] for i in group], fps=fps, options=plan.options
            )
            offset = 0
            for i in group:
                n = episodes[i].length
                rows[i][f"videos/{key}/chunk_index"] = chunk
                rows[i][f"videos/{key}/file_index"] = file
                rows[i][f"videos/{key}/from_timestamp"] = offset / fps
                rows[i][f"videos/{key}/to_timestamp"] = (offset + n) / fps
                offset += n
    for row, ep_stats in zip(rows, plan.stats, strict=True):
        for feature, values in to_jsonable(ep_stats).items():
            for name, value in values.items():
                row[f"stats/{feature}/{name}"] = value
        row["meta/episodes/chunk_index"] = 0
        row["meta/episodes/file_index"] = 0
    path = root / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    _write_tasks_parquet(root / "meta" / "tasks.parquet", plan.tasks)


def _write_tasks_parquet(path: Path, tasks: list[str]) -> None:
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - pandas ships with ray[data]
        raise ImportError(
            "writing a LeRobot v3.0 tasks.parquet needs pandas: pip install pandas"
        ) from e
    frame = pd.DataFrame({"task_index": np.arange(len(tasks), dtype=np.int64)}, index=tasks)
    frame.to_parquet(path)


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=4, ensure_ascii=False) + "\n")


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
