"""Ingest: source datasets -> lake, on Ray Data, in one lake commit, idempotent by content hash.

Two Ray Data stages run over chunks of episodes:

1. *check*: read each episode's parquet rows, validate them (finite values, monotonic timestamps,
   widths that match the embodiment spec) and hash their content. Cheap: no video is decoded.
   The driver drops episodes whose hash the lake already holds, and duplicates within the run.
2. *load*: decode the videos of the remaining episodes, encode each frame, check frame counts,
   and write steps and media rows as Lance fragments straight from the worker.

The driver then appends all fragments (one Lance commit per table), recomputes the normalisation
statistics of the embodiments it touched, and publishes one lake version. Every rejected episode
lands in the quarantine table with its file and reason. Killing the process at any point leaves
the lake at its previous version; running the same ingest again resumes it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.lake.lake import Lake
from robolake.lake.query import sql_quote
from robolake.lake.sources import (
    EpisodeRef,
    SourceError,
    SourceOptions,
    SourceReader,
    TabularEpisode,
    discover_readers,
)
from robolake.lake.sources.mapping import Mapping
from robolake.lake.stats import NormStatsAccumulator, accumulate_norm_stats
from robolake.lake.transaction import fragments_from_json, fragments_to_json, write_table_fragments
from robolake.ray_tasks import chunk, ensure_ray, fan_out
from robolake.schemas.tables import schema_for_table

__all__ = ["IngestConfig", "IngestResult", "ingest", "ensure_ray"]  # ensure_ray: re-exported from robolake.ray_tasks

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True, kw_only=True)
class IngestConfig:
    """How to ingest.

    Attributes:
        format: Source format: `auto` or a registered format name (`robolake ingest --help`).
        embodiment: Force this embodiment tag on every source dataset.
        mapping: Which streams become state, action, cameras and task (`--map FILE`).
        state_only: Accept episodes without camera frames instead of quarantining them.
        episodes_per_task: Episodes one Ray task handles (and writes as one fragment per table).
        ray_address: Ray cluster address; None starts (or joins) a local Ray.
        num_cpus: CPUs for a local Ray; None lets Ray decide.
    """

    format: str = "auto"
    embodiment: str | None = None
    mapping: Mapping | None = None
    state_only: bool = False
    episodes_per_task: int = 8
    ray_address: str | None = None
    num_cpus: int | None = None

    def __post_init__(self) -> None:
        if self.episodes_per_task < 1:
            raise ValueError(f"episodes_per_task must be >= 1, got {self.episodes_per_task}")


@dataclass(frozen=True, kw_only=True)
class IngestResult:
    """What an ingest did.

    Attributes:
        lake_version: The version it published (the old one when nothing changed).
        discovered: Episodes found in the source.
        ingested: Episodes written.
        skipped: Episodes already in the lake (same content hash) or duplicated in the source.
        quarantined: Episodes rejected in this run, each recorded in the quarantine table (once:
            a re-run over the same bad file does not record it again).
        steps: Steps written.
        frames: Camera frames written.
        seconds: Wall time.
        quarantine: (path, reason) of each rejected episode.
        unrecognised: Paths under the source that look like data but that no format read.
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


def _read_checked(reader: SourceReader, ref: EpisodeRef) -> TabularEpisode:
    try:
        return reader.read_tabular(ref)
    except SourceError:
        raise
    except Exception as e:  # an unexpected reader failure is still this episode's problem, not the batch's
        raise SourceError("reader_error", os.path.join(ref.source_uri, str(ref.get("data_path", ""))), f"{type(e).__name__}: {e}") from e


class _CheckStage:
    """Ray Data stage 1: validate and hash tabular content (no video decode)."""

    def __init__(self, readers: dict[str, SourceReader], chunks: list[list[EpisodeRef]]):
        self.readers, self.chunks = readers, chunks

    def __call__(self, index: int) -> list[dict[str, Any]]:
        out = []
        for ref in self.chunks[index]:
            try:
                ep = _read_checked(self.readers[ref.source_uri], ref)
                out.append({"ok": True, "ref": _ref_key(ref), "hash": ep.content_hash})
            except SourceError as e:
                out.append({"ok": False, "ref": _ref_key(ref), "quarantine": _quarantine_row(ref, e)})
        return out


class _LoadStage:
    """Ray Data stage 2: decode frames, build rows, write Lance fragments from the worker."""

    def __init__(self, readers: dict[str, SourceReader], chunks: list[list[EpisodeRef]], lake_uri: str, storage_options: dict[str, str] | None):
        self.readers, self.chunks, self.lake_uri, self.opts = readers, chunks, lake_uri, storage_options

    def __call__(self, index: int) -> dict[str, Any]:
        steps: list[pa.Table] = []
        media: list[pa.Table] = []
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
            episode_id = f"{ref.source_name}/{ref.episode_index:06d}-{ep.content_hash[:12]}"
            steps.append(_steps_table(episode_id, ep))
            media.append(_media_table(episode_id, ep, frames))
            episodes.append(_episode_row(episode_id, ep, [f.camera for f in frames]))
        out: dict[str, Any] = {"episodes": episodes, "quarantine": quarantine, "steps": [], "media": []}
        for table, parts in (("steps", steps), ("media", media)):
            if parts:
                frags = write_table_fragments(self.lake_uri, table, pa.concat_tables(parts), self.opts)
                out[table] = fragments_to_json(frags)
        out["num_steps"] = int(sum(t.num_rows for t in steps))
        out["num_frames"] = int(sum(t.num_rows for t in media))
        out["stats"] = _partial_stats(steps)
        return out


def _partial_stats(steps: list[pa.Table]) -> dict[str, str]:
    """Mergeable statistics of the steps one task wrote, per embodiment (merged on the driver)."""
    by_tag: dict[str, list[pa.Table]] = {}
    for t in steps:
        if t.num_rows:
            by_tag.setdefault(t["embodiment"][0].as_py(), []).append(t)
    return {
        tag: json.dumps(accumulate_norm_stats(pa.concat_tables(parts)).state_action_dict())
        for tag, parts in sorted(by_tag.items())
    }


def _ref_key(ref: EpisodeRef) -> str:
    return f"{ref.source_uri}#{ref.episode_index}"


def _steps_table(episode_id: str, ep: TabularEpisode) -> pa.Table:
    n = ep.num_steps
    return pa.table(
        {
            "episode_id": pa.array([episode_id] * n, pa.string()),
            "embodiment": pa.array([ep.ref.embodiment] * n, pa.string()),
            "step_index": pa.array(np.arange(n, dtype=np.int32)),
            "timestamp": pa.array(ep.timestamps - ep.timestamps[0]),
            "state": pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32) * ep.state.shape[1]), pa.array(ep.state.reshape(-1))
            ),
            "action": pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32) * ep.action.shape[1]), pa.array(ep.action.reshape(-1))
            ),
            "task_index": pa.array(ep.task_index.astype(np.int32)),
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


def _episode_row(episode_id: str, ep: TabularEpisode, cameras: list[str]) -> dict[str, Any]:
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
        "metadata": json.dumps(ep.metadata, sort_keys=True),
    }


def _run_stage(stage: Any, num_chunks: int, name: str, total: int, progress: ProgressFn | None) -> list[Any]:
    """Results of `stage` over every chunk, in chunk order (so the commit order is reproducible)."""
    results: dict[int, Any] = {}
    done = 0
    for index, res in fan_out(stage, num_chunks):
        results[index] = res
        done += len(res) if isinstance(res, list) else len(res["episodes"]) + len(res["quarantine"])
        if progress:
            progress(name, done, total)
    return [results[i] for i in sorted(results)]


def _check_embodiments(lake: Lake, readers: list[SourceReader]) -> dict[str, str]:
    """Readers whose spec contradicts the lake's spec for the same tag -> reason."""
    known = lake.embodiments()
    problems = {}
    for r in readers:
        spec, have = r.spec(), known.get(r.tag)
        if have is not None and (have.state_dim, have.action_dim) != (spec.state_dim, spec.action_dim):
            problems[r.root] = (
                f"embodiment {r.tag!r} in the lake has state/action widths {have.state_dim}/{have.action_dim} "
                f"but this dataset has {spec.state_dim}/{spec.action_dim}; ingest it with --embodiment <new tag>"
            )
    return problems


def ingest(
    source: str,
    lake: Lake | str,
    config: IngestConfig | None = None,
    *,
    progress: ProgressFn | None = None,
) -> IngestResult:
    """Ingest every episode under `source` into `lake` (created if missing) as one lake version.

    Args:
        source: A dataset root or a directory of datasets.
        lake: A Lake or a lake URI.
        config: Ingest options.
        progress: Called as progress(stage, done, total) while episodes are processed.

    Returns:
        What was ingested, skipped and quarantined.

    Raises:
        ValueError: nothing readable at `source`.
        CommitConflictError: another writer published a lake version meanwhile (re-run).
    """
    config = config or IngestConfig()
    t0 = time.perf_counter()
    # Discovery first: a source with nothing readable fails here, before Ray starts or the lake is created.
    found_units = discover_readers(source, format=config.format, options=SourceOptions(
        embodiment=config.embodiment, mapping=config.mapping, state_only=config.state_only))
    readers = list(found_units.readers)
    if isinstance(lake, str):
        lake = Lake.open_or_create(lake)
    ensure_ray(config.ray_address, config.num_cpus)
    by_root = {r.root: r for r in readers}
    spec_problems = _check_embodiments(lake, readers)
    quarantine: list[dict[str, Any]] = [
        _quarantine_row(EpisodeRef(source_uri=u.path, source_format=u.format, episode_index=-1, embodiment=""),
                        SourceError(u.reason_code, u.path, u.message))
        for u in found_units.failed
    ]
    refs: list[EpisodeRef] = []
    for r in readers:
        found = r.discover()
        if r.root in spec_problems:
            quarantine += [_quarantine_row(ref, SourceError("shape", r.root, spec_problems[r.root])) for ref in found]
        else:
            refs += found
    discovered = len(refs) + len(quarantine)

    # Stage 1: validate + hash; drop what the lake already holds.
    chunks = chunk(refs, config.episodes_per_task)
    checked = _run_stage(_CheckStage(by_root, chunks), len(chunks), "check", len(refs), progress)
    by_key = {_ref_key(r): r for r in refs}
    existing = lake.content_hashes()
    todo: list[EpisodeRef] = []
    skipped = 0
    for res in (x for part in checked for x in part):
        if not res["ok"]:
            quarantine.append(res["quarantine"])
        elif res["hash"] in existing:
            skipped += 1
        else:
            existing.add(res["hash"])
            todo.append(by_key[res["ref"]])
    todo.sort(key=lambda r: (r.source_uri, r.episode_index))

    # Stage 2: decode frames and write fragments on workers.
    chunks = chunk(todo, config.episodes_per_task)
    loaded = _run_stage(_LoadStage(by_root, chunks, lake.uri, lake.storage_options), len(chunks), "load", len(todo), progress)
    episode_rows = [e for res in loaded for e in res["episodes"]]
    quarantine += [q for res in loaded for q in res["quarantine"]]
    frags = {t: fragments_from_json([f for res in loaded for f in res[t]]) for t in ("steps", "media")}
    n_steps = sum(res["num_steps"] for res in loaded)
    n_frames = sum(res["num_frames"] for res in loaded)

    quarantine_list = [(q["source_path"], q["reason"]) for q in quarantine]
    for path, reason in quarantine_list:
        log.warning("quarantined %s: %s", path, reason)
    to_record = _new_quarantine(lake, quarantine)
    if not episode_rows and not to_record:
        return IngestResult(
            lake_version=lake.version, discovered=discovered, ingested=0, skipped=skipped,
            quarantined=len(quarantine), steps=0, frames=0, seconds=time.perf_counter() - t0,
            quarantine=quarantine_list, unrecognised=list(found_units.unrecognised),
        )

    # One lake version: media, steps, episodes, quarantine, then statistics, then the manifest.
    tx = lake.begin()
    tx.append("media", frags["media"])
    tx.append("steps", frags["steps"])
    if episode_rows:
        tx.append_table("episodes", pa.Table.from_pylist(episode_rows, schema=schema_for_table("episodes")))
    if to_record:
        tx.append_table("quarantine", pa.Table.from_pylist(to_record, schema=schema_for_table("quarantine")))
    if episode_rows:
        _update_embodiments(tx, by_root, episode_rows, [res["stats"] for res in loaded])
        for table in ("episodes", "steps", "media"):
            tx.create_index(table, "episode_id")
    summary = {"source": os.path.abspath(source), "ingested": len(episode_rows), "skipped": skipped,
               "quarantined": len(quarantine), "steps": n_steps, "frames": n_frames}
    published = tx.commit("ingest", summary)
    return IngestResult(
        lake_version=published.version, discovered=discovered, ingested=len(episode_rows), skipped=skipped,
        quarantined=len(quarantine), steps=n_steps, frames=n_frames, seconds=time.perf_counter() - t0,
        quarantine=quarantine_list, unrecognised=list(found_units.unrecognised),
    )


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


def _update_embodiments(
    tx: Any, readers: dict[str, SourceReader], episode_rows: list[dict[str, Any]], partial_stats: list[dict[str, str]]
) -> None:
    """Rewrite the (small) embodiments table: specs of new tags, statistics of touched ones with
    this ingest's steps merged in.

    Only the new steps are read (by the workers that wrote them, as `partial_stats` in chunk
    order); the stored accumulators absorb them, so the cost of an ingest does not grow with the
    lake. A tag whose stored statistics predate the accumulators is recomputed from its steps once.
    """
    current = {r["embodiment"]: r for r in tx.dataset("embodiments").to_table().to_pylist()}
    specs = {r.tag: r.spec() for r in readers.values()}
    new_episodes: dict[str, int] = {}
    for e in episode_rows:
        new_episodes[e["embodiment"]] = new_episodes.get(e["embodiment"], 0) + 1
    merged: dict[str, NormStatsAccumulator] = {}
    for part in partial_stats:
        for tag, text in part.items():
            acc = NormStatsAccumulator.from_state_action_dict(json.loads(text))
            merged[tag] = merged[tag].merge(acc) if tag in merged else acc
    for tag in sorted(new_episodes):
        where = f"embodiment = {sql_quote(tag)}"
        row = current.get(tag)
        stored = None
        if row is not None:
            try:
                stored = NormStatsAccumulator.from_json(row["stats_json"])
            except ValueError as e:
                log.warning("embodiment %s: %s", tag, e)
        if row is not None and stored is None:
            # Statistics from before the accumulators: rebuild them from every step once
            # (this version's steps table already holds the new steps, so nothing is merged).
            log.info("embodiment %s: computing mergeable statistics from all its steps (once)", tag)
            acc = accumulate_norm_stats(tx.dataset("steps").to_table(columns=["state", "action"], filter=where))
            num_episodes = tx.dataset("episodes").count_rows(filter=where)
        else:
            acc = merged[tag] if stored is None else stored.merge(merged[tag])
            num_episodes = (0 if row is None else int(row["num_episodes"])) + new_episodes[tag]
        current[tag] = {
            "embodiment": tag,
            "spec_json": row["spec_json"] if row is not None else specs[tag].to_json(),
            "stats_json": acc.to_json(),
            "num_episodes": num_episodes,
            "num_steps": acc.state.count,
        }
    tx.overwrite("embodiments", pa.Table.from_pylist([current[k] for k in sorted(current)], schema=schema_for_table("embodiments")))
