"""What `--where` reads of the record: stream facts from episode metadata, events from their table.

`stream('/imu').rate_hz` is answered from each episode's metadata (`record.streams`, written at
ingest from every message: kind, count, median rate, clock, gaps), so it never opens the
`signals` table. `any(event('/fault'))` reads the `events` table, one stream at a time: a Lance
scan filtered on the stream (a pyarrow expression, so no user text reaches an SQL string) and
projected to the columns the expression needs, in batches of `BATCH_ROWS`, each batch reduced
to per-episode partial results before the next is read. Memory is one batch and a few numbers
per episode, however many events the lake holds.

Event times are put on the steps' own axis by `record.steps_seconds` (the one place that knows
where step 0 sits on the record's clock, and how far the log clock runs behind header stamps).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.lake import Lake
from robolake.lake.sources.record import steps_seconds

__all__ = [
    "BATCH_ROWS",
    "STREAM_ATTRS",
    "EventBatch",
    "PerEpisode",
    "event_batches",
    "recorded_streams",
    "stream_column",
]

BATCH_ROWS = 65_536
# stream('S').ATTR: what each means, for the error that lists them
STREAM_ATTRS = {
    "count": "messages (events) recorded, 0 where the episode has no such stream",
    "rate_hz": "median message rate",
    "gaps": "intervals longer than 5x the median (and 50 ms)",
    "longest_gap_s": "the longest such interval in seconds, 0 without gaps",
    "kind": "numeric, camera, bool, enum, string or trigger",
    "clock": "header, log or source",
}
_TEXT_ATTRS = ("kind", "clock")


def _streams(meta: dict[str, Any]) -> dict[str, Any]:
    rec = meta.get("record")
    streams = rec.get("streams") if isinstance(rec, dict) else None
    return streams if isinstance(streams, dict) else {}


def recorded_streams(metadata: list[dict[str, Any]]) -> dict[str, str]:
    """Every stream the episodes' records hold, with its kind (the first episode's that names it)."""
    out: dict[str, str] = {}
    for meta in metadata:
        for name, st in _streams(meta).items():
            if name not in out:
                out[name] = str(st.get("kind", "")) if isinstance(st, dict) else ""
    return dict(sorted(out.items()))


def stream_column(metadata: list[dict[str, Any]], name: str, attr: str | None) -> np.ndarray:
    """One value per episode: `stream(name).attr`, or whether the episode has the stream (attr None).

    Numbers are float64 with NaN where the episode lacks the stream (so any comparison is false),
    except `count`, which is 0 there; `kind` and `clock` are text or None.
    """
    per = [_streams(m).get(name) for m in metadata]
    per = [st if isinstance(st, dict) else None for st in per]
    if attr is None:
        return np.array([st is not None and int(st.get("count", 0)) > 0 for st in per], dtype=bool)
    if attr in _TEXT_ATTRS:
        return np.array([None if st is None else st.get(attr) for st in per], dtype=object)
    out = np.full(len(per), np.nan)
    for i, st in enumerate(per):
        if st is None:
            out[i] = 0.0 if attr == "count" else np.nan
        elif attr in ("count", "rate_hz"):
            out[i] = float(st.get(attr) or 0.0)
        else:
            gaps = st.get("gaps") or {}
            out[i] = float(gaps.get("count", 0) if attr == "gaps" else gaps.get("longest_s", 0.0))
    return out


@dataclass(frozen=True)
class EventBatch:
    """Events of one stream read together: which episode each belongs to, its value, its time.

    Attributes:
        episode: int64 [N], the index of each event's episode among the episodes filtered.
        value: object [N], the value as text (None for a trigger).
        t: float64 [N], seconds on the episode's steps axis (empty when not asked for).
    """

    episode: np.ndarray
    value: np.ndarray
    t: np.ndarray

    @property
    def n(self) -> int:
        return int(self.episode.size)


def event_batches(
    lake: Lake, stream: str, episode_ids: pa.Array, metadata: list[dict[str, Any]], *, times: bool
) -> Iterator[EventBatch]:
    """The events of `stream` of the episodes `episode_ids` (events of others are dropped), in batches.

    Args:
        lake: The lake (a format-2 lake has no events: nothing is yielded).
        stream: The stream's name, compared as a value, never parsed.
        episode_ids: The episodes' ids; an event's `episode` is the position of its id here.
        metadata: Each episode's metadata (for `t0_ns` and `window`), in the same order.
        times: Also read `t_ns` and put it on the steps' axis.
    """
    if not lake.has_table("events"):
        return
    columns = ["episode_id", "value", *(["t_ns", "log_ns"] if times else [])]
    for batch in lake.dataset("events").to_batches(
        columns=columns, filter=pc.field("stream") == stream, batch_size=BATCH_ROWS
    ):
        idx = pc.fill_null(pc.index_in(batch.column("episode_id"), value_set=episode_ids), -1)
        episode = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)
        keep = episode >= 0
        if not keep.any():
            continue
        episode = episode[keep]
        value = np.array(batch.column("value").to_pylist(), dtype=object)[keep]
        if times:
            t_ns = np.asarray(batch.column("t_ns").to_numpy(zero_copy_only=False), dtype=np.int64)[keep]
            logged = np.asarray(pc.fill_null(batch.column("log_ns"), -1).to_numpy(), dtype=np.int64)[keep]
            on_log = logged == t_ns  # an event without a stamp of its own is on the log clock
            t = np.empty(len(t_ns))
            for e in np.unique(episode):  # one origin per episode (`steps_seconds`)
                sel = episode == e
                t[sel] = steps_seconds(t_ns[sel], metadata[int(e)], log_clock=on_log[sel])
        else:
            t = np.zeros(0)
        yield EventBatch(episode=episode, value=value, t=t)


class PerEpisode:
    """Per-episode partial results of an aggregate over events, added one batch at a time.

    `add` takes each event's truth (for count/any/all) and number (for min/max/mean/sum/std;
    NaN where an event has none, which then does not count).
    """

    def __init__(self, n: int):
        self.n = n
        self.events = np.zeros(n)
        self.hits = np.zeros(n)
        self.valid = np.zeros(n)
        self.total = np.zeros(n)
        self.squares = np.zeros(n)
        self.low = np.full(n, np.inf)
        self.high = np.full(n, -np.inf)

    def add(self, episode: np.ndarray, truth: np.ndarray | None, values: np.ndarray | None) -> None:
        self.events += np.bincount(episode, minlength=self.n)
        if truth is not None:
            self.hits += np.bincount(episode, weights=truth.astype(np.float64), minlength=self.n)
        if values is not None:
            ok = ~np.isnan(values)
            ep, v = episode[ok], values[ok]
            self.valid += np.bincount(ep, minlength=self.n)
            self.total += np.bincount(ep, weights=v, minlength=self.n)
            self.squares += np.bincount(ep, weights=v * v, minlength=self.n)
            np.minimum.at(self.low, ep, v)
            np.maximum.at(self.high, ep, v)

    def result(self, fn: str) -> np.ndarray:
        """One value per episode: `any`/`all` booleans (`all` of no events is true), numbers otherwise
        (NaN where no event has a number, except `count` and `sum`, which are 0 there)."""
        if fn == "any":
            return self.hits > 0
        if fn == "all":
            return self.hits == self.events
        if fn == "count":
            return self.hits
        if fn == "sum":
            return self.total
        none = self.valid == 0
        with np.errstate(invalid="ignore", divide="ignore"):
            if fn == "min":
                out = self.low.copy()
            elif fn == "max":
                out = self.high.copy()
            else:
                mean = self.total / self.valid
                out = mean if fn == "mean" else np.sqrt(np.maximum(self.squares / self.valid - mean**2, 0.0))
        out[none] = np.nan
        return out
