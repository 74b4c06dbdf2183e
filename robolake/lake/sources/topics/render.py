"""Steps of a topic-log episode, derived from its record: the one path ingest and `align` share.

Ingest keeps every message of every stream in the record (`sources.record`), then derives the
steps from that record, never from the source directly; `robolake align` later runs the same
function on the record read back from the lake with another rate or rules. Each mapped stream
is replayed message by message (as a nested dict, in log order across its parts) through the
readers' own `NumericStream`, so joint order by name, a TF frame or a Stamped field come out
exactly as they would from the bag, and `resample.align` puts them on ticks.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.record import Record, SignalPart, replay
from robolake.lake.sources.resample import Aligned, Stream, align
from robolake.lake.sources.topics.plan import Plan, TopicInfo
from robolake.lake.sources.topics.streams import NumericStream, permute, rel_seconds, stream_columns

__all__ = ["Rendered", "render_topic_steps", "topic_kinds"]


@dataclass(frozen=True)
class _At:
    """What `NumericStream` needs of a recording: the path its messages name."""

    path: str


@dataclass(frozen=True, kw_only=True)
class Rendered:
    """Steps of one episode and what they came from.

    Attributes:
        aligned: State, action and frame indices on ticks.
        t0_ns: The time every relative second counts from (the first mapped message or frame).
        header_clock: Per mapped stream label, whether its times are header stamps.
    """

    aligned: Aligned
    t0_ns: int
    header_clock: dict[str, bool]


def topic_kinds(topics: dict[str, TopicInfo], plan: Plan) -> dict[str, dict[str, str]]:
    """The message type and kind of each mapped numeric topic (kept with the plan for `align`)."""
    return {t: {"msgtype": topics[t].msgtype, "kind": topics[t].kind} for t in plan.numeric_topics()}


def _messages(record: Record, topic: str) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """A topic's messages from every part, in log order (the order the recording gave them)."""

    def keyed(i: int, part: SignalPart) -> Iterator[tuple[int, int, int, dict[str, Any]]]:
        for t, log, msg in replay(part):
            yield log, i, t, msg

    parts = [p for p in record.parts(topic) if p.kind == "numeric"]
    for log, _, t, msg in heapq.merge(*[keyed(i, p) for i, p in enumerate(parts)], key=lambda x: (x[0], x[1])):
        yield t, log, msg


def render_topic_steps(
    record: Record,
    plan: Plan,
    kinds: dict[str, dict[str, str]],
    *,
    fps: float,
    mode: str,
    path: str,
    rules: dict[str, str] | None = None,
    dims: list[int] | None = None,
    first_recording: str = "",
) -> Rendered:
    """Steps of an episode from its record, by the plan.

    Args:
        record: The episode's record (every message of its mapped topics at least).
        plan: Which topics make the state, action and cameras.
        kinds: `topic_kinds` of the plan's numeric topics.
        fps: Tick rate.
        mode: `ticks` or `none` (`resample.align`).
        path: The recording, for messages.
        rules: Alignment rules over the defaults.
        dims: Widths the reader probed (state streams then action streams), to check this episode
            against; None skips the check (align on an episode already checked at ingest).
        first_recording: The file the widths were probed in, for the message.

    Raises:
        SourceError: a mapped topic has no messages, changes width, or the streams do not overlap.
    """
    infos = {t: TopicInfo(name=t, msgtype=k["msgtype"], count=0, kind=k["kind"]) for t, k in kinds.items()}
    readers = {
        s.label + str(i): NumericStream(s, infos[s.source], plan.clock)
        for i, s in enumerate((*plan.state, *plan.action))
    }
    by_topic: dict[str, list[NumericStream]] = {}
    for r in readers.values():
        by_topic.setdefault(r.s.source, []).append(r)
    at = _At(path)
    for topic, rs in by_topic.items():
        for _, log_ns, msg in _messages(record, topic):
            for r in rs:
                r.add(at, log_ns, msg)  # type: ignore[arg-type]  # only .path is read
    cam_t = {c.source: _camera_times(record, c.source) for c in plan.cameras}
    firsts = [t for r in readers.values() for t in r.t] + [int(ts[0]) for ts in cam_t.values() if len(ts)]
    if not firsts:
        raise SourceError("empty", path, f"the episode window holds no messages of {sorted(by_topic)}")
    t0 = min(firsts)
    n_state = len(plan.state)
    parts = [r.streams(t0, path) for r in readers.values()]
    if dims is not None:
        for r, pieces, want in zip(readers.values(), parts, dims, strict=False):
            got = sum(int(np.shape(st.values)[1]) for st, _ in pieces)
            if got != want:
                raise SourceError(
                    "shape",
                    path,
                    f"{r.s.source} has {got} values per message here but {want} in {first_recording}; "
                    "one unit must keep one layout: ingest it with its own --embodiment, "
                    "or select joints with `names:`",
                )
    state_perm, action_perm = stream_columns(parts[:n_state]), stream_columns(parts[n_state:])
    cams = {
        c.name: Stream(c.source, rel_seconds(cam_t[c.source].tolist(), t0), np.zeros((len(cam_t[c.source]), 0)), path)
        for c in plan.cameras
    }
    aligned = align(
        state=[st for p in parts[:n_state] for st, _ in p],
        action=[st for p in parts[n_state:] for st, _ in p],
        cameras=cams,
        fps=fps,
        action_from_state=plan.action_from_state,
        path=path,
        mode=mode,
        rules=rules,
        recorded=True,
    )
    if state_perm is not None or action_perm is not None:
        aligned = dataclasses.replace(
            aligned,
            state=permute(aligned.state, state_perm),
            action=permute(aligned.action, state_perm if plan.action_from_state else action_perm),
        )
    return Rendered(
        aligned=aligned,
        t0_ns=int(t0),
        header_clock={r.s.label: bool(r.header_clock) for r in readers.values()},
    )


def _camera_times(record: Record, topic: str) -> np.ndarray:
    parts = [p for p in record.parts(topic) if p.kind == "camera"]
    return np.concatenate([p.t_ns for p in parts]) if parts else np.zeros(0, np.int64)
