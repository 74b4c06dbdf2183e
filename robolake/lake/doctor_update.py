"""`robolake doctor --update`: measure the quality of episodes that lack it, and store what
`robolake info` reads, as one new lake version.

An older lake (ingested before quality, or with it off, or by a robolake whose quality had no
frame fingerprints) gets its quality here: the steps, media and streams rows of the episodes that
lack it are read once, in batches of `_UPDATE_BATCH` (one scan a table, arrays sliced out of the
Arrow columns, never a Python list per step; from `_PARALLEL_FROM` batches on, in one worker
process per CPU), their quality computed by the same functions ingest uses (`lake.stats.quality`),
and their episode rows published by the driver as one new lake version (the record is untouched;
`restore` goes back). The same version stores the per-embodiment summaries `robolake info` reads
(`lake.stats.episode_summary`) for embodiments whose rows lack them (a lake written before them),
so a lake whose quality is complete still gets one version here when it needs them.

Measured on 10,000 synthetic episodes (`bench doctor`): 3.7 CPU seconds per 1,000 episodes in one
process, linear in the episodes.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.lake import Lake
from robolake.lake.media.record import StreamIndex, is_record
from robolake.lake.protocol.versions import who
from robolake.lake.query import sql_in
from robolake.lake.stats.embodiments import refresh_summaries
from robolake.lake.stats.episode_summary import SUMMARY_COLUMNS, stored_summary, summarize
from robolake.lake.stats.findings import quality_of as _quality
from robolake.lake.stats.quality import QUALITY_VERSION, episode_quality
from robolake.schemas.tables import schema_for_table

__all__ = ["update_quality"]

log = logging.getLogger(__name__)

_UPDATE_BATCH = 256  # episodes whose steps and media are read in one scan
_PARALLEL_FROM = 4  # batches from which --update runs them in worker processes by default


def _stale(metadata: Any) -> bool:
    """Whether an episode's quality is missing or from an older `QUALITY_VERSION` (no frame fingerprints)."""
    q = _quality(metadata)
    return q is None or int(q.get("v", 0) or 0) < QUALITY_VERSION


def update_quality(lake: Lake, workers: int | None = None) -> int:
    """Measure the quality of the episodes without it (or with an older one) and publish their rows
    as one version.

    Reads each batch of episodes' steps and media in one scan each, sorted once, and slices every
    episode's arrays out of the columns (flattened list values reshaped, never a Python list per
    step): the quality functions get what ingest hands them. Batches run in `workers` processes
    (default: one per CPU from `_PARALLEL_FROM` batches on; each opens the lake at this version and
    reads its own batches), and the driver commits once.
    """
    table = lake.episodes()
    todo = [i for i, m in enumerate(table.column("metadata").to_pylist()) if _stale(m)]
    if not todo:
        _store_summaries(lake)
        return 0
    rows = table.take(todo).to_pylist()
    batches = [rows[i : i + _UPDATE_BATCH] for i in range(0, len(rows), _UPDATE_BATCH)]
    n = _workers(workers, len(batches))
    if n <= 1:
        new_rows = [r for b in batches for r in _measured(lake, b)]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # forkserver, not fork: Lance's threads do not survive a fork (as the loaders' workers)
        ctx = multiprocessing.get_context("forkserver")
        uri, version, opts = lake.uri, lake.version, lake.storage_options
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            done = pool.map(_measured_at, [(uri, version, opts, b) for b in batches])
            new_rows = [r for part in done for r in part]
    with lake.begin() as tx:
        tx.acquire()
        ids = [r["episode_id"] for r in new_rows]
        for i in range(0, len(ids), 500):
            tx.delete("episodes", sql_in("episode_id", ids[i : i + 500]))
        tx.append_table("episodes", pa.Table.from_pylist(new_rows, schema=schema_for_table("episodes")))
        tx.index_episodes()
        refresh_summaries(tx, sorted({r["embodiment"] for r in new_rows}) + _unsummarised(lake))
        lv = tx.commit("doctor", {"who": who(), "quality_added": len(new_rows)})
    log.info("lake %s: version %d adds the quality of %d episodes", lake.uri, lv.version, len(new_rows))
    return len(new_rows)


def _unsummarised(lake: Lake) -> list[str]:
    """Embodiments whose row keeps no summary of their episodes (`lake.stats.episode_summary`), or
    one that disagrees with a recount (what `robolake check` reports)."""
    rows = lake.to_arrow("embodiments", columns=["embodiment", "stats_json"]).to_pylist()
    episodes = lake.episodes(columns=SUMMARY_COLUMNS).to_pylist()
    recount = summarize(episodes, lake.to_arrow("media", columns=["episode_id", "encoding"]))
    return [r["embodiment"] for r in rows if stored_summary(r["stats_json"]) != recount.get(r["embodiment"])]


def _store_summaries(lake: Lake) -> None:
    """Store the summaries a lake written before them lacks (or holds wrong), as one version (what
    `robolake info` reads instead of every episode's metadata); nothing when every one is right."""
    stale = _unsummarised(lake)
    if not stale:
        return
    with lake.begin() as tx:
        tx.acquire()
        tags = refresh_summaries(tx, stale)
        lv = tx.commit("doctor", {"who": who(), "summaries_added": tags})
    log.info("lake %s: version %d stores the episode summaries of %s", lake.uri, lv.version, ", ".join(tags))


def _workers(asked: int | None, batches: int) -> int:
    if asked is not None:
        return min(asked, batches)
    if batches < _PARALLEL_FROM:
        return 1  # a worker's start-up (imports) costs more than a few batches
    return max(1, min(os.cpu_count() or 1, batches))


def _measured_at(job: tuple[str, int, dict[str, str] | None, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """`_measured` in a worker process: the lake opened at the driver's version."""
    uri, version, opts, batch = job
    return _measured(Lake.open(uri, version=version, storage_options=opts), batch)


def _measured(lake: Lake, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The episode rows of `batch` with their quality measured into the metadata."""
    arrays = _batch_arrays(lake, [r["episode_id"] for r in batch])
    out = []
    for r in batch:
        try:
            meta = json.loads(r["metadata"]) if r["metadata"] else {}
        except json.JSONDecodeError:
            meta = {}
        meta = meta if isinstance(meta, dict) else {}
        meta["quality"] = _quality_of(r, arrays.get(r["episode_id"]))
        out.append({**r, "metadata": json.dumps(meta, sort_keys=True)})
    return out


@dataclass
class _Arrays:
    """One episode's steps and cameras, as ingest holds them."""

    state: np.ndarray
    action: np.ndarray
    timestamps: np.ndarray
    cameras: list[tuple[str, list[bytes], str, Any]] = field(default_factory=list)


def _runs_of(keys: pa.ChunkedArray | pa.Array) -> list[tuple[Any, int, int]]:
    """(value, start, end) of each run of equal values of a sorted column."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    if len(arr) == 0:
        return []
    enc = pc.run_end_encode(arr)
    ends = enc.run_ends.to_numpy()
    starts = np.concatenate([[0], ends[:-1]])
    return list(zip(enc.values.to_pylist(), starts.tolist(), ends.tolist(), strict=True))


def _matrix(col: pa.ChunkedArray, start: int, end: int) -> np.ndarray:
    """float32 [end - start, D] of a list<float> column's rows (one width within an episode)."""
    part = col.slice(start, end - start).combine_chunks()
    if isinstance(part, pa.ChunkedArray):  # pragma: no cover - combine_chunks of a ChunkedArray is an Array
        part = part.chunk(0)
    values = np.asarray(part.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
    if not values.size:
        return np.zeros((end - start, 0), dtype=np.float32)
    return values.reshape(end - start, -1)


def _batch_arrays(lake: Lake, ids: list[str]) -> dict[str, _Arrays]:
    """The steps, media and streams of the episodes `ids`, one scan of each table."""
    where = sql_in("episode_id", ids)
    steps = lake.to_arrow("steps", columns=["episode_id", "step_index", "timestamp", "state", "action"], where=where)
    steps = steps.sort_by([("episode_id", "ascending"), ("step_index", "ascending")])
    out: dict[str, _Arrays] = {}
    ts = steps.column("timestamp").to_numpy()
    for eid, a, b in _runs_of(steps.column("episode_id")):
        out[eid] = _Arrays(
            state=_matrix(steps.column("state"), a, b),
            action=_matrix(steps.column("action"), a, b),
            timestamps=np.asarray(ts[a:b], dtype=np.float64),
        )
    media = lake.to_arrow("media", columns=["episode_id", "camera", "step_index", "encoding", "data"], where=where)
    if not media.num_rows:
        return out
    media = media.sort_by([("episode_id", "ascending"), ("camera", "ascending"), ("step_index", "ascending")])
    streams = (
        {(r["episode_id"], r["camera"]): r for r in lake.to_arrow("streams", where=where).to_pylist()}
        if lake.has_table("streams")
        else {}
    )
    key = pc.binary_join_element_wise(media.column("episode_id"), media.column("camera"), "\x00")
    encodings, data = media.column("encoding"), media.column("data")
    for k, a, b in _runs_of(key):
        eid, cam = k.split("\x00", 1)
        if eid not in out:
            continue
        enc = str(encodings[a].as_py())
        images = data.slice(a, b - a).to_pylist()
        video: Any = False
        if is_record(enc):
            row = streams.get((eid, cam))
            video = StreamIndex.from_row(row) if row is not None else True
        out[eid].cameras.append((cam, images, enc, video))
    return out


def _quality_of(row: dict[str, Any], arrays: _Arrays | None) -> dict[str, Any]:
    if arrays is None:  # an episode without steps: measure what there is
        arrays = _Arrays(
            state=np.zeros((0, 0), np.float32), action=np.zeros((0, 0), np.float32), timestamps=np.zeros(0)
        )
    return episode_quality(
        state=arrays.state,
        action=arrays.action,
        timestamps=arrays.timestamps,
        fps=float(row["fps"] or 0.0),
        success=row["success"],
        cameras=arrays.cameras,
    )


# --- the static page ------------------------------------------------------------------------------
