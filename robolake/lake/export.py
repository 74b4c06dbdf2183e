"""Export: one lake version -> LeRobot v3.0 datasets that the LeRobot and GR00T trainers load.

A lake built from bags, HDF5 or RLDS is only useful to most robot-learning code once it is a
LeRobot dataset again, so the export writes exactly LeRobot's v3.0 layout (the layout of
`huggingface/lerobot` `datasets/utils.py`: `DEFAULT_DATA_PATH`, `DEFAULT_VIDEO_PATH`,
`DEFAULT_EPISODES_PATH`, `meta/tasks.parquet`, `meta/stats.json`) plus GR00T's
`meta/modality.json`, built from the embodiment spec:

    meta/info.json                 codebase_version v3.0, fps, features, path templates
    meta/episodes/chunk-000/file-000.parquet
                                   one row per episode: tasks, length, data/{chunk,file}_index,
                                   dataset_{from,to}_index, videos/<key>/{chunk_index,file_index,
                                   from_timestamp,to_timestamp}, stats/<feature>/<stat>
    meta/tasks.parquet             task string (pandas index) -> task_index
    meta/stats.json                dataset statistics (min, max, mean, std, count, q01..q99)
    meta/modality.json             GR00T slices of state/action, video keys, language annotation
    meta/robolake_export.json      lineage: lake URI, lake version, filter, lake episode ids
    data/chunk-XXX/file-XXX.parquet        many episodes, one row group each
    videos/<key>/chunk-XXX/file-XXX.mp4    many episodes, h264 yuv420p, pts = frame number

A LeRobot dataset has one feature layout, so an export holds one embodiment. When the episodes
selected span several embodiments, each gets its own dataset under `OUT/<tag>/`; when they are
of one embodiment, `OUT` itself is the dataset. `robolake ingest OUT` reads both.

Why these choices:

- Values round-trip exactly. State and action are the lake's float32 vectors; timestamps are
  the lake's float64 seconds (LeRobot's default is float32, which would round them; LeRobot and
  GR00T read whatever dtype info.json declares). Per-step task indices are global indices of
  an ordering of tasks that keeps each episode's own task order, so re-ingesting the export
  gives the same per-episode task lists and per-step task indices.
- Frames are decoded from the lake's per-frame JPEG/PNG and encoded once to h264 with PyAV
  (`robolake.writers` settings: libx264, closed GOP, yuv420p, no mbtree, a keyframe at every
  episode start). Frame n of a file is stamped n / fps, and an episode's frames are those with
  from_timestamp <= t < to_timestamp, which is how LeRobot finds them. Video is lossy: a
  re-ingest gives frames within codec tolerance, not the same bytes.
- Files roll over like LeRobot's writer: a new data (video) file starts when the current one
  would pass `data_files_size_in_mb` (`video_files_size_in_mb`), estimated from its size per
  frame so far; file indices count up to `chunks_size - 1`, then the chunk index moves on.
- Statistics are computed from the exported rows (not copied from the lake, whose statistics
  cover the whole embodiment, not the filtered subset): exact per-dimension min/max/mean/std
  and quantiles for numbers, and exact per-channel statistics of every frame from 256-bin
  histograms for cameras (LeRobot samples frames; a histogram of all of them costs little next
  to the video encode).
- A dataset is written into `<dest>.robolake-partial` and renamed into place once complete, so
  a killed export never leaves something that looks like a finished dataset.

What is not kept: per-episode metadata beyond task and success (source paths, reader details),
and GR00T annotations other than the task description (the lake does not hold them, e.g.
`human.validity`). Episodes whose timestamps are not at i / fps (within LeRobot's 1e-4 s
tolerance) are exported as they are, with a warning: LeRobot's video lookup would reject them.
"""

from __future__ import annotations

import dataclasses
import graphlib
import json
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robolake.lake.lake import Lake
from robolake.lake.media import decode_row, video_gop
from robolake.lake.query import EpisodeFilter, sql_quote
from robolake.lake.sources.lerobot import embodiment_tag
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.writers.lerobot import V3_DATA_PATH, V3_EPISODES_PATH, V3_VIDEO_PATH, VideoOptions

__all__ = ["ExportConfig", "ExportResult", "export_lerobot", "EXPORT_FORMATS", "QUANTILES"]

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("lerobot-v3",)
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)  # LeRobot's DEFAULT_QUANTILES
_Q_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)
_PARTIAL = ".robolake-partial"
_DECODE_AHEAD = 16  # frames decoded ahead of the encoder (bounds memory for large frames)
_TIMESTAMP_TOLERANCE_S = 1e-4  # LeRobot's default tolerance_s
TASK_ANNOTATION = "human.action.task_description"  # GR00T's language key

ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """How to write the LeRobot datasets.

    Attributes:
        video: Codec settings of the mp4 files (h264 by default, yuv420p).
        data_files_size_in_mb: A data parquet file rolls over past this size (LeRobot: 100).
        video_files_size_in_mb: An mp4 file rolls over past this size (LeRobot: 200).
        chunks_size: Files per chunk directory (LeRobot: 1000).
        decode_threads: Threads decoding the lake's JPEG/PNG frames ahead of the video encoder.
    """

    video: VideoOptions = field(default_factory=VideoOptions)
    data_files_size_in_mb: float = 100
    video_files_size_in_mb: float = 200
    chunks_size: int = 1000
    decode_threads: int = 2

    def __post_init__(self) -> None:
        if self.data_files_size_in_mb <= 0 or self.video_files_size_in_mb <= 0:
            raise ValueError(
                f"file sizes must be > 0 MB, got data {self.data_files_size_in_mb}, video {self.video_files_size_in_mb}"
            )
        if self.chunks_size < 1 or self.decode_threads < 1:
            raise ValueError(f"chunks_size and decode_threads must be >= 1, got {self.chunks_size}, {self.decode_threads}")


@dataclass(frozen=True, kw_only=True)
class ExportResult:
    """One dataset written by an export.

    Attributes:
        embodiment: Its embodiment tag.
        path: The dataset root (holds meta/info.json).
        lake_version: The lake version it was read from.
        episodes: Episodes written.
        frames: Steps (parquet rows) written.
        videos: mp4 files written.
        tasks: Distinct tasks.
        seconds: Wall time.
    """

    embodiment: str
    path: Path
    lake_version: int
    episodes: int
    frames: int
    videos: int
    tasks: int
    seconds: float


def export_lerobot(
    lake: Lake | str,
    out: str | Path,
    *,
    filter: EpisodeFilter | None = None,
    version: int | None = None,
    config: ExportConfig | None = None,
    progress: ProgressFn | None = None,
) -> list[ExportResult]:
    """Write the lake's episodes (optionally filtered, at any version) as LeRobot v3.0 datasets.

    Args:
        lake: A Lake or a lake URI.
        out: A new or empty local directory. With one embodiment selected it becomes the
            dataset; with several, each embodiment's dataset is `out/<tag>`.
        filter: Which episodes (default: all).
        version: Lake version to read (default: the Lake's version, or the newest for a URI).
        config: File and codec settings.
        progress: Called as progress(embodiment, episodes_done, episodes_total).

    Returns:
        One result per dataset written, in embodiment order.

    Raises:
        FileExistsError: `out` exists and is not empty.
        ValueError: no episode matches, or the episodes cannot form a LeRobot dataset
            (frame sizes that differ between episodes, odd sizes, missing frames or cameras).
    """
    config = config or ExportConfig()
    if isinstance(lake, str):
        lake = Lake.open(lake, version=version)
    elif version is not None and version != lake.version:
        lake = lake.checkout(version)
    if "://" in str(out):
        raise ValueError(f"export writes to a local directory, got {out}; export locally and upload the result")
    out = Path(os.path.abspath(out))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not empty; export into a new directory or remove it first")
    rows = lake.episodes(filter).to_pylist()
    if not rows:
        raise ValueError(
            f"no episode of lake {lake.uri} version {lake.version} matches the filter {_filter_json(filter)}; "
            f"its embodiments are {sorted(lake.embodiments())} (`robolake info {lake.uri}`)"
        )
    by_tag: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: (r["embodiment"], r["source_uri"], r["source_episode_index"], r["episode_id"])):
        by_tag.setdefault(r["embodiment"], []).append(r)
    specs = lake.embodiments()
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for tag, episodes in by_tag.items():
        dest = out if len(by_tag) == 1 else out / tag
        if tag not in specs:
            raise ValueError(f"lake {lake.uri} has episodes of embodiment {tag!r} but no spec for it; re-ingest them")
        results.append(_export_one(lake, specs[tag], episodes, dest, filter, config, progress))
    return results


# --- one embodiment --------------------------------------------------------------------------


def _export_one(
    lake: Lake,
    spec: EmbodimentSpec,
    episodes: list[dict[str, Any]],
    dest: Path,
    filter: EpisodeFilter | None,
    config: ExportConfig,
    progress: ProgressFn | None,
) -> ExportResult:
    t0 = time.perf_counter()
    fps = _common_fps(spec, episodes)
    cameras = _cameras(spec, episodes)
    ep_tasks = [_episode_tasks(e) for e in episodes]
    tasks = _task_order(ep_tasks)
    task_id = {t: i for i, t in enumerate(tasks)}
    modality, annotation_columns = _modality(spec, cameras)
    success = [e["success"] for e in episodes]
    write_success = all(s is not None for s in success)
    if not write_success and any(s is not None for s in success):
        log.warning("embodiment %s: only some episodes record success; the export leaves next.success out", spec.tag)

    tmp = dest.with_name(dest.name + _PARTIAL)
    shutil.rmtree(tmp, ignore_errors=True)  # what a killed export of the same destination left
    tmp.mkdir(parents=True)
    data = _RollingParquet(tmp, config)
    videos = {cam: _RollingVideo(tmp, _video_key(spec, cam), fps, config) for cam in cameras}
    pool = ThreadPoolExecutor(max_workers=config.decode_threads, thread_name_prefix="robolake-export")
    try:
        meta_rows: list[dict[str, Any]] = []
        numeric: dict[str, list[np.ndarray]] = {}
        hists: dict[str, np.ndarray] = {}
        sizes: dict[str, tuple[int, int]] = {}
        index = 0
        off_grid = 0
        for i, (ep, names) in enumerate(zip(episodes, ep_tasks, strict=True)):
            steps = _read_steps(lake, ep, spec)
            n = steps.num_rows
            local = steps["task_index"].to_numpy().astype(np.int64)
            if len(local) and (local.min() < 0 or local.max() >= len(names)):
                raise ValueError(
                    f"episode {ep['episode_id']}: step task_index {int(local.max())} is outside its "
                    f"{len(names)} tasks; the lake is inconsistent, re-ingest the episode"
                )
            global_task = np.asarray([task_id[t] for t in names], dtype=np.int64)[local]
            ts = steps["timestamp"].to_numpy().astype(np.float64)
            if np.abs(ts - np.arange(n) / fps).max() > _TIMESTAMP_TOLERANCE_S:
                off_grid += 1
            table, values = _data_table(steps, i, index, global_task, fps, annotation_columns, success[i] if write_success else None)
            chunk, file = data.write(table)
            row: dict[str, Any] = {"episode_index": i, "tasks": list(names), "length": n,
                                   "data/chunk_index": chunk, "data/file_index": file,
                                   "dataset_from_index": index, "dataset_to_index": index + n}  # fmt: skip
            ep_stats = {feature: _vector_stats(arr) for feature, arr in values.items()}
            for feature, arr in values.items():
                numeric.setdefault(feature, []).append(arr)
            for cam in cameras:
                key = _video_key(spec, cam)
                hist = np.zeros((3, 256), dtype=np.int64)
                placed = videos[cam].write_episode(_episode_frames(lake, ep, cam, n, sizes, hist, pool))
                row.update({f"videos/{key}/{k}": v for k, v in placed.items()})
                ep_stats[key] = _image_stats(hist, n)
                hists[key] = hists.get(key, np.zeros((3, 256), dtype=np.int64)) + hist
            for feature, fstats in ep_stats.items():
                for name, value in fstats.items():
                    row[f"stats/{feature}/{name}"] = np.asarray(value).tolist()
            row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = 0, 0
            meta_rows.append(row)
            index += n
            if progress is not None:
                progress(spec.tag, i + 1, len(episodes))
        data.close()
        for video in videos.values():
            video.close()
        if off_grid:
            log.warning(
                "embodiment %s: %d of %d episodes have timestamps off the 1/%g s grid by more than %g s; "
                "LeRobot's video lookup will reject them (resample them onto the fps at ingest)",
                spec.tag, off_grid, len(episodes), fps, _TIMESTAMP_TOLERANCE_S,
            )
        stats = {feature: _vector_stats(np.concatenate(parts)) for feature, parts in numeric.items()}
        stats.update({key: _image_stats(h, index) for key, h in hists.items()})
        meta = tmp / "meta"
        _write_episodes_meta(tmp, meta_rows)
        _write_tasks(meta / "tasks.parquet", tasks)
        _write_json(meta / "stats.json", {f: {s: np.asarray(x).tolist() for s, x in d.items()} for f, d in stats.items()})
        _write_json(meta / "modality.json", modality)
        _write_json(meta / "robolake_export.json", {
            "lake": lake.uri, "lake_version": lake.version, "embodiment": spec.tag,
            "filter": _filter_json(filter), "exported_at": time.time(),
            "episode_ids": [e["episode_id"] for e in episodes],
        })  # fmt: skip
        info = _info(spec, cameras, sizes, fps, len(episodes), index, len(tasks), config, annotation_columns, write_success)
        _write_json(meta / "info.json", info)  # last: a dataset without it is unfinished
        if dest.exists():
            dest.rmdir()  # the empty `out` of a one-embodiment export
        os.replace(tmp, dest)
    except BaseException:
        pool.shutdown(cancel_futures=True)
        data.close()
        for video in videos.values():
            video.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pool.shutdown()
    n_videos = sum(video.files for video in videos.values())
    log.info("exported %d episodes of %s to %s", len(episodes), spec.tag, dest)
    return ExportResult(
        embodiment=spec.tag, path=dest, lake_version=lake.version, episodes=len(episodes), frames=index,
        videos=n_videos, tasks=len(tasks), seconds=time.perf_counter() - t0,
    )


def _common_fps(spec: EmbodimentSpec, episodes: list[dict[str, Any]]) -> float:
    rates = sorted({float(e["fps"]) for e in episodes})
    if len(rates) > 1:
        raise ValueError(
            f"embodiment {spec.tag!r}: the selected episodes were recorded at different rates {rates}; "
            "a LeRobot dataset has one fps, so export each rate separately (--filter)"
        )
    if rates[0] <= 0:
        raise ValueError(f"embodiment {spec.tag!r}: episodes have fps {rates[0]}; a LeRobot dataset needs fps > 0")
    return rates[0]


def _cameras(spec: EmbodimentSpec, episodes: list[dict[str, Any]]) -> list[str]:
    """Cameras every selected episode has, in spec order (an episode lacking one is an error)."""
    seen: list[str] = []
    for e in episodes:
        seen += [c for c in e["cameras"] if c not in seen]
    ordered = [c for c in spec.cameras if c in seen] + [c for c in seen if c not in spec.cameras]
    for e in episodes:
        missing = [c for c in ordered if c not in e["cameras"]]
        if missing:
            raise ValueError(
                f"episode {e['episode_id']} has no frames of camera(s) {missing} that other episodes of "
                f"{spec.tag!r} have; a LeRobot dataset needs every camera in every episode, so export "
                "these episodes separately (--filter)"
            )
    return ordered


def _episode_tasks(episode: dict[str, Any]) -> list[str]:
    """The episode's task list, which its steps' task_index points into."""
    try:
        tasks = json.loads(episode["metadata"] or "{}").get("tasks")
    except (json.JSONDecodeError, AttributeError):
        tasks = None
    return [str(t) for t in tasks] if tasks else [str(episode["task"])]


def _task_order(per_episode: Sequence[Sequence[str]]) -> list[str]:
    """All tasks in an order that keeps each episode's own order (first appearance otherwise).

    A re-ingest numbers an episode's tasks by their global index, so keeping each episode's
    relative order reproduces its per-step task indices exactly.
    """
    first = list(dict.fromkeys(t for tasks in per_episode for t in tasks))
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for t in first:
        sorter.add(t)
    for tasks in per_episode:
        for a, b in zip(tasks, tasks[1:], strict=False):
            sorter.add(b, a)
    try:
        return list(sorter.static_order())
    except graphlib.CycleError:
        log.info("episodes list their tasks in contradicting orders; numbering tasks by first appearance")
        return first


def _video_key(spec: EmbodimentSpec, camera: str) -> str:
    key = spec.video_key(camera)
    return key if key.startswith("observation.images.") else f"observation.images.{camera}"


def _modality(spec: EmbodimentSpec, cameras: list[str]) -> tuple[dict[str, Any], list[str]]:
    """GR00T modality.json of the export, and the annotation columns the parquet files need."""
    modality = spec.to_modality_json()
    if not modality["state"]:
        modality["state"] = {"state": {"start": 0, "end": spec.state_dim}}
    if not modality["action"]:
        modality["action"] = {"action": {"start": 0, "end": spec.action_dim}}
    modality["video"] = {cam: {"original_key": _video_key(spec, cam)} for cam in cameras}
    annotation: dict[str, Any] = {}
    columns: list[str] = []
    for name, key in spec.annotations:
        if key == "task_index":
            annotation[name] = {"original_key": "task_index"}
        elif "task_description" in name:
            annotation[name] = {} if key == f"annotation.{name}" else {"original_key": key}
            columns.append(key)
        else:
            log.info("embodiment %s: annotation %r is not kept in the lake; the export leaves it out", spec.tag, name)
    if not annotation:
        annotation[TASK_ANNOTATION] = {}
        columns.append(f"annotation.{TASK_ANNOTATION}")
    modality["annotation"] = annotation
    return modality, columns


def _read_steps(lake: Lake, episode: dict[str, Any], spec: EmbodimentSpec) -> pa.Table:
    steps = lake.to_arrow(
        "steps", columns=["step_index", "timestamp", "state", "action", "task_index"],
        where=f"episode_id = {sql_quote(episode['episode_id'])}",
    ).sort_by("step_index")
    n = int(episode["num_steps"])
    if steps.num_rows != n or not np.array_equal(steps["step_index"].to_numpy(), np.arange(n)):
        raise ValueError(
            f"episode {episode['episode_id']} has {steps.num_rows} step rows but num_steps={n} "
            "(or gaps in step_index); the lake is inconsistent: run `robolake check` and re-ingest it"
        )
    return steps


def _matrix(column: pa.ChunkedArray, n: int) -> np.ndarray:
    arr = column.combine_chunks()
    flat = arr.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    return flat.reshape(n, -1) if n else flat.reshape(0, 0)


def _fixed_list(x: np.ndarray) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1), pa.float32()), x.shape[1])


def _data_table(
    steps: pa.Table,
    episode_index: int,
    start: int,
    task_index: np.ndarray,
    fps: float,
    annotation_columns: list[str],
    success: bool | None,
) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """The episode's data rows (LeRobot column order) and its numeric features for statistics."""
    n = steps.num_rows
    state, action = _matrix(steps["state"], n), _matrix(steps["action"], n)
    ts = steps["timestamp"].to_numpy().astype(np.float64)
    ints = {
        "frame_index": np.arange(n, dtype=np.int64),
        "episode_index": np.full(n, episode_index, dtype=np.int64),
        "index": np.arange(start, start + n, dtype=np.int64),
        "task_index": task_index,
    }
    cols: dict[str, pa.Array] = {
        "observation.state": _fixed_list(state), "action": _fixed_list(action), "timestamp": pa.array(ts, pa.float64()),
        **{k: pa.array(v, pa.int64()) for k, v in ints.items()},
    }  # fmt: skip
    for name in annotation_columns:
        cols[name] = pa.array(task_index, pa.int64())
    done = np.zeros(n, dtype=bool)
    done[-1] = True
    cols["next.done"] = pa.array(done)
    if success is not None:
        cols["next.success"] = pa.array(done & success)
    values = {"observation.state": state, "action": action, "timestamp": ts[:, None],
              **{k: v[:, None] for k, v in ints.items()}}  # fmt: skip
    return pa.table(cols), values


def _episode_frames(
    lake: Lake,
    episode: dict[str, Any],
    camera: str,
    n: int,
    sizes: dict[str, tuple[int, int]],
    hist: np.ndarray,
    pool: ThreadPoolExecutor,
) -> Iterator[np.ndarray]:
    """Yield the episode's decoded RGB frames of `camera`, in step order, counting pixel values."""
    eid = episode["episode_id"]
    media = lake.to_arrow(
        "media", columns=["step_index", "width", "height", "encoding", "data"],
        where=f"episode_id = {sql_quote(eid)} AND camera = {sql_quote(camera)}",
    ).sort_by("step_index")
    if media.num_rows != n or not np.array_equal(media["step_index"].to_numpy(), np.arange(n)):
        raise ValueError(
            f"episode {eid} camera {camera!r} has {media.num_rows} frames for {n} steps; the lake is "
            "inconsistent: run `robolake check` and re-ingest the episode"
        )
    found = {(int(w), int(h)) for w, h in zip(media["width"].to_pylist(), media["height"].to_pylist(), strict=True)}
    size = sizes.setdefault(camera, next(iter(found)))
    if found != {size}:
        raise ValueError(
            f"episode {eid} camera {camera!r} has frames of {sorted(found)} (width, height) but earlier "
            f"episodes have {size}; a LeRobot video feature has one size, so export these groups separately (--filter)"
        )
    if size[0] % 2 or size[1] % 2:
        raise ValueError(
            f"camera {camera!r} frames are {size[0]}x{size[1]}; h264 in yuv420p needs even sizes, "
            "so this camera cannot be exported to LeRobot video"
        )
    # Decoding (PIL and PyAV release the GIL) runs on the pool, a bounded window ahead of the encoder.
    pending: deque[Future[tuple[np.ndarray, np.ndarray]]] = deque()
    cells, encodings = media["data"].to_pylist(), media["encoding"].to_pylist()
    for i, (cell, enc) in enumerate(zip(cells, encodings, strict=True)):
        gop = video_gop(enc)
        key = cells[i - i % gop] if gop and i % gop else None  # rows are steps 0..n-1, checked above
        pending.append(pool.submit(_decode_counted, cell, enc, key))
        if len(pending) >= _DECODE_AHEAD:
            yield _take(pending, hist)
    while pending:
        yield _take(pending, hist)


def _decode_counted(data: bytes, encoding: str, key: bytes | None) -> tuple[np.ndarray, np.ndarray]:
    frame = decode_row(data, encoding, key)
    counts = np.stack([np.bincount(frame[..., c].reshape(-1), minlength=256) for c in range(3)])
    return frame, counts


def _take(pending: deque[Future[tuple[np.ndarray, np.ndarray]]], hist: np.ndarray) -> np.ndarray:
    frame, counts = pending.popleft().result()
    hist += counts
    return frame


# --- files ----------------------------------------------------------------------------------


def _next_file(chunk: int, file: int, chunks_size: int) -> tuple[int, int]:
    """LeRobot's update_chunk_file_indices."""
    return (chunk + 1, 0) if file == chunks_size - 1 else (chunk, file + 1)


def _full(size_bytes: int, frames_in_file: int, new_frames: int, limit_mb: float) -> bool:
    """Whether adding `new_frames` would take the file past the limit (LeRobot's estimate)."""
    if frames_in_file == 0:
        return False
    per_frame = size_bytes / frames_in_file
    return (size_bytes + per_frame * new_frames) / (1024 * 1024) >= limit_mb


class _RollingParquet:
    """Data parquet files, one row group per episode, rolling over by size."""

    def __init__(self, root: Path, config: ExportConfig):
        self._root, self._config = root, config
        self._chunk, self._file, self._frames = 0, 0, 0
        self._writer: pq.ParquetWriter | None = None
        self._sink: pa.NativeFile | None = None

    def write(self, table: pa.Table) -> tuple[int, int]:
        if self._writer is not None and self._sink is not None:
            # tell(): bytes written so far (an unbuffered sink), so the estimate sees every row group.
            if _full(self._sink.tell(), self._frames, table.num_rows, self._config.data_files_size_in_mb):
                self.close()
                self._chunk, self._file = _next_file(self._chunk, self._file, self._config.chunks_size)
        if self._writer is None:
            path = self._root / V3_DATA_PATH.format(chunk_index=self._chunk, file_index=self._file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._sink = pa.OSFile(str(path), "wb")
            self._writer = pq.ParquetWriter(self._sink, table.schema, compression="snappy")
            self._frames = 0
        self._writer.write_table(table)
        self._frames += table.num_rows
        return self._chunk, self._file

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._sink is not None:
            self._sink.close()
            self._sink = None


class _RollingVideo:
    """One camera's mp4 files: episodes laid end to end, rolling over by size."""

    def __init__(self, root: Path, key: str, fps: float, config: ExportConfig):
        self._root, self._key, self._fps, self._config = root, key, fps, config
        self._chunk, self._file = 0, 0
        self._mp4: _Mp4 | None = None
        self.files = 0

    def write_episode(self, frames: Any) -> dict[str, Any]:
        """Append an episode's frames; returns its chunk/file indices and from/to timestamps."""
        frames = iter(frames)
        first = next(frames, None)
        if first is None:
            raise ValueError(f"camera {self._key}: an episode has no frames")
        mp4 = self._mp4
        if mp4 is not None and _full(mp4.encoded_bytes, mp4.frames, 1, self._config.video_files_size_in_mb):
            mp4.close()
            mp4 = self._mp4 = None
            self._chunk, self._file = _next_file(self._chunk, self._file, self._config.chunks_size)
        if mp4 is None:
            path = self._root / V3_VIDEO_PATH.format(video_key=self._key, chunk_index=self._chunk, file_index=self._file)
            mp4 = self._mp4 = _Mp4(path, width=first.shape[1], height=first.shape[0], fps=self._fps, options=self._config.video)
            self.files += 1
        start = mp4.frames
        mp4.write(first, keyframe=True)
        for frame in frames:
            mp4.write(frame, keyframe=False)
        return {"chunk_index": self._chunk, "file_index": self._file,
                "from_timestamp": start / self._fps, "to_timestamp": mp4.frames / self._fps}  # fmt: skip

    def close(self) -> None:
        if self._mp4 is not None:
            self._mp4.close()
            self._mp4 = None


class _Mp4:
    """An mp4 written frame by frame with the settings of `robolake.writers._video_encode`.

    `encode_video` there takes every frame of a file at once; an export streams files of
    hundreds of megabytes, so it encodes one frame at a time with the same codec options.
    """

    def __init__(self, path: Path, *, width: int, height: int, fps: float, options: VideoOptions):
        import av  # lazy: PyAV is only needed when video is written

        self.path, self.frames, self.encoded_bytes = path, 0, 0
        self._width, self._height = width, height
        path.parent.mkdir(parents=True, exist_ok=True)
        rate = Fraction(fps).limit_denominator(1001)
        self._container = av.open(str(path), mode="w")
        encoder = {"h264": "libx264", "av1": "libsvtav1"}[options.codec]
        stream = cast("av.video.stream.VideoStream", self._container.add_stream(encoder, rate=rate))
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p"
        stream.time_base = 1 / rate
        stream.codec_context.gop_size = options.gop or max(1, round(2 * float(fps)))
        if width * height <= 256 * 256:
            stream.codec_context.thread_count = 1
        if options.codec == "h264":
            stream.options = {
                "crf": str(options.crf if options.crf is not None else 23),
                "preset": options.preset or "veryfast",
                "forced-idr": "1",
                "x264-params": "mbtree=0",  # output a function of the frames alone (see _video_encode)
            }
        else:
            stream.options = {"crf": str(options.crf if options.crf is not None else 35), "preset": options.preset or "10"}
        self._stream = stream

    def write(self, frame: np.ndarray, *, keyframe: bool) -> None:
        import av

        if frame.shape != (self._height, self._width, 3):
            raise ValueError(f"{self.path}: frame of shape {frame.shape}, expected {(self._height, self._width, 3)}")
        vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
        vf.pts = self.frames
        if keyframe:
            vf.pict_type = av.video.frame.PictureType.I
        packets = self._stream.encode(vf)
        # Encoded bytes so far: the file on disk lags behind by the muxer's buffer.
        self.encoded_bytes += sum(p.size for p in packets)
        self._container.mux(packets)
        self.frames += 1

    def close(self) -> None:
        self._container.mux(self._stream.encode(None))
        self._container.close()


# --- statistics -------------------------------------------------------------------------------


def _vector_stats(x: np.ndarray) -> dict[str, np.ndarray]:
    """Per-dimension statistics of [n, d] values, as LeRobot stores them."""
    v = x.astype(np.float64)
    quant = np.quantile(v, QUANTILES, axis=0)
    out = {"min": v.min(0), "max": v.max(0), "mean": v.mean(0), "std": v.std(0), "count": np.array([len(v)])}
    out.update({k: quant[i] for i, k in enumerate(_Q_KEYS)})
    return out


def _image_stats(hist: np.ndarray, frames: int) -> dict[str, np.ndarray]:
    """Per-channel statistics, scaled to [0, 1] and shaped [3, 1, 1], of 256-bin pixel histograms."""
    values = np.arange(256, dtype=np.float64) / 255.0
    total = hist.sum(axis=1, keepdims=True).astype(np.float64)
    mean = (hist * values).sum(axis=1) / total[:, 0]
    var = (hist * values**2).sum(axis=1) / total[:, 0] - mean**2
    nonzero = hist > 0
    lo = values[np.argmax(nonzero, axis=1)]
    hi = values[255 - np.argmax(nonzero[:, ::-1], axis=1)]
    cdf = np.cumsum(hist, axis=1) / total
    out = {"min": lo, "max": hi, "mean": mean, "std": np.sqrt(np.maximum(var, 0.0))}
    out.update({k: values[np.argmax(cdf >= q, axis=1)] for q, k in zip(QUANTILES, _Q_KEYS, strict=True)})
    shaped = {k: v.reshape(3, 1, 1) for k, v in out.items()}
    shaped["count"] = np.array([frames])
    return shaped


# --- metadata ---------------------------------------------------------------------------------


def _fps_value(fps: float) -> int | float:
    return int(fps) if float(fps).is_integer() else float(fps)


def _names(slices: Sequence[Any], dim: int) -> list[str]:
    names = [f"motor_{i}" for i in range(dim)]
    for s in slices:
        for j in range(s.start, s.end):
            names[j] = f"{s.name}_{j - s.start}"
    return names


def _info(
    spec: EmbodimentSpec,
    cameras: list[str],
    sizes: dict[str, tuple[int, int]],
    fps: float,
    episodes: int,
    frames: int,
    tasks: int,
    config: ExportConfig,
    annotation_columns: list[str],
    success: bool,
) -> dict[str, Any]:
    fps_out = _fps_value(fps)
    features: dict[str, Any] = {}
    for cam in cameras:
        w, h = sizes[cam]
        features[_video_key(spec, cam)] = {
            "dtype": "video", "shape": [h, w, 3], "names": ["height", "width", "channels"],
            "info": {"video.height": h, "video.width": w, "video.codec": config.video.codec,
                     "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": fps_out,
                     "video.channels": 3, "has_audio": False},
        }  # fmt: skip
    features["observation.state"] = {"dtype": "float32", "shape": [spec.state_dim], "names": _names(spec.state, spec.state_dim)}
    features["action"] = {"dtype": "float32", "shape": [spec.action_dim], "names": _names(spec.action, spec.action_dim)}
    features["timestamp"] = {"dtype": "float64", "shape": [1], "names": None}
    for key in ("frame_index", "episode_index", "index", "task_index", *annotation_columns):
        features[key] = {"dtype": "int64", "shape": [1], "names": None}
    features["next.done"] = {"dtype": "bool", "shape": [1], "names": None}
    if success:
        features["next.success"] = {"dtype": "bool", "shape": [1], "names": None}
    for ft in features.values():
        if ft["dtype"] != "video":
            ft["fps"] = fps_out
    robot_type = spec.robot_type
    if embodiment_tag(robot_type, "") != spec.tag:
        robot_type = spec.tag  # so that a re-ingest derives the same tag from robot_type
        if embodiment_tag(robot_type, "") != spec.tag:
            log.warning("embodiment tag %r is not snake_case; re-ingest the export with --embodiment %s", spec.tag, spec.tag)
    return {
        "codebase_version": "v3.0",
        "robot_type": robot_type,
        "total_episodes": episodes,
        "total_frames": frames,
        "total_tasks": tasks,
        "chunks_size": config.chunks_size,
        "data_files_size_in_mb": _fps_value(config.data_files_size_in_mb),
        "video_files_size_in_mb": _fps_value(config.video_files_size_in_mb),
        "fps": fps_out,
        "splits": {"train": f"0:{episodes}"},
        "data_path": V3_DATA_PATH,
        "video_path": V3_VIDEO_PATH if cameras else None,
        "features": features,
    }


def _write_episodes_meta(root: Path, rows: list[dict[str, Any]]) -> None:
    path = root / V3_EPISODES_PATH.format(chunk_index=0, file_index=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _write_tasks(path: Path, tasks: list[str]) -> None:
    """meta/tasks.parquet as LeRobot writes it: a pandas frame indexed by task string."""
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - pandas ships with ray[data]
        raise ImportError("writing meta/tasks.parquet needs pandas: pip install pandas") from e
    frame = pd.DataFrame({"task_index": np.arange(len(tasks), dtype=np.int64)}, index=pd.Index(tasks, name="task"))
    frame.to_parquet(path)


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=4, ensure_ascii=False) + "\n")


def _filter_json(f: EpisodeFilter | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(f).items() if v is not None}
