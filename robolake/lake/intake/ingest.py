"""Ingest: source datasets -> lake, on Ray Data, in one lake commit, idempotent by content hash.

Two Ray Data stages run over chunks of episodes:

1. *check*: read each episode's parquet rows, validate them (finite values, monotonic timestamps,
   widths that match the embodiment spec) and hash their content. Cheap: no video is decoded.
   The driver skips episodes whose hash the lake already holds, and records a second episode of
   the same content within the run as a `duplicate` (it lands once).
2. *load*: decode the videos of the remaining episodes, encode each frame, check frame counts,
   and write steps and media rows as Lance fragments straight from the worker. The episode's
   quality (`lake.stats.quality`) is measured here, where its arrays and encoded frames are in
   memory, and kept in its metadata.

The driver then appends all fragments (one Lance commit per table), recomputes the normalisation
statistics of the embodiments it touched, and publishes one lake version. Every rejected episode
lands in the quarantine table with its file and reason. Killing the process at any point leaves
the lake at its previous version; running the same ingest again resumes it.

Small sources do not wait for Ray. Starting a local Ray costs seconds to tens of seconds, more
than ingesting a bag of a few hundred messages; so below `IngestConfig.local_below_bytes` of
source files (and with no `ray_address`), the same two stages run in this process, chunk by
chunk, through the same stage objects and the same JSON round trip of their results, and the
driver commits exactly as it would after Ray: the lake is the same either way
(`IngestConfig.execution` forces one or the other).

Every problem belongs to a dataset or an episode, never to the run: a dataset whose metadata
cannot be used (the reader's constructor raises), whose episodes cannot be listed, whose spec
cannot be built, or whose widths contradict the lake's (or an earlier dataset's of the same tag
in this run) is quarantined, one row per episode it declares (one row for the dataset when its
episode list is unreadable), and the other datasets land. Nothing is dropped without a
quarantine row, an `unrecognised` path or a note in the result.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from robolake.lake.lake import Lake
from robolake.lake.protocol import faults
from robolake.lake.protocol.lease import Writer
from robolake.lake.protocol.retry import commit_with_retries
from robolake.lake.protocol.transaction import (
    delete_fragment_files,
    fragments_from_json,
    fragments_to_json,
    write_table_fragments,
)
from robolake.lake.protocol.upgrade import upgrade
from robolake.lake.protocol.versions import LakeVersion
from robolake.lake.sources import (
    EpisodeRef,
    ReadLimits,
    SourceError,
    SourceOptions,
    SourceReader,
    TabularEpisode,
    discover_readers,
)
from robolake.lake.sources.limits import DEFAULT_MAX_READ_BYTES
from robolake.lake.sources.mapping import Mapping
from robolake.lake.sources.record import record_tables
from robolake.lake.sources.video import RecordedVideo
from robolake.lake.stats.embodiments import merge_embodiment_stats, partial_stats
from robolake.lake.stats.quality import episode_quality
from robolake.lake.upkeep.access import access_rows
from robolake.lake.upkeep.compact import compact_in, needs_compaction
from robolake.ray_tasks import chunk, ensure_ray, fan_out
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.schemas.tables import schema_for_table
from robolake.schemas.version import LAKE_FORMAT_VERSION

__all__ = [
    "IngestConfig",
    "IngestResult",
    "ingest",
    "ensure_ray",
    "steps_rows",
]  # ensure_ray: re-exported from robolake.ray_tasks

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]
_R = TypeVar("_R")


@dataclass(frozen=True, kw_only=True)
class IngestConfig:
    """How to ingest.

    Attributes:
        format: Source format: `auto` or a registered format name (`robolake ingest --help`).
        embodiment: Force this embodiment tag on every source dataset.
        mapping: Which streams become state, action, cameras and task (`--map FILE`).
        state_only: Accept episodes without camera frames instead of quarantining them.
        video_frames: How frames are stored (`--frames`): `record` (the default: a source
            video's own packets, images as recorded, raw pixels lossless), or the lossy `jpeg`
            (one image a frame) and `h264` (key-referenced); see `lake.media`.
        video_crf: CRF of the `h264` layout (`--crf`; default `lake.codecs.VIDEO_CRF`).
        access_copy: Also write an access copy (`h264`) of the recorded videos it ingests, for
            fast random reads (`lake.access`); None: none.
        episodes_per_task: Episodes one task handles (at most: on Ray, fewer when a smaller chunk
            gives every CPU two). A task writes one fragment per table (one per `FRAGMENT_BYTES`
            of a table beyond that) and reads a v3.0 data file once for the episodes it holds.
        ray_address: Ray cluster address; None starts (or joins) a local Ray.
        num_cpus: CPUs for a local Ray; None lets Ray decide.
        resample: `ticks` or `none` for topic logs and stamped HDF5 (`--resample`); None: the
            mapping's `resample:` (default ticks).
        max_read_bytes: The read budget: the most memory one read of a source may need (a
            dataset read whole, a frame, a decompressed chunk); a source declaring more is
            quarantined before anything is allocated (`robolake.lake.sources.limits`).
        execution: `auto` (in this process below `local_below_bytes` of source files and with
            no `ray_address`, else Ray), `local` or `ray`.
        local_below_bytes: Source size below which `auto` runs without Ray.
        session: Files of one folder read as one recording (`--session`: overlap, split,
            folder); None: the mapping's `session:`, else each file alone.
        streams: Glob patterns of the topics / keys the record keeps (`--streams`); None keeps
            every numeric stream and event (the mapped ones are always kept).
        quality: Measure each episode's quality in the load stage and keep it in the episode
            metadata's `"quality"` (`lake.stats.quality`; `--where quality.NAME`, `doctor`); off
            only to measure what it costs (`robolake doctor --update` adds it later).
    """

    format: str = "auto"
    embodiment: str | None = None
    mapping: Mapping | None = None
    state_only: bool = False
    video_frames: str = "record"
    video_crf: int | None = None
    access_copy: str | None = None
    episodes_per_task: int = 256
    ray_address: str | None = None
    num_cpus: int | None = None
    resample: str | None = None
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES
    execution: str = "auto"
    local_below_bytes: int = 64 * 1024**2
    session: str | None = None
    streams: tuple[str, ...] | None = None
    quality: bool = True

    def __post_init__(self) -> None:
        if self.episodes_per_task < 1:
            raise ValueError(f"episodes_per_task must be >= 1, got {self.episodes_per_task}")
        if self.execution not in ("auto", "local", "ray"):
            raise ValueError(f"execution must be auto, local or ray, got {self.execution!r}")
        if self.execution == "local" and self.ray_address:
            raise ValueError("execution='local' runs without Ray; leave ray_address out (or use execution='ray')")
        if self.local_below_bytes < 0:
            raise ValueError(f"local_below_bytes must be >= 0, got {self.local_below_bytes}")
        ReadLimits(max_read_bytes=self.max_read_bytes)  # validates it
        SourceOptions(
            resample=self.resample,
            video_frames=self.video_frames,
            video_crf=self.video_crf,
            session=self.session,
            streams=self.streams,
        )  # validates them
        if self.access_copy not in (None, "h264"):
            raise ValueError(f"access_copy must be 'h264' or None, got {self.access_copy!r}")


@dataclass(frozen=True, kw_only=True)
class IngestResult:
    """What an ingest did.

    Attributes:
        lake_version: The version it published (the old one when nothing changed).
        discovered: Episodes found in the source.
        ingested: Episodes written.
        skipped: Episodes already in the lake (same content hash) before this run.
        quarantined: Episodes (or whole datasets, when their episodes are unknown) rejected in
            this run, each recorded in the quarantine table (once: a re-run over the same bad
            file does not record it again). Includes the duplicates.
        duplicates: Episodes whose content equals another episode's of this run: ingested once,
            the copies recorded in quarantine with reason_code `duplicate`.
        steps: Steps written.
        frames: Camera frames written.
        seconds: Wall time.
        quarantine: (path, reason) of each rejected episode.
        unrecognised: Paths under the source that look like data but that no format read.
        notes: Things readers noticed that are not errors (e.g. cameras left out under
            `state_only`, an episode listed twice identically, a trimmed span, a rounded or
            assumed rate, messages averaged on a shared stamp), each once.
        execution: Where the stages ran: `local` (this process) or `ray`.
    """

    lake_version: int
    discovered: int
    ingested: int
    skipped: int
    quarantined: int
    steps: int
    frames: int
    seconds: float
    quarantine: list[tuple[str, str]] = field(default_factory=list)
    unrecognised: list[str] = field(default_factory=list)
    duplicates: int = 0
    notes: list[str] = field(default_factory=list)
    execution: str = "ray"


def _now_ns() -> int:
    return time.time_ns()


def _quarantine_row(ref: EpisodeRef, err: SourceError) -> dict[str, Any]:
    return {
        "source_uri": ref.source_uri,
        "source_path": err.path,
        "source_format": ref.source_format,
        "source_episode_index": ref.episode_index,
        "reason_code": err.reason_code,
        "reason": err.message,
        "quarantined_at": _now_ns(),
    }


def _read_checked(reader: SourceReader, ref: EpisodeRef, *, record: bool = True) -> TabularEpisode:
    """The reader's tabular episode; with `record=False`, a reader that can skips the streams its
    steps do not need (the first pass only decides the content hash)."""
    try:
        if not record and getattr(reader, "reads_record", False):
            return reader.read_tabular(ref, record=False)  # type: ignore[call-arg]
        return reader.read_tabular(ref)
    except SourceError:
        raise
    except Exception as e:  # an unexpected reader failure is still this episode's problem, not the batch's
        raise SourceError(
            "reader_error", os.path.join(ref.source_uri, str(ref.get("data_path", ""))), f"{type(e).__name__}: {e}"
        ) from e


@dataclass(frozen=True, kw_only=True)
class Checked:
    """Stage 1's verdict on one episode (it crosses the Ray boundary as `to_json()`).

    Attributes:
        ref: The episode's key (`_ref_key`: source root and episode index).
        hash: Its content hash ("" when its rows could not be read).
        notes: What its reader noticed.
        quarantine: Its quarantine row when it is rejected; None when it passed.
    """

    ref: str
    hash: str = ""
    notes: tuple[str, ...] = ()
    quarantine: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.quarantine is None

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "hash": self.hash, "notes": list(self.notes), "quarantine": self.quarantine}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Checked:
        return cls(ref=d["ref"], hash=d["hash"], notes=tuple(d["notes"]), quarantine=d["quarantine"])


@dataclass(frozen=True, kw_only=True)
class Loaded:
    """Stage 2's result for one chunk of episodes (it crosses the Ray boundary as `to_json()`).

    Attributes:
        episodes: The episodes table rows of the episodes it loaded.
        quarantine: Quarantine rows of the episodes whose frames failed.
        fragments: Per table of `ROW_TABLES`, the uncommitted fragments it wrote (`fragments_to_json`).
        num_steps: Steps it wrote.
        num_frames: Camera frames it wrote.
        stats: `partial_stats` of its steps, per embodiment (merged on the driver).
        notes: What its reader noticed that only a full read shows (streams kept as recorded
            despite a bad clock or NaN, topics left out of the record).
    """

    episodes: list[dict[str, Any]]
    quarantine: list[dict[str, Any]]
    fragments: dict[str, list[str]]
    num_steps: int = 0
    num_frames: int = 0
    stats: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def fragments_of(self, table: str) -> list[str]:
        return self.fragments.get(table, [])

    def without_rows(self) -> Loaded:
        """The same chunk with its episodes taken out (its quarantine rows stay)."""
        return replace(self, episodes=[], fragments={}, num_steps=0, num_frames=0, stats={})

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "quarantine": self.quarantine,
            "fragments": self.fragments,
            "num_steps": self.num_steps,
            "num_frames": self.num_frames,
            "stats": self.stats,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Loaded:
        return cls(
            episodes=list(d["episodes"]),
            quarantine=list(d["quarantine"]),
            fragments={t: list(f) for t, f in d["fragments"].items()},
            num_steps=int(d["num_steps"]),
            num_frames=int(d["num_frames"]),
            stats=dict(d["stats"]),
            notes=[str(n) for n in d.get("notes", [])],
        )


class _CheckStage:
    """Ray Data stage 1: validate and hash tabular content (no video decode)."""

    def __init__(self, readers: dict[str, SourceReader], chunks: list[list[EpisodeRef]]):
        self.readers, self.chunks = readers, chunks

    def __call__(self, index: int) -> list[dict[str, Any]]:
        out = []
        for ref in self.chunks[index]:
            try:
                ep = _read_checked(self.readers[ref.source_uri], ref, record=False)
                notes = tuple(str(n) for n in ep.metadata.get("notes", ()))
                out.append(Checked(ref=_ref_key(ref), hash=ep.content_hash, notes=notes))
            except SourceError as e:
                out.append(Checked(ref=_ref_key(ref), quarantine=_quarantine_row(ref, e)))
        _release(self.readers, self.chunks[index])
        return [c.to_json() for c in out]

    @staticmethod
    def decode(raw: list[dict[str, Any]]) -> tuple[list[Checked], int]:
        """A chunk's result back from JSON, and how many episodes it handled."""
        return [Checked.from_json(c) for c in raw], len(raw)


class _LoadStage:
    """Ray Data stage 2: decode frames, build rows, write Lance fragments from the worker."""

    def __init__(
        self,
        readers: dict[str, SourceReader],
        chunks: list[list[EpisodeRef]],
        lake_uri: str,
        storage_options: dict[str, str] | None,
        access_copy: str | None = None,
        quality: bool = True,
    ):
        self.readers, self.chunks, self.lake_uri, self.opts = readers, chunks, lake_uri, storage_options
        self.access_copy = access_copy
        self.quality = quality

    def __call__(self, index: int) -> dict[str, Any]:
        parts = _Fragments(self.lake_uri, self.opts)
        steps: list[pa.Table] = []  # kept whole for the chunk's statistics (small beside the media)
        num_frames = 0
        notes: list[str] = []
        episodes: list[dict[str, Any]] = []
        quarantine: list[dict[str, Any]] = []
        for ref in self.chunks[index]:
            reader = self.readers[ref.source_uri]
            try:
                ep = _read_checked(reader, ref)
                frames = list(reader.read_frames(ep))
            except SourceError as e:
                quarantine.append(_quarantine_row(ref, e))
                continue
            except Exception as e:  # an unexpected decode failure is still this episode's problem
                quarantine.append(
                    _quarantine_row(ref, SourceError("reader_error", _episode_path(ref), f"{type(e).__name__}: {e}"))
                )
                continue
            episode_id = f"{ref.source_name}/{ref.episode_index:06d}-{ep.content_hash[:12]}"
            steps.append(_steps_table(episode_id, ep))
            parts.add("steps", steps[-1])
            media = _media_table(episode_id, ep, frames)
            num_frames += media.num_rows
            parts.add("media", media)
            parts.add("streams", _streams_table(episode_id, frames))
            if self.access_copy:
                for t in _access_tables(episode_id, ep, frames):
                    parts.add("access", t)
            if ep.record is not None:
                sig, ev = record_tables(episode_id, ep.record)
                parts.add("signals", sig)
                parts.add("events", ev)
            quality = _quality(ep, frames) if self.quality else None
            episodes.append(_episode_row(episode_id, ep, [f.camera for f in frames], quality))
            notes += [str(n) for n in ep.metadata.get("notes", ())]
        _release(self.readers, self.chunks[index])
        return Loaded(
            episodes=episodes,
            quarantine=quarantine,
            fragments=parts.finish(),
            num_steps=int(sum(t.num_rows for t in steps)),
            num_frames=num_frames,
            stats=partial_stats(pa.concat_tables(steps)) if steps else {},
            notes=notes,
        ).to_json()

    @staticmethod
    def decode(raw: dict[str, Any]) -> tuple[Loaded, int]:
        """A chunk's result back from JSON, and how many episodes it handled."""
        loaded = Loaded.from_json(raw)
        return loaded, len(loaded.episodes) + len(loaded.quarantine)


# A task writes a table's rows as one fragment, or as several of about this many bytes when its
# chunk holds more: a task's memory stays bounded however many episodes it is given, and a large
# ingest writes few large fragments (not one per episode) that need no compaction at commit.
FRAGMENT_BYTES = 128 * 1024**2


class _Fragments:
    """One task's rows per table, written as a fragment once `FRAGMENT_BYTES` of a table pile up."""

    def __init__(self, lake_uri: str, storage_options: dict[str, str] | None):
        self.lake_uri, self.opts = lake_uri, storage_options
        self.pending: dict[str, list[pa.Table]] = {t: [] for t in ROW_TABLES}
        self.pending_bytes: dict[str, int] = dict.fromkeys(ROW_TABLES, 0)
        self.written: dict[str, list[str]] = {t: [] for t in ROW_TABLES}

    def add(self, table: str, rows: pa.Table) -> None:
        if not rows.num_rows:
            return
        self.pending[table].append(rows)
        self.pending_bytes[table] += rows.nbytes
        if self.pending_bytes[table] >= FRAGMENT_BYTES:
            self._flush(table)

    def _flush(self, table: str) -> None:
        if self.pending[table]:
            frags = write_table_fragments(self.lake_uri, table, pa.concat_tables(self.pending[table]), self.opts)
            self.written[table] += fragments_to_json(frags)
        self.pending[table], self.pending_bytes[table] = [], 0

    def finish(self) -> dict[str, list[str]]:
        """Every table's fragments (the rest written now), in the order their rows came."""
        for table in ROW_TABLES:
            self._flush(table)
        return self.written


def _release(readers: dict[str, SourceReader], refs: list[EpisodeRef]) -> None:
    """Let the chunk's readers drop what they keep between episodes (a data file, an open video)."""
    for root in dict.fromkeys(ref.source_uri for ref in refs):
        release = getattr(readers[root], "release_files", None)
        if release is not None:
            release()


def _ref_key(ref: EpisodeRef) -> str:
    return f"{ref.source_uri}#{ref.episode_index}"


def _steps_table(episode_id: str, ep: TabularEpisode) -> pa.Table:
    return steps_rows(episode_id, ep.ref.embodiment, ep.timestamps, ep.state, ep.action, ep.task_index)


def steps_rows(
    episode_id: str,
    embodiment: str,
    timestamps: np.ndarray,
    state: np.ndarray,
    action: np.ndarray,
    task_index: np.ndarray,
) -> pa.Table:
    """The `steps` rows of one episode (timestamps from its first step; state and action float32)."""
    n = len(timestamps)
    state = np.asarray(state, np.float32)
    action = np.asarray(action, np.float32)
    return pa.table(
        {
            "episode_id": pa.array([episode_id] * n, pa.string()),
            "embodiment": pa.array([embodiment] * n, pa.string()),
            "step_index": pa.array(np.arange(n, dtype=np.int32)),
            "timestamp": pa.array(np.asarray(timestamps, np.float64) - (timestamps[0] if n else 0.0)),
            "state": pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32) * state.shape[1]), pa.array(state.reshape(-1))
            ),
            "action": pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32) * action.shape[1]), pa.array(action.reshape(-1))
            ),
            "task_index": pa.array(np.asarray(task_index, np.int32)),
        },
        schema=schema_for_table("steps"),
    )


def _media_table(episode_id: str, ep: TabularEpisode, frames: list[Any]) -> pa.Table:
    cols: dict[str, list[Any]] = {k: [] for k in schema_for_table("media").names}
    ts = ep.timestamps - ep.timestamps[0]
    for f in frames:
        n = len(f.images)
        cols["episode_id"] += [episode_id] * n
        cols["camera"] += [f.camera] * n
        cols["step_index"] += list(range(n))
        cols["timestamp"] += ts.tolist()
        cols["width"] += [f.width] * n
        cols["height"] += [f.height] * n
        cols["encoding"] += [f.encoding] * n
        cols["data"] += list(f.images)
    return pa.Table.from_pydict(cols, schema=schema_for_table("media"))


def _streams_table(episode_id: str, frames: list[Any]) -> pa.Table:
    """The `streams` rows of the cameras whose frames are a recorded video (`lake.record`)."""
    rows = [f.stream.to_row(episode_id, f.camera) for f in frames if isinstance(f, RecordedVideo)]
    return pa.Table.from_pylist(rows, schema=schema_for_table("streams"))


def _access_tables(episode_id: str, ep: TabularEpisode, frames: list[Any]) -> list[pa.Table]:
    """Access-copy rows of the recorded cameras (derived: a failure is logged, the episode lands)."""
    out = []
    for f in frames:
        if isinstance(f, RecordedVideo):
            try:
                t = access_rows(episode_id, f.camera, f.stream, f.images.__getitem__, ep.timestamps - ep.timestamps[0])
            except (RuntimeError, ValueError) as e:
                log.warning(
                    "%s camera %s: no access copy (%s); `robolake optimize --access-copy h264` retries",
                    episode_id,
                    f.camera,
                    e,
                )
                continue
            if t is not None:
                out.append(t)
    return out


def _quality(ep: TabularEpisode, frames: list[Any]) -> dict[str, Any]:
    """The episode's quality from the arrays and encoded frames already in memory (no media re-read)."""
    cameras = [(f.camera, f.images, f.encoding, f.stream if isinstance(f, RecordedVideo) else False) for f in frames]
    return episode_quality(
        state=ep.state, action=ep.action, timestamps=ep.timestamps, fps=ep.fps, success=ep.success, cameras=cameras
    )


def _episode_row(
    episode_id: str, ep: TabularEpisode, cameras: list[str], quality: dict[str, Any] | None = None
) -> dict[str, Any]:
    meta = {**ep.metadata, "source_time_offset_s": float(ep.timestamps[0])}
    if quality is not None:
        meta["quality"] = quality
    return {
        "episode_id": episode_id,
        "source_uri": ep.ref.source_uri,
        "source_format": ep.ref.source_format,
        "source_episode_index": ep.ref.episode_index,
        "embodiment": ep.ref.embodiment,
        "task": ep.task,
        "num_steps": ep.num_steps,
        "fps": ep.fps,
        "cameras": cameras,
        "success": ep.success,
        "content_hash": ep.content_hash,
        "ingested_at": _now_ns(),
        # Lake timestamps start at 0; the source's first timestamp is kept to map back.
        "metadata": json.dumps(meta, sort_keys=True),
    }


def _local_fan_out(stage: Any, num_chunks: int) -> Any:
    """`fan_out` in this process: the same stage calls and the same JSON round trip of results."""
    for index in range(num_chunks):
        yield index, json.loads(json.dumps(stage(index)))


def _chunks(items: list[EpisodeRef], max_per_task: int, local: bool) -> list[list[EpisodeRef]]:
    if not local:
        return chunk(items, max_per_task)
    return [items[i : i + max_per_task] for i in range(0, len(items), max_per_task)]


def _source_bytes(readers: list[SourceReader], limit: int) -> int:
    """Bytes of the readers' files (stops counting past `limit`: only the comparison matters)."""
    total = 0
    for r in readers:
        paths = [r.root] if os.path.isfile(r.root) else (os.path.join(d, f) for d, _, fs in os.walk(r.root) for f in fs)
        for p in paths:
            try:
                total += os.path.getsize(p)
            except OSError:
                continue
            if total > limit:
                return total
    return total


def _collapse_notes(notes: list[str]) -> list[str]:
    """Each note once; one said of several files once, naming how many ("path: text" notes)."""
    by_text: dict[str, list[str]] = {}
    order: list[str] = []
    for n in dict.fromkeys(notes):
        path, sep, text = n.partition(": ")
        key = text if sep and path.startswith("/") else n
        if key not in by_text:
            order.append(key)
        by_text.setdefault(key, []).append(n)
    out = []
    for key in order:
        items = by_text[key]
        if len(items) == 1:
            out.append(items[0])
        else:
            first = items[0].partition(": ")[0]
            out.append(f"{key} ({len(items)} files: {first} and {len(items) - 1} more)")
    return out


def _run_stage(
    stage: Callable[[int], Any],
    decode: Callable[[Any], tuple[_R, int]],
    num_chunks: int,
    name: str,
    total: int,
    progress: ProgressFn | None,
    local: bool = False,
) -> list[_R]:
    """Results of `stage` over every chunk (decoded from JSON by `decode`, which also says how many
    episodes a chunk handled), in chunk order (so the commit order is reproducible)."""
    results: dict[int, _R] = {}
    done = 0
    for index, raw in _local_fan_out(stage, num_chunks) if local else fan_out(stage, num_chunks):
        results[index], handled = decode(raw)
        done += handled
        if progress:
            progress(name, done, total)
    return [results[i] for i in sorted(results)]


def _check_embodiments(
    lake: Lake, readers: list[SourceReader], passed: set[str] | None = None
) -> dict[str, SourceError]:
    """Readers whose spec cannot be had, or contradicts the spec of the same tag -> the error.

    The spec of a tag is the lake's, or, for a tag new to the lake, that of the first reader of
    it in this run (readers come in path order): two datasets of one tag but different widths
    must never land in one embodiment. Only readers in `passed` (the datasets with an episode
    that passed its own checks; None: all) set a width or are compared: a dataset whose every
    episode was rejected (say, an info.json declaring a width its files do not have) must not
    block a good one beside it. With `passed` empty, only the specs are built.
    """
    known = dict(lake.embodiments())
    first: dict[str, str] = {}
    problems: dict[str, SourceError] = {}
    for r in readers:
        try:
            spec = r.spec()
        except SourceError as e:
            problems[r.root] = e
            continue
        except Exception as e:  # a reader bug is this dataset's problem, not the whole ingest's
            problems[r.root] = SourceError(
                "reader_error", r.root, f"cannot build the embodiment spec ({type(e).__name__}: {e})"
            )
            continue
        if passed is not None and r.root not in passed:
            continue
        have = known.get(r.tag)
        if have is None:
            known[r.tag], first[r.tag] = spec, r.root
        elif (have.state_dim, have.action_dim) != (spec.state_dim, spec.action_dim):
            where = f"dataset {first[r.tag]} of this run" if r.tag in first else "the lake"
            problems[r.root] = SourceError(
                "shape",
                r.root,
                (
                    f"embodiment {r.tag!r} in {where} has state/action widths {have.state_dim}/{have.action_dim} "
                    f"but this dataset has {spec.state_dim}/{spec.action_dim}; ingest it with --embodiment <new tag>"
                ),
            )
    return problems


def _unit_rows(failed: Any) -> list[dict[str, Any]]:
    """Quarantine rows of a unit that could not be opened: one per episode it declares, else one."""
    ref = EpisodeRef(source_uri=failed.path, source_format=failed.format, episode_index=-1, embodiment="")
    err = SourceError(failed.reason_code, failed.path, failed.message)
    return [_quarantine_row(replace(ref, episode_index=i), err) for i in getattr(failed, "episodes", ()) or (-1,)]


def _episode_path(ref: EpisodeRef) -> str:
    rel = ref.get("data_path")
    return os.path.join(ref.source_uri, str(rel)) if rel else ref.source_uri


# tables the load stage writes fragments of, per episode
ROW_TABLES = ("steps", "media", "streams", "access", "signals", "events")


def ingest(
    source: str,
    lake: Lake | str,
    config: IngestConfig | None = None,
    *,
    progress: ProgressFn | None = None,
) -> IngestResult:
    """Ingest every episode under `source` into `lake` (created if missing) as one lake version.

    Writers serialise through the lake's write lease (`robolake.lake.protocol.lease`): an ingest that
    meets a live writer waits for it, re-reads the lake, re-checks its content hashes against
    the new version, and commits on top, up to `MAX_COMMIT_ATTEMPTS` times (`commit_with_retries`).
    However it ends, it leaves no file of its own behind that no published version needs (a killed
    one's are removed by the next writer).

    Args:
        source: A dataset root or a directory of datasets.
        lake: A Lake or a lake URI.
        config: Ingest options.
        progress: Called as progress(stage, done, total) while episodes are processed.

    Returns:
        What was ingested, skipped and quarantined.

    Raises:
        ValueError: nothing readable at `source`.
        CommitConflictError: it lost the race to other writers `MAX_COMMIT_ATTEMPTS` times (re-run).
    """
    slot = _WriterSlot()
    try:
        result = _ingest(source, lake, config, progress, slot)
    except BaseException:
        slot.abandon()
        raise
    slot.close()
    return result


class _WriterSlot:
    """This ingest's `Writer` (presence + lease) and the fragment files it owns until committed."""

    def __init__(self) -> None:
        self.writer: Writer | None = None
        self.lake_uri = ""
        self.opts: dict[str, str] | None = None
        self.fragments: dict[str, list[Any]] = {}
        self.loading = False  # workers are writing files this ingest cannot name yet

    def start(self, lake: Lake) -> Writer:
        # Before any data file of this ingest exists, so no lease holder takes them for a dead writer's.
        self.lake_uri, self.opts = lake.uri, lake.storage_options
        self.writer = Writer(lake.uri, lake.storage_options)
        return self.writer

    def abandon(self) -> None:
        """On failure or interrupt: delete the fragment files this ingest wrote, release, leave."""
        try:
            for table, frags in self.fragments.items():
                delete_fragment_files(self.lake_uri, table, frags, self.opts)
        finally:
            self.fragments = {}
            self.close(clean=not self.loading)

    def close(self, *, clean: bool = True) -> None:
        if self.writer is not None:
            self.writer.close(clean=clean)
            self.writer = None


def _ingest(
    source: str, lake: Lake | str, config: IngestConfig | None, progress: ProgressFn | None, slot: _WriterSlot
) -> IngestResult:
    config = config or IngestConfig()
    t0 = time.perf_counter()
    # Discovery first: a source with nothing readable fails here, before Ray starts or the lake is created.
    found_units = discover_readers(
        source,
        format=config.format,
        options=SourceOptions(
            embodiment=config.embodiment,
            mapping=config.mapping,
            state_only=config.state_only,
            video_frames=config.video_frames,
            video_crf=config.video_crf,
            resample=config.resample,
            limits=ReadLimits(max_read_bytes=config.max_read_bytes),
            session=config.session,
            streams=config.streams,
        ),
    )
    readers = list(found_units.readers)
    if isinstance(lake, str):
        lake = Lake.open_or_create(lake)
    if lake.format_version < LAKE_FORMAT_VERSION:  # workers write the record's tables before the commit
        upgrade(lake.uri, storage_options=lake.storage_options)
        lake = Lake.open(lake.uri, version=lake.version, storage_options=lake.storage_options)
    local = config.execution == "local" or (
        config.execution == "auto"
        and config.ray_address is None
        and _source_bytes(readers, config.local_below_bytes) < config.local_below_bytes
    )
    if not local:
        ensure_ray(config.ray_address, config.num_cpus)
    # Every problem stays with its dataset or episode: a unit that cannot be opened, listed or
    # given a spec is quarantined (per episode where its episodes are known), the rest goes on.
    spec_problems = _check_embodiments(lake, readers, passed=set())  # widths are compared after stage 1
    quarantine: list[dict[str, Any]] = [q for u in found_units.failed for q in _unit_rows(u)]
    notes: list[str] = []
    refs: list[EpisodeRef] = []
    usable: list[SourceReader] = []
    for r in readers:
        unit = EpisodeRef(source_uri=r.root, source_format=r.format_name, episode_index=-1, embodiment=r.tag)
        try:
            found = r.discover()
        except SourceError as e:
            quarantine.append(_quarantine_row(unit, e))
            continue
        except Exception as e:  # a reader bug is this dataset's problem, not the whole ingest's
            quarantine.append(
                _quarantine_row(
                    unit, SourceError("reader_error", r.root, f"cannot list episodes ({type(e).__name__}: {e})")
                )
            )
            continue
        finally:
            notes += [str(n) for n in getattr(r, "notes", ())]
        if r.root in spec_problems:
            quarantine += [_quarantine_row(ref, spec_problems[r.root]) for ref in found] or [
                _quarantine_row(unit, spec_problems[r.root])
            ]
        else:
            refs += found
            usable.append(r)
    by_root = {r.root: r for r in usable}
    discovered = len(refs) + len(quarantine)

    # Stage 1: validate + hash; drop what the lake already holds.
    chunks = _chunks(refs, config.episodes_per_task, local)
    check = _CheckStage(by_root, chunks)
    checked = _run_stage(check, check.decode, len(chunks), "check", len(refs), progress, local)
    by_key = {_ref_key(r): r for r in refs}
    # Widths across datasets of one tag, set only by datasets with an episode that passed its own checks.
    results = [x for part in checked for x in part]
    widths = _check_embodiments(lake, usable, passed={by_key[x.ref].source_uri for x in results if x.ok})
    results = [
        replace(x, quarantine=_quarantine_row(by_key[x.ref], widths[by_key[x.ref].source_uri]))
        if x.ok and by_key[x.ref].source_uri in widths
        else x
        for x in results
    ]
    existing = lake.content_hashes()
    this_run: dict[str, EpisodeRef] = {}
    todo: list[EpisodeRef] = []
    skipped = duplicates = 0
    for res in results:
        notes += res.notes
        if res.quarantine is not None:
            quarantine.append(res.quarantine)
        elif res.hash in existing:
            skipped += 1
        elif res.hash in this_run:
            # The same content twice in one source: it lands once, and the copy is recorded (a
            # re-run finds both in the lake and skips them, so this row is written once).
            ref, first = by_key[res.ref], this_run[res.hash]
            duplicates += 1
            quarantine.append(
                _quarantine_row(
                    ref,
                    SourceError(
                        "duplicate",
                        _episode_path(ref),
                        (
                            f"episode {ref.episode_index} has the same content as episode {first.episode_index} "
                            f"of {first.source_uri} (content hash {res.hash[:12]}); it is ingested once, "
                            "as that one: delete the copy"
                        ),
                    ),
                )
            )
        else:
            this_run[res.hash] = by_key[res.ref]
            todo.append(by_key[res.ref])
    todo.sort(key=lambda r: (r.source_uri, r.episode_index))

    # Stage 2: decode frames and write fragments on workers.
    slot.start(lake)
    lake_uri, lake_opts = lake.uri, lake.storage_options

    def load(todo: list[EpisodeRef]) -> list[Loaded]:
        chunks = _chunks(todo, config.episodes_per_task, local)
        slot.loading = True
        out = _run_stage(
            _LoadStage(by_root, chunks, lake_uri, lake_opts, config.access_copy, config.quality),
            _LoadStage.decode,
            len(chunks),
            "load",
            len(todo),
            progress,
            local,
        )
        slot.loading = False
        for t in ROW_TABLES:
            slot.fragments.setdefault(t, []).extend(
                fragments_from_json([f for res in out for f in res.fragments_of(t)])
            )
        faults.hook("fragments_written")
        return out

    loaded = load(todo)
    quarantine += [q for res in loaded for q in res.quarantine]
    notes += [n for res in loaded for n in res.notes]  # what only the full read saw (collapsed below)
    quarantine_list = [(q["source_path"], q["reason"]) for q in quarantine]
    for path, reason in quarantine_list:
        log.info("quarantined %s: %s", path, reason)  # reported in the result (the CLI prints it once)
    to_record = _new_quarantine(lake, quarantine)

    def result(version: int) -> IngestResult:
        return IngestResult(
            lake_version=version,
            discovered=discovered,
            ingested=len(_episode_rows(loaded)),
            skipped=skipped,
            quarantined=len(quarantine),
            steps=sum(res.num_steps for res in loaded),
            frames=sum(res.num_frames for res in loaded),
            seconds=time.perf_counter() - t0,
            quarantine=quarantine_list,
            unrecognised=list(found_units.unrecognised),
            duplicates=duplicates,
            notes=_collapse_notes(notes),
            execution="local" if local else "ray",
        )

    if not _episode_rows(loaded) and not to_record:
        return result(lake.version)

    # One lake version: media, steps, episodes, quarantine, then statistics, then the manifest,
    # under the write lease; a lost race re-reads the lake and tries again on top of it.
    def attempt(current: Lake, n: int) -> LakeVersion:
        nonlocal loaded, skipped, to_record
        if n > 1:  # lost a race: drop what another writer landed meanwhile
            loaded, dropped = _recheck(current, loaded, by_key, slot, load)
            skipped += dropped
            to_record = _new_quarantine(current, quarantine)
            if not _episode_rows(loaded) and not to_record:
                return current.version_info
        summary = {
            "source": os.path.abspath(source),
            "ingested": len(_episode_rows(loaded)),
            "skipped": skipped,
            "quarantined": len(quarantine),
            "steps": sum(res.num_steps for res in loaded),
            "frames": sum(res.num_frames for res in loaded),
        }
        return _commit(current, slot, loaded, to_record, by_root, summary)

    published = commit_with_retries(lake, attempt, what="this ingest")
    slot.fragments = {}  # committed (or nothing left to commit): no longer this ingest's to delete
    return result(published.version)


def _episode_rows(loaded: list[Loaded]) -> list[dict[str, Any]]:
    return [e for res in loaded for e in res.episodes]


def _commit(
    lake: Lake,
    slot: _WriterSlot,
    loaded: list[Loaded],
    to_record: list[dict[str, Any]],
    by_root: dict[str, SourceReader],
    summary: dict[str, Any],
) -> LakeVersion:
    """Commit this ingest's rows on top of `lake`'s version under the lease and publish them."""
    episode_rows = _episode_rows(loaded)
    with lake.begin(writer=slot.writer) as tx:
        tx.acquire()
        for table in ("media", "streams", "access", "signals", "events", "steps"):
            tx.append(table, fragments_from_json([f for res in loaded for f in res.fragments_of(table)]))
        if episode_rows:
            tx.append_table("episodes", pa.Table.from_pylist(episode_rows, schema=schema_for_table("episodes")))
        if to_record:
            tx.append_table("quarantine", pa.Table.from_pylist(to_record, schema=schema_for_table("quarantine")))
        if episode_rows:
            merge_embodiment_stats(
                tx,
                _landed_specs(by_root, episode_rows),
                Counter(e["embodiment"] for e in episode_rows),
                [res.stats for res in loaded],
                episodes=episode_rows,  # their summary is added to the embodiment's (robolake info)
            )
            tx.index_episodes()
            if needs_compaction(tx):  # many small ingests: keep reads from opening thousands of files
                summary = {**summary, "compacted": compact_in(tx)}
        return tx.commit("ingest", summary)


def _recheck(
    lake: Lake,
    loaded: list[Loaded],
    by_key: dict[str, EpisodeRef],
    slot: _WriterSlot,
    load: Callable[[list[EpisodeRef]], list[Loaded]],
) -> tuple[list[Loaded], int]:
    """Load results less the episodes the lake now holds (another writer ingested them meanwhile).

    A chunk with such an episode is written again without it (its old fragment files deleted);
    the others are kept as they are. Returns (results, episodes dropped).
    """
    have = lake.content_hashes()
    keep: list[Loaded] = []
    redo: list[EpisodeRef] = []
    dropped = 0
    for res in loaded:
        clash = [e for e in res.episodes if e["content_hash"] in have]
        if not clash:
            keep.append(res)
            continue
        dropped += len(clash)
        for t in ROW_TABLES:
            mine = fragments_from_json(res.fragments_of(t))
            delete_fragment_files(lake.uri, t, mine, lake.storage_options)
            ids = {json.dumps(f.to_json(), sort_keys=True) for f in mine}
            slot.fragments[t] = [
                f for f in slot.fragments.get(t, []) if json.dumps(f.to_json(), sort_keys=True) not in ids
            ]
        redo += [
            by_key[f"{e['source_uri']}#{e['source_episode_index']}"]
            for e in res.episodes
            if e["content_hash"] not in have
        ]
        keep.append(res.without_rows())
    if redo:
        keep += load(sorted(redo, key=lambda r: (r.source_uri, r.episode_index)))
    return keep, dropped


def _new_quarantine(lake: Lake, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` less those the lake already records (same file, episode and reason): re-running an
    ingest over a bad file reports it again but does not record it twice."""
    if not rows:
        return rows
    have = {
        (q["source_path"], q["source_episode_index"], q["reason"])
        for q in lake.to_arrow("quarantine", columns=["source_path", "source_episode_index", "reason"]).to_pylist()
    }
    return [q for q in rows if (q["source_path"], q["source_episode_index"], q["reason"]) not in have]


def _landed_specs(readers: dict[str, SourceReader], episode_rows: list[dict[str, Any]]) -> dict[str, EmbodimentSpec]:
    """Each tag's spec from the first dataset (in the run's reader order) with an episode landing now:
    the one `_check_embodiments` let set the width; a later reader of the tag was quarantined."""
    landed = {e["source_uri"] for e in episode_rows}
    specs: dict[str, EmbodimentSpec] = {}
    for r in readers.values():
        if r.root in landed and r.tag not in specs:
            specs[r.tag] = r.spec()
    return specs
