"""Native-rate stream history in samples: the messages of a stream in the window before each sample.

A 1 kHz force-torque stream beside 30 Hz steps holds ~33 messages between two steps, and how many
fall in a window before a sample differs from sample to sample (jitter, dropped messages, a
stream that starts late). `pack --history /ft=0.1` puts every message of `/ft` recorded in
(t - 0.1 s, t] into the sample as its own backbone tokens, one per message, with its time offset
(seconds before t, <= 0) and its values; the model embeds them with a small MLP per stream
(`training.model`) and attends over them through the same varlen path as views and text. The
sample's token length grows by the number of messages, as recorded: padded batches pay for the
longest window, packed ones do not.

Values come from the lake's record (`signals`, `events`), never from the steps: by default a
numeric stream's floating-point fields (covariances and the header's stamp left out), or the
one named with `STREAM:FIELD`; a bool event is 1/0 and a trigger 1. They are normalised per
stream (mean and std over the packed episodes' messages) and padded to `width` values.

The sample's time is its step's `timestamp`; message times are put on that axis by
`record.steps_seconds` (the one place that knows where step 0 sits on the record's clock, and
how far a log clock runs behind header stamps).
Everything is held per episode in memory: the streams of the packed episodes, read once with a
Lance filter per stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake import Lake, read_record, sql_in, sql_quote, steps_seconds

__all__ = ["HistorySpec", "HistoryData", "parse_history", "load_history", "HISTORY_WIDTH"]

HISTORY_WIDTH = 16  # values per history token (a stream's fields are padded to it)
_NS = 1_000_000_000


@dataclass(frozen=True, kw_only=True)
class HistorySpec:
    """One stream whose recent messages a sample carries.

    Attributes:
        stream: Topic or key in the record (a numeric stream, or a bool / trigger event stream).
        seconds: Window length before the sample's time.
        field: The numeric field to take (None: every floating-point field but covariances and stamps).
    """

    stream: str
    seconds: float
    field: str | None = None

    def __post_init__(self) -> None:
        if not self.stream:
            raise ValueError("a history stream needs a name (STREAM=SECONDS)")
        if not (self.seconds > 0 and np.isfinite(self.seconds)):
            raise ValueError(f"history window of {self.stream} must be > 0 seconds, got {self.seconds}")

    def to_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "seconds": self.seconds, "field": self.field}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> HistorySpec:
        return cls(stream=str(d["stream"]), seconds=float(d["seconds"]), field=d.get("field"))


def parse_history(text: str) -> HistorySpec:
    """`/ft=0.1` or `/ft:wrench.force=0.1` -> HistorySpec.

    Raises:
        ValueError: not STREAM[:FIELD]=SECONDS, naming the text.
    """
    name, sep, secs = text.rpartition("=")
    if not sep or not name:
        raise ValueError(f"--history {text!r}: write STREAM=SECONDS (e.g. /ft=0.1) or STREAM:FIELD=SECONDS")
    try:
        seconds = float(secs)
    except ValueError:
        raise ValueError(f"--history {text!r}: {secs!r} is not a number of seconds") from None
    stream, _, fld = name.partition(":")
    return HistorySpec(stream=stream, seconds=seconds, field=fld or None)


@dataclass(frozen=True, kw_only=True)
class _Series:
    t_ns: np.ndarray  # int64 [N], sorted
    values: np.ndarray  # float32 [N, width], normalised


@dataclass(kw_only=True)
class HistoryData:
    """The history streams of the packed episodes, and every sample's token count.

    Attributes:
        specs: The streams, in token-stream-id order.
        width: Values per token.
        series: (episode row, stream id) -> its messages (absent: the episode lacks the stream).
        step_ns: Per episode row, int64 [num_steps] each step's time in ns (step 0 at 0); message
            times are put on the same axis (`record.steps_seconds`).
        stats: Per stream: mean and std used to normalise it, messages, and the episodes lacking it.
    """

    specs: tuple[HistorySpec, ...]
    width: int
    series: dict[tuple[int, int], _Series] = field(default_factory=dict)
    step_ns: list[np.ndarray] = field(default_factory=list)
    stats: list[dict[str, Any]] = field(default_factory=list)

    def window(self, episode: int, stream: int, step: int) -> tuple[int, int]:
        """[lo, hi) message indices of `stream` in the window before `step` of `episode`."""
        s = self.series.get((episode, stream))
        if s is None:
            return 0, 0
        t = int(self.step_ns[episode][step])
        lo = int(np.searchsorted(s.t_ns, t - int(self.specs[stream].seconds * _NS), side="right"))
        hi = int(np.searchsorted(s.t_ns, t, side="right"))
        return lo, hi

    def counts(self, episode: np.ndarray, step: np.ndarray) -> np.ndarray:
        """int64 history tokens of each (episode row, step) sample, all streams together."""
        out = np.zeros(len(episode), dtype=np.int64)
        for (e, k), s in self.series.items():
            sel = np.flatnonzero(episode == e)
            if not sel.size:
                continue
            t = self.step_ns[e][step[sel]]
            lo = np.searchsorted(s.t_ns, t - int(self.specs[k].seconds * _NS), side="right")
            hi = np.searchsorted(s.t_ns, t, side="right")
            out[sel] += hi - lo
        return out

    def tokens(self, episode: int, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values float32 [k, width], dt float32 [k] seconds <= 0, stream int32 [k]) of one sample."""
        vals, dts, ids = [], [], []
        t = int(self.step_ns[episode][step])
        for k in range(len(self.specs)):
            lo, hi = self.window(episode, k, step)
            if hi > lo:
                s = self.series[(episode, k)]
                vals.append(s.values[lo:hi])
                dts.append(((s.t_ns[lo:hi] - t) / _NS).astype(np.float32))
                ids.append(np.full(hi - lo, k, np.int32))
        if not vals:
            return np.zeros((0, self.width), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32)
        return np.concatenate(vals), np.concatenate(dts), np.concatenate(ids)


def _numbers(
    parts: list[Any], spec: HistorySpec, episode_id: str, meta: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """(ns on the steps' axis, float64 [N, w]) of a numeric stream's chosen fields, parts merged in time order."""
    ts, vals = [], []
    for p in parts:
        if p.kind != "numeric":
            continue
        if spec.field is not None:
            if spec.field not in p.fields:
                raise ValueError(
                    f"history stream {spec.stream} of episode {episode_id} has no field {spec.field!r}; "
                    f"its fields: {', '.join(p.fields)}"
                )
            chosen = [p.fields.index(spec.field)]
        else:
            chosen = [
                i
                for i, (f, v) in enumerate(zip(p.fields, p.values, strict=True))
                if v.dtype.kind == "f" and not f.endswith("covariance") and not f.startswith("header.")
            ]
        if not chosen:
            raise ValueError(
                f"history stream {spec.stream} of episode {episode_id} has no floating-point field; name one with "
                f"{spec.stream}:FIELD=SECONDS (fields: {', '.join(p.fields)})"
            )
        ts.append(_on_steps(p.t_ns, meta, p.clock == "log"))
        vals.append(np.concatenate([p.values[i].astype(np.float64) for i in chosen], axis=1))
    t = np.concatenate(ts)
    order = np.argsort(t, kind="stable")
    return t[order], np.concatenate(vals)[order]


def _on_steps(t_ns: np.ndarray, meta: dict[str, Any], log_clock: bool | np.ndarray) -> np.ndarray:
    """int64 ns on the steps' axis (step `timestamp` 0 is 0) of record times (`steps_seconds`)."""
    return np.round(steps_seconds(t_ns, meta, log_clock=log_clock) * _NS).astype(np.int64)


def load_history(
    lake: Lake, episodes: pa.Table, specs: tuple[HistorySpec, ...], *, width: int = HISTORY_WIDTH
) -> HistoryData:
    """The history streams of `episodes` (rows in sample-index order) from the lake's record.

    Raises:
        ValueError: the lake has no record, a stream is in none of the episodes, a stream is wider
            than `width`, or a string event stream is asked for (names the stream).
    """
    if not lake.has_table("signals"):
        raise ValueError(
            f"lake {lake.uri} has no record of streams (format {lake.format_version}); history needs one: "
            "re-ingest the sources with this robolake"
        )
    ids = episodes["episode_id"].to_pylist()
    row_of = {e: i for i, e in enumerate(ids)}
    rows = lake.episodes(sql_in("episode_id", ids), columns=["episode_id", "metadata"]) if ids else None
    metas: dict[int, dict[str, Any]] = dict.fromkeys(range(len(ids)), {})
    if rows is not None:
        for eid, m in zip(rows["episode_id"].to_pylist(), rows["metadata"].to_pylist(), strict=True):
            metas[row_of[eid]] = json.loads(m or "{}")
    steps = lake.to_arrow("steps", columns=["episode_id", "step_index", "timestamp"], where=sql_in("episode_id", ids))
    step_ns: list[np.ndarray] = [np.zeros(0, np.int64) for _ in ids]
    for eid, group in _by_episode(steps):
        r = row_of[eid]
        order = np.argsort(group["step_index"].to_numpy())
        step_ns[r] = np.round(group["timestamp"].to_numpy()[order] * _NS).astype(np.int64)
    data = HistoryData(specs=specs, width=width, step_ns=step_ns)
    for k, spec in enumerate(specs):
        where = f"({sql_in('episode_id', ids)}) AND stream = {sql_quote(spec.stream)}"
        sig = lake.to_arrow("signals", where=where)
        evs = lake.to_arrow("events", where=where)
        per: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for eid in sorted(set(sig["episode_id"].to_pylist()) | set(evs["episode_id"].to_pylist())):
            r = row_of[eid]
            sub = read_record(
                sig.filter(pc.equal(sig["episode_id"], eid)), evs.filter(pc.equal(evs["episode_id"], eid))
            )
            ev = sub.event(spec.stream)
            if ev is not None:
                if ev.kind == "string":
                    raise ValueError(
                        f"history stream {spec.stream} holds text events; a sample's history takes numbers, "
                        "bool or trigger events"
                    )
                v = np.asarray([1.0 if x in (None, "true") else 0.0 for x in ev.values], np.float64)[:, None]
                on_log = ev.t_ns == ev.log_ns if len(ev.log_ns) == len(ev) else np.ones(len(ev), bool)
                per[r] = (_on_steps(ev.t_ns, metas[r], on_log), v)
            else:
                per[r] = _numbers(list(sub.signals), spec, eid, metas[r])
        if not per:
            raise ValueError(
                f"history stream {spec.stream} is in none of the {len(ids)} packed episodes' records; "
                "`robolake info LAKE` lists the streams"
            )
        w = {v.shape[1] for _, v in per.values()}
        if max(w) > width:
            raise ValueError(
                f"history stream {spec.stream} has {max(w)} values per message, more than {width}; "
                f"take one field with {spec.stream}:FIELD={spec.seconds:g}"
            )
        allv = np.concatenate([v for _, v in per.values()])
        mean, std = allv.mean(axis=0), allv.std(axis=0)
        std = np.where(std > 1e-8, std, 1.0)
        for r, (t, v) in per.items():
            norm = np.zeros((len(t), width), np.float32)
            norm[:, : v.shape[1]] = ((v - mean) / std).astype(np.float32)
            data.series[(r, k)] = _Series(t_ns=np.asarray(t, np.int64), values=norm)
        data.stats.append(
            {
                "stream": spec.stream,
                "messages": int(len(allv)),
                "width": int(max(w)),
                "mean": mean.tolist(),
                "std": std.tolist(),
                "episodes_without": len(ids) - len(per),
            }
        )
    return data


def _by_episode(table: pa.Table) -> list[tuple[str, pa.Table]]:
    if not table.num_rows:
        return []
    table = table.sort_by("episode_id")
    ids = table["episode_id"].to_numpy(zero_copy_only=False)
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(ids)]])
    return [(str(ids[a]), table.slice(int(a), int(b - a))) for a, b in zip(starts, ends, strict=True)]
