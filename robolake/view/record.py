"""An episode's record for the viewer: every stream at its own rate, events as markers.

The steps are one rendition of an episode; the record (`signals`, `events`) is every message as
recorded. The episode page plots each numeric stream from the record, not from the steps: every
message at its own stamp, on the steps' time axis (`steps_seconds`: step `timestamp` 0 is 0; a
log-clock stream beside header-stamped steps shifted by the measured transport latency), with
the step ticks drawn over it.

A browser cannot draw 600,000 points a stream, and needs no more than a few per pixel. So a
stream is **decimated for display, never resampled**: the visible span is cut into `px`
buckets (one per pixel of the plot) and each bucket sends, per series, the smallest and the
largest value it holds, in the order they occurred, at the bucket's first and last message
times. Every spike, dropout and plateau a pixel could show is kept; `bucket_counts` says how
many messages each bucket stands for (they sum to the stream's count in view). A stream with at
most two messages a pixel is sent whole (`decimated: false`). Zooming asks again for the
narrower span, so detail returns as the span shrinks. Values travel as JSON numbers (float64:
integers up to 2^53 exactly).

Events (`events`: flags, labels, triggers) become markers: a flag's transitions (its first
value, then each change), a label stream's labels where they change, every trigger. A stream's
markers are capped at `MAX_MARKERS` (the count says how many there were).

Stream names from a request are looked up in the episode's own stream list before anything is
read; an unknown one is `None` (the app answers 404). Names reach Lance only as quoted SQL
literals (`sql_quote`), never as paths.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pyarrow.compute as pc

from robolake.lake import Lake, SignalPart, read_record, sql_quote, steps_seconds
from robolake.schemas.tables import schema_for_table

__all__ = ["DEFAULT_PX", "MAX_MARKERS", "MAX_PX", "MAX_SERIES", "RecordSource"]

DEFAULT_PX = 1000
MAX_PX = 4000
MAX_SERIES = 48  # columns of one stream sent (a 720-wide laser scan is not 720 lines)
MAX_MARKERS = 2000
_EVENT_KINDS = ("bool", "enum", "string", "trigger")
_CACHED = 16  # episodes whose metadata is kept


class RecordSource:
    """The record of one lake handle's episodes, as the episode page draws it."""

    def __init__(self, lake: Lake):
        self._lake = lake
        self._lock = threading.Lock()
        self._meta: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def _episode(self, episode_id: str) -> dict[str, Any]:
        """(origin, streams) of an episode the caller has checked the lake holds."""
        with self._lock:
            hit = self._meta.get(episode_id)
            if hit is not None:
                self._meta.move_to_end(episode_id)
                return hit
        rows = self._lake.to_arrow(
            "episodes", columns=["metadata"], where=f"episode_id = {sql_quote(episode_id)}"
        ).to_pylist()
        meta = json.loads(rows[0]["metadata"] or "{}") if rows else {}
        rec = meta.get("record")
        streams = rec.get("streams") if isinstance(rec, dict) else None
        out = {
            "meta": meta,  # where step 0 sits on the record's clock (`steps_seconds`)
            "origin_s": float(steps_seconds(np.zeros(1, np.int64), meta)[0]),  # -(step 0 on the record clock)
            "streams": streams if isinstance(streams, dict) else {},
        }
        with self._lock:
            self._meta[episode_id] = out
            while len(self._meta) > _CACHED:
                self._meta.popitem(last=False)
        return out

    def _seconds(self, ep: dict[str, Any], t_ns: np.ndarray, log_clock: bool | np.ndarray = False) -> np.ndarray:
        return steps_seconds(t_ns, ep["meta"], log_clock=log_clock)

    def catalog(self, episode_id: str) -> dict[str, Any]:
        """What the page needs before it plots: the numeric streams (no values) and every event marker."""
        ep = self._episode(episode_id)
        numeric = [
            {"name": name, **{k: st.get(k) for k in ("kind", "count", "rate_hz", "clock", "parts", "gaps")}}
            for name, st in sorted(ep["streams"].items())
            if isinstance(st, dict) and st.get("kind") == "numeric"
        ]
        events = [n for n, st in ep["streams"].items() if isinstance(st, dict) and st.get("kind") in _EVENT_KINDS]
        return {
            "episode_id": episode_id,
            "origin": {"steps_zero_on_record_clock_s": -ep["origin_s"]},
            "streams": numeric,
            "events": self._markers(episode_id, ep, sorted(events)),
        }

    def _markers(self, episode_id: str, ep: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
        if not names or not self._lake.has_table("events"):
            return []
        t = self._lake.to_arrow(
            "events",
            columns=["stream", "kind", "t_ns", "log_ns", "value"],
            where=f"episode_id = {sql_quote(episode_id)}",
        )
        streams = np.asarray(t.column("stream").to_pylist(), dtype=object)
        kinds = t.column("kind").to_pylist()
        stamps = np.asarray(t.column("t_ns").to_numpy(), dtype=np.int64)
        on_log = np.asarray(pc.fill_null(t.column("log_ns"), -1).to_numpy(), dtype=np.int64) == stamps
        values = np.asarray(t.column("value").to_pylist(), dtype=object)
        out = []
        for name in names:
            rows = np.flatnonzero(streams == name)
            if not rows.size:
                continue
            order = rows[np.argsort(stamps[rows], kind="stable")]
            kind = kinds[int(order[0])]
            v = values[order]
            if kind == "trigger":
                keep = np.ones(v.size, dtype=bool)
            else:  # a flag's transitions, a label where it changes
                keep = np.r_[True, v[1:] != v[:-1]] if v.size else np.zeros(0, bool)
            idx = order[keep]
            out.append(
                {
                    "name": name,
                    "kind": kind,
                    "count": int(rows.size),
                    "markers": int(idx.size),
                    "t": self._seconds(ep, stamps[idx[:MAX_MARKERS]], on_log[idx[:MAX_MARKERS]]).tolist(),
                    "value": [None if x is None else str(x) for x in values[idx[:MAX_MARKERS]]],
                }
            )
        return out

    def series(
        self,
        episode_id: str,
        stream: str,
        *,
        px: int = DEFAULT_PX,
        start: float | None = None,
        end: float | None = None,
    ) -> dict[str, Any] | None:
        """The stream's messages in [start, end] s (all when None), decimated to `px` buckets; None when
        the episode has no numeric stream of that name.

        Raises:
            ValueError: `px` out of 1..MAX_PX.
        """
        if not 1 <= px <= MAX_PX:
            raise ValueError(f"px must be 1..{MAX_PX}, got {px}")
        ep = self._episode(episode_id)
        st = ep["streams"].get(stream)
        if not isinstance(st, dict) or st.get("kind") != "numeric" or not self._lake.has_table("signals"):
            return None
        where = f"episode_id = {sql_quote(episode_id)} AND stream = {sql_quote(stream)} AND kind = 'numeric'"
        parts = read_record(
            self._lake.to_arrow("signals", where=where), schema_for_table("events").empty_table()
        ).signals
        return _decimate(stream, parts, [self._seconds(ep, p.t_ns, p.clock == "log") for p in parts], px, start, end)


def _columns(parts: tuple[SignalPart, ...]) -> list[tuple[int, str, str, int, np.ndarray]]:
    """(part position, label, field, dim, values float64 [N]) of each series, at most MAX_SERIES."""
    out = []
    for i, p in enumerate(parts):
        for f, v in zip(p.fields, p.values, strict=True):
            for d in range(v.shape[1]):
                label = (f if v.shape[1] == 1 else f"{f}[{d}]") + (f" (part {p.part})" if len(parts) > 1 else "")
                out.append((i, label, f, d, v[:, d]))
    return out


def _hidden(field: str, values: np.ndarray) -> bool:
    """Series off until picked: header stamps, covariances, and anything constant in view."""
    finite = values[np.isfinite(values)]
    return field.startswith("header.") or "covariance" in field or not finite.size or finite.min() == finite.max()


def _decimate(
    stream: str,
    parts: tuple[SignalPart, ...],
    seconds: list[np.ndarray],
    px: int,
    start: float | None,
    end: float | None,
) -> dict[str, Any]:
    # each part in time order, cut to the span asked for
    sel: list[tuple[np.ndarray, np.ndarray]] = []  # (times, message indices) per part
    for t in seconds:
        order = np.argsort(t, kind="stable")
        ts = t[order]
        a = 0 if start is None else int(np.searchsorted(ts, start, side="left"))
        b = ts.size if end is None else int(np.searchsorted(ts, end, side="right"))
        sel.append((ts[a:b], order[a:b]))
    cols = _columns(parts)
    total = sum(int(len(p)) for p in parts)
    in_view = sum(int(ts.size) for ts, _ in sel)
    series = [
        {"label": label, "field": f, "dim": d, "part": parts[i].part, "hidden": _hidden(f, v[sel[i][1]])}
        for i, label, f, d, v in cols[:MAX_SERIES]
    ]
    out: dict[str, Any] = {
        "stream": stream,
        "count": total,
        "in_view": in_view,
        "span": [start, end],
        "series": series,
        "omitted_series": max(0, len(cols) - MAX_SERIES),
    }
    all_t = np.concatenate([ts for ts, _ in sel]) if sel else np.zeros(0)
    if in_view <= 2 * px:
        # whole: every message one x, in time order; a part's series are null at other parts' messages
        where = np.argsort(all_t, kind="stable")
        pos = np.empty_like(where)
        pos[where] = np.arange(where.size)
        offsets = np.cumsum([0] + [ts.size for ts, _ in sel])
        values = []
        for i, _, _, _, v in cols[:MAX_SERIES]:
            row = np.full(in_view, np.nan)
            row[pos[offsets[i] : offsets[i + 1]]] = v[sel[i][1]]
            values.append(row.tolist())
        out.update(decimated=False, x=all_t[where].tolist(), values=values, bucket_counts=None, edges=None)
        return out
    lo, hi = float(all_t.min()), float(all_t.max())
    width = (hi - lo) or 1.0
    buckets = [np.minimum(((ts - lo) / width * px).astype(np.int64), px - 1) for ts, _ in sel]
    used = np.unique(np.concatenate(buckets))  # buckets with a message, ascending
    k = used.size
    counts = np.zeros(k, np.int64)
    first, last = np.full(k, np.inf), np.full(k, -np.inf)
    for (ts, _), bucket in zip(sel, buckets, strict=True):
        slot = np.searchsorted(used, bucket)
        np.add.at(counts, slot, 1)
        np.minimum.at(first, slot, ts)
        np.maximum.at(last, slot, ts)
    x = np.empty(2 * k)
    x[0::2], x[1::2] = first, last
    values = []
    for i, _, _, _, v in cols[:MAX_SERIES]:
        values.append(_extremes(sel[i][0], v[sel[i][1]], np.searchsorted(used, buckets[i]), k).tolist())
    out.update(
        decimated=True,
        x=x.tolist(),
        values=values,
        bucket_counts=counts.tolist(),
        edges=[lo, hi, px],
        buckets=used.tolist(),
    )
    return out


def _extremes(t: np.ndarray, v: np.ndarray, slot: np.ndarray, k: int) -> np.ndarray:
    """Per bucket slot, [min, max] of `v` in the order they occurred (NaN where the slot has none).

    `slot` is nondecreasing (messages in time order), so each slot's messages are one run and
    the extremes are reductions over runs: O(N), no sort.
    """
    out = np.full((k, 2), np.nan)
    ok = np.isfinite(v)
    t, v, slot = t[ok], v[ok], slot[ok]
    if not v.size:
        return out.reshape(-1)
    starts = np.flatnonzero(np.r_[True, slot[1:] != slot[:-1]])
    where = slot[starts]
    low = np.minimum.reduceat(v, starts)
    high = np.maximum.reduceat(v, starts)
    idx = np.arange(v.size)
    run = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, v.size]))
    at_low = np.minimum.reduceat(np.where(v == low[run], idx, v.size), starts)
    at_high = np.minimum.reduceat(np.where(v == high[run], idx, v.size), starts)
    low_first = t[at_low] <= t[at_high]
    out[where, 0] = np.where(low_first, low, high)
    out[where, 1] = np.where(low_first, high, low)
    return out.reshape(-1)
