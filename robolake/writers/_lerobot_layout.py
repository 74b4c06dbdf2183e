"""Where a LeRobot dataset's pieces go on disk, per version (see `robolake.writers.lerobot`).

`LeRobotWriter` decides what an episode holds; this module decides which files it lands in
(one parquet and one mp4 per camera each in v2.x; shared files that roll over in v3.0), and
writes the metadata files in each version's format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robolake.writers.video import PIX_FMT, EncodedSegment, Mp4Remuxer, Mp4Writer, VideoOptions

__all__ = [
    "LeRobotFeatures",
    "LeRobotFiles",
    "LeRobotVersion",
    "VERSIONS",
    "V2_DATA_PATH",
    "V2_VIDEO_PATH",
    "V3_DATA_PATH",
    "V3_EPISODES_PATH",
    "V3_VIDEO_PATH",
]

LeRobotVersion = Literal["v2.0", "v2.1", "v3.0"]
VERSIONS: tuple[str, ...] = ("v2.0", "v2.1", "v3.0")

V2_DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
V2_VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
V3_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
V3_VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
V3_EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"


@dataclass(frozen=True, kw_only=True)
class LeRobotFeatures:
    """What every frame of a dataset holds: its data columns and its info.json features.

    Attributes:
        fps: Recording rate (> 0).
        robot_type: info.json `robot_type`.
        state_names: Names of the `observation.state` dims (their number is its width).
        action_names: Names of the `action` dims.
        video_keys: Camera features (`observation.images.<camera>`), in order.
        timestamp_dtype: "float32" (LeRobot's default) or "float64" (keeps seconds exactly).
        task_columns: Extra int64 columns holding each step's task index, for GR00T language
            annotations (`annotation.human.action.task_description`).
        done: Write `next.done` (True on each episode's last step).
        success: Write `next.success` (`next.done` and the episode's success); every episode
            then says whether it succeeded.
    """

    fps: float
    robot_type: str
    state_names: tuple[str, ...]
    action_names: tuple[str, ...]
    video_keys: tuple[str, ...] = ()
    timestamp_dtype: Literal["float32", "float64"] = "float32"
    task_columns: tuple[str, ...] = ()
    done: bool = False
    success: bool = False

    def __post_init__(self) -> None:
        if not self.fps > 0:
            raise ValueError(f"fps must be > 0, got {self.fps}")
        if not self.state_names or not self.action_names:
            raise ValueError("state_names and action_names must name at least one dim each")
        if self.timestamp_dtype not in ("float32", "float64"):
            raise ValueError(f"timestamp_dtype must be 'float32' or 'float64', got {self.timestamp_dtype!r}")


@dataclass(frozen=True, kw_only=True)
class LeRobotFiles:
    """How a dataset is laid out in files.

    Attributes:
        version: "v2.0", "v2.1" or "v3.0".
        video: Codec settings of the mp4 files.
        chunks_size: Files per chunk directory (LeRobot: 1000).
        data_files_size_in_mb: v3.0: a data parquet file rolls over past this size (LeRobot: 100).
        video_files_size_in_mb: v3.0: an mp4 file rolls over past this size (LeRobot: 200).
        episodes_per_file: v3.0: files also roll over after this many episodes (None: size only).
    """

    version: LeRobotVersion = "v3.0"
    video: VideoOptions = field(default_factory=VideoOptions)
    chunks_size: int = 1000
    data_files_size_in_mb: float = 100
    video_files_size_in_mb: float = 200
    episodes_per_file: int | None = None

    def __post_init__(self) -> None:
        if self.version not in VERSIONS:
            raise ValueError(f"version must be one of {VERSIONS}, got {self.version!r}")
        if self.data_files_size_in_mb <= 0 or self.video_files_size_in_mb <= 0:
            raise ValueError(
                f"file sizes must be > 0 MB, got data {self.data_files_size_in_mb}, video {self.video_files_size_in_mb}"
            )
        if self.chunks_size < 1 or (self.episodes_per_file is not None and self.episodes_per_file < 1):
            raise ValueError(
                f"chunks_size and episodes_per_file must be >= 1, got {self.chunks_size}, {self.episodes_per_file}"
            )


# --- data rows and info.json -----------------------------------------------------------------


def data_table(
    features: LeRobotFeatures,
    version: str,
    *,
    state: np.ndarray,
    action: np.ndarray,
    timestamps: np.ndarray,
    task_index: np.ndarray,
    episode_index: int,
    start: int,
    success: bool | None,
) -> pa.Table:
    """One episode's data rows, in LeRobot's column order."""
    n = len(state)
    vector = _fixed_list if version == "v3.0" else _list
    cols: dict[str, pa.Array] = {
        "observation.state": vector(state),
        "action": vector(action),
        "timestamp": pa.array(timestamps, pa.float64() if features.timestamp_dtype == "float64" else pa.float32()),
        "frame_index": pa.array(np.arange(n, dtype=np.int64)),
        "episode_index": pa.array(np.full(n, episode_index, dtype=np.int64)),
        "index": pa.array(np.arange(start, start + n, dtype=np.int64)),
        "task_index": pa.array(task_index, pa.int64()),
    }
    for name in features.task_columns:
        cols[name] = pa.array(task_index, pa.int64())
    done = np.arange(n) == n - 1
    if features.done:
        cols["next.done"] = pa.array(done)
    if features.success:
        cols["next.success"] = pa.array(done & bool(success))
    return pa.table(cols)


def _fixed_list(x: np.ndarray) -> pa.FixedSizeListArray:
    """v3.0: fixed_size_list<float32>[d], what LeRobot's `Sequence(length=d)` feature writes."""
    return pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1), pa.float32()), x.shape[1])


def _list(x: np.ndarray) -> pa.ListArray:
    """v2.x: list<float32>, as in the real GR00T v2.0 files."""
    offsets = np.arange(0, x.size + 1, x.shape[1], dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(x.reshape(-1), pa.float32()))


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def info_json(
    features: LeRobotFeatures,
    files: LeRobotFiles,
    *,
    sizes: Mapping[str, tuple[int, int]],
    episodes: int,
    frames: int,
    tasks: int,
) -> dict[str, Any]:
    """meta/info.json. `sizes`: (height, width) of each video key."""
    version, fps = files.version, features.fps
    v3 = version == "v3.0"
    out: dict[str, Any] = {}
    for key in features.video_keys:
        h, w = sizes[key]
        if v3:  # LeRobot v3.0's get_video_info, in its order
            vinfo = {
                "video.height": h,
                "video.width": w,
                "video.codec": files.video.codec,
                "video.pix_fmt": PIX_FMT,
                "video.is_depth_map": False,
                "video.fps": _number(fps),
                "video.channels": 3,
                "has_audio": False,
            }
        else:  # v2.0 as the real GR00T file (no sizes, key "video_info"); v2.1 adds the sizes
            vinfo = {} if version == "v2.0" else {"video.height": h, "video.width": w, "video.channels": 3}
            vinfo.update(
                {
                    "video.fps": float(fps),
                    "video.codec": files.video.codec,
                    "video.pix_fmt": PIX_FMT,
                    "video.is_depth_map": False,
                    "has_audio": False,
                }
            )
        ft = {"dtype": "video", "shape": [h, w, 3], "names": ["height", "width", "channels"]}
        out[key] = {**ft, ("video_info" if version == "v2.0" else "info"): vinfo}
    out["observation.state"] = {
        "dtype": "float32",
        "shape": [len(features.state_names)],
        "names": list(features.state_names),
    }
    out["action"] = {"dtype": "float32", "shape": [len(features.action_names)], "names": list(features.action_names)}
    out["timestamp"] = {"dtype": features.timestamp_dtype, "shape": [1], "names": None}
    for key in ("frame_index", "episode_index", "index", "task_index", *features.task_columns):
        out[key] = {"dtype": "int64", "shape": [1], "names": None}
    for key, wanted in (("next.done", features.done), ("next.success", features.success)):
        if wanted:
            out[key] = {"dtype": "bool", "shape": [1], "names": None}
    if v3:
        for ft in out.values():
            if ft["dtype"] != "video":
                ft["fps"] = _number(fps)
    info: dict[str, Any] = {
        "codebase_version": version,
        "robot_type": features.robot_type,
        "total_episodes": episodes,
        "total_frames": frames,
        "total_tasks": tasks,
    }
    if not v3:
        info["total_videos"] = episodes * len(features.video_keys)
        info["total_chunks"] = -(-episodes // files.chunks_size)
    info["chunks_size"] = files.chunks_size
    if v3:
        info["data_files_size_in_mb"] = _number(files.data_files_size_in_mb)
        info["video_files_size_in_mb"] = _number(files.video_files_size_in_mb)
    info["fps"] = _number(fps)
    info["splits"] = {"train": f"0:{episodes}"}
    info["data_path"] = V3_DATA_PATH if v3 else V2_DATA_PATH
    info["video_path"] = (V3_VIDEO_PATH if v3 else V2_VIDEO_PATH) if features.video_keys else None
    info["features"] = out
    return info


# --- files -----------------------------------------------------------------------------------


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=4, ensure_ascii=False) + "\n")


def _write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _encode(mp4: Mp4Writer | Mp4Remuxer, frames: Iterable[np.ndarray], segment: EncodedSegment | None = None) -> int:
    """Append one episode's frames, the first a keyframe (or copy its packets, still reading the
    frames, which the statistics count); returns how many."""
    if segment is not None and isinstance(mp4, Mp4Remuxer):
        n = sum(1 for _ in frames)
        if n != len(segment.packets):
            raise ValueError(f"{mp4.path}: {n} frames for {len(segment.packets)} packets to copy")
        return mp4.write_segment(segment)
    if not isinstance(mp4, Mp4Writer):
        raise ValueError(f"{mp4.path} holds copied packets; frames to encode go to a new file")
    start = mp4.frames
    for frame in frames:
        mp4.write(frame, keyframe=mp4.frames == start)
    return mp4.frames - start


def _open_mp4(
    path: Path, size: tuple[int, int], fps: float, options: VideoOptions, segment: EncodedSegment | None
) -> Mp4Writer | Mp4Remuxer:
    if segment is not None:
        return Mp4Remuxer(path, fps=fps, first=segment)
    return Mp4Writer(path, width=size[1], height=size[0], fps=fps, options=options)


class V2Files:
    """v2.0 / v2.1: one parquet file and one mp4 per camera for each episode."""

    def __init__(self, root: Path, files: LeRobotFiles, fps: float) -> None:
        self._root, self._files, self._fps = root, files, fps
        self.videos = 0

    def write_data(self, episode_index: int, table: pa.Table) -> dict[str, Any]:
        path = self._root / V2_DATA_PATH.format(
            episode_chunk=episode_index // self._files.chunks_size, episode_index=episode_index
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        return {}

    def write_video(
        self,
        episode_index: int,
        key: str,
        size: tuple[int, int],
        frames: Iterable[np.ndarray],
        segment: EncodedSegment | None = None,
    ) -> tuple[int, dict[str, Any]]:
        chunk = episode_index // self._files.chunks_size
        path = self._root / V2_VIDEO_PATH.format(episode_chunk=chunk, video_key=key, episode_index=episode_index)
        with _open_mp4(path, size, self._fps, self._files.video, segment) as mp4:
            n = _encode(mp4, frames, segment)
        self.videos += 1
        return n, {}

    def close(self) -> None:
        pass

    def write_meta(
        self, rows: Sequence[Mapping[str, Any]], stats: Sequence[Mapping[str, Any]], tasks: Sequence[str]
    ) -> None:
        meta = self._root / "meta"
        _write_jsonl(meta / "episodes.jsonl", ({k: r[k] for k in ("episode_index", "tasks", "length")} for r in rows))
        _write_jsonl(meta / "tasks.jsonl", ({"task_index": i, "task": t} for i, t in enumerate(tasks)))
        if self._files.version == "v2.1":
            _write_jsonl(meta / "episodes_stats.jsonl", ({"episode_index": i, "stats": s} for i, s in enumerate(stats)))


class V3Files:
    """v3.0: episodes laid end to end in data and video files that roll over like LeRobot's.

    A new file starts when the current one would pass its size limit, estimated from its size
    per frame so far, or holds `episodes_per_file` episodes; file indices count up to
    `chunks_size - 1`, then the chunk index moves on (LeRobot's update_chunk_file_indices).
    """

    def __init__(self, root: Path, files: LeRobotFiles, fps: float) -> None:
        self._root, self._files, self._fps = root, files, fps
        self._data = _Rolling(files, files.data_files_size_in_mb)
        self._video: dict[str, _Rolling] = {}
        self._parquet: pq.ParquetWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._mp4: dict[str, Mp4Writer | Mp4Remuxer] = {}
        self.videos = 0

    def write_data(self, episode_index: int, table: pa.Table) -> dict[str, Any]:
        # tell(): bytes written so far (an unbuffered sink), so the estimate sees every row group.
        if self._data.roll(self._sink.tell() if self._sink is not None else 0, table.num_rows):
            self._close_data()
        if self._parquet is None:
            path = self._root / V3_DATA_PATH.format(chunk_index=self._data.chunk, file_index=self._data.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._sink = pa.OSFile(str(path), "wb")
            self._parquet = pq.ParquetWriter(self._sink, table.schema, compression="snappy")
        self._parquet.write_table(table)
        self._data.added(table.num_rows)
        return {"data/chunk_index": self._data.chunk, "data/file_index": self._data.file}

    def write_video(
        self,
        episode_index: int,
        key: str,
        size: tuple[int, int],
        frames: Iterable[np.ndarray],
        segment: EncodedSegment | None = None,
    ) -> tuple[int, dict[str, Any]]:
        rolling = self._video.setdefault(key, _Rolling(self._files, self._files.video_files_size_in_mb))
        mp4 = self._mp4.get(key)
        # A file holds encoded frames or copied packets of one set of codec parameters, not both.
        if mp4 is not None and rolling.roll(mp4.encoded_bytes, 1, force=not mp4.accepts(segment)):
            self._mp4.pop(key).close()
            mp4 = None
        if mp4 is None:
            path = self._root / V3_VIDEO_PATH.format(video_key=key, chunk_index=rolling.chunk, file_index=rolling.file)
            mp4 = self._mp4[key] = _open_mp4(path, size, self._fps, self._files.video, segment)
            self.videos += 1
        start = mp4.frames
        n = _encode(mp4, frames, segment)
        rolling.added(n)
        return n, {
            f"videos/{key}/chunk_index": rolling.chunk,
            f"videos/{key}/file_index": rolling.file,
            f"videos/{key}/from_timestamp": start / self._fps,
            f"videos/{key}/to_timestamp": mp4.frames / self._fps,
        }

    def close(self) -> None:
        self._close_data()
        for mp4 in self._mp4.values():
            mp4.close()
        self._mp4.clear()

    def _close_data(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        if self._sink is not None:
            self._sink.close()
            self._sink = None

    def write_meta(
        self, rows: Sequence[Mapping[str, Any]], stats: Sequence[Mapping[str, Any]], tasks: Sequence[str]
    ) -> None:
        table_rows = []
        for row, ep_stats in zip(rows, stats, strict=True):
            flat = dict(row)
            flat.update({f"stats/{feature}/{name}": v for feature, s in ep_stats.items() for name, v in s.items()})
            flat["meta/episodes/chunk_index"], flat["meta/episodes/file_index"] = 0, 0
            table_rows.append(flat)
        path = self._root / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(table_rows), path)
        _write_tasks_parquet(self._root / "meta" / "tasks.parquet", tasks)


class _Rolling:
    """Chunk and file index of one series of v3.0 files, and when the current file is full."""

    def __init__(self, files: LeRobotFiles, limit_mb: float) -> None:
        self._files, self._limit_mb = files, limit_mb
        self.chunk, self.file = 0, 0
        self._frames, self._episodes = 0, 0

    def roll(self, size_bytes: int, new_frames: int, *, force: bool = False) -> bool:
        """Whether the next episode goes to a new file (then the indices have moved on to it);
        `force`: it must (the current file cannot hold it)."""
        if self._episodes == 0 and not force:
            return False
        per_file = self._files.episodes_per_file
        # LeRobot's estimate: the file's bytes per frame so far, times the frames to come.
        per_frame = size_bytes / self._frames if self._frames else 0.0
        full = (size_bytes + per_frame * new_frames) / (1024 * 1024) >= self._limit_mb
        if not force and not full and (per_file is None or self._episodes < per_file):
            return False
        last = self.file == self._files.chunks_size - 1
        self.chunk, self.file = (self.chunk + 1, 0) if last else (self.chunk, self.file + 1)
        self._frames, self._episodes = 0, 0
        return True

    def added(self, frames: int) -> None:
        self._frames += frames
        self._episodes += 1


def _write_tasks_parquet(path: Path, tasks: Sequence[str]) -> None:
    """meta/tasks.parquet as LeRobot writes it: a pandas frame indexed by task string."""
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - pandas ships with ray[data]
        raise ImportError("writing a LeRobot v3.0 meta/tasks.parquet needs pandas: pip install pandas") from e
    frame = pd.DataFrame(
        {"task_index": np.arange(len(tasks), dtype=np.int64)}, index=pd.Index(list(tasks), name="task")
    )
    frame.to_parquet(path)
