"""Reader for LeRobot datasets: layouts v2.0, v2.1 and v3.0, with GR00T's modality.json.

Three pieces, as for the other formats: `lerobot_meta` reads and checks the dataset's metadata
(info.json, modality.json, the episode and task tables; a dataset it cannot trust raises one
`bad_metadata` error), `lerobot_plan` resolves the cameras, the spec and each episode's files
and time spans, and this module reads what the plan points at: an episode's parquet rows, then
its frames: by default the videos' own packets, kept as recorded and checked to decode
(`sources.video.read_record`); with a lossy layout, decoded and re-encoded one at a time; image
columns byte for byte.

Real datasets have quirks this tolerates: timestamps that do not start at 0, no `frame_index`
column (or no `timestamp` one, when `frame_index / fps` stands in), tasks listed per episode
instead of a `task_index` column. *Content problems* are per episode, at read time: a `task_index` with no task in
the task table (`unknown_task`, never an empty instruction), frames whose size is not the size
info.json declares or that change size mid-episode (`frame_size`: frames of one camera must
never mix sizes in the lake), a declared video that is missing (`missing_video`; with
`state_only` the reader takes state and action alone), and the checks on values, timestamps
and frame counts. Each is a `SourceError` naming the file, and ingest quarantines the episode.

Beside the steps, each episode keeps its record (`lerobot.record`): every column of its rows in
the column's own type (float64 state stays float64), at the rows' timestamps, taken from the
rows already read.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robolake.lake.media.codecs import jpeg_encoding
from robolake.lake.media.frames import VIDEO_CRF, VIDEO_FRAME_LAYOUTS, KeyframeEncoder, encode_frame
from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    TabularEpisode,
    content_hash,
)
from robolake.lake.sources.columnar import CLOCK_ROWS, CLOCK_SOURCE, ColumnRecord, seconds_to_ns
from robolake.lake.sources.lerobot.meta import (
    ACTION_KEY,
    STATE_KEY,
    LeRobotMeta,
    embodiment_tag,
    is_lerobot_dataset,
    resolves_inside,
)
from robolake.lake.sources.lerobot.plan import LeRobotPlan
from robolake.lake.sources.lerobot.record import SKIPPED, parquet_column_bytes, record_rows
from robolake.lake.sources.record import Record, record_notes
from robolake.lake.sources.registry import SourceFormat, SourceOptions
from robolake.lake.sources.video import file_digest, iter_video_frames, read_record, release_videos
from robolake.schemas.embodiment import EmbodimentSpec

__all__ = ["LeRobotReader", "is_lerobot_dataset", "embodiment_tag", "FORMAT"]

log = logging.getLogger(__name__)


class LeRobotReader:
    """Reads one LeRobot dataset directory.

    Args:
        root: Dataset root (holds `meta/info.json`).
        embodiment: Embodiment tag to give its episodes; defaults to its robot_type in snake_case.
        state_only: Take state and action alone where declared videos are missing, instead of
            quarantining the episodes.
        video_frames: How the videos' frames are stored: `record` (the videos' own packets, the
            default), `jpeg` (re-encoded, one image a frame) or `h264` (re-encoded,
            key-referenced); see `lake.media`.
        video_crf: CRF of the `h264` layout (default `lake.codecs.VIDEO_CRF`).
        streams: Glob patterns of the columns the record keeps (`--streams`); None keeps every
            column (state, action, timestamps, tasks and cameras are kept regardless).

    Attributes:
        notes: Things a user should hear about that are not errors (cameras left out under
            `state_only`, an episode listed twice identically); ingest prints them.

    Raises:
        SourceError: `bad_metadata`: the dataset's metadata is missing, malformed or of an
            unsupported version; the error names the file and the field, and lists the episodes
            the dataset declares when they can be read.
    """

    def __init__(
        self,
        root: str,
        *,
        embodiment: str | None = None,
        state_only: bool = False,
        video_frames: str = "record",
        video_crf: int | None = None,
        streams: tuple[str, ...] | None = None,
    ):
        if video_frames not in VIDEO_FRAME_LAYOUTS:
            raise ValueError(f"video_frames must be one of {VIDEO_FRAME_LAYOUTS}, got {video_frames!r}")
        self.state_only = state_only
        self.video_frames = video_frames
        self.video_crf = VIDEO_CRF if video_crf is None else video_crf
        self.streams = streams
        self.meta = LeRobotMeta(root)
        self.root = self.meta.root
        self.notes = self.meta.notes
        self.info = self.meta.info
        self.modality = self.meta.modality
        self.version = self.meta.version
        self.format_name = f"lerobot-{self.version}"
        self.fps = self.meta.fps
        self.tag = embodiment or embodiment_tag(str(self.info.get("robot_type") or ""), os.path.basename(self.root))
        self.plan = LeRobotPlan(self.meta, tag=self.tag, state_only=state_only)
        self.cameras = self.plan.cameras
        self._file: _DataFile | None = None

    def spec(self) -> EmbodimentSpec:
        """The embodiment spec, from modality.json when present, else from info.json widths."""
        return self.plan.spec

    def inspect(self) -> dict[str, Any]:
        """What the dataset holds: features (dtype, shape, role), cameras, episodes, frames, fps, tasks,
        and what ingest makes of it; a declared camera with no video file is said, not counted."""
        feats = self.info.get("features", {})
        lengths = [int(e.get("length", 0)) for e in self.meta.episodes.values()]
        keys: dict[str, dict[str, Any]] = {}
        roles = {STATE_KEY: "state", ACTION_KEY: "action", "timestamp": "timestamps", "task_index": "task"}
        roles.update(
            {
                key: "in the record only: a meta/modality.json annotation (the embodiment names it)"
                for _, key in self.plan.spec.annotations
            }
        )
        roles.update({key: f"camera {cam}" for cam, key in self.plan.video_keys.items()})
        no_video: list[str] = []
        for k, v in feats.items():
            row: dict[str, Any] = {
                "type": str(v.get("dtype", "")),
                "shape": list(v.get("shape", [])),
                "count": int(sum(lengths)),
                "rate_hz": self.fps,
            }
            if v.get("dtype") == "video" and not self.meta.video_key_has_files(k):
                no_video.append(k)
                row["count"] = 0
                declared = (
                    f"declared in meta/info.json with no video file under videos/ ({int(sum(lengths))} frames declared)"
                )
                if self.state_only:
                    row["note"], row["role"] = (
                        f"{declared}: --state-only leaves it out",
                        "ignored: no video files (--state-only)",
                    )
                elif k in self.plan.video_keys.values():
                    row["note"] = (
                        f"{declared}: ingest quarantines its episodes as missing_video; --state-only leaves it out"
                    )
                    row["role"] = "camera: no video files"
                else:  # declared, but not a camera this dataset's plan ingests (modality.json names others)
                    row["note"] = f"{declared}; not one of the cameras ingested, so nothing is lost"
                    row["role"] = (
                        "ignored: no video files, and not a camera here (meta/modality.json names the cameras)"
                    )
            else:
                row["role"] = roles.get(
                    k,
                    f"bookkeeping: not in the record ({SKIPPED[k]})"
                    if k in SKIPPED
                    else "bookkeeping (in the record)"
                    if k in ("frame_index", "index")
                    else "in the record only: not state, action or a camera (meta/modality.json can name it)",
                )
            keys[k] = row
        spec = self.plan.spec
        blocked = [k for k in no_video if k in self.plan.video_keys.values()]
        ingest = (
            f"quarantined (missing_video): {', '.join(blocked)} declared but no video file; "
            "--state-only ingests state and action alone"
            if blocked
            else f"{len(self.meta.episodes)} episode(s) of embodiment {self.tag!r}: state {spec.state_dim} values, "
            f"action {spec.action_dim}, cameras {list(self.cameras) or 'none'}, at {self.fps:g} Hz"
        )
        out: dict[str, Any] = {
            "format": self.format_name,
            "path": self.root,
            "ingest": ingest,
            "embodiment": self.tag,
            "episodes": len(self.meta.episodes),
            "fps": self.fps,
            "frames": int(sum(lengths)),
            "duration_s": float(sum(lengths) / self.fps) if self.fps else 0.0,
            "cameras": list(self.cameras),
            "tasks": sorted(set(self.meta.tasks.values()))[:20],
            "keys": keys,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def discover(self) -> list[EpisodeRef]:
        """One reference per listed episode, and one per data file the metadata does not list.

        Never raises: an episode whose listing is unusable gets a reference carrying the error,
        which `read_tabular` raises, so that ingest quarantines it like any other bad episode.
        """
        return self.plan.discover()

    # --- episode rows ----------------------------------------------------------------------

    def _read_rows(self, ref: EpisodeRef) -> tuple[pa.Table, str]:
        rel = str(ref.get("data_path"))
        path = os.path.join(self.root, rel)
        if not resolves_inside(self.root, rel):  # the metadata checks refuse such templates; never open one regardless
            raise SourceError(
                "bad_metadata",
                os.path.join(self.root, "meta", "info.json"),
                f"data_path of episode {ref.episode_index} is {rel!r}, outside the dataset (or a symlink "
                "out of it); fix meta/info.json or copy the real file into the dataset",
            )
        if not os.path.exists(path):
            raise SourceError("missing_file", path, "episode parquet file is missing; re-export the dataset")
        if self.version != "v3.0":
            return _read_parquet(path), path
        return self._data_file(path).rows_of(ref.episode_index), path

    def _data_file(self, path: str) -> _DataFile:
        """The v3.0 data file at `path`, read once for all the episodes it holds (the last one read
        is kept: ingest reads a chunk's episodes in file order, so a file is read once a chunk,
        not once an episode)."""
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        if self._file is None or self._file.key != key:
            self._file = None  # the old table goes before the new one is read
            table = _read_parquet(path)
            if "episode_index" not in table.column_names:
                raise SourceError("missing_column", path, "v3.0 data file has no 'episode_index' column")
            self._file = _DataFile(key, table)
        return self._file

    def release_files(self) -> None:
        """Drop the data file kept in memory and close the video kept open (ingest calls this at the
        end of each chunk)."""
        self._file = None
        release_videos()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_file"] = None  # a cache of this process's last data file: never shipped to a worker
        return state

    @staticmethod
    def _matrix(table: pa.Table, key: str, path: str, expected_width: int | None) -> np.ndarray:
        if key not in table.column_names:
            raise SourceError("missing_column", path, f"column {key!r} is missing; the reader needs it")
        col = table[key].combine_chunks()
        if not (
            pa.types.is_list(col.type) or pa.types.is_large_list(col.type) or pa.types.is_fixed_size_list(col.type)
        ):
            raise SourceError("shape", path, f"column {key!r} has type {col.type}, expected a list of numbers")
        if col.null_count:
            raise SourceError("non_finite", path, f"column {key!r} has {col.null_count} null rows")
        if pa.types.is_fixed_size_list(col.type):
            widths = np.full(len(col), col.type.list_size)
        else:
            widths = np.diff(col.offsets.to_numpy())
        if len(widths) and widths.min() != widths.max():
            raise SourceError("shape", path, f"column {key!r} rows differ in width ({widths.min()}..{widths.max()})")
        width = int(widths[0]) if len(widths) else 0
        if expected_width is not None and width != expected_width:
            raise SourceError(
                "shape",
                path,
                f"column {key!r} has width {width} but meta/modality.json / info.json say {expected_width}; "
                "fix the metadata or the data",
            )
        values = col.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
        return values.reshape(len(col), width)

    def _video_path(self, ref: EpisodeRef, cam: str) -> str | None:
        """The episode's video file of `cam`; None when it has none and that is allowed (image
        columns, or `state_only`). Raises `missing_video` for a declared video that is missing."""
        rel = ref.get(f"video:{cam}")
        key = self.plan.video_keys[cam]
        if rel is None and self.meta.dtype(key) == "image":
            return None
        if rel is not None and not resolves_inside(self.root, rel):  # never open a file outside the dataset
            raise SourceError(
                "bad_metadata",
                os.path.join(self.root, "meta", "info.json"),
                f"video_path of camera {cam!r} is {rel!r}, outside the dataset (or a symlink out of it); "
                "fix meta/info.json or copy the real file into the dataset",
            )
        path = os.path.join(self.root, rel) if rel is not None else None
        if path is not None and os.path.isfile(path):
            return path
        if self.state_only:
            return None
        where = path if path is not None else os.path.join(self.root, "meta", "episodes")
        what = "video file is missing" if path is not None else f"episode {ref.episode_index} lists no video file"
        raise SourceError(
            "missing_video",
            where,
            f"camera {cam!r} ({key}): {what}; re-download or re-export the videos, or ingest with --state-only "
            "to take state and action alone",
        )

    def _tasks_of(self, ref: EpisodeRef, table: pa.Table, path: str) -> tuple[tuple[str, ...], np.ndarray]:
        """The episode's tasks and per-step local task indices; a task_index with no task is an error."""
        n = table.num_rows
        tasks_table = self.meta.tasks
        if "task_index" not in table.column_names:
            listed = ref.get("listed_tasks") or self.meta.episodes.get(ref.episode_index, {}).get("tasks")
            if isinstance(listed, (list, tuple)) and listed and isinstance(listed[0], str):
                return (listed[0],), np.zeros(n, np.int32)
            return (), np.zeros(n, np.int32)
        col = table["task_index"]
        if col.null_count:
            raise SourceError(
                "unknown_task", path, f"column 'task_index' has {col.null_count} null rows; give every row a task"
            )
        task_ids = col.to_numpy().astype(np.int64)
        unique = sorted(set(task_ids.tolist()))
        unknown = [t for t in unique if t not in tasks_table]
        if unknown:
            table_name = "meta/tasks.parquet" if self.version == "v3.0" else "meta/tasks.jsonl"
            rows = int(np.isin(task_ids, unknown).sum())
            raise SourceError(
                "unknown_task",
                path,
                f"episode {ref.episode_index}: task_index {', '.join(map(str, unknown))} ({rows} rows) "
                f"is not in {table_name} "
                f"(it has {len(tasks_table)} tasks); add the task there or fix the task_index column",
            )
        tasks = tuple(tasks_table[t] for t in unique)
        return tasks, np.searchsorted(np.asarray(unique), task_ids).astype(np.int32)

    reads_record = True  # read_tabular(ref, record=False) leaves the record out

    def read_tabular(self, ref: EpisodeRef, *, record: bool = True) -> TabularEpisode:
        """Read and validate an episode's parquet rows; hash its content; keep every column in its
        record (`lerobot.record`), unless `record=False` (ingest's first pass, which only decides
        the content hash).

        Raises:
            SourceError: the episode's listing is unusable, or its rows are unreadable,
                incomplete, non-finite or out of order, or a task or declared video is missing.
        """
        error = ref.get("error")
        if error is not None:
            raise SourceError(*error)
        table, path = self._read_rows(ref)
        if table.num_rows == 0:
            raise SourceError("empty", path, f"episode {ref.episode_index} has no rows")
        spec = self.spec()
        state = self._matrix(table, STATE_KEY, path, spec.state_dim)
        action = self._matrix(table, ACTION_KEY, path, spec.action_dim)
        for name, arr in ((STATE_KEY, state), (ACTION_KEY, action)):
            bad = ~np.isfinite(arr)
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise SourceError(
                    "non_finite",
                    path,
                    f"{name} has {int(bad.sum())} NaN/inf values (first at row {row}); clean or drop the episode",
                )
        if "timestamp" in table.column_names:
            ts, clock = table["timestamp"].to_numpy().astype(np.float64), CLOCK_SOURCE
        elif "frame_index" in table.column_names:
            ts, clock = table["frame_index"].to_numpy().astype(np.float64) / self.fps, CLOCK_ROWS
        else:
            raise SourceError("missing_column", path, "neither 'timestamp' nor 'frame_index' is present")
        if not np.all(np.isfinite(ts)):
            raise SourceError("timestamps", path, "timestamps contain NaN/inf")
        steps = np.diff(ts)
        if len(steps) and steps.min() <= 0:
            row = int(np.argmin(steps)) + 1
            raise SourceError(
                "timestamps",
                path,
                f"timestamps are not strictly increasing (row {row}: {ts[row - 1]:.4f} -> {ts[row]:.4f}); "
                "re-sort the rows or fix the recorder clock",
            )
        expected_len = int(ref.get("length", -1))
        if expected_len >= 0 and expected_len != table.num_rows:
            raise SourceError(
                "frame_count",
                path,
                f"episode {ref.episode_index} has {table.num_rows} rows but the episode metadata says {expected_len}",
            )
        tasks, local = self._tasks_of(ref, table, path)
        success = None
        for key in ("next.success", "success"):
            if key in table.column_names:
                success = bool(table[key][-1].as_py())
                break
        digests = []
        framed: dict[str, str] = {}  # key -> dtype of each camera with frames in this episode
        for cam in self.cameras:
            video = self._video_path(ref, cam)
            key = self.plan.video_keys[cam]
            if video is not None:
                digests.append(f"{cam}:{file_digest(video)}:{ref.get(f'from:{cam}')}:{ref.get(f'to:{cam}')}")
            if video is not None or self.meta.dtype(key) == "image":
                framed[key] = str(self.meta.dtype(key) or "video")
        metadata: dict[str, Any] = {
            "data_path": ref.get("data_path"),
            "tasks": list(tasks),
            "source_version": self.version,
        }
        built = self._record(table, path, ts, clock, framed, metadata) if record else None
        return TabularEpisode(
            ref=ref,
            state=state.astype(np.float32),
            action=action.astype(np.float32),
            timestamps=ts,
            task_index=local,
            tasks=tasks,
            success=success,
            fps=self.fps,
            content_hash=content_hash(
                state=state, action=action, timestamps=ts, tasks=tasks, task_index=local, media_digests=tuple(digests)
            ),
            metadata=metadata,
            record=built,
        )

    def _record(
        self, table: pa.Table, path: str, ts: np.ndarray, clock: str, cameras: dict[str, str], metadata: dict[str, Any]
    ) -> Record:
        """The episode's record from its rows (`lerobot.record`); its summary and notes go into `metadata`."""
        into = ColumnRecord(path=path, streams=self.streams)
        cached = self._file
        footer = cached.footer if cached is not None and cached.key[0] == path else pq.read_metadata(path)
        record_rows(
            table,
            into,
            t_ns=seconds_to_ns(ts),
            clock=clock,
            cameras=cameras,
            mapped=(STATE_KEY, ACTION_KEY, "timestamp", "frame_index", "task_index", "next.success", "success"),
            column_bytes=(
                parquet_column_bytes(footer, table.column_names) if footer.num_rows == table.num_rows else None
            ),
        )
        built = into.build()
        metadata["record"] = into.metadata(built)
        notes = record_notes(built, path)
        if notes:
            metadata["notes"] = notes
        return built

    # --- episode frames --------------------------------------------------------------------

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Each camera's frames of the episode: recorded packets (`RecordedVideo`), or re-encoded frames.

        Raises:
            SourceError: a video is missing, undecodable, holds a different number of frames
                than the episode has rows, or frames of another size than info.json declares.
        """
        ref = episode.ref
        n = episode.num_steps
        for cam in self.cameras:
            key = self.plan.video_keys[cam]
            path = self._video_path(ref, cam)
            if path is None and self.meta.dtype(key) == "image":
                yield self._image_column_frames(episode, cam, key)
                continue
            if path is None:  # state_only, and this episode has no video of this camera
                log.info(
                    "%s: episode %d has no video of camera %r; --state-only: left out",
                    self.root,
                    ref.episode_index,
                    cam,
                )
                continue
            declared = self.meta.declared_size(key)
            if self.video_frames == "record":
                rec = read_record(
                    path,
                    start_s=ref.get(f"from:{cam}"),
                    end_s=ref.get(f"to:{cam}"),
                    fps=self.fps,
                    source_path=str(ref.get(f"video:{cam}")),
                    digest=file_digest(path),
                    keep_open=ref.get(f"from:{cam}") is not None,  # v3.0: the next episode is likely in it
                )
                self._check_size(path, cam, key, declared, None, (rec.height, rec.width), 0)
                self._check_count(path, cam, ref, rec.stream.num_steps, n)
                yield dataclasses.replace(rec, camera=cam)
                continue
            images: list[bytes] = []
            size: tuple[int, int] | None = None
            encoder: KeyframeEncoder | None = None
            for _, rgb, height, width in iter_video_frames(
                path, start_s=ref.get(f"from:{cam}"), end_s=ref.get(f"to:{cam}"), fps=self.fps, encode_jpeg=False
            ):
                self._check_size(path, cam, key, declared, size, (height, width), len(images))
                if size is None and self.video_frames == "h264" and not (height % 2 or width % 2):
                    encoder = KeyframeEncoder(height, width, crf=self.video_crf)  # odd sizes cannot be yuv420p: JPEG
                size = (height, width)
                try:
                    images.append(encoder.add(rgb) if encoder is not None else encode_frame(rgb))  # type: ignore[arg-type]
                except (RuntimeError, ValueError) as e:
                    raise SourceError(
                        "encode_failed",
                        path,
                        f"camera {cam!r} frame {len(images)} could not be stored ({e}); ingest with --frames record",
                    ) from e
                if len(images) > n:
                    break
            self._check_count(path, cam, ref, len(images), n, at_least=len(images) > n)
            if size is None:  # unreachable: _check_count refused an episode without frames
                raise SourceError("frame_count", path, f"camera {cam!r} has no frames")
            yield EncodedFrames(
                camera=cam,
                images=tuple(images),
                encoding=encoder.encoding if encoder else jpeg_encoding(),
                height=size[0],
                width=size[1],
            )

    @staticmethod
    def _check_count(path: str, cam: str, ref: EpisodeRef, got: int, n: int, *, at_least: bool = False) -> None:
        """A camera has one frame per row of the episode."""
        if got != n:
            raise SourceError(
                "frame_count",
                path,
                f"camera {cam!r} has {'more than ' if at_least else ''}{got} frames for "
                f"episode {ref.episode_index} but the episode has {n} rows; the video is short, long or truncated",
            )

    @staticmethod
    def _check_size(
        path: str,
        cam: str,
        key: str,
        declared: tuple[int, int] | None,
        first: tuple[int, int] | None,
        got: tuple[int, int],
        index: int,
    ) -> None:
        """Frames of one camera all have one size, the size info.json declares (when it does)."""
        if declared is not None and got != declared:
            raise SourceError(
                "frame_size",
                path,
                f"camera {cam!r} frame {index} is {got[1]}x{got[0]} but meta/info.json features[{key!r}].shape says "
                f"{declared[1]}x{declared[0]}; re-encode the video at the declared size or fix the shape",
            )
        if first is not None and got != first:
            raise SourceError(
                "frame_size",
                path,
                f"camera {cam!r} changes frame size mid-episode ({first[1]}x{first[0]} -> {got[1]}x{got[0]} at frame "
                f"{index}); re-encode the video at one size",
            )

    def _image_column_frames(self, episode: TabularEpisode, cam: str, key: str) -> EncodedFrames:
        from PIL import Image

        table, path = self._read_rows(episode.ref)
        if key not in table.column_names:
            raise SourceError("missing_column", path, f"image column {key!r} is missing")
        images = []
        declared = self.meta.declared_size(key)
        first: tuple[int, int] | None = None
        fmt = "png"
        for index, cell in enumerate(table[key].to_pylist()):
            data = cell.get("bytes") if isinstance(cell, dict) else cell
            if not data:
                raise SourceError("missing_video", path, f"image column {key!r} has an empty cell at row {index}")
            try:
                with Image.open(io.BytesIO(data)) as im:  # reads the header only
                    fmt, (w, h) = (im.format or "PNG").lower(), im.size
            except (OSError, ValueError) as e:
                raise SourceError(
                    "corrupt_video", path, f"image column {key!r} row {index} is not an image ({e})"
                ) from e
            self._check_size(path, cam, key, declared, first, (h, w), index)
            first = (h, w)
            images.append(bytes(data))
        assert first is not None
        return EncodedFrames(camera=cam, images=tuple(images), encoding=fmt, height=first[0], width=first[1])


def _read_parquet(path: str) -> pa.Table:
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise SourceError("corrupt_file", path, f"parquet file cannot be read ({e}); it is corrupt or truncated") from e


class _DataFile:
    """A v3.0 data file read whole, with the rows of each episode it holds found once (stable:
    an episode's rows keep their order in the file, as a filter on `episode_index` gives them)."""

    def __init__(self, key: tuple[str, int, int], table: pa.Table):
        self.key = key
        self.table = table
        self._footer: pq.FileMetaData | None = None
        col = table["episode_index"].combine_chunks()
        self.by_filter = not pa.types.is_integer(col.type)  # odd types: compared as a filter compares them
        self.spans: dict[int, tuple[int, int]] = {}
        self.order = np.zeros(0, dtype=np.int64)
        if self.by_filter:
            return
        rows = np.flatnonzero(col.is_valid().to_numpy(zero_copy_only=False))  # a null equals no episode
        values = np.asarray(col.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)[rows]
        by_value = np.argsort(values, kind="stable")
        self.order = rows[by_value]
        uniq, starts, counts = np.unique(values[by_value], return_index=True, return_counts=True)
        self.spans = {int(u): (int(s), int(c)) for u, s, c in zip(uniq, starts, counts, strict=True)}

    @property
    def footer(self) -> pq.FileMetaData:
        if self._footer is None:
            self._footer = pq.read_metadata(self.key[0])  # the footer alone: stored bytes per column
        return self._footer

    def rows_of(self, episode_index: int) -> pa.Table:
        """The rows whose `episode_index` is `episode_index`, in file order (none: an empty table)."""
        if self.by_filter:
            return self.table.filter(pc.equal(self.table["episode_index"], episode_index))
        span = self.spans.get(int(episode_index))
        if span is None:
            return self.table.slice(0, 0)
        start, count = span
        rows = self.order[start : start + count]
        if int(rows[-1]) - int(rows[0]) + 1 == count:  # contiguous (the usual case): no copy
            return self.table.slice(int(rows[0]), count)
        return self.table.take(pa.array(rows))


def _open_lerobot(path: str, options: SourceOptions) -> LeRobotReader:
    return LeRobotReader(
        path,
        embodiment=options.embodiment,
        state_only=options.state_only,
        video_frames=options.video_frames,
        video_crf=options.video_crf,
        streams=options.streams,
    )


FORMAT = SourceFormat(
    name="lerobot",
    description="LeRobot dataset v2.0/v2.1/v3.0 (meta/info.json)",
    detect=is_lerobot_dataset,
    open=_open_lerobot,
    unit="directory",
)
