"""Write LeRobot datasets to disk in the real v2.0, v2.1 and v3.0 layouts: the one LeRobot writer.

`robolake export` (a lake back out as LeRobot v3.0), the synthetic generator and the sim
recorder all write through `LeRobotWriter`, so they all write exactly what LeRobot (and GR00T on
top of it) writes, not look-alikes. The writer is incremental (open, `add_episode`, `finish`):
an export streams episodes from the lake, one episode's frames at a time, and the in-memory
`write_lerobot_dataset(EpisodeArrays...)` goes through the same calls. Tests that need a
corrupt dataset write a good one and then break it themselves.

v2.0 / v2.1 (checked against the shared GR00T PickNPlace dataset, a real v2.0 file set, and
LeRobot's `LEGACY_*` constants in `lerobot/datasets/utils.py`)::

    meta/info.json             codebase_version, robot_type, total_episodes, total_frames,
                               total_tasks, total_videos, total_chunks, chunks_size, fps, splits,
                               data_path, video_path, features
    meta/episodes.jsonl        {"episode_index", "tasks": [str], "length"}
    meta/tasks.jsonl           {"task_index", "task"}
    meta/episodes_stats.jsonl  v2.1 only: {"episode_index", "stats": {feature: {stat: value}}}
    meta/stats.json            dataset statistics
    data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet
    videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4

  Video features carry `video_info` in v2.0 (as the real GR00T file does) and `info` (with
  video.height/width/channels too) in v2.1. State and action are list<float32>.

v3.0 (checked against huggingface/lerobot `src/lerobot/datasets/utils.py` constants,
`lerobot_dataset.py` `save_episode`, `video_utils.py` `get_video_info` and
`v30/convert_dataset_v21_to_v30.py` `convert_info`)::

    meta/info.json             as v2.1 minus total_chunks/total_videos, plus data_files_size_in_mb
                               and video_files_size_in_mb; fps is an int where it is whole;
                               non-video features carry "fps"
    meta/episodes/chunk-000/file-000.parquet
                               one row per episode: episode_index, tasks (list<string>), length,
                               data/{chunk,file}_index, dataset_{from,to}_index,
                               videos/<key>/{chunk_index,file_index,from_timestamp,to_timestamp},
                               stats/<feature>/<stat>, meta/episodes/{chunk,file}_index
    meta/tasks.parquet         task string (pandas index "task") -> task_index
    meta/stats.json
    data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet       many episodes, one row group each
    videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4   many episodes

  State and action are fixed_size_list<float32>[d] (LeRobot's `Sequence(length=d)` feature).
  Files roll over like LeRobot's writer (`LeRobotFiles`: by size, and optionally by a number of
  episodes). An episode's frames in a shared mp4 are those with from_timestamp <= t <
  to_timestamp; each episode starts on a keyframe.

Data columns (all versions): observation.state, action, timestamp (float32, or float64 when
`LeRobotFeatures.timestamp_dtype` says so: LeRobot and GR00T read whatever dtype info.json
declares), frame_index, episode_index, index, task_index (int64), then optional int64 task
columns (GR00T annotations), `next.done` and `next.success`. Video is encoded by
`robolake.writers.video` (pts = frame number in a 1/fps time base, so decoded frame timestamps
are exactly i/fps). Statistics (`_lerobot_stats`) are exact, from every row and every frame.

A dataset is written into `<root>.robolake-partial` and renamed into place by `finish`, so a
killed writer never leaves something that looks like a finished dataset.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from robolake.writers._lerobot_layout import (
    V2_DATA_PATH,
    V2_VIDEO_PATH,
    V3_DATA_PATH,
    V3_EPISODES_PATH,
    V3_VIDEO_PATH,
    VERSIONS,
    LeRobotFeatures,
    LeRobotFiles,
    LeRobotVersion,
    V2Files,
    V3Files,
    data_table,
    info_json,
    write_json,
)
from robolake.writers._lerobot_stats import DatasetStats, pixel_counts, to_jsonable
from robolake.writers.video import EncodedSegment, VideoCodec, VideoOptions

__all__ = [
    "EpisodeArrays",
    "LeRobotFeatures",
    "LeRobotFiles",
    "LeRobotVersion",
    "LeRobotWriter",
    "PARTIAL_SUFFIX",
    "VERSIONS",
    "write_lerobot_dataset",
    "safe_path_part",
    "V2_DATA_PATH",
    "V2_VIDEO_PATH",
    "V3_DATA_PATH",
    "V3_VIDEO_PATH",
    "V3_EPISODES_PATH",
]

PARTIAL_SUFFIX = ".robolake-partial"
_SAFE_PART = re.compile(r"[A-Za-z0-9._-]+")
_COUNT_AHEAD = 16  # frames whose pixel counts may be pending (bounds the frames held)


class LeRobotWriter:
    """One LeRobot dataset, written one episode at a time: `add_episode`..., then `finish`.

    Used as a context manager, a block left without `finish` (or by an exception) aborts.

    Args:
        root: Dataset directory; must not exist or be empty.
        features: What every frame holds.
        files: Version, codec and file layout (default LeRobot v3.0 with h264).
        tasks: Tasks numbered first, in this order (an export's order); tasks first seen in
            `add_episode` follow in order of appearance.

    Raises:
        FileExistsError: `root` holds a dataset or other files.
    """

    def __init__(
        self,
        root: str | Path,
        features: LeRobotFeatures,
        files: LeRobotFiles | None = None,
        *,
        tasks: Sequence[str] = (),
    ) -> None:
        self.root = Path(os.path.abspath(root))
        self.features, self.files = features, files or LeRobotFiles()
        unsafe = [k for k in features.video_keys if not safe_path_part(k)]
        if unsafe:  # a video key is a directory name in the dataset: it must not leave it
            raise ValueError(
                f"video key {unsafe[0]!r} is not a safe file name (letters, digits, '.', '_', '-'; not '.' "
                "or '..'); rename the camera"
            )
        if (self.root / "meta" / "info.json").exists():
            raise FileExistsError(f"{self.root} already holds a LeRobot dataset; write to a new directory")
        if self.root.exists() and (not self.root.is_dir() or any(self.root.iterdir())):
            raise FileExistsError(f"{self.root} exists and is not empty; write the dataset to a new directory")
        self._tmp = self.root.with_name(self.root.name + PARTIAL_SUFFIX)
        shutil.rmtree(self._tmp, ignore_errors=True)  # what a killed writer of the same root left
        self._tmp.mkdir(parents=True)
        layout = V3Files if self.files.version == "v3.0" else V2Files
        self._layout = layout(self._tmp, self.files, features.fps)
        self._task_ids = {t: i for i, t in enumerate(dict.fromkeys(tasks))}
        self._stats = DatasetStats()
        self._rows: list[dict[str, Any]] = []
        self._episode_stats: list[dict[str, Any]] = []
        self._sizes: dict[str, tuple[int, int]] = {}
        self._frames = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="robolake-pixel-stats")
        self._open = True

    @property
    def num_episodes(self) -> int:
        return len(self._rows)

    @property
    def num_frames(self) -> int:
        return self._frames

    @property
    def num_videos(self) -> int:
        """mp4 files written so far."""
        return self._layout.videos

    @property
    def tasks(self) -> list[str]:
        """Tasks in task_index order."""
        return list(self._task_ids)

    def add_episode(
        self,
        *,
        state: np.ndarray,
        action: np.ndarray,
        tasks: Sequence[str],
        task_index: np.ndarray | None = None,
        timestamps: np.ndarray | None = None,
        frames: Mapping[str, Iterable[np.ndarray]] | None = None,
        success: bool | None = None,
        segments: Mapping[str, EncodedSegment] | None = None,
    ) -> None:
        """Write one episode of T steps.

        Args:
            state: [T, len(state_names)] (stored as float32).
            action: [T, len(action_names)].
            tasks: The episode's tasks (at least one; "" where a log has none).
            task_index: [T] index into `tasks` of each step's task; None: all `tasks[0]`.
            timestamps: [T] seconds from the episode start; None: i / fps.
            frames: Each video key -> its T uint8 RGB [H, W, 3] frames (an iterator is read once,
                frame by frame); a key's frames have one even size throughout the dataset.
            success: Whether the episode succeeded (needed when `features.success`).
            segments: Video keys whose frames are copied as these encoded packets instead of
                encoded (`Mp4Remuxer`); their `frames` are still read, for the statistics.

        Raises:
            ValueError: shapes, tasks, frames or success that do not fit the features. The
                dataset is then unusable: `abort` it.
        """
        if not self._open:
            raise ValueError(f"{self.root}: the writer is finished or aborted")
        f, i = self.features, len(self._rows)
        state = np.ascontiguousarray(state, dtype=np.float32)
        action = np.ascontiguousarray(action, dtype=np.float32)
        n = len(state)
        if n == 0 or state.shape != (n, len(f.state_names)) or action.shape != (n, len(f.action_names)):
            raise ValueError(
                f"episode {i}: state {state.shape} and action {action.shape} must be [T, {len(f.state_names)}] "
                f"and [T, {len(f.action_names)}] with the same T >= 1"
            )
        if not tasks or not all(isinstance(t, str) for t in tasks):
            raise ValueError(f"episode {i}: tasks must be one or more strings, got {tasks!r}")
        local = np.zeros(n, np.int64) if task_index is None else np.asarray(task_index, dtype=np.int64)
        if local.shape != (n,) or local.min() < 0 or local.max() >= len(tasks):
            raise ValueError(f"episode {i}: task_index must be [{n}] indices into its {len(tasks)} tasks, got {local}")
        ids = np.asarray([self._task_ids.setdefault(t, len(self._task_ids)) for t in tasks], dtype=np.int64)[local]
        dtype = np.float64 if f.timestamp_dtype == "float64" else np.float32
        ts = (np.arange(n) / f.fps if timestamps is None else np.asarray(timestamps, dtype=np.float64)).astype(dtype)
        if ts.shape != (n,):
            raise ValueError(f"episode {i}: timestamps must have shape ({n},), got {ts.shape}")
        frames = frames or {}
        if sorted(frames) != sorted(f.video_keys):
            raise ValueError(f"episode {i}: frames for {sorted(frames)}, the features have {sorted(f.video_keys)}")
        if f.success and success is None:
            raise ValueError(f"episode {i}: the dataset records next.success, so every episode needs success")
        table = data_table(
            f,
            self.files.version,
            state=state,
            action=action,
            timestamps=ts,
            task_index=ids,
            episode_index=i,
            start=self._frames,
            success=success,
        )
        row: dict[str, Any] = {"episode_index": i, "tasks": list(tasks), "length": n}
        row.update(self._layout.write_data(i, table))
        row["dataset_from_index"], row["dataset_to_index"] = self._frames, self._frames + n
        hists = {}
        for key in f.video_keys:
            hists[key] = np.zeros((3, 256), dtype=np.int64)
            size, checked = self._checked(key, frames[key], i, hists[key])
            written, placed = self._layout.write_video(i, key, size, checked, (segments or {}).get(key))
            if written != n:
                raise ValueError(f"episode {i}: {key} has {written} frames for {n} steps")
            row.update(placed)
        values = {"observation.state": state, "action": action, "timestamp": ts[:, None]}
        values.update(
            {k: table[k].to_numpy()[:, None] for k in ("frame_index", "episode_index", "index", "task_index")}
        )
        self._episode_stats.append(to_jsonable(self._stats.add_episode(values, hists)))
        self._rows.append(row)
        self._frames += n

    def _checked(
        self, key: str, frames: Iterable[np.ndarray], episode: int, hist: np.ndarray
    ) -> tuple[tuple[int, int], Iterator[np.ndarray]]:
        """The key's (height, width), and its frames, checked and counted into `hist` as they pass."""
        it = iter(frames)
        first = next(it, None)
        if first is None:
            raise ValueError(f"episode {episode}: {key} has no frames")
        if first.ndim != 3:
            raise ValueError(
                f"episode {episode}: {key} frames must be uint8 [H, W, 3], got {first.dtype} {first.shape}"
            )
        size = self._sizes.setdefault(key, (first.shape[0], first.shape[1]))

        def counted() -> Iterator[np.ndarray]:
            # Counting runs on a thread beside the encoder (PyAV releases the GIL while encoding).
            pending: deque[Future[np.ndarray]] = deque()
            for frame in itertools.chain([first], it):
                if frame.dtype != np.uint8 or frame.shape != (*size, 3):
                    raise ValueError(
                        f"episode {episode}: {key} has a frame of {frame.dtype} {frame.shape}, earlier ones are uint8 "
                        f"{(*size, 3)}; a LeRobot video feature has one size, "
                        "so write these episodes as separate datasets"
                    )
                pending.append(self._pool.submit(pixel_counts, frame))
                yield frame
                while len(pending) > _COUNT_AHEAD:
                    np.add(hist, pending.popleft().result(), out=hist)
            while pending:
                np.add(hist, pending.popleft().result(), out=hist)

        return size, counted()

    def finish(self, *, meta: Mapping[str, Any] | None = None) -> Path:
        """Write the metadata (info.json last), move the dataset into place and return its root.

        Args:
            meta: Further JSON files for `meta/`, by file name (e.g. GR00T's "modality.json").
        """
        if not self._open:
            raise ValueError(f"{self.root}: the writer is finished or aborted")
        if not self._rows:
            raise ValueError(f"{self.root}: a LeRobot dataset needs at least one episode")
        bad = [
            m for m in meta or {} if Path(m).name != m or not m.endswith(".json") or m in ("info.json", "stats.json")
        ]
        if bad:
            raise ValueError(f"meta files must be plain *.json names other than info.json and stats.json, got {bad}")
        self._layout.close()
        self._layout.write_meta(self._rows, self._episode_stats, self.tasks)
        write_json(self._tmp / "meta" / "stats.json", to_jsonable(self._stats.dataset()))
        for name, obj in (meta or {}).items():
            write_json(self._tmp / "meta" / name, obj)
        info = info_json(
            self.features,
            self.files,
            sizes=self._sizes,
            episodes=len(self._rows),
            frames=self._frames,
            tasks=len(self._task_ids),
        )
        write_json(self._tmp / "meta" / "info.json", info)  # last: a dataset without it is unfinished
        if self.root.exists():
            self.root.rmdir()  # empty, checked on open
        os.replace(self._tmp, self.root)
        self._open = False
        self._pool.shutdown()
        return self.root

    def abort(self) -> None:
        """Stop and remove what was written (nothing at `root` itself changes)."""
        if not self._open:
            return
        self._open = False
        self._pool.shutdown(cancel_futures=True)
        try:
            self._layout.close()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> LeRobotWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.abort()


# --- in memory ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, eq=False)
class EpisodeArrays:
    """One episode in memory, ready to be written.

    Attributes:
        state: `observation.state`, float32 [T, Ds].
        action: `action`, float32 [T, Da].
        task: The language instruction.
        frames: Video key (`observation.images.<camera>`) -> uint8 RGB frames [T, H, W, 3],
            H and W even (yuv420p); the writer checks them.
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
            raise ValueError(f"state {state.shape} and action {action.shape} must be 2-D [T, D] with the same T >= 1")
        if not isinstance(self.task, str) or not self.task:
            raise ValueError(f"task must be a non-empty string, got {self.task!r}")
        if self.timestamps is not None:
            object.__setattr__(self, "timestamps", np.asarray(self.timestamps, dtype=np.float32))
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
    """Write `episodes` as one LeRobot dataset under `root`, through `LeRobotWriter`.

    Args:
        root: Dataset directory; must not exist or be empty.
        episodes: The episodes, in episode_index order; all with the same widths and video keys.
        fps: Recording rate.
        robot_type: `robot_type` in info.json.
        version: "v2.0", "v2.1" or "v3.0".
        video: Codec ("h264" or "av1") or full `VideoOptions`.
        modality: GR00T `meta/modality.json` content, written verbatim when given.
        state_names: Names of the state dims (default `motor_<i>`, like the GR00T file).
        action_names: Names of the action dims.
        episodes_per_file: v3.0 only: episodes per data parquet file and per mp4 file (at most).
        chunks_size: Files per chunk directory (LeRobot's `chunks_size`, 1000 by default).

    Returns:
        The dataset root.

    Raises:
        ValueError: inconsistent episodes or an unknown version/codec.
        FileExistsError: `root` already holds a dataset.
    """
    options = video if isinstance(video, VideoOptions) else VideoOptions(codec=video)
    files = LeRobotFiles(version=version, video=options, chunks_size=chunks_size, episodes_per_file=episodes_per_file)
    if not episodes:
        raise ValueError("need at least one episode")
    first = episodes[0]
    features = LeRobotFeatures(
        fps=fps,
        robot_type=robot_type,
        video_keys=tuple(first.frames),
        state_names=_names("observation.state", state_names, first.state.shape[1]),
        action_names=_names("action", action_names, first.action.shape[1]),
    )
    with LeRobotWriter(root, features, files) as writer:
        for ep in episodes:
            writer.add_episode(
                state=ep.state, action=ep.action, tasks=[ep.task], timestamps=ep.timestamps, frames=ep.frames
            )
        return writer.finish(meta=None if modality is None else {"modality.json": dict(modality)})


def safe_path_part(name: str) -> bool:
    """Whether `name` can be one component of a path the writer creates, staying where it is put:
    letters, digits, '.', '_' and '-', not '.' or '..' (no separator, NUL or drive)."""
    return bool(_SAFE_PART.fullmatch(name)) and name not in (".", "..")


def _names(key: str, names: Sequence[str] | None, width: int) -> tuple[str, ...]:
    out = tuple(names) if names is not None else tuple(f"motor_{i}" for i in range(width))
    if len(out) != width:
        raise ValueError(f"{key} has {width} dims but {len(out)} names were given")
    return out
