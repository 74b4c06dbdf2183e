"""The record of a robot's non-camera sensors: every message of every stream, as recorded.

Steps at one rate are a rendition; the record is what the robot logged. A 1 kHz force-torque
stream beside 30 Hz cameras keeps all its messages here, at their own stamps, in the dtype and
width the source wrote, so that the alignment rule and rate can be chosen again later
(`robolake align`) without the source files, and so that a sample can carry a stream's
native-rate history.

A message is split into its numeric leaves (each keeps its numpy dtype: float64 stays float64,
integer ticks stay integers, bytes stay uint8) and its text leaves (joint names, frame ids).
Messages of one topic that share a layout (which leaves, their widths, and the same text) form
a **part**; a topic with one publisher has one part, two publishers of different joints on one
`/joint_states` have two. Text that changes from message to message (a status string inside a
numeric message) would make a part per message, so such a leaf becomes an event stream of its
own (`<topic>/<field>`) and nothing is lost either way. Messages without numbers become
**events**: booleans, strings, and triggers (a message without content).

Tables (`schemas.tables.SignalRow`, `EventRow`): a part is stored in chunks of `CHUNK` messages,
each leaf as raw little-endian bytes; reading them back gives the same arrays bit for bit
(`read_record`). `replay` rebuilds each message as a nested dict, so the readers' own field
logic (joint order by name, a TF frame, a Stamped inner field) runs on the record exactly as it
ran on the source.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.limits import human_bytes
from robolake.schemas.tables import schema_for_table

__all__ = [
    "CHUNK",
    "MAX_PARTS",
    "SignalPart",
    "EventStream",
    "Record",
    "RecordBuilder",
    "flatten_message",
    "replay",
    "record_tables",
    "read_record",
    "stream_summary",
    "gaps",
    "EVENT_KINDS",
    "record_notes",
    "log_minus_header_ns",
    "steps_seconds",
]

_OVERHEAD = 200  # bytes a held message costs beyond its values (tuples, dicts), for the budget
_LEAF = 120  # and each of its leaves (a small numpy array)
CHUNK = 65_536  # messages per stored row of a part: bounded rows, few rows per stream
MAX_PARTS = 8  # distinct layouts of one topic before its changing text leaves become events
EVENT_KINDS = ("bool", "enum", "string", "trigger")
_LE = {"<", "|", "="}


@dataclass(frozen=True, kw_only=True)
class SignalPart:
    """Messages of one stream that share a layout.

    Attributes:
        stream: Topic or key.
        part: Layout index within the stream.
        kind: `numeric`, or `camera` (only the capture times of frames).
        msgtype: Message type.
        clock: What `t_ns` is: `header` (message stamps), `log` (receive time), `source` (a
            dataset's own seconds) or `rows` (row index / fps: a dataset without times).
        t_ns: int64 [N] times on that clock.
        log_ns: int64 [N] log times, or empty when the source has none.
        fields: Dotted paths of the numeric leaves.
        values: One [N, width] array per field, in the source's dtype.
        scalars: Per field, whether the source held a scalar there (not an array of one).
        labels: The part's text leaves (path -> str or list of str), the same in every message.
        path: The file.
    """

    stream: str
    part: int = 0
    kind: str = "numeric"
    msgtype: str = ""
    clock: str = "log"
    t_ns: np.ndarray
    log_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fields: tuple[str, ...] = ()
    values: tuple[np.ndarray, ...] = ()
    scalars: tuple[bool, ...] = ()
    labels: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    def __len__(self) -> int:
        return int(len(self.t_ns))

    @property
    def nbytes(self) -> int:
        return int(self.t_ns.nbytes + self.log_ns.nbytes + sum(v.nbytes for v in self.values))


@dataclass(frozen=True, kw_only=True)
class EventStream:
    """Timestamped events of one stream.

    Attributes:
        stream: Topic, key, or `<topic>/<field>` for a text leaf that changes in a numeric stream.
        kind: `bool`, `enum`, `string` or `trigger`.
        t_ns: int64 [N].
        log_ns: int64 [N], or empty.
        values: N values as text (`true`/`false` for bool); None for a trigger.
        path: The file.
    """

    stream: str
    kind: str
    t_ns: np.ndarray
    log_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    values: tuple[str | None, ...] = ()
    path: str = ""
    clock: str = "log"

    def __len__(self) -> int:
        return int(len(self.t_ns))


@dataclass(frozen=True, kw_only=True)
class Record:
    """Every stream and event of one episode."""

    signals: tuple[SignalPart, ...] = ()
    events: tuple[EventStream, ...] = ()

    def counts(self) -> dict[str, int]:
        """Messages per stream name (parts summed), events included."""
        out: dict[str, int] = {}
        for s in self.signals:
            out[s.stream] = out.get(s.stream, 0) + len(s)
        for e in self.events:
            out[e.stream] = out.get(e.stream, 0) + len(e)
        return out

    def parts(self, stream: str) -> list[SignalPart]:
        return [s for s in self.signals if s.stream == stream]

    def event(self, stream: str) -> EventStream | None:
        return next((e for e in self.events if e.stream == stream), None)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.signals)


# --- messages to leaves ------------------------------------------------------------------------


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}  # message class -> its field names (None: not a structure)


def _children(obj: Any) -> list[tuple[str, Any]] | None:
    if isinstance(obj, dict):
        return [(str(k), v) for k, v in obj.items()]
    cls = type(obj)
    names = _FIELD_NAMES.get(cls, ())
    if names == ():
        names = (
            tuple(f.name for f in dataclasses.fields(obj) if not f.name.startswith("__"))
            if dataclasses.is_dataclass(obj) and not isinstance(obj, type)
            else None
        )
        _FIELD_NAMES[cls] = names
    if names is None:
        return None
    return [(n, getattr(obj, n)) for n in names]


def flatten_message(msg: Any) -> tuple[list[tuple[str, np.ndarray, bool]], dict[str, Any]]:
    """A message's numeric leaves (path, 1-D array in the source dtype, whether it was a scalar)
    and text leaves (path -> value).

    Python numbers become float64 / int64 / bool (what the decoder handed over); numpy arrays
    keep their dtype; bytes become uint8; a list of numbers one array; a list of structures is
    walked with its index in the path (`transforms.0.transform`). JSON nulls are NaN.
    """
    numeric: list[tuple[str, np.ndarray, bool]] = []
    text: dict[str, Any] = {}

    def walk(value: Any, where: str) -> None:
        if isinstance(value, (bool, np.bool_)):
            numeric.append((where, np.asarray([value], dtype=np.bool_), True))
        elif isinstance(value, (int, np.integer)):
            numeric.append(
                (where, np.asarray([value], dtype=np.int64 if isinstance(value, int) else value.dtype), True)
            )
        elif isinstance(value, (float, np.floating)):
            dt = np.float64 if isinstance(value, float) else value.dtype
            numeric.append((where, np.asarray([value], dtype=dt), True))
        elif value is None:
            numeric.append((where, np.asarray([math.nan]), True))
        elif isinstance(value, str):
            text[where] = value
        elif isinstance(value, (bytes, bytearray, memoryview)):
            numeric.append((where, np.frombuffer(bytes(value), dtype=np.uint8), False))
        elif isinstance(value, np.ndarray):
            if value.dtype.kind in "biuf":
                numeric.append((where, np.ascontiguousarray(value).reshape(-1), False))
            elif value.dtype.kind in "US":
                text[where] = [str(x) for x in value.reshape(-1)]
        elif isinstance(value, (list, tuple)):
            if value and all(isinstance(x, str) for x in value):
                text[where] = list(value)
            elif all(isinstance(x, (int, float, bool)) and not isinstance(x, bool) for x in value):
                kind = np.float64 if any(isinstance(x, float) for x in value) else np.int64
                numeric.append((where, np.asarray(value, dtype=kind), False))
            elif all(isinstance(x, bool) for x in value):
                numeric.append((where, np.asarray(value, dtype=np.bool_), False))
            else:
                for i, x in enumerate(value):
                    walk(x, f"{where}.{i}" if where else str(i))
        else:
            kids = _children(value)
            if kids is None:
                return  # an opaque value (a protobuf enum wrapper, ...) carries nothing numeric
            for name, v in kids:
                walk(v, f"{where}.{name}" if where else name)

    walk(msg, "")
    return numeric, text


def _layout(numeric: list[tuple[str, np.ndarray, bool]]) -> tuple[tuple[str, str, int, bool], ...]:
    return tuple((p, a.dtype.str, int(a.shape[0]), one) for p, a, one in numeric)


def _text_key(text: dict[str, Any], keep: set[str] | None) -> str:
    return json.dumps({k: v for k, v in text.items() if keep is None or k in keep}, sort_keys=True)


class RecordBuilder:
    """Collects the messages of one episode's streams and turns them into a `Record`.

    `add` takes each decoded message once (`event_kind` for a topic the reader knows is a flag
    or a label); `build` decides parts and events once all messages are in, so a text leaf that
    changes is seen as changing.
    """

    def __init__(self, *, budget: int | None = None, path: str = "") -> None:
        self._budget = budget
        self._path = path
        self._held = 0
        self.source_bytes: dict[str, int] = {}  # serialized bytes of each stream's messages, where known
        self._msgs: dict[str, list[tuple[int, int, list[tuple[str, np.ndarray, bool]], dict[str, Any]]]] = {}
        self._meta: dict[str, tuple[str, str, str, str | None]] = {}  # stream -> (msgtype, clock, path, event kind)
        self._cameras: dict[str, tuple[list[int], list[int], str, str, str]] = {}

    def add(
        self,
        stream: str,
        msg: Any,
        *,
        t_ns: int,
        log_ns: int,
        msgtype: str = "",
        clock: str = "log",
        path: str = "",
        event_kind: str | None = None,
        nbytes: int | None = None,
    ) -> None:
        """Keep one message.

        Raises:
            SourceError: `too_large`, when the episode's record would hold more than the read budget.
        """
        numeric, text = flatten_message(msg)
        self._msgs.setdefault(stream, []).append((int(t_ns), int(log_ns), numeric, text))
        self._meta.setdefault(stream, (msgtype, clock, path, event_kind))
        if nbytes is not None:
            self.source_bytes[stream] = self.source_bytes.get(stream, 0) + int(nbytes)
        self._held += _OVERHEAD + sum(a.nbytes + _LEAF for _, a, _ in numeric)
        if self._budget is not None and self._held > self._budget:
            raise SourceError(
                "too_large",
                path or self._path,
                f"the record of this episode passes the read budget ({human_bytes(self._budget)}) at stream {stream} "
                f"(message {len(self._msgs[stream])}); split the recording (`split:` in a mapping), keep fewer "
                "streams (--streams), or raise --max-read-gb",
            )

    def add_frame(
        self, camera: str, *, t_ns: int, log_ns: int, msgtype: str = "", clock: str = "log", path: str = ""
    ) -> None:
        """A camera frame's capture time (its pixels live in the media table)."""
        ts, logs, *_ = self._cameras.setdefault(camera, ([], [], msgtype, clock, path))
        ts.append(int(t_ns))
        logs.append(int(log_ns))

    def build(self) -> Record:
        signals: list[SignalPart] = []
        events: list[EventStream] = []
        for stream, msgs in self._msgs.items():
            msgtype, clock, path, event_kind = self._meta[stream]
            t = np.asarray([m[0] for m in msgs], dtype=np.int64)
            log = np.asarray([m[1] for m in msgs], dtype=np.int64)
            has_numbers = any(m[2] for m in msgs)
            if event_kind is not None or not has_numbers:
                events.append(_as_events(stream, msgs, t, log, event_kind, path, clock))
                continue
            changing = _changing_text(msgs)
            for name in sorted(changing):
                texts = tuple(_text_value(m[3].get(name)) for m in msgs)
                events.append(
                    EventStream(
                        stream=f"{stream}/{name}",
                        kind="string",
                        t_ns=t,
                        log_ns=log,
                        values=texts,
                        path=path,
                        clock=clock,
                    )
                )
            keep = {k for m in msgs for k in m[3]} - changing
            groups: dict[tuple[Any, ...], list[int]] = {}
            for i, m in enumerate(msgs):
                groups.setdefault((_layout(m[2]), _text_key(m[3], keep)), []).append(i)
            for part, ((layout, text_key), idx) in enumerate(groups.items()):
                values = tuple(
                    np.stack([msgs[i][2][j][1] for i in idx]).astype(np.dtype(dt), copy=False).reshape(len(idx), width)
                    if idx
                    else np.zeros((0, width), np.dtype(dt))
                    for j, (_, dt, width, _) in enumerate(layout)
                )
                signals.append(
                    SignalPart(
                        stream=stream,
                        part=part,
                        msgtype=msgtype,
                        clock=clock,
                        t_ns=t[idx],
                        log_ns=log[idx],
                        fields=tuple(p for p, _, _, _ in layout),
                        values=values,
                        scalars=tuple(one for _, _, _, one in layout),
                        labels=json.loads(text_key),
                        path=path,
                    )
                )
        for camera, (ts, logs, msgtype, clock, path) in self._cameras.items():
            signals.append(
                SignalPart(
                    stream=camera,
                    kind="camera",
                    msgtype=msgtype,
                    clock=clock,
                    t_ns=np.asarray(ts, np.int64),
                    log_ns=np.asarray(logs, np.int64),
                    path=path,
                )
            )
        return Record(signals=tuple(signals), events=tuple(events))


def _text_value(v: Any) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else json.dumps(v)


def _changing_text(msgs: Sequence[tuple[int, int, list[tuple[str, np.ndarray, bool]], dict[str, Any]]]) -> set[str]:
    """Text leaves with more distinct values than a topic may have parts."""
    seen: dict[str, set[str]] = {}
    for m in msgs:
        for k, v in m[3].items():
            seen.setdefault(k, set()).add(json.dumps(v))
    layouts = {(_layout(m[2]), _text_key(m[3], None)) for m in msgs}
    if len(layouts) <= MAX_PARTS:
        return set()
    return {k for k, vals in seen.items() if len(vals) > MAX_PARTS}


def _as_events(
    stream: str,
    msgs: Sequence[tuple[int, int, list[tuple[str, np.ndarray, bool]], dict[str, Any]]],
    t: np.ndarray,
    log: np.ndarray,
    kind: str | None,
    path: str,
    clock: str,
) -> EventStream:
    values: list[str | None] = []
    for _, _, numeric, text in msgs:
        data = {p: a for p, a, _ in numeric}.get("data")
        if kind == "trigger":
            values.append(None)
        elif kind == "bool" or (kind is None and data is not None and data.dtype == np.bool_ and not text):
            kind = "bool"
            values.append("true" if data is not None and bool(data.reshape(-1)[0]) else "false")
        elif kind == "enum":
            values.append(str(data.reshape(-1)[0].item()) if data is not None and data.size else _one_text(text))
        elif text:
            kind = kind or "string"
            values.append(_one_text(text))
        else:
            kind = kind or "trigger"
            values.append(None)
    return EventStream(
        stream=stream, kind=kind or "trigger", t_ns=t, log_ns=log, values=tuple(values), path=path, clock=clock
    )


def _one_text(text: dict[str, Any]) -> str:
    """One text leaf as itself (`data` of a String); several as JSON."""
    if len(text) == 1:
        v = next(iter(text.values()))
        return v if isinstance(v, str) else json.dumps(v)
    return json.dumps(text, sort_keys=True)


# --- the record back as messages ------------------------------------------------------------------


def _put(root: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node: Any = root
    for i, key in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        child = node.get(key) if isinstance(node, dict) else None
        if child is None:
            child = {}
            node[key] = child
        node = child
        del nxt
    node[parts[-1]] = value


def _lists(node: Any) -> Any:
    """Dicts whose keys are 0..n-1 back into lists (a list of structures in the message)."""
    if not isinstance(node, dict):
        return node
    out = {k: _lists(v) for k, v in node.items()}
    if out and all(k.isdigit() for k in out) and sorted(int(k) for k in out) == list(range(len(out))):
        return [out[str(i)] for i in range(len(out))]
    return out


def replay(part: SignalPart) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(t_ns, log_ns, message as a nested dict) of each message of a part, in order.

    A scalar leaf is a scalar again, an array leaf an array of its dtype, text as recorded.
    """
    log = part.log_ns if len(part.log_ns) else part.t_ns
    for i in range(len(part)):
        msg: dict[str, Any] = {}
        for f, v, one in zip(part.fields, part.values, part.scalars, strict=True):
            _put(msg, f, v[i, 0].item() if one else v[i])
        for f, v in part.labels.items():
            _put(msg, f, v)
        yield int(part.t_ns[i]), int(log[i]), _lists(msg)


# --- tables ---------------------------------------------------------------------------------------


def _le(a: np.ndarray) -> np.ndarray:
    return a if a.dtype.byteorder in _LE or a.dtype.itemsize == 1 else a.astype(a.dtype.newbyteorder("<"))


def record_tables(episode_id: str, record: Record) -> tuple[pa.Table, pa.Table]:
    """The `signals` and `events` rows of one episode's record."""
    rows: list[dict[str, Any]] = []
    for s in record.signals:
        n = len(s)
        for c, lo in enumerate(range(0, max(n, 1), CHUNK)):
            hi = min(n, lo + CHUNK)
            rows.append(
                {
                    "episode_id": episode_id,
                    "stream": s.stream,
                    "part": s.part,
                    "chunk": c,
                    "kind": s.kind,
                    "msgtype": s.msgtype,
                    "clock": s.clock,
                    "count": hi - lo,
                    "t_ns": s.t_ns[lo:hi],
                    "log_ns": s.log_ns[lo:hi] if len(s.log_ns) else np.zeros(0, np.int64),
                    "fields": list(s.fields),
                    "dtypes": [_le(v).dtype.str for v in s.values],
                    "widths": [int(v.shape[1]) for v in s.values],
                    "scalars": list(s.scalars),
                    "data": [np.ascontiguousarray(_le(v[lo:hi])).tobytes() for v in s.values],
                    "labels": json.dumps(s.labels, sort_keys=True),
                    "source_path": s.path,
                }
            )
    signals = pa.Table.from_pylist(rows, schema=schema_for_table("signals"))
    ev: dict[str, list[Any]] = {k: [] for k in schema_for_table("events").names}
    for e in record.events:
        n = len(e)
        ev["episode_id"] += [episode_id] * n
        ev["stream"] += [e.stream] * n
        ev["kind"] += [e.kind] * n
        ev["t_ns"] += e.t_ns.tolist()
        ev["log_ns"] += e.log_ns.tolist() if len(e.log_ns) else [None] * n
        ev["value"] += list(e.values)
        ev["source_path"] += [e.path] * n
    return signals, pa.Table.from_pydict(ev, schema=schema_for_table("events"))


def read_record(signals: pa.Table, events: pa.Table) -> Record:
    """The record back from its rows (of one episode), bit for bit."""
    parts: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in signals.to_pylist():
        parts.setdefault((row["stream"], int(row["part"])), []).append(row)
    out: list[SignalPart] = []
    for (stream, part), chunks in parts.items():
        chunks.sort(key=lambda r: int(r["chunk"]))
        first = chunks[0]
        values = tuple(
            np.concatenate(
                [np.frombuffer(c["data"][j], dtype=np.dtype(dt)).reshape(int(c["count"]), int(w)) for c in chunks]
            )
            if chunks
            else np.zeros((0, int(w)), np.dtype(dt))
            for j, (dt, w) in enumerate(zip(first["dtypes"], first["widths"], strict=True))
        )
        out.append(
            SignalPart(
                stream=stream,
                part=part,
                kind=first["kind"],
                msgtype=first["msgtype"],
                clock=first["clock"],
                t_ns=np.concatenate([np.asarray(c["t_ns"], np.int64) for c in chunks]),
                log_ns=np.concatenate([np.asarray(c["log_ns"], np.int64) for c in chunks]),
                fields=tuple(first["fields"]),
                values=values,
                scalars=tuple(bool(x) for x in first["scalars"]),
                labels=json.loads(first["labels"] or "{}"),
                path=first["source_path"],
            )
        )
    evs: dict[str, list[dict[str, Any]]] = {}
    for row in events.to_pylist():
        evs.setdefault(row["stream"], []).append(row)
    out_ev = []
    for stream, rows in evs.items():
        rows.sort(key=lambda r: int(r["t_ns"]))
        has_log = all(r["log_ns"] is not None for r in rows)
        out_ev.append(
            EventStream(
                stream=stream,
                kind=rows[0]["kind"],
                t_ns=np.asarray([r["t_ns"] for r in rows], np.int64),
                log_ns=np.asarray([r["log_ns"] for r in rows], np.int64) if has_log else np.zeros(0, np.int64),
                values=tuple(r["value"] for r in rows),
                path=rows[0]["source_path"],
            )
        )
    return Record(signals=tuple(out), events=tuple(out_ev))


# --- what a user reads about it -------------------------------------------------------------------


def gaps(t_ns: np.ndarray, *, factor: float = 5.0, floor_s: float = 0.05) -> tuple[int, float]:
    """(intervals longer than `factor` x the median interval and `floor_s`, the longest in seconds)."""
    return _gaps(_intervals(t_ns), factor=factor, floor_s=floor_s)


def _intervals(t_ns: np.ndarray) -> np.ndarray:
    """The intervals (ns, int64) between a stream's stamps in time order: sorted once, then shared
    by `_gaps` and `_rate_of` (a summary per stream of every episode is `check`'s main cost)."""
    t = np.sort(np.asarray(t_ns, dtype=np.int64))
    return np.diff(t) if t.size else t


def _median(x: np.ndarray) -> float:
    """np.median of a non-empty 1-D float64 array, bit for bit (the middle order statistic, or the
    mean of the two), without np.median's per-call overhead (~20 us; this runs per stream)."""
    n = x.size
    k = n // 2
    if n % 2:
        return float(np.partition(x, k)[k])
    part = np.partition(x, (k - 1, k))
    return float(np.mean(part[k - 1 : k + 1]))


def _gaps(d_ns: np.ndarray, *, factor: float = 5.0, floor_s: float = 0.05) -> tuple[int, float]:
    if d_ns.size < 2:  # fewer than 3 stamps
        return 0, 0.0
    dt = d_ns.astype(np.float64) / 1e9
    pos = dt[dt > 0]
    if not pos.size:
        return 0, 0.0
    limit = max(factor * _median(pos), floor_s)
    long = dt[dt > limit]
    return int(long.size), float(long.max()) if long.size else 0.0


def _rate(t_ns: np.ndarray) -> float:
    return _rate_of(_intervals(t_ns))


def _rate_of(d_ns: np.ndarray) -> float:
    dt = d_ns.astype(np.float64)
    dt = dt[dt > 0]
    return float(1e9 / _median(dt)) if dt.size else 0.0


def stream_summary(record: Record) -> dict[str, dict[str, Any]]:
    """Per stream: kind, message count, median rate, span and gaps (for the episode's metadata)."""
    out: dict[str, dict[str, Any]] = {}
    by_stream: dict[str, list[SignalPart]] = {}
    for s in record.signals:
        by_stream.setdefault(s.stream, []).append(s)
    for name, parts in by_stream.items():
        t = np.concatenate([p.t_ns for p in parts])
        d = _intervals(t)
        n_gaps, longest = _gaps(d)
        out[name] = {
            "kind": parts[0].kind,
            "count": int(t.size),
            "rate_hz": round(_rate_of(d), 3),
            "clock": parts[0].clock,
            "dtypes": sorted({str(np.dtype(v.dtype)) for p in parts for v in p.values}),
            "parts": len(parts),
            **({"gaps": {"count": n_gaps, "longest_s": round(longest, 6)}} if n_gaps else {}),
        }
    for e in record.events:
        out[e.stream] = {"kind": e.kind, "count": len(e), "rate_hz": round(_rate(e.t_ns), 3), "clock": e.clock}
    return out


def concat_parts(parts: Iterable[SignalPart]) -> list[SignalPart]:
    return sorted(parts, key=lambda p: (p.stream, p.part))


def record_notes(record: Record, path: str, *, future_s: float = 1.0) -> list[str]:
    """What a user should hear about streams kept as recorded: a clock that goes backwards, stamps
    ahead of when they were logged, duplicated messages, non-finite values (named per stream;
    the record keeps them all, the steps' own streams are checked strictly by `resample`)."""
    notes: list[str] = []
    by_stream: dict[str, list[SignalPart]] = {}
    for s in record.signals:
        if s.kind == "numeric":
            by_stream.setdefault(s.stream, []).append(s)
    for name, parts in sorted(by_stream.items()):
        t = np.concatenate([p.t_ns for p in parts])
        log = np.concatenate([p.log_ns for p in parts]) if all(len(p.log_ns) for p in parts) else None
        order = np.argsort(log, kind="stable") if log is not None else np.arange(len(t))
        back = np.flatnonzero(np.diff(t[order]) < 0)
        if back.size:
            notes.append(
                f"{path}: {name}: its clock goes backwards {back.size} times (first at message {int(back[0]) + 1}); "
                "kept as recorded"
            )
        if log is not None:
            ahead = (t - log) > future_s * 1e9
            if ahead.any():
                notes.append(
                    f"{path}: {name}: {int(ahead.sum())} messages are stamped more than {future_s:g} s after they "
                    f"were logged (up to {float((t - log).max()) / 1e9:.3f} s); kept as recorded"
                )
        dup = 0
        bad = 0
        for p in parts:
            if len(p) > 1 and p.values:
                same_t = np.diff(p.t_ns) == 0
                same_v = np.ones(len(p) - 1, bool)
                for v in p.values:
                    same_v &= np.all(v[1:] == v[:-1], axis=1)
                dup += int((same_t & same_v).sum())
            for v in p.values:
                if v.dtype.kind == "f":
                    bad += int((~np.isfinite(v)).any(axis=1).sum())
        if dup:
            notes.append(f"{path}: {name}: {dup} messages repeat the one before (same stamp, same values); kept")
        if bad:
            notes.append(f"{path}: {name}: {bad} of {len(t)} messages hold NaN/inf values; kept as recorded")
    return notes


def log_minus_header_ns(record: Record) -> int | None:
    """Median of (log time - header stamp) over the messages that carry both: how far the log
    clock runs behind the stamps (transport latency), to place log-clock streams on a header axis."""
    diffs = [p.log_ns - p.t_ns for p in record.signals if p.clock == "header" and len(p.log_ns) == len(p)]
    if not diffs:
        return None
    return int(np.median(np.concatenate(diffs)))


def steps_seconds(t_ns: np.ndarray, metadata: dict[str, Any], *, log_clock: bool | np.ndarray = False) -> np.ndarray:
    """Record times on the steps' axis (seconds; step `timestamp` 0 is 0).

    Step 0 sits at `t0_ns + source_time_offset_s` on the clock the steps were built on (the
    episode metadata). Times on the log clock (`log_clock`: a stream's clock is `log`, or per
    message an event whose `t_ns` is its `log_ns`) beside header-stamped steps are shifted by the
    measured `record.log_minus_header_ns`, so that a flag logged with the transport latency
    lands where the stamped streams put it.
    """
    origin = int(metadata.get("t0_ns", 0)) + int(round(float(metadata.get("source_time_offset_s", 0.0)) * 1e9))
    t = np.asarray(t_ns, dtype=np.int64) - origin
    steps_on_header = "header" in set((metadata.get("clock") or {}).values())
    offset = (metadata.get("record") or {}).get("log_minus_header_ns")
    if steps_on_header and offset is not None:
        t = t - np.where(np.asarray(log_clock, dtype=bool), int(offset), 0)
    return t.astype(np.float64) / 1e9
