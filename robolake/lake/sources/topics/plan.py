"""Which recorded topic becomes what: the mapping where it speaks, defaults elsewhere.

Defaults, used where the mapping says nothing (or there is no mapping):

- state: the positions of the first `JointState` topic whose name does not look like a command;
- action: the first numeric topic named like a command (`command`, `cmd`, `action`, `target`,
  `goal`); without one, the state one tick ahead (`action_from_state`, recorded in metadata);
- cameras: every `Image` / `CompressedImage` topic with two messages or more, named after its
  topic (`/wrist/image_raw` -> `wrist`), except depth topics, and only the `/compressed` one of a
  raw + compressed pair; none with `--state-only`, none with `cameras: {}` in the mapping;
- task: a `String` topic named like `instruction`/`task`/`prompt`, else empty;
- clock: `header.stamp` where a topic's messages carry one, else the log time;
- fps: the rate of the first state stream; split: one episode per recording.

A plan is resolved once per reader, on the driver, against the first recording's topics; a
mapping that names a topic the recording lacks fails here, naming what exists. What the defaults
left out is said in `Plan.notes`, and `topic_roles` says, per topic, what an ingest does with it
and why (for `robolake inspect`).
"""

from __future__ import annotations

import abc
import dataclasses
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.mapping import CameraMap, Mapping, SplitMap, StreamMap, check_sources
from robolake.lake.sources.topics import ros_messages as rm

__all__ = [
    "TopicInfo",
    "Plan",
    "resolve_plan",
    "topic_roles",
    "is_passive",
    "topic_key",
    "slice_name",
    "COMMAND_PATTERN",
    "TASK_PATTERN",
    "is_metadata",
]

COMMAND_PATTERN = re.compile(r"(command|cmd|action|target|goal|setpoint)", re.IGNORECASE)
TASK_PATTERN = re.compile(r"(instruction|task|prompt|language)", re.IGNORECASE)
# what describes the recording rather than the robot: device info (RealSense's `/device_0/info`,
# KeyValue), calibration (`camera_info`), static transforms, diagnostics, logs, parameters
_METADATA_TOPIC = re.compile(
    r"(^|/)(info|camera_info|tf_static|diagnostics\w*|rosout\w*|parameter_events|file_version|metadata|"
    r"robot_description|options?)(/|$)",
    re.IGNORECASE,
)
_METADATA_TYPE = re.compile(
    r"/(KeyValue|Diagnostic\w*|CameraInfo|StreamInfo|ImuInfo|Extrinsics|Log|ParameterEvent|Clock)$"
)


@dataclass(frozen=True, kw_only=True)
class TopicInfo:
    """One topic of a recording.

    Attributes:
        name: Topic name.
        msgtype: Message type (`sensor_msgs/msg/JointState`, a JSON schema title, ...).
        count: Messages recorded.
        kind: What a reader can do with it (`ros_messages.kind_of`).
        encoding: Serialization (`cdr`, `ros1`, `json`).
    """

    name: str
    msgtype: str
    count: int
    kind: str
    encoding: str = ""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What becomes what, resolved against one recording's topics.

    Attributes:
        state: State streams, in order.
        action: Action streams (empty with action_from_state).
        action_from_state: Action = state one tick ahead.
        cameras: Camera streams.
        task: Literal instruction (None: from `task_from`, or empty).
        task_from: String topic holding the instruction.
        clock: header or log.
        fps: Target rate (None: the first state stream's).
        split: How recordings split into episodes.
        defaults: Which parts came from defaults rather than the mapping (for metadata).
        notes: What the plan left out that a user may expect (cameras dropped and why).
    """

    state: tuple[StreamMap, ...]
    action: tuple[StreamMap, ...]
    action_from_state: bool
    cameras: tuple[CameraMap, ...]
    task: str | None
    task_from: str | None
    clock: str
    fps: float | None
    split: SplitMap
    defaults: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def numeric_topics(self) -> list[str]:
        return list(dict.fromkeys(s.source for s in (*self.state, *self.action)))

    def to_json(self) -> dict[str, Any]:
        """Everything `from_json` needs to rebuild the plan (kept in an episode's metadata, so that
        `robolake align` derives steps from the record the way ingest did)."""
        return {
            "state": [dataclasses.asdict(s) for s in self.state],
            "action": [dataclasses.asdict(s) for s in self.action],
            "action_from_state": self.action_from_state,
            "cameras": [dataclasses.asdict(c) for c in self.cameras],
            "task": self.task,
            "task_from": self.task_from,
            "clock": self.clock,
            "fps": self.fps,
            "split": dataclasses.asdict(self.split),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Plan:
        def stream(x: dict[str, Any]) -> StreamMap:
            return StreamMap(**{**x, "names": tuple(x["names"]) if x.get("names") is not None else None})

        return cls(
            state=tuple(stream(x) for x in d["state"]),
            action=tuple(stream(x) for x in d["action"]),
            action_from_state=bool(d["action_from_state"]),
            cameras=tuple(CameraMap(**x) for x in d["cameras"]),
            task=d.get("task"),
            task_from=d.get("task_from"),
            clock=str(d["clock"]),
            fps=d.get("fps"),
            split=SplitMap(**d["split"]),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "state": [s.label + (f"[{','.join(s.names)}]" if s.names else "") for s in self.state],
            "action": "state one tick ahead" if self.action_from_state else [s.label for s in self.action],
            "cameras": {c.name: c.source for c in self.cameras},
            "task": self.task if self.task is not None else (f"from {self.task_from}" if self.task_from else ""),
            "clock": self.clock,
            "fps": self.fps,
            "split": {
                "by": self.split.by,
                **({"source": self.split.source} if self.split.source else {}),
                **({"seconds": self.split.seconds} if self.split.seconds else {}),
            },
            "defaults": list(self.defaults),
        }


def topic_key(topics: dict[str, TopicInfo], source: str) -> str:
    """The recording's own spelling of a mapped topic (`joint_states` matches `/joint_states`)."""
    if source in topics:
        return source
    for name in topics:
        if name.lstrip("/") == source.lstrip("/"):
            return name
    return source


def resolve_plan(topics: dict[str, TopicInfo], mapping: Mapping | None, path: str, *, state_only: bool = False) -> Plan:
    """The plan for a recording: the mapping where it speaks, defaults elsewhere.

    Raises:
        SourceError: a mapped topic is missing (`missing_key`, naming what exists), or no default
            fits (no JointState topic for the state, no camera topic without `state_only`).
    """
    listed = ", ".join(f"{t.name} ({rm.short_type(t.msgtype)})" for t in sorted(topics.values(), key=lambda x: x.name))
    defaults: list[str] = []
    notes: list[str] = []
    if mapping is not None:
        check_sources(mapping, topics, path)

        def fix(s: StreamMap) -> StreamMap:
            return StreamMap(
                source=topic_key(topics, s.source),
                field=s.field,
                names=s.names,
                stamps=s.stamps,
                child_frame=s.child_frame,
            )

        state = tuple(fix(s) for s in mapping.state)
        action = tuple(fix(s) for s in mapping.action)
        cameras = tuple(CameraMap(name=c.name, source=topic_key(topics, c.source)) for c in mapping.cameras)
        if not mapping.cameras_given:
            cameras = _default_cameras(topics, notes, state_only)
            defaults.append("cameras")
        single = [c for c in cameras if topics[c.source].count == 1]
        for c in single:
            notes.append(
                f"camera {c.name!r} ({c.source}) has a single message: a snapshot, not a camera; ingesting without it"
            )
        cameras = tuple(c for c in cameras if c not in single)
        split = mapping.split
        if split.by == "topic" and split.source:
            split = SplitMap(by="topic", source=topic_key(topics, split.source))
        task_from = topic_key(topics, mapping.task_from) if mapping.task_from else None
        task = mapping.task
        if task is None and task_from is None:
            task_from = _default_task_topic(topics)
        # `cameras: {}` asks for none; a camera left out for having one frame is said in a note
        no_camera_ok = mapping.cameras_given or bool(single) or any("single message" in n for n in notes)
        plan = Plan(
            state=state,
            action=action,
            action_from_state=mapping.action_from_state,
            cameras=cameras,
            task=task,
            task_from=task_from,
            clock=mapping.clock,
            fps=mapping.fps,
            split=split,
            defaults=tuple(defaults),
            notes=tuple(notes),
        )
    else:
        joint = [t for t in sorted(topics) if topics[t].kind == rm.JOINT_STATE and not COMMAND_PATTERN.search(t)]
        if not joint:
            raise SourceError(
                "missing_key",
                path,
                f"no sensor_msgs/JointState topic to take the state from; give a mapping (--map) with `state:` "
                f"naming topics and fields (`robolake inspect {path} --suggest-map` writes one to start from); "
                f"topics here: {listed or 'none'}",
            )
        state = (StreamMap(source=joint[0], field="position"),)
        commands = [
            t
            for t in sorted(topics)
            if COMMAND_PATTERN.search(t) and topics[t].kind in (rm.JOINT_STATE, rm.NUMERIC) and topics[t].count
        ]
        action = (StreamMap(source=commands[0], field=None),) if commands else ()
        cameras = _default_cameras(topics, notes, state_only)
        no_camera_ok = any(topics[t].kind in (rm.IMAGE, rm.COMPRESSED_IMAGE) and topics[t].count == 1 for t in topics)
        plan = Plan(
            state=state,
            action=action,
            action_from_state=not commands,
            cameras=cameras,
            task=None,
            task_from=_default_task_topic(topics),
            clock="header",
            fps=None,
            split=SplitMap(),
            defaults=("state", "action", "cameras", "task", "clock", "fps", "split"),
            notes=tuple(notes),
        )
    if not plan.cameras and not state_only and not no_camera_ok:
        raise SourceError(
            "missing_video",
            path,
            f"no camera: the recording has no sensor_msgs/Image or CompressedImage topic (topics: {listed or 'none'}); "
            "map `cameras:` to image topics, or pass --state-only (or `cameras: {}` in a mapping) "
            "to ingest it without frames",
        )
    for c in plan.cameras:
        kind = topics[c.source].kind if c.source in topics else ""
        if kind not in (rm.IMAGE, rm.COMPRESSED_IMAGE):
            raise SourceError(
                "shape",
                path,
                f"camera {c.name!r} maps {c.source!r} "
                f"of type {topics[c.source].msgtype if c.source in topics else '?'}, "
                "not an Image or CompressedImage; map an image topic",
            )
    return plan


def is_metadata(info: TopicInfo) -> bool:
    """Whether a topic describes the recording (device info, calibration, static transforms,
    diagnostics, logs) rather than the robot's motion: never a state or an action by default."""
    return bool(_METADATA_TOPIC.search(info.name) or _METADATA_TYPE.search(rm.short_type(info.msgtype)))


def topic_roles(topics: dict[str, TopicInfo], plan: Plan | None, why_no_plan: str = "") -> dict[str, str]:
    """What an ingest does with each topic, and why, in a few words (for `robolake inspect`)."""
    roles: dict[str, str] = {}
    if plan is not None:
        for i, s in enumerate(plan.state):
            roles.setdefault(
                s.source,
                f"state[{i}]"
                + (f" ({s.field})" if s.field else "")
                + (f" frame {s.child_frame}" if s.child_frame else ""),
            )
        for i, s in enumerate(plan.action):
            roles.setdefault(s.source, f"action[{i}]" + (f" ({s.field})" if s.field else ""))
        for c in plan.cameras:
            roles.setdefault(c.source, f"camera {c.name}")
        if plan.task_from:
            roles.setdefault(plan.task_from, "task (instruction text)")
        if plan.split.by == "topic" and plan.split.source:
            roles.setdefault(plan.split.source, "split (episode flag)")
    used_cams = {c.source for c in plan.cameras} if plan is not None else set()
    for name, info in sorted(topics.items()):
        if name in roles:
            continue
        if plan is None:
            roles[name] = f"not ingested: {why_no_plan}" if why_no_plan else "not ingested"
        elif info.count == 0:
            roles[name] = "ignored: no messages"
        elif is_metadata(info) and info.kind not in (rm.IMAGE, rm.COMPRESSED_IMAGE):
            roles[name] = "in the record only: metadata (device info, calibration, static TF, diagnostics)"
        elif info.kind in (rm.IMAGE, rm.COMPRESSED_IMAGE):
            if info.count == 1:
                roles[name] = "ignored: a single image (a camera needs two frames or more)"
            elif "depth" in name.lower():
                roles[name] = "ignored: depth image (map it under cameras: to include it)"
            elif f"{name.rstrip('/')}/compressed" in used_cams:
                roles[name] = f"ignored: raw twin of {name.rstrip('/')}/compressed"
            else:
                roles[name] = "ignored: image topic not mapped (add it under cameras:)"
        elif info.kind == rm.TF:
            roles[name] = "in the record only: TF (in the steps: {source: " + name + ", child_frame: FRAME})"
        elif info.kind in (rm.JOINT_STATE, rm.NUMERIC):
            roles[name] = (
                "in the record only: numeric, not in the steps (add it under state: or action:, or give samples "
                "its history with pack --history)"
            )
        elif info.kind == rm.STRING:
            roles[name] = "event (text), not named like an instruction (task_from: to use it)"
        elif info.kind == rm.BOOL:
            roles[name] = "event (flag); split: {by: topic, source: ...} cuts episodes on it"
        else:
            roles[name] = "in the record only"
    return roles


PASSIVE_ROLES = ("ignored", "in the record only", "event", "not ingested")  # roles where no mapping option applies


def is_passive(role: str) -> bool:
    """Whether a topic's role leaves it out of the steps (so no `with --suggest-map` applies to it)."""
    return role.startswith(PASSIVE_ROLES)


def _default_cameras(topics: dict[str, TopicInfo], notes: list[str], state_only: bool) -> tuple[CameraMap, ...]:
    """Every colour image topic of two messages or more. Depth streams (`depth` in the name;
    often 16-bit or compressedDepth) are left to the mapping, and where image_transport recorded
    both a raw topic and its `/compressed` republication, the compressed one is kept (it passes
    through). A single image is a snapshot, not a camera: left out, with a note."""
    images = [t for t in sorted(topics) if topics[t].kind in (rm.IMAGE, rm.COMPRESSED_IMAGE) and topics[t].count]
    if state_only:
        if images:
            notes.append(f"--state-only: image topics {', '.join(images)} not ingested")
        return ()
    out: list[CameraMap] = []
    used: set[str] = set()
    for t in images:
        if "depth" in t.lower() or (
            f"{t.rstrip('/')}/compressed" in topics and topics[f"{t.rstrip('/')}/compressed"].count
        ):
            continue
        if topics[t].count == 1:
            notes.append(f"image topic {t} has a single message: a snapshot, not a camera; ingesting without it")
            continue
        name = base = rm.camera_name(t)
        i = 2
        while name in used:
            name, i = f"{base}_{i}", i + 1
        used.add(name)
        out.append(CameraMap(name=name, source=t))
    return tuple(out)


def _default_task_topic(topics: dict[str, TopicInfo]) -> str | None:
    found = [t for t in sorted(topics) if topics[t].kind == rm.STRING and TASK_PATTERN.search(t) and topics[t].count]
    return found[0] if found else None


def slice_name(s: StreamMap, used: set[str]) -> str:
    base = re.sub(
        r"[^a-z0-9]+", "_", (s.source.strip("/") + ("_" + s.field if s.field and s.field != "position" else "")).lower()
    ).strip("_")
    base = base or "stream"
    name, i = base, 2
    while name in used:
        name, i = f"{base}_{i}", i + 1
    used.add(name)
    return name


class Recording(abc.ABC):
    """One recording opened for reading (a bag, a split bag, an MCAP file). Use as a context manager.

    Implementations raise SourceError (`corrupt_file`) for unreadable storage, and
    (`missing_type`) when a topic's message definition is unknown.
    """

    path: str

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicInfo]: ...

    @abc.abstractmethod
    def messages(
        self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None
    ) -> Iterator[tuple[str, int, Any]]:
        """(topic, log time ns, raw message) in log-time order, log time in [start_ns, stop_ns)."""

    @abc.abstractmethod
    def decode(self, topic: str, raw: Any) -> Any: ...

    def image_stamp_ns(self, topic: str, raw: Any) -> int | None:
        """Header stamp of an image message; implementations may read it without decoding pixels."""
        return rm.header_stamp_ns(self.decode(topic, raw))

    def raw_bytes(self, raw: Any) -> bytes:
        return bytes(raw)

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
