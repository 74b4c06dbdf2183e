"""Loading a Rerun recording (`.rrd`) into columns: one per entity and component, in log order.

A `.rrd` file is a stream of Arrow *chunks*, each holding some rows of one entity: a row id
(a TUID, increasing in the order the SDK logged), one column per timeline the row was logged on
(`log_time`, `log_tick`, and whatever the user set with `rr.set_time`), and one list column per
component (`Scalars:scalars`, `Image:buffer`, `Transform3D:translation`, ...). Nothing in the
file says "episode", "state" or "camera": that is the reader's plan (`rerun.plan`).

rerun-sdk 0.41 reads the file itself (`rr.chunk.RrdReader(path).stream()`: its own decoder,
chunk by chunk, each as a pyarrow RecordBatch); its dataframe view (`ChunkStore.reader`) needs
DataFusion and sorts rows by the index, which would hide a clock that runs backwards. So rows
are gathered here per (entity, component) and put back in log order by their row ids, each
with its value on every timeline (`MISSING` where a row was not logged on it), the values left
as Arrow arrays until the reader decides what they are (numbers, text, images).

Reads are bounded: the chunks' bytes count against the read budget (`limits`), and a file the
SDK cannot decode (truncated, not an RRD) raises one `SourceError` naming it. Only the entities
asked for are decoded (`entities=`), so finding episode windows reads one entity, not the images.
"""

from __future__ import annotations

import fnmatch
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.limits import ReadLimits, human_bytes

__all__ = ["Column", "Timeline", "RrdContents", "load_rrd", "rerun_module", "MISSING", "PROPERTIES"]

MISSING = np.iinfo(np.int64).min  # a row not logged on a timeline
PROPERTIES = "/__properties"  # the recording's own properties (start time, name): not robot data


def rerun_module() -> Any:
    """`rerun` (rerun-sdk), imported on first use; a missing one names the extra to install."""
    try:
        import rerun
    except ImportError as e:
        raise ImportError(
            "reading Rerun recordings (.rrd) needs rerun-sdk: "
            "pip install 'robolake[formats]' (or pip install rerun-sdk)"
        ) from e
    return rerun


@dataclass(frozen=True, kw_only=True)
class Timeline:
    """One timeline of a recording.

    Attributes:
        name: As logged (`log_time`, `log_tick`, `sim_time`, ...).
        kind: `timestamp` (ns since the epoch), `duration` (ns) or `sequence` (integers).
    """

    name: str
    kind: str

    @property
    def temporal(self) -> bool:
        return self.kind in ("timestamp", "duration")


@dataclass(kw_only=True)
class Column:
    """Every row of one component of one entity, in log order.

    Attributes:
        entity: Entity path (`/robot/joints`).
        component: Component identifier (`Scalars:scalars`).
        archetype: Archetype it was logged with (`Scalars`, `Image`, ...; "" when unknown).
        component_type: Rerun component type (`Scalar`, `ImageBuffer`, ...).
        static: Logged as static (no timeline).
        times: Timeline -> int64 [N] value of each row on it (`MISSING` where not logged on it).
        values: The rows' values, one list entry per row (null where the row left it out).
    """

    entity: str
    component: str
    archetype: str
    component_type: str
    static: bool
    times: dict[str, np.ndarray] = field(default_factory=dict)
    values: pa.Array = field(default_factory=lambda: pa.array([], pa.null()))

    def __len__(self) -> int:
        return len(self.values)

    def on(self, timeline: str) -> np.ndarray:
        """bool [N]: which rows have a value on `timeline`."""
        t = self.times.get(timeline)
        return np.zeros(len(self), bool) if t is None else t != MISSING


@dataclass(frozen=True, kw_only=True)
class RrdContents:
    """What one `.rrd` file holds (its first recording store).

    Attributes:
        path: The file.
        application_id: The SDK's application id (`rr.init("...")`).
        recording_id: The recording id.
        timelines: Every timeline, by name.
        columns: (entity, component) -> column, entities in path order.
        nbytes: Bytes of the chunks read.
    """

    path: str
    application_id: str
    recording_id: str
    timelines: dict[str, Timeline]
    columns: dict[tuple[str, str], Column]
    nbytes: int

    def entities(self) -> list[str]:
        return sorted({e for e, _ in self.columns})

    def of(self, entity: str) -> list[Column]:
        return [c for (e, _), c in self.columns.items() if e == entity]


def _kind(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_duration(t):
        return "duration"
    return "sequence"


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1] if name else ""


def _heavy(component: str) -> bool:
    """Image and video payloads: bytes the steps never need."""
    return component.endswith((":blob", ":buffer", ":sample"))


def _row_order(row_ids: list[pa.Array]) -> np.ndarray:
    """Indices that put rows in log order: a TUID is (time ns, counter), both big-endian u64."""
    raw = b"".join(a.buffers()[1].to_pybytes()[a.offset * 16 : (a.offset + len(a)) * 16] for a in row_ids)
    words = np.frombuffer(raw, dtype=">u8").reshape(-1, 2)
    return np.lexsort((words[:, 1], words[:, 0]))


def load_rrd(
    path: str,
    *,
    limits: ReadLimits | None = None,
    entities: list[str] | None = None,
    pixels: bool = True,
) -> RrdContents:
    """Read a `.rrd` file's first recording into columns in log order.

    Args:
        path: The file.
        limits: The read budget (the chunks' bytes, all together).
        entities: Entity paths (or `fnmatch` patterns) to decode; None for every one.
        pixels: False: keep only the row times of image and video payloads, not their bytes (for
            `inspect`, discovery and the steps, which need counts and spans, not pixels).

    Returns:
        The recording's timelines and columns.

    Raises:
        SourceError: `corrupt_file` when rerun-sdk cannot read it (truncated, not an RRD),
            `empty` when it holds no recording, `too_large` past the read budget.
    """
    rr = rerun_module()
    limits = limits or ReadLimits()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no footer/manifest": a legacy or unfinished file, read by a scan
            reader = rr.chunk.RrdReader(path)
            stores = reader.recordings()
    except (RuntimeError, OSError, ValueError) as e:
        raise SourceError(
            "corrupt_file", path, f"rerun-sdk cannot read this file ({e}); it is truncated or not a Rerun recording"
        ) from None
    if not stores:
        raise SourceError("empty", path, "the file holds no Rerun recording (only blueprints, or nothing)")
    store = stores[0]
    gathered: dict[tuple[str, str], dict[str, Any]] = {}
    timelines: dict[str, Timeline] = {}
    nbytes = 0
    try:
        for chunk in reader.stream(store=store):
            entity = chunk.entity_path
            if entity.startswith(PROPERTIES) or (
                entities is not None and not any(fnmatch.fnmatchcase(entity, p) for p in entities)
            ):
                continue
            rb = chunk.to_record_batch()
            nbytes += rb.nbytes
            if nbytes > limits.max_read_bytes:
                limits.check_bytes(nbytes, path, entity, "holds chunks of")
            idx = [f for f in rb.schema if (f.metadata or {}).get(b"rerun:kind") == b"index"]
            for f in idx:
                timelines.setdefault(f.name, Timeline(name=f.name, kind=_kind(f.type)))
            times = {
                f.name: np.asarray(rb.column(f.name).cast(pa.int64()).fill_null(MISSING), dtype=np.int64) for f in idx
            }
            row_ids = rb.column(0)
            for f in rb.schema:
                meta = f.metadata or {}
                if meta.get(b"rerun:kind") != b"data":
                    continue
                key = (entity, f.name)
                g = gathered.setdefault(
                    key,
                    {
                        "archetype": _short(meta.get(b"rerun:archetype", b"").decode()),
                        "component_type": _short(meta.get(b"rerun:component_type", b"").decode()),
                        "static": chunk.is_static,
                        "rows": [],
                        "times": [],
                        "values": [],
                    },
                )
                g["rows"].append(row_ids)
                g["times"].append(times)
                if pixels or not _heavy(f.name):
                    g["values"].append(rb.column(f.name))
    except (RuntimeError, OSError) as e:
        raise SourceError(
            "corrupt_file", path, f"rerun-sdk stopped reading this file ({e}); it is truncated or corrupt"
        ) from None
    columns: dict[tuple[str, str], Column] = {}
    for key in sorted(gathered):
        g = gathered[key]
        order = _row_order(g["rows"])
        n = len(order)
        times_of: dict[str, np.ndarray] = {}
        for name in timelines:
            parts = [
                t.get(name, np.full(len(r), MISSING, np.int64)) for t, r in zip(g["times"], g["rows"], strict=True)
            ]
            full = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            if (full != MISSING).any():
                times_of[name] = full[order]
        if len(g["values"]) == len(g["rows"]):
            values = pa.concat_arrays([v.cast(g["values"][0].type) for v in g["values"]]).take(pa.array(order))
        else:
            values = pa.nulls(n)
        columns[key] = Column(
            entity=key[0],
            component=key[1],
            archetype=g["archetype"],
            component_type=g["component_type"],
            static=bool(g["static"]),
            times=times_of,
            values=values,
        )
    if nbytes > limits.max_read_bytes:
        raise SourceError("too_large", path, f"its chunks hold {human_bytes(nbytes)}, over the read budget")
    return RrdContents(
        path=path,
        application_id=str(store.application_id),
        recording_id=str(store.recording_id),
        timelines=timelines,
        columns=columns,
        nbytes=nbytes,
    )
