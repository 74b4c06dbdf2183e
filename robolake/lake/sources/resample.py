"""Aligning streams recorded at different rates onto one clock of fixed-rate ticks.

A teleoperation log is a set of independent streams: joint states at 100 Hz or more, commands
whenever the operator's device sent one, camera frames at 15 or 30 fps, each with its own jitter
and dropped messages. A lake episode is one table of steps at a fixed rate, each step holding a
state, an action and one frame per camera. Getting from one to the other takes three decisions:

* **The window.** An episode spans only the time where *every* mapped stream has data: from the
  latest first message to the earliest last one. Outside it some quantity would have to be
  invented. Streams that never overlap are an error (`no_overlap`), not an empty episode.
* **The ticks.** `ticks(start, end, fps)` are `start + k / fps` inside the window. The default
  rate is that of the first state stream (1 / median message interval, robust to jitter).
* **One rule per kind of stream.** State is a physical quantity sampled by the recorder, so it
  is interpolated linearly between the two messages around a tick (`resample_linear`). An
  action is a command that holds until the next one, so a tick takes the last command at or
  before it (`resample_hold`, zero-order hold; interpolating would invent commands never sent).
  A frame cannot be blended, and a frame from the future would leak information the policy did
  not have, so a tick takes the latest frame at or before it (`resample_latest`).

Where a recording has no command stream, teleop convention takes the action at a tick to be the
state at the next tick (`action_from_state`); the last step repeats its own state.

Nothing is dropped or assumed without a word. Every decision lands in `Aligned.metadata` and,
where a user would not expect it, in `metadata["notes"]` (ingest prints each once):

* A stream with a **single message** (a latched calibration, one snapshot) is a static value,
  held over the whole episode; it does not bound the window.
* **Several messages on one stamp** (recorders that batch, simulators that publish a burst): a
  state stream is averaged per stamp, an action takes the last; both are counted.
* **Messages between ticks** that no tick uses (a 1 kHz stream on 30 Hz ticks) and the span the
  window **trims** off the recording are counted and noted.
* `mode="none"` (`resample: none`) keeps every message of the first state stream as a step at
  its own time (stamps may repeat), the other streams resampled onto those times.

The rule of a stream can be chosen (`rules`, `robolake align --rule STREAM=RULE`): `linear`,
`hold` (latest at or before), `latest` (the same, for frames), `nearest` (the closest message,
`nearest:0.01` within 10 ms, else held and counted), or `mean` (of the messages since the
previous tick, held where there are none). Whatever was chosen is in `metadata["rules"]`.

The checks here turn bad recordings into quarantine reasons a person can act on: an empty
stream (`empty`), a clock that goes backwards (`timestamps`), NaN/inf values (`non_finite`), a
width that changes mid-recording (`shape`), and streams with no common time (`no_overlap`).
Equal consecutive stamps are tolerated (recorders batch messages); a decrease is not.
Everything is plain numpy on arrays already in memory; readers decide how to get them there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robolake.lake.sources.base import SourceError

__all__ = [
    "Stream",
    "Aligned",
    "stack_rows",
    "check_stream",
    "stream_rate",
    "overlap_window",
    "ticks",
    "resample_linear",
    "resample_hold",
    "resample_latest",
    "action_one_ahead",
    "segments_by_gap",
    "segments_by_flag",
    "check_frame_sizes",
    "merge_shared_stamps",
    "align",
    "RULES",
    "parse_rule",
    "resample_rule",
]

RULES = ("linear", "hold", "latest", "nearest", "mean")


@dataclass(frozen=True)
class Stream:
    """One recorded stream.

    Attributes:
        name: Topic / key, for messages.
        t: float64 [N] seconds.
        values: [N, D] numbers, or N payloads (encoded frames, raw image arrays, ...).
        path: The file it came from, for messages.
    """

    name: str
    t: np.ndarray
    values: np.ndarray | Sequence[Any]
    path: str = ""

    def __len__(self) -> int:
        return int(len(self.t))


@dataclass(frozen=True, kw_only=True)
class Aligned:
    """Streams resampled onto common ticks.

    Attributes:
        timestamps: float64 [T] tick times (seconds, on the recording's clock).
        state: float64 [T, Ds].
        action: float64 [T, Da].
        frames: camera -> int64 [T] index into that camera stream's payloads.
        fps: Tick rate.
        metadata: What was decided (window, rate, action_from_state), for the episode metadata.
    """

    timestamps: np.ndarray
    state: np.ndarray
    action: np.ndarray
    frames: dict[str, np.ndarray]
    fps: float
    metadata: dict[str, Any] = field(default_factory=dict)


def stack_rows(rows: Sequence[Any], name: str, path: str) -> np.ndarray:
    """float64 [N, D] of per-message rows, failing on a width change with where it happened.

    Raises:
        SourceError: `empty` (no rows) or `shape` (rows of different widths).
    """
    if len(rows) == 0:
        raise SourceError("empty", path, f"{name} has no messages; record it or drop it from the mapping")
    arrs = [np.atleast_1d(np.asarray(r, dtype=np.float64)).reshape(-1) for r in rows]
    width = arrs[0].shape[0]
    for i, a in enumerate(arrs):
        if a.shape[0] != width:
            raise SourceError(
                "shape",
                path,
                f"{name} changes width mid-recording: {width} values until message {i}, then {a.shape[0]}; "
                "split the recording where the layout changed or select fixed joints with `names:` in the mapping",
            )
    return np.stack(arrs)


def check_stream(stream: Stream) -> None:
    """Validate one stream's clock and (numeric) values.

    Raises:
        SourceError: `empty`, `timestamps` (NaN or backwards clock), `non_finite` or `shape`.
    """
    t, name, path = np.asarray(stream.t, dtype=np.float64), stream.name, stream.path
    if t.ndim != 1 or t.shape[0] == 0:
        raise SourceError("empty", path, f"{name} has no messages; record it or drop it from the mapping")
    if len(stream.values) != t.shape[0]:
        raise SourceError("shape", path, f"{name} has {len(stream.values)} values but {t.shape[0]} timestamps")
    if not np.all(np.isfinite(t)):
        raise SourceError(
            "timestamps", path, f"{name} has NaN/inf timestamps (first at message {int(np.argmin(np.isfinite(t)))})"
        )
    back = np.flatnonzero(np.diff(t) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise SourceError(
            "timestamps",
            path,
            f"{name}'s clock goes backwards at message {i} ({t[i - 1]:.6f} -> {t[i]:.6f} s); "
            "re-sort the log by time, or use the other clock (mapping `clock: log` or `clock: header`)",
        )
    if isinstance(stream.values, np.ndarray) and np.issubdtype(stream.values.dtype, np.number):
        v = stream.values
        if v.ndim != 2:
            raise SourceError("shape", path, f"{name} values have shape {v.shape}; expected [messages, width]")
        bad = ~np.isfinite(v)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise SourceError(
                "non_finite",
                path,
                f"{name} has {int(bad.sum())} NaN/inf values (first at message {row}, t={t[row]:.6f} s); "
                "clean the recording or drop the episode",
            )


def stream_rate(stream: Stream) -> float:
    """Messages per second: 1 / median interval (robust to jitter and dropped messages); 0 for one message."""
    dt = np.diff(np.asarray(stream.t, dtype=np.float64))
    dt = dt[dt > 0]
    return float(1.0 / np.median(dt)) if dt.size else 0.0


def overlap_window(streams: Sequence[Stream], path: str) -> tuple[float, float]:
    """[start, end] where every stream has data.

    Raises:
        SourceError: `no_overlap`, listing each stream's span.
    """
    start = max(float(s.t[0]) for s in streams)
    end = min(float(s.t[-1]) for s in streams)
    if start > end:
        spans = ", ".join(f"{s.name} [{float(s.t[0]):.3f}, {float(s.t[-1]):.3f}]" for s in streams)
        raise SourceError(
            "no_overlap",
            path,
            f"the mapped streams never overlap in time ({spans} s); they were recorded at different times "
            "or on different clocks (try the other `clock:` in the mapping)",
        )
    return start, end


def ticks(start: float, end: float, fps: float) -> np.ndarray:
    """float64 tick times start + k / fps for every k with the tick inside [start, end]."""
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    n = int(np.floor((end - start) * fps + 1e-6)) + 1
    return start + np.arange(max(n, 0), dtype=np.float64) / fps


def _index_at_or_before(t: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.clip(np.searchsorted(t, at, side="right") - 1, 0, len(t) - 1).astype(np.int64)


def resample_linear(stream: Stream, at: np.ndarray) -> np.ndarray:
    """float64 [len(at), D]: values linearly interpolated at each tick (held flat outside the stream)."""
    v = np.asarray(stream.values, dtype=np.float64)
    t = np.asarray(stream.t, dtype=np.float64)
    if len(t) == 1:
        return np.repeat(v, len(at), axis=0)
    return (
        np.stack([np.interp(at, t, v[:, j]) for j in range(v.shape[1])], axis=1)
        if v.shape[1]
        else np.zeros((len(at), 0))
    )


def resample_hold(stream: Stream, at: np.ndarray) -> np.ndarray:
    """[len(at), D]: the last value at or before each tick (the first value before the stream starts)."""
    return np.asarray(stream.values, dtype=np.float64)[_index_at_or_before(np.asarray(stream.t, dtype=np.float64), at)]


def resample_latest(stream: Stream, at: np.ndarray) -> np.ndarray:
    """int64 [len(at)]: index of the latest message at or before each tick."""
    return _index_at_or_before(np.asarray(stream.t, dtype=np.float64), at)


def parse_rule(text: str) -> tuple[str, float | None]:
    """(rule, tolerance in seconds) of `linear`, `hold`, `latest`, `nearest`, `nearest:0.01`, `mean`.

    Raises:
        ValueError: an unknown rule or a bad tolerance, naming the rules there are.
    """
    name, _, tol = text.strip().partition(":")
    if name not in RULES:
        raise ValueError(
            f"unknown alignment rule {text!r}; rules: {', '.join(RULES)} (nearest:SECONDS for a tolerance)"
        )
    if tol and name != "nearest":
        raise ValueError(f"rule {name!r} takes no tolerance (only nearest:SECONDS does), got {text!r}")
    try:
        tolerance = float(tol) if tol else None
    except ValueError:
        raise ValueError(f"tolerance of {text!r} is not a number of seconds") from None
    if tolerance is not None and not tolerance > 0:
        raise ValueError(f"tolerance of {text!r} must be > 0 seconds")
    return name, tolerance


def resample_rule(stream: Stream, at: np.ndarray, rule: str) -> tuple[np.ndarray, int]:
    """float64 [len(at), D] of `stream` at each tick by `rule`, and how many ticks the rule could not serve
    (nearest: no message within the tolerance; mean: no message since the previous tick), which are held."""
    name, tol = parse_rule(rule)
    if name == "linear":
        return resample_linear(stream, at), 0
    if name in ("hold", "latest"):
        return resample_hold(stream, at), 0
    t = np.asarray(stream.t, dtype=np.float64)
    v = np.asarray(stream.values, dtype=np.float64)
    held = _index_at_or_before(t, at)
    if name == "nearest":
        after = np.clip(held + 1, 0, len(t) - 1)
        pick = np.where(np.abs(t[after] - at) < np.abs(t[held] - at), after, held)
        if tol is None:
            return v[pick], 0
        far = np.abs(t[pick] - at) > tol
        return v[np.where(far, held, pick)], int(far.sum())
    # mean over (previous tick, this tick]
    out = v[held].copy()
    lo = np.searchsorted(t, np.concatenate([[-np.inf], at[:-1]]), side="right")
    hi = np.searchsorted(t, at, side="right")
    csum = np.concatenate([np.zeros((1, v.shape[1])), np.cumsum(v, axis=0)])
    n = hi - lo
    some = n > 0
    out[some] = (csum[hi[some]] - csum[lo[some]]) / n[some, None]
    return out, int((~some).sum())


def _rule_of(name: str, default: str, rules: dict[str, str]) -> str:
    """A stream's rule: given for its name, or for its topic (`/joint_states` covers `/joint_states[a,b]`)."""
    if name in rules:
        return rules[name]
    base = name.split("[", 1)[0]
    return rules.get(base, default)


def action_one_ahead(state: np.ndarray) -> np.ndarray:
    """Action = the state one tick ahead; the last step repeats its own state."""
    if len(state) == 0:
        return state.copy()
    return np.concatenate([state[1:], state[-1:]], axis=0)


def segments_by_gap(t: np.ndarray, seconds: float) -> list[tuple[float, float]]:
    """[start, end] spans of `t` separated by pauses longer than `seconds`."""
    t = np.asarray(t, dtype=np.float64)
    if t.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(t) > seconds)
    starts = np.concatenate([[0], cuts + 1])
    ends = np.concatenate([cuts, [len(t) - 1]])
    return [(float(t[a]), float(t[b])) for a, b in zip(starts, ends, strict=True)]


def segments_by_flag(t: np.ndarray, flags: np.ndarray) -> list[tuple[float, float]]:
    """[start, end] spans where a boolean stream is true (each run of true messages is one episode)."""
    t = np.asarray(t, dtype=np.float64)
    f = np.asarray(flags).astype(bool).reshape(len(t), -1)[:, 0] if len(t) else np.zeros(0, bool)
    out = []
    i = 0
    while i < len(f):
        if f[i]:
            j = i
            while j + 1 < len(f) and f[j + 1]:
                j += 1
            out.append((float(t[i]), float(t[j])))
            i = j + 1
        else:
            i += 1
    return out


def check_frame_sizes(sizes: Sequence[tuple[int, int]], camera: str, path: str) -> tuple[int, int]:
    """The (height, width) shared by all frames of a camera.

    Raises:
        SourceError: `shape` when the size changes mid-episode, naming the frame.
    """
    if not sizes:
        raise SourceError("empty", path, f"camera {camera!r} has no frames")
    first = tuple(sizes[0])
    for i, s in enumerate(sizes):
        if tuple(s) != first:
            raise SourceError(
                "shape",
                path,
                f"camera {camera!r} changes image size mid-episode: "
                f"{first[0]}x{first[1]} until frame {i}, then {s[0]}x{s[1]}; "
                "split the recording where the camera was reconfigured, or resize the frames",
            )
    return int(first[0]), int(first[1])


def merge_shared_stamps(stream: Stream) -> tuple[Stream, int, int]:
    """The stream with messages that share a stamp averaged into one; (stream, merged, most per stamp)."""
    t = np.asarray(stream.t, dtype=np.float64)
    if t.size < 2 or not np.any(np.diff(t) == 0):
        return stream, 0, 1
    uniq, first, counts = np.unique(t, return_index=True, return_counts=True)
    v = np.asarray(stream.values, dtype=np.float64)
    sums = np.add.reduceat(v, first, axis=0) if v.shape[1] else np.zeros((len(uniq), 0))
    merged = Stream(stream.name, uniq, sums / counts[:, None], stream.path)
    return merged, int(t.size - uniq.size), int(counts.max())


def _shared(stream: Stream) -> tuple[int, int]:
    """(messages sharing an earlier message's stamp, most messages on one stamp)."""
    t = np.asarray(stream.t, dtype=np.float64)
    if t.size < 2 or not np.any(np.diff(t) == 0):
        return 0, 1
    _, counts = np.unique(t, return_counts=True)
    return int(t.size - counts.size), int(counts.max())


def _used(stream: Stream, at: np.ndarray, rule: str) -> tuple[int, int, int]:
    """(messages inside [at[0], at[-1]], of them used by some tick, most inside one tick interval)."""
    t = np.asarray(stream.t, dtype=np.float64)
    if not len(at) or not len(t):
        return 0, 0, 0
    inside = (t >= at[0]) & (t <= at[-1])
    idx = np.clip(np.searchsorted(t, at, side="right") - 1, 0, len(t) - 1)
    used = np.zeros(len(t), dtype=bool)
    used[idx] = True
    if rule == "linear":  # the message after each tick is the other end of its interpolation
        used[np.clip(idx + 1, 0, len(t) - 1)] = True
    n_in = int(inside.sum())
    per = np.bincount(np.clip(np.searchsorted(at, t[inside], side="right") - 1, 0, None)) if n_in else np.zeros(1, int)
    return n_in, int((used & inside).sum()), int(per.max()) if per.size else 0


def align(
    *,
    state: Sequence[Stream],
    action: Sequence[Stream] = (),
    cameras: dict[str, Stream] | None = None,
    fps: float | None = None,
    action_from_state: bool = False,
    window: tuple[float, float] | None = None,
    path: str = "",
    mode: str = "ticks",
    rules: dict[str, str] | None = None,
    recorded: bool = False,
) -> Aligned:
    """Resample state (linear), action (hold) and camera frames (latest) onto common ticks.

    Args:
        state: Streams concatenated into the state vector.
        action: Streams concatenated into the action vector (ignored with `action_from_state`).
        cameras: Camera name -> stream of frames.
        fps: Tick rate; None: the rate of the first state stream with more than one message.
        action_from_state: Action = state one tick ahead.
        window: Restrict the episode to [start, end] (a split of the recording).
        path: The recording, for messages.
        mode: `ticks` (fixed-rate ticks) or `none` (a step per message of `state[0]`).
        rules: Stream name (or its topic) -> rule, over the defaults (`parse_rule`).
        recorded: The numeric streams are kept whole in the record (notes say so).

    Raises:
        SourceError: a stream is empty, non-finite or out of order; the streams do not overlap.
    """
    cameras = cameras or {}
    rules = dict(rules or {})
    for r in rules.values():
        parse_rule(r)
    if not state:
        raise SourceError("missing_key", path, "no state stream; map one (`state:` in the mapping)")
    if not action and not action_from_state:
        raise SourceError("missing_key", path, "no action stream; map one, or set `action_from_state: true`")
    if mode not in ("ticks", "none"):
        raise ValueError(f"mode must be ticks or none, got {mode!r}")
    action = [] if action_from_state else list(action)
    streams = [*state, *action, *cameras.values()]
    for s in streams:
        check_stream(s)
    notes: list[str] = []
    static = [s.name for s in streams if len(s) == 1]
    for name in static:
        notes.append(f"{name} has a single message: held as a static value over the whole episode")
    timed = [s for s in streams if len(s) > 1] or list(streams)
    start, end = overlap_window(timed, path)
    rec_span = (min(float(s.t[0]) for s in timed), max(float(s.t[-1]) for s in timed))
    if window is not None:
        start, end = max(start, window[0]), min(end, window[1])
        if start > end:
            raise SourceError(
                "no_overlap",
                path,
                f"the episode window [{window[0]:.3f}, {window[1]:.3f}] s holds no data of every stream",
            )
    clock = next((x for x in state if len(x) > 1), state[0])
    measured = stream_rate(clock)
    rate = fps or measured
    if not rate > 0:
        raise SourceError(
            "empty", path, f"{state[0].name} has a single message; give `fps:` in the mapping or record longer"
        )
    stats: dict[str, dict[str, Any]] = {}
    merged_state: list[Stream] = []
    for x in state:
        m, n_merged, most = (x, 0, 1) if (mode == "none" and x is state[0]) else merge_shared_stamps(x)
        merged_state.append(m)
        if n_merged:
            stats.setdefault(x.name, {})["averaged_on_shared_stamps"] = n_merged
            notes.append(
                f"{x.name}: {n_merged} of {len(x)} messages share a stamp with another (up to {most} on one stamp); "
                "averaged per stamp (`resample: none` keeps every message)"
            )
    for x in action:
        n_shared, most = _shared(x)
        if n_shared:
            stats.setdefault(x.name, {})["held_last_on_shared_stamps"] = n_shared
            notes.append(
                f"{x.name}: {n_shared} of {len(x)} commands share a stamp with another (up to {most} on one stamp); "
                "each tick holds the last of them"
            )
    if mode == "none":
        t0 = np.asarray(state[0].t, dtype=np.float64)
        keep = (t0 >= start) & (t0 <= end)
        at = t0[keep]
        first = np.asarray(state[0].values, dtype=np.float64)[keep]
        st = np.concatenate([first, *[resample_linear(x, at) for x in merged_state[1:]]], axis=1)
    else:
        at = ticks(start, end, rate)
        st = np.concatenate([_by_rule(x, at, "linear", rules, stats) for x in merged_state], axis=1)
    ac = (
        action_one_ahead(st)
        if action_from_state
        else np.concatenate([_by_rule(x, at, "hold", rules, stats) for x in action], axis=1)
    )
    frames = {cam: _frame_index(x, at, rules, stats) for cam, x in cameras.items()}
    if mode == "ticks":
        used_rules = (
            [(x, _rule_of(x.name, "linear", rules)) for x in merged_state]
            + [(x, _rule_of(x.name, "hold", rules)) for x in action]
            + [(x, "latest") for x in cameras.values()]
        )
        for x, rule in used_rules:
            if len(x) < 2:
                continue
            n_in, n_used, most = _used(x, at, rule)
            stats.setdefault(x.name, {}).update(in_window=n_in, used=n_used, most_per_tick=most)
            if n_in - n_used > max(1, 0.05 * n_in):
                of_frames = rule == "latest"
                kept = (
                    "the record keeps them (`robolake align --fps`, `pack --history` use them)"
                    if recorded and not of_frames
                    else "raise `fps:` or use `resample: none` to keep them"
                )
                notes.append(
                    f"{x.name}: {n_in - n_used} of {n_in} {'frames' if of_frames else 'messages'} fall between "
                    f"{rate:g} Hz ticks and are not used by the steps (up to {most} per tick); {kept}"
                )
    tick = 1.0 / rate
    trimmed = (start - rec_span[0], rec_span[1] - end)
    span = {
        "recording_s": [rec_span[0], rec_span[1]],
        "episode_s": [start, end],
        "starts_with": max(timed, key=lambda x: float(x.t[0])).name,
        "ends_with": min(timed, key=lambda x: float(x.t[-1])).name,
    }
    worth_saying = max(2 * tick, 0.1 * (rec_span[1] - rec_span[0]))  # not the jitter of where streams start
    if window is None and max(trimmed) > worth_saying:
        notes.append(
            f"episode spans {start - rec_span[0]:.3f}-{end - rec_span[0]:.3f} s of the recording's "
            f"0-{rec_span[1] - rec_span[0]:.3f} s: it starts when {span['starts_with']} starts and ends when "
            f"{span['ends_with']} ends (every mapped stream has data only there)"
        )
    meta: dict[str, Any] = {
        "window": [start, end],
        "fps": rate,
        "resample": mode,
        "span": span,
        "rate": {"clock": clock.name, "measured_hz": measured, "fps": rate, "given": fps is not None},
        "streams": {x.name: len(x) for x in streams},
    }
    meta["rules"] = {
        **{x.name: _rule_of(x.name, "linear", rules) for x in state},
        **{x.name: _rule_of(x.name, "hold", rules) for x in action},
        **{x.name: _rule_of(x.name, "latest", rules) for x in cameras.values()},
    }
    if stats:
        meta["stream_use"] = stats
    if static:
        meta["static"] = static
    if notes:
        meta["notes"] = notes
    if action_from_state:
        meta["action_from_state"] = True
    return Aligned(timestamps=at, state=st, action=ac, frames=frames, fps=float(rate), metadata=meta)


def _by_rule(
    stream: Stream, at: np.ndarray, default: str, rules: dict[str, str], stats: dict[str, dict[str, Any]]
) -> np.ndarray:
    rule = _rule_of(stream.name, default, rules)
    if rule == default and default == "linear":
        return resample_linear(stream, at)
    values, unserved = resample_rule(stream, at, rule)
    if unserved:
        stats.setdefault(stream.name, {})["held_by_rule"] = unserved
    return values


def _frame_index(stream: Stream, at: np.ndarray, rules: dict[str, str], stats: dict[str, dict[str, Any]]) -> np.ndarray:
    """A camera's frame per tick: latest at or before (default), or the nearest (within a tolerance)."""
    rule = _rule_of(stream.name, "latest", rules)
    name, tol = parse_rule(rule)
    held = resample_latest(stream, at)
    if name in ("latest", "hold"):
        return held
    if name != "nearest":
        raise ValueError(f"camera {stream.name}: a frame cannot be {name}; use latest or nearest")
    t = np.asarray(stream.t, dtype=np.float64)
    after = np.clip(held + 1, 0, len(t) - 1)
    pick = np.where(np.abs(t[after] - at) < np.abs(t[held] - at), after, held)
    if tol is not None:
        far = np.abs(t[pick] - at) > tol
        pick = np.where(far, held, pick)
        if far.any():
            stats.setdefault(stream.name, {})["held_by_rule"] = int(far.sum())
    return pick
