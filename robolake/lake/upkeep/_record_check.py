"""`robolake check`'s look at the record: are the `signals` and `events` rows what ingest wrote?

Ingest writes each episode's record (`robolake.lake.sources.record`) and, from the same record,
its summary in the episode metadata (`record.streams`: kind, count, median rate, clock, gaps,
parts, dtypes). That summary is the check: the rows of every episode are summarised again by
the same function (`stream_summary`) and compared with it, so a deleted chunk, a chunk written
twice, a stream cut short or a row whose timestamps were changed reads as a mismatch naming the
episode and the stream. Around that, each row is checked on its own (`t_ns` holds `count`
stamps, every field's bytes are `count x width x itemsize`, the field lists agree) and each part's
chunks are numbered 0..n-1 once each: what `read_record` relies on to rebuild the arrays.

Memory is one episode's stamps at a time. Ingest writes an episode's rows together and Lance
keeps their order, so the tables are read once in order, in small batches, and an episode is
checked when the next begins. An episode whose rows are not together (a hand-made table) is
read again on its own at the end, through the `episode_id` index. `read_data=False` (`check
--quick`) reads everything but the `data` bytes and skips their lengths.

`check --quick` compares a sample (`sample_episodes`: `QUICK_EPISODES` spread evenly over the
table's order, so every ingest's fragments are likely to be met) instead of every episode: the
full comparison costs about 15 ms an episode (25 minutes at 100k), and a quick check has to stay
flat in the lake's size. Rows of episodes the episodes table does not list are looked for only
by the full check (finding them means reading every row).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.query import sql_in, sql_quote
from robolake.lake.sources.record import EVENT_KINDS, EventStream, Record, SignalPart, stream_summary

__all__ = ["QUICK_EPISODES", "RecordIssues", "check_record", "expected_streams", "sample_episodes"]

SIGNAL_BATCH_ROWS = 16  # a signals row is up to 65,536 messages of every field
EVENT_BATCH_ROWS = 65_536
_SIGNAL_KINDS = ("numeric", "camera")
_COMPARED = ("kind", "count", "rate_hz", "clock", "parts", "dtypes")
_KEPT = 1000  # issues described; past that only counted
QUICK_EPISODES = 16  # episodes whose record `check --quick` compares


@dataclass
class RecordIssues:
    """What is wrong with the record: described issues (each naming an episode and stream) and a
    count of all of them, and episodes the episodes table does not list, per table."""

    issues: list[str] = field(default_factory=list)
    total: int = 0
    foreign: dict[str, list[str]] = field(default_factory=dict)

    def add(self, episode_id: str, stream: str | None, what: str) -> None:
        self.total += 1
        if len(self.issues) < _KEPT:
            where = f"episode {episode_id}" + (f", stream {stream}" if stream is not None else "")
            self.issues.append(f"{where}: {what}")


def sample_episodes(episodes: lance.LanceDataset, k: int | None = None) -> tuple[dict[str, dict[str, Any] | None], int]:
    """(`expected_streams` of `k` (default `QUICK_EPISODES`) episodes spread evenly over the table's
    order, first and last included; the number of episodes). Read by position (one take of their
    ids and metadata), so the sample costs k rows at any size of lake."""
    k = QUICK_EPISODES if k is None else k
    n = episodes.count_rows()
    if n <= k:
        return expected_streams(episodes), n
    picks = sorted({round(i * (n - 1) / max(k - 1, 1)) for i in range(k)})
    return _streams_of(episodes.take(picks, columns=["episode_id", "metadata"]).to_batches()), n


def expected_streams(episodes: lance.LanceDataset) -> dict[str, dict[str, Any] | None]:
    """episode id -> its metadata's `record.streams` (None for an episode ingested without a record)."""
    return _streams_of(episodes.to_batches(columns=["episode_id", "metadata"]))


def _streams_of(batches: Iterable[pa.RecordBatch]) -> dict[str, dict[str, Any] | None]:
    out: dict[str, dict[str, Any] | None] = {}
    for batch in batches:
        for eid, raw in zip(batch.column("episode_id").to_pylist(), batch.column("metadata").to_pylist(), strict=True):
            try:
                meta = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                meta = {}
            rec = meta.get("record") if isinstance(meta, dict) else None
            streams = rec.get("streams") if isinstance(rec, dict) else None
            out[eid] = streams if isinstance(streams, dict) else None
    return out


def check_record(
    signals: lance.LanceDataset,
    events: lance.LanceDataset,
    expected: dict[str, dict[str, Any] | None],
    *,
    read_data: bool = True,
    sampled: bool = False,
) -> RecordIssues:
    """Compare every episode's `signals` and `events` rows with its metadata (see the module essay).

    With `sampled`, `expected` is a sample of the episodes (`sample_episodes`): only their rows
    are read, and rows of unlisted episodes are not looked for."""
    found = RecordIssues()
    summaries: dict[str, dict[str, dict[str, Any]]] = {}
    sig_columns = ["episode_id", "stream", "part", "chunk", "kind", "clock", "count", "t_ns", "log_ns"]
    sig_columns += ["fields", "dtypes", "widths", "scalars", *(["data"] if read_data else [])]
    flt = sql_in("episode_id", sorted(expected)) if sampled else None
    for eid, batches in _episodes(signals, sig_columns, SIGNAL_BATCH_ROWS, flt):
        if eid not in expected:
            found.foreign.setdefault("signals", []).append(eid)
            continue
        summaries[eid] = _signal_summary(eid, batches, found, read_data)
    for eid, batches in _episodes(events, ["episode_id", "stream", "kind", "t_ns"], EVENT_BATCH_ROWS, flt):
        if eid not in expected:
            found.foreign.setdefault("events", []).append(eid)
            continue
        summaries.setdefault(eid, {}).update(_event_summary(eid, batches, found))
    for eid, want in expected.items():
        _compare(eid, summaries.get(eid, {}), want, found)
    return found


# --- reading an episode's rows together ------------------------------------------------------------


def _runs(ids: pa.Array) -> Iterator[tuple[str, int, int]]:
    """(episode id, start, stop) of each run of one id in a batch."""
    values = np.asarray(ids.to_pylist(), dtype=object)
    if not values.size:
        return
    cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts, stops = [0, *cuts.tolist()], [*cuts.tolist(), values.size]
    for a, b in zip(starts, stops, strict=True):
        yield str(values[a]), a, b


def _scattered(ds: lance.LanceDataset, flt: str | None) -> set[str]:
    """Episodes (of those `flt` keeps) whose rows are not one run in the table's order."""
    seen: set[str] = set()
    out: set[str] = set()
    last = None
    for batch in ds.to_batches(columns=["episode_id"], filter=flt):
        for eid, _, _ in _runs(batch.column("episode_id")):
            if eid != last and eid in seen:
                out.add(eid)
            seen.add(eid)
            last = eid
    return out


def _episodes(
    ds: lance.LanceDataset, columns: list[str], batch_rows: int, flt: str | None = None
) -> Iterator[tuple[str, list[pa.RecordBatch]]]:
    """Each episode's rows of `ds` (those the SQL filter `flt` keeps), one episode at a time."""
    if flt is not None:
        # A sample's rows are few: one read, grouped in memory (a stable sort keeps each episode's
        # rows in table order), rather than a scan for scattered episodes and another for the rows.
        t = ds.to_table(columns=columns, filter=flt)
        t = t.take(pc.sort_indices(t["episode_id"])).combine_chunks()
        for batch in t.to_batches():
            for eid, a, b in _runs(batch.column("episode_id")):
                yield eid, [batch.slice(a, b - a)]
        return
    apart = _scattered(ds, flt)
    current: str | None = None
    held: list[pa.RecordBatch] = []
    for batch in ds.to_batches(columns=columns, batch_size=batch_rows, filter=flt):
        for eid, a, b in _runs(batch.column("episode_id")):
            if eid in apart:
                continue
            if eid != current:
                if current is not None:
                    yield current, held
                current, held = eid, []
            held.append(batch.slice(a, b - a))
    if current is not None:
        yield current, held
    for eid in sorted(apart):
        # an SQL literal (quoted): Lance cannot pass a pyarrow expression over signals' binary lists
        yield eid, ds.to_table(columns=columns, filter=f"episode_id = {sql_quote(eid)}").to_batches()


# --- one episode ----------------------------------------------------------------------------------


def _lists(batch: pa.RecordBatch, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(offsets [rows + 1], flat values) of a list column, without Python objects per value."""
    col = batch.column(name)
    offsets = np.asarray(col.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    flat = col.values if name != "data" else pc.binary_length(col.values)
    return offsets, np.asarray(flat.to_numpy(zero_copy_only=False))


def _dtype(text: str) -> np.dtype | None:
    try:
        dt = np.dtype(text)
    except TypeError:
        return None
    return dt if dt.itemsize == 1 or dt.byteorder in ("<", "=", "|") else None


@dataclass
class _Part:
    chunks: list[int] = field(default_factory=list)
    t_ns: list[tuple[int, np.ndarray]] = field(default_factory=list)
    layout: tuple[Any, ...] | None = None


def _signal_summary(
    eid: str, batches: list[pa.RecordBatch], found: RecordIssues, read_data: bool
) -> dict[str, dict[str, Any]]:
    parts: dict[tuple[str, int], _Part] = {}
    for batch in batches:
        t_off, t_flat = _lists(batch, "t_ns")
        log_off, _ = _lists(batch, "log_ns")
        d_off, d_len = _lists(batch, "data") if read_data else (None, None)
        cols = {
            k: batch.column(k).to_pylist()
            for k in ("stream", "part", "chunk", "kind", "clock", "count", "fields", "dtypes", "widths", "scalars")
        }
        for i in range(batch.num_rows):
            stream, count, chunk = cols["stream"][i], int(cols["count"][i]), int(cols["chunk"][i])
            n_t, n_log = int(t_off[i + 1] - t_off[i]), int(log_off[i + 1] - log_off[i])
            if n_t != count:
                found.add(eid, stream, f"chunk {chunk} says {count} messages but holds {n_t} timestamps")
            if n_log not in (0, n_t):
                found.add(eid, stream, f"chunk {chunk} holds {n_t} timestamps and {n_log} log times")
            fields, dtypes, widths = cols["fields"][i], cols["dtypes"][i], cols["widths"][i]
            if not len(fields) == len(dtypes) == len(widths) == len(cols["scalars"][i]):
                found.add(eid, stream, f"chunk {chunk} lists {len(fields)} fields but {len(dtypes)} dtypes")
            elif d_off is not None and d_len is not None:
                lengths = d_len[d_off[i] : d_off[i + 1]]
                if len(lengths) != len(fields):
                    found.add(eid, stream, f"chunk {chunk} lists {len(fields)} fields but holds {len(lengths)}")
                for f, d, w, have in zip(fields, dtypes, widths, lengths.tolist(), strict=False):
                    dt = _dtype(d)
                    if dt is None:
                        found.add(eid, stream, f"chunk {chunk} field {f} has dtype {d!r}, not a little-endian one")
                    elif have != count * int(w) * dt.itemsize:
                        found.add(
                            eid,
                            stream,
                            f"chunk {chunk} field {f} holds {have} bytes, not {count} x {w} x {dt.itemsize} "
                            f"({dt.name})",
                        )
            p = parts.setdefault((stream, int(cols["part"][i])), _Part())
            layout = (cols["kind"][i], cols["clock"][i], tuple(fields), tuple(dtypes), tuple(widths))
            if p.layout is not None and p.layout != layout:
                found.add(eid, stream, f"part {cols['part'][i]}'s chunks disagree on its fields or clock")
            p.layout = p.layout or layout
            p.chunks.append(chunk)
            p.t_ns.append((chunk, t_flat[t_off[i] : t_off[i + 1]].astype(np.int64)))
    out: list[SignalPart] = []
    for (stream, part), p in sorted(parts.items()):
        if sorted(p.chunks) != list(range(len(p.chunks))):
            found.add(eid, stream, f"part {part} has chunks {_ranges(sorted(p.chunks))}, not 0..{len(p.chunks) - 1}")
        kind, clock, _, dtypes, widths = p.layout or ("numeric", "log", (), (), ())
        out.append(
            SignalPart(
                stream=stream,
                part=part,
                kind=kind,
                clock=clock,
                t_ns=np.concatenate([t for _, t in sorted(p.t_ns, key=lambda x: x[0])]),
                values=tuple(
                    np.zeros((0, int(w)), dt) for d, w in zip(dtypes, widths, strict=False) if (dt := _dtype(d))
                ),
            )
        )
    return stream_summary(Record(signals=tuple(out)))


def _event_summary(eid: str, batches: list[pa.RecordBatch], found: RecordIssues) -> dict[str, dict[str, Any]]:
    t = pa.Table.from_batches(batches)
    streams = t.column("stream").to_numpy(zero_copy_only=False)
    kinds = t.column("kind").to_numpy(zero_copy_only=False)
    stamps = np.asarray(t.column("t_ns").to_numpy(zero_copy_only=False), dtype=np.int64)
    out = []
    for stream in sorted(set(streams.tolist())):
        rows = streams == stream
        these = sorted(set(kinds[rows].tolist()))
        if len(these) > 1:
            found.add(eid, stream, f"its events are of {len(these)} kinds ({', '.join(these)})")
        out.append(EventStream(stream=stream, kind=these[0], t_ns=stamps[rows]))
    summary = stream_summary(Record(events=tuple(out)))
    for s in summary.values():
        s.pop("clock", None)  # the events table keeps no clock: the metadata's is not compared
    return summary


def _compare(eid: str, have: dict[str, dict[str, Any]], want: dict[str, Any] | None, found: RecordIssues) -> None:
    """The summary of an episode's rows against its metadata's `record.streams`."""
    want = want or {}
    for stream in sorted(set(have) | set(want)):
        w, h = want.get(stream), have.get(stream)
        if not isinstance(w, dict):
            table = "events" if h is not None and h.get("kind") in EVENT_KINDS else "signals"
            found.add(eid, stream, f"the {table} table holds {h['count'] if h else 0} of its messages, but the "
                      "episode metadata lists no such stream")  # fmt: skip
            continue
        table = "signals" if w.get("kind") in _SIGNAL_KINDS else "events"
        if h is None:
            found.add(eid, stream, f"the metadata records {w.get('count')} messages; the {table} table holds none")
            continue
        wrong = [k for k in _COMPARED if k in w and k in h and w[k] != h[k]]
        if int((w.get("gaps") or {}).get("count", 0)) != int((h.get("gaps") or {}).get("count", 0)):
            wrong.append("gaps")
        if wrong:
            said = ", ".join(f"{k} {_shown(k, h)} (metadata: {_shown(k, w)})" for k in wrong)
            found.add(eid, stream, f"the {table} rows give {said}")


def _shown(key: str, summary: dict[str, Any]) -> str:
    if key == "gaps":
        return str(int((summary.get("gaps") or {}).get("count", 0)))
    v = summary.get(key)
    return "none" if v is None else str(v)


def _ranges(chunks: list[int]) -> str:
    shown = ", ".join(str(c) for c in chunks[:8])
    return shown + (f", ... ({len(chunks)} in all)" if len(chunks) > 8 else "")
