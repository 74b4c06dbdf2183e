"""What every source reader produces: episode references, episode contents, and source errors.

A reader is split in two so that ingest can run it on Ray workers: `discover` runs on the driver
and returns small, picklable `EpisodeRef`s; `read_tabular` and `read_frames` run wherever the
episode is processed. Tabular content (state, action, timestamps, task) is read first because it
is cheap and decides the content hash: an episode already in the lake is skipped before any
video is decoded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

import numpy as np

from robolake.schemas.embodiment import EmbodimentSpec

_VERSION_DIR = re.compile(r"v?\d+(\.\d+)+")

__all__ = [
    "EpisodeRef",
    "TabularEpisode",
    "EncodedFrames",
    "SourceError",
    "SourceReader",
    "content_hash",
]


class SourceError(Exception):
    """An episode cannot be ingested; the ingest quarantines it with this reason.

    Raised for one episode, or, by a reader's constructor, for a whole unit whose metadata is
    unusable (then `episodes` lists the episodes the unit declares, when they are known, so that
    each gets its own quarantine row; otherwise the unit gets one row).

    Args:
        reason_code: Class of problem (`corrupt_file`, `missing_column`, `missing_video`,
            `corrupt_video`, `frame_count`, `frame_size`, `non_finite`, `timestamps`, `shape`,
            `empty`, `bad_metadata`, `unknown_task`, `duplicate_index`, `unlisted`, `duplicate`,
            `encode_failed`, `too_large` (declares more than the read budget), `outside_source`
            (points at data outside the source), `missing_part` (a split recording's part),
            `pickled` (an array that only unpickling could read: never done), `frame_size`).
        path: The file at fault.
        message: What is wrong and what to do about it; it names the file and the field.
        episodes: Episode indices a unit-level error applies to (empty: unknown or per episode).
    """

    def __init__(self, reason_code: str, path: str, message: str, *, episodes: tuple[int, ...] = ()):
        super().__init__(f"{path}: {message}")
        self.reason_code = reason_code
        self.path = path
        self.message = message
        self.episodes = tuple(episodes)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across Ray workers, keyword included
        return (_rebuild_source_error, (self.reason_code, self.path, self.message, self.episodes))


def _rebuild_source_error(reason_code: str, path: str, message: str, episodes: tuple[int, ...]) -> SourceError:
    return SourceError(reason_code, path, message, episodes=episodes)


@dataclass(frozen=True, kw_only=True)
class EpisodeRef:
    """Where one source episode lives; small and picklable.

    Attributes:
        source_uri: Root of the source dataset.
        source_format: Reader name and layout (`lerobot-v2.1`, ...).
        episode_index: Index in the source.
        embodiment: Embodiment tag the episode will get.
        location: Reader-specific, JSON-able details (file paths, segment bounds).
    """

    source_uri: str
    source_format: str
    episode_index: int
    embodiment: str
    location: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.location).get(key, default)

    @property
    def source_name(self) -> str:
        """The source's last path component, with its parent when it is a version (`bridge/1.0.0`).

        TFDS/RLDS keep each version of a dataset in `<name>/<version>/`: a version alone would
        name every such dataset alike in episode ids.
        """
        parts = self.source_uri.rstrip("/").rsplit("/", 2)
        if len(parts) >= 2 and _VERSION_DIR.fullmatch(parts[-1]):
            return f"{parts[-2]}/{parts[-1]}"
        return parts[-1]


@dataclass(frozen=True, kw_only=True)
class TabularEpisode:
    """The non-image content of one episode, validated.

    Attributes:
        ref: Where it came from.
        state: float32 [T, state_dim].
        action: float32 [T, action_dim].
        timestamps: float64 [T], seconds, increasing (as recorded; may not start at 0): strictly
            on fixed-rate ticks; with `resample: none`, messages that share a stamp share it.
        task_index: int32 [T], index into `tasks` per step.
        tasks: Instructions of the episode.
        success: Whether it succeeded, when the source records it.
        fps: Frame rate.
        content_hash: sha256 hex of the content (see `content_hash`).
        metadata: JSON-able reader details kept in the episodes table.
        record: Every message of every stream the reader kept (`sources.record`); None when the
            reader keeps none (its steps are its record).
    """

    ref: EpisodeRef
    state: np.ndarray
    action: np.ndarray
    timestamps: np.ndarray
    task_index: np.ndarray
    tasks: tuple[str, ...]
    success: bool | None
    fps: float
    content_hash: str
    metadata: dict[str, Any] = field(default_factory=dict)
    record: Any = None  # sources.record.Record (typed loosely: base sits below the record module)

    @classmethod
    def of(
        cls,
        *,
        ref: EpisodeRef,
        state: np.ndarray,
        action: np.ndarray,
        timestamps: np.ndarray,
        task_index: np.ndarray,
        tasks: tuple[str, ...],
        fps: float,
        success: bool | None = None,
        media_digests: tuple[str, ...] = (),
        metadata: dict[str, Any] | None = None,
        record: Any = None,
    ) -> TabularEpisode:
        """The episode with its content hash computed (`content_hash`) and state/action as float32."""
        return cls(
            ref=ref,
            state=np.asarray(state).astype(np.float32),
            action=np.asarray(action).astype(np.float32),
            timestamps=timestamps,
            task_index=task_index,
            tasks=tasks,
            success=success,
            fps=fps,
            content_hash=content_hash(
                state=state,
                action=action,
                timestamps=timestamps,
                tasks=tasks,
                task_index=task_index,
                media_digests=media_digests,
            ),
            metadata=metadata or {},
            record=record,
        )

    @property
    def num_steps(self) -> int:
        return int(self.state.shape[0])

    @property
    def task(self) -> str:
        """The episode's instruction: its most frequent per-step task."""
        if not self.tasks:
            return ""
        counts = np.bincount(self.task_index, minlength=len(self.tasks))
        return self.tasks[int(np.argmax(counts))]


@dataclass(frozen=True, kw_only=True)
class EncodedFrames:
    """One camera's frames of one episode, each encoded as an image.

    Attributes:
        camera: Camera name.
        images: Encoded bytes, one per step.
        encoding: Codec of `images` (jpeg or png).
        height: Frame height.
        width: Frame width.
    """

    camera: str
    images: tuple[bytes, ...]
    encoding: str
    height: int
    width: int


class SourceReader(Protocol):
    """A format reader over one unit (a dataset directory or a data file).

    `discover` runs on the driver; the rest on workers. `root` is the unit's path, `tag` the
    embodiment tag of its episodes (one reader = one embodiment spec), and `inspect` describes
    what the unit holds (keys or topics, types, counts, rates, shapes, time span) for
    `robolake inspect`.
    """

    format_name: str
    root: str
    tag: str

    def inspect(self) -> dict[str, Any]: ...

    def discover(self) -> list[EpisodeRef]: ...

    def spec(self) -> EmbodimentSpec: ...

    def read_tabular(self, ref: EpisodeRef) -> TabularEpisode: ...

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]: ...


def content_hash(
    *,
    state: np.ndarray,
    action: np.ndarray,
    timestamps: np.ndarray,
    tasks: tuple[str, ...],
    task_index: np.ndarray,
    media_digests: tuple[str, ...] = (),
) -> str:
    """sha256 over an episode's numbers, instructions and the digests of its media.

    The same episode content gives the same hash whatever file it sits in, so a re-ingest (or a
    resumed one) recognises episodes it already holds before decoding any video.
    """
    h = hashlib.sha256()
    for arr in (
        state.astype(np.float32),
        action.astype(np.float32),
        timestamps.astype(np.float64),
        task_index.astype(np.int32),
    ):
        h.update(str(arr.shape).encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    for t in tasks:
        h.update(t.encode("utf-8") + b"\0")
    for d in media_digests:
        h.update(d.encode() + b"\0")
    return h.hexdigest()


def iso_time(ns: int | None) -> str | None:
    """ISO 8601 UTC of a time in ns since the epoch, to the millisecond (None stays None)."""
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
