"""Access copies: frames re-encoded from the record for fast random reads, derived and droppable.

A recorded video answers a random frame by decoding from its keyframe, which on a long-GOP
source (the GR00T data has 250-frame GOPs) costs about what an mp4 seek does. The access copy
trades bytes and fidelity for that: every recorded camera of every episode re-encoded as
key-referenced h264 (`codecs.KeyframeEncoder`, `h264;gop=16;crf=22`: any frame in at most two
decodes), one row per (episode, camera, step) in the `access` table, same columns as `media`.

It is never the data of record:

- It is built from the record only (each stream decoded sequentially once, `lake.record`), by
  `robolake optimize LAKE --access-copy h264` for every recorded camera that has none yet, or
  by `ingest --access-copy h264` for the episodes it ingests. The same record and settings give
  the same bytes (x264 on one thread is deterministic; `KeyframeEncoder` checks it), so a dropped
  copy is rebuilt exactly.
- The lake version references it like any table, and curation keeps it with its episode
  (`compact.EPISODE_TABLES`): a deleted episode's copy goes with it, a merged one comes along.
- `robolake optimize LAKE --access-copy none` publishes a version without it; `gc` then removes
  its files once no kept version names them.
- Readers use it where an (episode, camera) has one and the record elsewhere; `FrameReader(...,
  exact=True)` and the viewer always read the record.

Cameras whose frames are not a recorded video (images as recorded, FFV1 raw pixels: one decode a
frame already) and frames of odd sizes (yuv420p) get no copy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from robolake.lake.media.codecs import VIDEO_CRF, KeyframeEncoder
from robolake.lake.media.frames import load_streams
from robolake.lake.media.record import StreamIndex, decode_runs, rgb
from robolake.lake.protocol.versions import who
from robolake.lake.query import sql_in
from robolake.schemas.tables import schema_for_table

if TYPE_CHECKING:
    from robolake.lake.lake import Lake
    from robolake.lake.protocol.transaction import LakeTransaction

__all__ = ["ACCESS_COPIES", "AccessReport", "access_rows", "build_access_copy", "drop_access_copy"]

log = logging.getLogger(__name__)

ACCESS_COPIES = ("h264",)
_EPISODES_PER_WRITE = 16


@dataclass(frozen=True, kw_only=True)
class AccessReport:
    """What an access-copy build or drop did.

    Attributes:
        version: The lake version published (None: nothing to do).
        streams: Recorded streams copied (built) or whose copies were dropped.
        frames: Access rows written (built) or removed (dropped).
    """

    version: int | None
    streams: int
    frames: int


def access_rows(
    episode_id: str,
    camera: str,
    stream: StreamIndex,
    packet: Callable[[int], bytes],
    timestamps: np.ndarray,
    *,
    crf: int = VIDEO_CRF,
) -> pa.Table | None:
    """The access-copy rows of one recorded stream (None for odd frame sizes, which h264 cannot hold)."""
    n = stream.num_steps
    enc: KeyframeEncoder | None = None
    data: list[bytes] = []
    size = (0, 0)
    for step, frame in decode_runs(stream, stream.runs(range(n)), packet):
        if step != len(data):  # runs yield in step order within a run; one run covers a whole stream
            raise RuntimeError(f"stream of {episode_id}/{camera} decoded step {step} out of order")
        if enc is None:
            size = (frame.height, frame.width)
            if size[0] % 2 or size[1] % 2:
                return None
            enc = KeyframeEncoder(size[0], size[1], crf=crf)
        data.append(enc.add(rgb(frame)))
    if enc is None or len(data) != n:
        raise RuntimeError(f"stream of {episode_id}/{camera} decoded {len(data)} of {n} frames")
    return pa.table(
        {
            "episode_id": [episode_id] * n,
            "camera": [camera] * n,
            "step_index": pa.array(np.arange(n, dtype=np.int32)),
            "timestamp": pa.array(np.asarray(timestamps, dtype=np.float64)),
            "width": pa.array([size[1]] * n, pa.int32()),
            "height": pa.array([size[0]] * n, pa.int32()),
            "encoding": [enc.encoding] * n,
            "data": pa.array(data, pa.large_binary()),
        },
        schema=schema_for_table("access"),
    )


def _episode_copies(
    lake: Lake, episode_ids: list[str], crf: int, skip: set[tuple[str, str]]
) -> Iterable[tuple[int, pa.Table]]:
    """(streams copied, rows) for chunks of episodes: each recorded stream not in `skip` decoded once."""
    media = lake.dataset("media")
    for i in range(0, len(episode_ids), _EPISODES_PER_WRITE):
        chunk = episode_ids[i : i + _EPISODES_PER_WRITE]
        streams = load_streams(lake.dataset("streams"), chunk)
        if not streams:
            continue
        rows = media.to_table(
            columns=["episode_id", "camera", "step_index", "timestamp", "data"], filter=sql_in("episode_id", chunk)
        )
        by: dict[tuple[str, str], Any] = {}
        for r in rows.to_pylist():
            by.setdefault((r["episode_id"], r["camera"]), {})[int(r["step_index"])] = (r["timestamp"], r["data"])
        parts = []
        for (eid, cam), stream in sorted(streams.items()):
            if (eid, cam) in skip:
                continue
            cells = by[(eid, cam)]
            ts = np.array([cells[s][0] for s in range(stream.num_steps)])
            table = access_rows(eid, cam, stream, lambda s, cells=cells: cells[s][1], ts, crf=crf)  # type: ignore[misc]
            if table is not None:
                parts.append(table)
        if parts:
            yield len(parts), pa.concat_tables(parts)


def _copied(lake: Lake) -> set[tuple[str, str]]:
    if lake.count("access") == 0:
        return set()
    t = lake.dataset("access").to_table(columns=["episode_id", "camera"], filter="step_index = 0")
    return set(zip(t["episode_id"].to_pylist(), t["camera"].to_pylist(), strict=True))


def append_access_copy(tx: LakeTransaction, lake: Lake, *, crf: int = VIDEO_CRF) -> tuple[int, int]:
    """Write the access copy of every recorded stream of `lake` that lacks one, in `tx`; (streams, rows)."""
    from robolake.lake.protocol.transaction import write_table_fragments

    have = _copied(lake)
    pairs = lake.dataset("streams").to_table(columns=["episode_id", "camera"])
    todo = sorted(
        {
            e
            for e, c in zip(pairs["episode_id"].to_pylist(), pairs["camera"].to_pylist(), strict=True)
            if (e, c) not in have
        }
    )
    streams = frames = 0
    for n, table in _episode_copies(lake, todo, crf, have):
        frags = write_table_fragments(tx.lake_uri, "access", table, tx.storage_options)
        tx.adopt("access", frags)
        tx.append("access", frags)
        streams, frames = streams + n, frames + table.num_rows
    if frames:
        tx.index_episodes(("access",))
    return streams, frames


def build_access_copy(lake: Lake, kind: str = "h264", *, crf: int = VIDEO_CRF) -> AccessReport:
    """Publish a version whose access copy covers every recorded stream of the lake's newest version.

    Raises:
        ValueError: an unknown `kind`.
    """
    if kind not in ACCESS_COPIES:
        raise ValueError(f"access copy must be one of {ACCESS_COPIES} (or none to drop it), got {kind!r}")
    lake = lake.refresh()
    with lake.begin() as tx:
        tx.acquire()
        streams, frames = append_access_copy(tx, lake, crf=crf)
        if not frames:
            tx.abort()
            return AccessReport(version=None, streams=0, frames=0)
        lv = tx.commit("access_copy", {"who": who(), "kind": kind, "crf": crf, "streams": streams, "frames": frames})
    log.info("lake %s: version %d holds an access copy of %d more streams", lake.uri, lv.version, streams)
    return AccessReport(version=lv.version, streams=streams, frames=frames)


def drop_access_copy(lake: Lake) -> AccessReport:
    """Publish a version without the access copy (`gc` frees its files later)."""
    lake = lake.refresh()
    rows = lake.count("access")
    if rows == 0:
        return AccessReport(version=None, streams=0, frames=0)
    streams = len(_copied(lake))
    with lake.begin() as tx:
        tx.acquire()
        tx.overwrite("access", pa.Table.from_pylist([], schema=schema_for_table("access")))
        lv = tx.commit("access_copy", {"who": who(), "kind": "none", "dropped_frames": rows})
    return AccessReport(version=lv.version, streams=streams, frames=rows)
