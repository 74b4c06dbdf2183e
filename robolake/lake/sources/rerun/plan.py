"""Which entities of a Rerun recording become state, action, cameras, task and episode splits.

A Rerun recording has entities, components and timelines, and no episode, state or action. A
mapping (`--map`) says which is which, with entity paths as sources (`{source: /robot/joints}`,
`field:` naming a component other than the entity's `Scalars`, e.g. `Transform3D:translation`).
Without one, the defaults read the common layouts: state is every `Scalars` entity whose path
does not name a command, action the ones that do (`action`, `command`, `cmd`, `target`, `goal`;
none: action = state one tick ahead), cameras every `Image` / `EncodedImage` entity, the task a
text entity named `task` / `instruction`, and one episode per file.

The timeline: `stamps:` on the first state stream names one (`stamps: sim_time`); `clock: log`
takes the SDK's `log_time`; otherwise the recording's own temporal timeline (one the user set
with `rr.set_time(..., timestamp=/duration=)`, like a ROS header stamp) when every mapped entity
is on it, else `log_time`, else a sequence timeline (`log_tick`, a frame counter) with ticks
`1 / fps` apart. A numeric entity whose clock runs backwards, or whose width changes, is left out
of the default state with a note naming it (the record keeps it as recorded); mapped, it is the
episode's quarantine reason. `to_yaml` writes the plan as a mapping that ingests the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.mapping import CameraMap, Mapping, SplitMap, StreamMap
from robolake.lake.sources.rerun.load import MISSING, Column, RrdContents
from robolake.lake.sources.rerun.values import ENCODED_IMAGE, IMAGE, NUMERIC, TEXT, column_kind

__all__ = ["RerunPlan", "resolve_plan", "stream_column", "LOG_TIME"]

LOG_TIME = "log_time"
_COMMAND = re.compile(r"(^|[/_.\-])(action|actions|command|commands|cmd|target|goal)s?($|[/_.\-])", re.IGNORECASE)
_TASK = re.compile(r"(^|/)(task|instruction|prompt|language_instruction)$", re.IGNORECASE)
_SEQUENCE_FPS = 30.0  # ticks per second on a sequence timeline when the mapping gives no `fps:`


@dataclass(frozen=True, kw_only=True)
class RerunPlan:
    """What the reader does with a recording.

    Attributes:
        timeline: The timeline every stream is read on.
        timeline_from: Why (`mapping stamps`, `clock: log`, `the recording's own`, `log_time`, `sequence`).
        sequence: The timeline counts ticks (times are `value / fps`).
        state: State streams (entity, component in `field`).
        action: Action streams.
        action_from_state: Action = state one tick ahead.
        cameras: Camera entities.
        fps: The mapping's rate, None: measured.
        split: How the file splits into episodes.
        task: Literal instruction.
        task_from: Text entity holding it.
        defaults: Which of state/action/cameras/task came from the defaults.
        notes: What a user should hear.
    """

    timeline: str
    timeline_from: str
    sequence: bool
    state: tuple[StreamMap, ...]
    action: tuple[StreamMap, ...]
    action_from_state: bool
    cameras: tuple[CameraMap, ...]
    fps: float | None
    split: SplitMap
    task: str | None
    task_from: str | None
    defaults: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def entities(self) -> list[str]:
        """Entities the steps need (state, action, split, task; cameras aside)."""
        out = [s.source for s in (*self.state, *self.action)]
        out += [x for x in (self.split.source if self.split.by == "topic" else None, self.task_from) if x]
        return list(dict.fromkeys(out))

    def to_yaml(self, *, fps: float) -> str:
        """The plan as a mapping file that ingests the same (`inspect --suggest-map`)."""

        def stream(s: StreamMap) -> str:
            d: dict[str, str] = {"source": s.source}
            if s.field:
                d["field"] = s.field
            if s.stamps:
                d["stamps"] = s.stamps
            return json.dumps(d)

        lines = ["# Rerun recording: entity paths as sources; `field` picks a component; `stamps` the timeline"]
        lines.append("state:")
        for i, s in enumerate(self.state):
            lines.append(
                f"  - {stream(StreamMap(source=s.source, field=s.field, stamps=self.timeline if i == 0 else None))}"
            )
        if self.action_from_state:
            lines.append("action_from_state: true")
        else:
            lines.append("action:")
            lines += [f"  - {stream(s)}" for s in self.action]
        lines.append("cameras: " + json.dumps({c.name: c.source for c in self.cameras}))
        if self.fps is not None or self.sequence:
            lines.append(f"fps: {fps:g}")
        if self.split.by == "gap":
            lines.append(f"split: {{by: gap, seconds: {self.split.seconds:g}}}")
        elif self.split.by == "topic":
            lines.append(f"split: {{by: topic, source: {json.dumps(self.split.source)}}}")
        if self.task_from:
            lines.append(f"task_from: {json.dumps(self.task_from)}")
        elif self.task:
            lines.append(f"task: {json.dumps(self.task)}")
        return "\n".join(lines) + "\n"


def stream_column(contents: RrdContents, s: StreamMap, path: str) -> Column:
    """The column a mapped stream reads: its `field` component, else the entity's `Scalars`, else
    its only numeric component.

    Raises:
        SourceError: `missing_key` naming the entity and what the file holds.
    """
    cols = contents.of(s.source)
    if not cols:
        raise SourceError(
            "missing_key",
            path,
            f"entity {s.source} is not in this recording; entities: {', '.join(contents.entities()[:30])}",
        )
    if s.field:
        for c in cols:
            if s.field in (c.component, c.component.split(":", 1)[-1]):
                return c
        raise SourceError(
            "missing_key",
            path,
            f"entity {s.source} has no component {s.field!r}; it has {', '.join(c.component for c in cols)}",
        )
    numeric = [c for c in cols if column_kind(c)[0] == NUMERIC]
    scalars = [c for c in numeric if c.component == "Scalars:scalars"]
    if scalars or len(numeric) == 1:
        return (scalars or numeric)[0]
    raise SourceError(
        "missing_key",
        path,
        f"entity {s.source} holds {len(numeric)} numeric components ({', '.join(c.component for c in numeric)}); "
        "name one with `field:`",
    )


def _backwards(col: Column, timeline: str) -> int:
    t = col.times.get(timeline)
    if t is None:
        return 0
    t = t[t != MISSING]
    return int((np.diff(t) < 0).sum())


def _choose_timeline(contents: RrdContents, mapping: Mapping | None, entities: list[str], path: str) -> tuple[str, str]:
    tls = contents.timelines
    if mapping is not None and mapping.state and mapping.state[0].stamps:
        name = mapping.state[0].stamps
        if name not in tls:
            raise SourceError(
                "missing_key", path, f"timeline {name!r} (stamps:) is not in this recording; timelines: {sorted(tls)}"
            )
        return name, "mapping stamps"
    if mapping is not None and mapping.clock == "log" and LOG_TIME in tls:
        return LOG_TIME, "clock: log"
    if not tls:
        raise SourceError("empty", path, "the recording has no timeline: everything in it is static")

    def covers(name: str) -> bool:
        return all(any(name in c.times for c in contents.of(e)) for e in entities)

    own = [n for n, t in sorted(tls.items()) if t.temporal and n != LOG_TIME and covers(n)]
    if own:
        return own[0], "the recording's own"
    if LOG_TIME in tls and covers(LOG_TIME):
        return LOG_TIME, "log_time"
    seq = [n for n, t in sorted(tls.items()) if not t.temporal and covers(n)]
    if seq:
        return seq[0], "sequence"
    raise SourceError(
        "timestamps",
        path,
        f"no timeline holds every entity the episode needs ({', '.join(entities)}); name one with stamps:",
    )


def resolve_plan(contents: RrdContents, mapping: Mapping | None, path: str, *, state_only: bool = False) -> RerunPlan:
    """The plan for one recording: the mapping's, or the defaults (see the module docstring).

    Raises:
        SourceError: `empty` (no entity with data), `missing_key` (a mapped entity or component
            is missing; no numeric entity), `timestamps` (no timeline fits).
    """
    if not contents.columns:
        raise SourceError("empty", path, "the recording holds no logged data (an empty Rerun recording)")
    kinds = {k: column_kind(c)[0] for k, c in contents.columns.items()}
    notes: list[str] = []
    defaults: list[str] = []
    cameras_default = [
        CameraMap(name=e.strip("/").replace("/", "_") or "camera", source=e)
        for (e, _), k in kinds.items()
        if k in (IMAGE, ENCODED_IMAGE)
    ]
    if mapping is not None:
        state, action, afs = mapping.state, mapping.action, mapping.action_from_state
        cameras = mapping.cameras if mapping.cameras_given else tuple(cameras_default)
        for s in (*state, *action):
            stream_column(contents, s, path)
        for cam in cameras:
            if not any(kinds[(e, comp)] in (IMAGE, ENCODED_IMAGE) for (e, comp) in contents.columns if e == cam.source):
                raise SourceError(
                    "missing_key", path, f"camera {cam.name!r}: entity {cam.source} holds no Image or EncodedImage"
                )
        task, task_from, split, fps = mapping.task, mapping.task_from, mapping.split, mapping.fps
        if not mapping.cameras_given:
            defaults.append("cameras")
    else:
        scalars = [c for (e, comp), c in contents.columns.items() if comp == "Scalars:scalars" and not c.static]
        if not scalars:
            scalars = [c for k, c in contents.columns.items() if kinds[k] == NUMERIC and not c.static]
        if not scalars:
            raise SourceError(
                "missing_key",
                path,
                "no numeric entity (Scalars, transforms, ...) to make a state of; "
                f"entities: {', '.join(contents.entities()[:30])}",
            )
        usable = []
        for c in scalars:
            widths = {len(v) for v in c.values.to_pylist() if v} if len(c) else set()
            on = [t for t in contents.timelines if t in c.times]
            back = max((_backwards(c, t) for t in on), default=0)
            if back:
                notes.append(
                    f"{path}: entity {c.entity}: its timeline goes backwards {back} times; "
                    "not in the default state (kept in the record as recorded)"
                )
            elif len(widths) > 1:
                notes.append(
                    f"{path}: entity {c.entity}: its width changes ({sorted(widths)}); "
                    "not in the default state (kept in the record)"
                )
            else:
                usable.append(c)
        if not usable:
            raise SourceError(
                "timestamps",
                path,
                "every numeric entity's timeline goes backwards or changes width: " + "; ".join(notes),
            )
        field = {c.entity: (None if c.component == "Scalars:scalars" else c.component) for c in usable}
        cmd = [c.entity for c in usable if _COMMAND.search(c.entity)]
        st = [c.entity for c in usable if c.entity not in cmd] or cmd
        state = tuple(StreamMap(source=e, field=field[e]) for e in st)
        action = tuple(StreamMap(source=e, field=field[e]) for e in cmd if e not in st)
        afs = not action
        cameras = tuple(cameras_default)
        texts = [e for (e, _), k in kinds.items() if k == TEXT and _TASK.search(e)]
        task, task_from = None, (texts[0] if texts else None)
        split, fps = SplitMap(), None
        defaults += ["state", "action", "cameras"] + (["task"] if task_from else [])
    if state_only:
        cameras = ()
    needed = [s.source for s in (*state, *action)] + [c.source for c in cameras]
    timeline, why = _choose_timeline(contents, mapping, needed, path)
    sequence = not contents.timelines[timeline].temporal
    if sequence and fps is None:
        fps = _SEQUENCE_FPS
        notes.append(
            f"{path}: timeline {timeline} counts ticks, not time: read at {_SEQUENCE_FPS:g} ticks a second "
            "(give `fps:` in a mapping)"
        )
    if not cameras:
        notes.append(f"{path}: no camera ingested: state and action only")
    return RerunPlan(
        timeline=timeline,
        timeline_from=why,
        sequence=sequence,
        state=tuple(state),
        action=() if afs else tuple(action),
        action_from_state=afs,
        cameras=tuple(cameras),
        fps=fps,
        split=split,
        task=task,
        task_from=task_from,
        defaults=tuple(defaults),
        notes=tuple(notes),
    )
