"""Episodes from topic logs: the part every bag and MCAP reader shares.

A ROS 1 bag, a ROS 2 bag and an MCAP file differ in how they store messages, not in what a
reader must do with them: find which topics are the state, the action, the cameras and the task
(from the mapping, or from defaults that fit common recorder layouts), cut the recording into
episodes, resample every stream onto fixed-rate ticks, and report problems per episode. This
module does that over a small `Recording` interface (list topics; iterate raw messages of some
topics in log-time order; decode one; read its header stamp), which each storage implements.

Which topic becomes what (the mapping, or defaults) is decided in `topic_plan`; one numeric
topic becomes vectors in `topic_streams`; `topic_inspect` describes a unit for `robolake inspect`
(an unopenable plan included: `describe_only=True` keeps the reason in `plan_error`).

Work is split the way ingest runs it. `discover` (driver) opens each recording only to find its
episode windows: for `split: {by: gap}` and `{by: topic}` it reads log times and a boolean topic,
never the big messages. `read_tabular` (worker) decodes every topic of one window into the
episode's record (`sources.record`: each message as recorded, images aside), hashes the camera
messages' bytes (so a re-ingest recognises the episode before any image decode) and derives the
steps from the record (`topics.render`, the function `robolake align` runs later); ingest's first
pass, which only decides the content hash, reads just the topics the steps need. `read_frames`
reads the camera topics again and picks the latest frame
at or before each tick from their header stamps (read from the serialized bytes), in one pass
with one message of lookahead, and decodes only the frames that land: CompressedImage bytes
pass through unchanged, raw Images are encoded once per message, not once per tick. A
`CompressedVideo` camera is a recorded video (`topics.video`): its packets, by the same rule.

Episode windows are spans of log time; the clock used for resampling can be the header stamps.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import itertools
import logging
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    TabularEpisode,
)
from robolake.lake.sources.mapping import CameraMap, StreamMap
from robolake.lake.sources.record import RecordBuilder, log_minus_header_ns, record_notes, stream_summary
from robolake.lake.sources.registry import SourceOptions
from robolake.lake.sources.resample import (
    Stream,
    check_frame_sizes,
    resample_latest,
)
from robolake.lake.sources.topics import ros_messages as rm
from robolake.lake.sources.topics.inspect import describe_unit
from robolake.lake.sources.topics.plan import (
    Plan,
    Recording,
    TopicInfo,
    resolve_plan,
    slice_name,
    topic_key,
)
from robolake.lake.sources.topics.render import render_topic_steps, topic_kinds
from robolake.lake.sources.topics.streams import (
    NumericStream,
    nice_rate,
    robust_rate,
)
from robolake.lake.sources.topics.video import read_video
from robolake.schemas.embodiment import EmbodimentSpec

__all__ = ["TopicInfo", "Recording", "TopicLogReader"]

log = logging.getLogger(__name__)

_NS = 1_000_000_000
_EVENT_KINDS = {rm.BOOL: "bool", rm.STRING: "string"}  # message kinds kept as events (and std_msgs/Empty: trigger)


class TopicLogReader:
    """Episodes of one unit of topic logs: one or more recordings with one layout.

    Subclasses say how recordings are found (`_recordings`) and opened (`_open`).

    Args:
        root: The unit's path (a bag directory, a bag file, an MCAP file).
        format_name: Source format reported in the lake (`ros2-sqlite3`, `ros1`, `mcap-json`, ...).
        options: Mapping, embodiment, state-only, resample mode and read limits.
        describe_only: Open for `inspect`: a plan that does not resolve (no JointState, no
            camera) is kept in `plan_error` instead of raised.

    Raises:
        SourceError: the first recording cannot be opened, or the mapping does not fit it.
    """

    format_name: str

    def __init__(
        self, root: str, *, format_name: str, options: SourceOptions | None = None, describe_only: bool = False
    ):
        options = options or SourceOptions()
        self.root = os.path.abspath(root)
        self.format_name = format_name
        self.options = options
        self.mapping = options.mapping
        self.state_only = options.state_only
        self.limits = options.limits
        self._joint_names: tuple[str, ...] = ()
        self.state_dims: list[int] = []
        self.action_dims: list[int] = []
        self.measured_hz = 0.0
        self._rate_uncertainty = 0.0
        self.notes: list[str] = []  # things a user should hear that are not errors (ingest reports them)
        self.plan_error: SourceError | None = None
        self.recordings: list[tuple[str, ...]] = self._recordings()
        if not self.recordings:
            raise SourceError("empty", self.root, "no recording files found")
        self.plan: Plan | None = None
        with self.open_recording(self.recordings[0]) as rec:
            self.topic_infos = self.topics_of(rec)
            try:
                self.plan = resolve_plan(self.topic_infos, self.mapping, rec.path, state_only=self.state_only)
                self.notes += [f"{rec.path}: {n}" for n in self.plan.notes]
                self.notes += _plan_notes(self.topic_infos, self.plan, rec.path, self.state_only)
                self.state_dims, self.action_dims, self.measured_hz = self._probe(rec)
            except SourceError as e:
                if not describe_only:
                    raise
                self.plan, self.plan_error = None, e
        self.tag = options.embodiment or (
            self.mapping.embodiment
            if self.mapping and self.mapping.embodiment
            else (self._default_tag() if self.plan is not None else "unknown")
        )
        self.fps = (
            float(self.plan.fps or nice_rate(self.measured_hz, self._rate_uncertainty))
            if self.plan is not None
            else 0.0
        )
        if self.plan is not None and not self.fps > 0:
            no_rate = SourceError(
                "empty",
                self.root,
                f"{self.plan.state[0].source} has too few messages to tell its rate; give `fps:` in a mapping",
            )
            if not describe_only:
                raise no_rate
            self.plan, self.plan_error = None, no_rate
        if (
            self.plan is not None
            and self.plan.fps is None
            and abs(self.fps - self.measured_hz) > 1e-3 * self.measured_hz
        ):
            self.notes.append(
                f"{self.recordings[0][0]}: {self.plan.state[0].source} measured at {self.measured_hz:.4f} Hz; "
                f"ticks at {self.fps:g} Hz (give `fps:` in a mapping to choose)"
            )

    @property
    def resample_mode(self) -> str:
        return self.options.resample_mode

    def topics_of(self, rec: Recording) -> dict[str, TopicInfo]:
        """The recording's topics, with counts a storage's metadata got wrong counted from its messages.

        A ROS 2 bag's metadata.yaml can say a topic has 0 messages when its storage holds them
        (a recorder killed before it rewrote the file, a file edited by hand): those topics are
        counted from the storage, with a note.
        """
        topics = rec.topics()
        zero = [t for t, info in topics.items() if info.count == 0]
        if not zero:
            return topics
        counted = dict.fromkeys(zero, 0)
        for topic, _, _ in rec.messages(zero):
            counted[topic] += 1
        for t, n in counted.items():
            if n:
                topics[t] = dataclasses.replace(topics[t], count=n)
                self.notes.append(
                    f"{rec.path}: the recording's metadata says {t} has no messages but its storage holds {n}; "
                    "counted from the storage"
                )
        return topics

    def _plan(self) -> Plan:
        if self.plan is None:
            raise self.plan_error or SourceError("missing_key", self.root, "no plan for this recording")
        return self.plan

    # --- for subclasses -------------------------------------------------------------------

    def _recordings(self) -> list[tuple[str, ...]]:
        raise NotImplementedError

    def open_recording(self, paths: tuple[str, ...]) -> Recording:
        raise NotImplementedError

    def _default_tag(self) -> str:
        """A tag from the layout, so recordings of one robot share it and different widths do not:
        the joint names' common prefix (`panda_joint1..7` -> `panda`) or the state topic, then the
        state and action widths (`panda_7x8`)."""
        prefix = os.path.commonprefix(list(self._joint_names)) if len(self._joint_names) > 1 else ""
        prefix = re.sub(r"(_?joint)?[_0-9]*$", "", prefix.lower())
        plan = self._plan()
        if len(prefix) < 3:
            prefix = plan.state[0].source
        name = re.sub(r"[^a-z0-9]+", "_", prefix.lower()).strip("_") or "robot"
        s_dim = sum(self.state_dims)
        a_dim = s_dim if plan.action_from_state else sum(self.action_dims)
        return f"{name}_{s_dim}x{a_dim}"

    # --- probing --------------------------------------------------------------------------

    def _probe(self, rec: Recording) -> tuple[list[int], list[int], float]:
        """Widths of each state/action stream (its first usable message) and the rate of the first
        state stream that has more than one message (measured, not rounded)."""
        plan = self._plan()
        streams = [*plan.state, *([] if plan.action_from_state else plan.action)]
        probes: list[NumericStream | None] = []
        for s in streams:
            fixed = (
                s.names and self.topic_infos[s.source].kind == rm.JOINT_STATE
            )  # a publisher of other joints may come first
            probes.append(None if fixed else NumericStream(s, self.topic_infos[s.source], "log"))
        need = {s.source for s, p in zip(streams, probes, strict=True) if p is not None}
        clock_topics = [s.source for s in plan.state if self.topic_infos[s.source].count > 1] or [plan.state[0].source]
        clock = clock_topics[0]
        times: list[int] = []
        seen: set[str] = set()
        for topic, log_ns, raw in rec.messages(sorted(need | {clock})):
            seen.add(topic)
            if topic == clock and len(times) < 1000:
                times.append(log_ns)
            if topic in need:
                msg = rec.decode(topic, raw)
                for s, p in zip(streams, probes, strict=True):
                    if p is not None and s.source == topic and not p.groups:
                        p.add(rec, 0, msg)
            if all(p is None or p.groups for p in probes) and len(times) >= 1000:
                break
        for s, p in zip(streams, probes, strict=True):
            if s.source not in seen and (p is not None or s.source == clock):
                raise SourceError(
                    "empty", rec.path, f"mapped topic {s.source} has no messages; record it or map another topic"
                )
            if p is not None and not p.groups:
                raise SourceError(
                    "empty",
                    rec.path,
                    f"{s.label}: no message of {s.source} holds it; `robolake inspect` lists what the topic holds",
                )

        def width(s: StreamMap, p: NumericStream | None) -> int:
            if p is None:
                if s is plan.state[0]:
                    self._joint_names = tuple(s.names or ())
                return len(s.names or ())
            if s is plan.state[0] and p.names:
                self._joint_names = tuple(p.names)
            return int(p.first_row.shape[0])

        dims = [width(s, p) for s, p in zip(streams, probes, strict=True)]
        sd, ad = dims[: len(plan.state)], dims[len(plan.state) :]
        rate, self._rate_uncertainty = robust_rate(times)
        return sd, ad, rate

    # --- SourceReader ---------------------------------------------------------------------

    def spec(self) -> EmbodimentSpec:
        used: set[str] = set()
        state, start = {}, 0
        for s, d in zip(self._plan().state, self.state_dims, strict=True):
            state[slice_name(s, used)] = {"start": start, "end": start + d}
            start += d
        action, a0 = {}, 0
        if self._plan().action_from_state:
            action = {f"{k}": dict(v) for k, v in state.items()}
            a0 = start
        else:
            used_a: set[str] = set()
            for s, d in zip(self._plan().action, self.action_dims, strict=True):
                action[slice_name(s, used_a)] = {"start": a0, "end": a0 + d}
                a0 += d
        modality = {
            "state": state,
            "action": action,
            "video": {c.name: {"original_key": c.source} for c in self._plan().cameras},
        }
        return EmbodimentSpec.from_modality_json(
            modality, tag=self.tag, state_dim=start, action_dim=a0, fps=self.fps, robot_type=self.format_name
        )

    def discover(self) -> list[EpisodeRef]:
        refs: list[EpisodeRef] = []
        for i, paths in enumerate(self.recordings):
            windows: list[tuple[int, int] | None] = [None]
            problem: tuple[str, str, str] | None = None
            if self._plan().split.by != "file":
                try:
                    windows = list(self._windows(paths))
                except SourceError as e:
                    problem = (e.reason_code, e.path, e.message)
                    windows = [None]
            for w in windows:
                loc: dict[str, Any] = {"paths": list(paths), "recording": i, "window": list(w) if w else None}
                if problem:
                    loc["problem"] = list(problem)
                refs.append(
                    EpisodeRef(
                        source_uri=self.root,
                        source_format=self.format_name,
                        episode_index=len(refs),
                        embodiment=self.tag,
                        location=tuple(sorted(loc.items())),
                    )
                )
        return refs

    def _windows(self, paths: tuple[str, ...]) -> Iterator[tuple[int, int]]:
        split = self._plan().split
        with self.open_recording(paths) as rec:
            topics = rec.topics()
            if split.by == "topic":
                src = topic_key(topics, split.source or "")
                if src not in topics:
                    raise SourceError(
                        "missing_key",
                        rec.path,
                        f"split topic {split.source} is not in this recording; topics: {sorted(topics)}",
                    )
                kind = rm.kind_of(topics[src].msgtype)
                if kind == rm.STRING or rm.short_type(topics[src].msgtype).endswith("/Empty"):
                    yield from self._event_windows(rec, src, kind == rm.STRING)
                    return
                flags: list[tuple[int, bool]] = []
                for _, log_ns, raw in rec.messages([src]):
                    msg = rec.decode(src, raw)
                    flags.append((log_ns, bool(rm.to_vector(msg, "data" if kind == rm.BOOL else None)[0])))
                if not flags:
                    raise SourceError("empty", rec.path, f"split topic {src} has no messages")
                start: int | None = None
                for log_ns, on in flags:
                    if on and start is None:
                        start = log_ns
                    elif not on and start is not None:
                        yield (start, log_ns)  # the episode lasts until the flag turns false
                        start = None
                if start is not None:
                    yield (start, 2**63 - 1)
            else:  # gap, on the first state stream's log times
                src = self._plan().state[0].source
                times = [log_ns for _, log_ns, _ in rec.messages([src])]
                if not times:
                    raise SourceError("empty", rec.path, f"{src} has no messages")
                gap = int(float(split.seconds or 0) * _NS)
                begin = times[0]
                for a, b in zip(times[:-1], times[1:], strict=True):
                    if b - a > gap:
                        yield (begin, a + 1)
                        begin = b
                yield (begin, times[-1] + 1)

    @staticmethod
    def _event_windows(rec: Recording, src: str, labels: bool) -> Iterator[tuple[int, int]]:
        """Episodes cut by events: each trigger (an empty message) starts one, which lasts until the
        next; with `labels` (a phase or subtask text topic), each run of one label is one episode."""
        marks: list[tuple[int, str]] = []
        for _, log_ns, raw in rec.messages([src]):
            text = str(rm.get_field(rec.decode(src, raw), "data")) if labels else ""
            if not marks or not labels or text != marks[-1][1]:
                marks.append((log_ns, text))
        if not marks:
            raise SourceError("empty", rec.path, f"split topic {src} has no messages")
        ends = [m[0] for m in marks[1:]] + [2**63 - 1]
        for (start, _), end in zip(marks, ends, strict=True):
            yield (start, end)

    def _check_ref(self, ref: EpisodeRef) -> None:
        problem = ref.get("problem")
        if problem:
            raise SourceError(problem[0], problem[1], problem[2])

    reads_record = True  # read_tabular(ref, record=False) skips the streams the steps do not need

    def read_tabular(self, ref: EpisodeRef, *, record: bool = True) -> TabularEpisode:
        """Read one episode's record (every stream), derive its steps from it; hash its camera bytes.

        With `record=False` only the streams the steps need are read (ingest's first pass, which
        only decides the content hash); the episode's `record` then holds those alone.

        Raises:
            SourceError: a mapped topic is missing or empty, a clock runs backwards, values are
                NaN/inf or change width, the streams do not overlap.
        """
        self._check_ref(ref)
        paths = tuple(ref.get("paths"))
        window = ref.get("window")
        start_ns, stop_ns = (window[0], window[1]) if window else (None, None)
        plan = self._plan()
        with self.open_recording(paths) as rec:
            topics = rec.topics()
            if paths != self.recordings[0]:
                topics = self.topics_of(rec)
                resolve_plan(topics, self.mapping, rec.path, state_only=self.state_only)  # same topics in this one?
            for t in plan.numeric_topics() + [c.source for c in plan.cameras]:
                if t not in topics:
                    raise SourceError(
                        "missing_key", rec.path, f"topic {t} is not in this recording; topics here: {sorted(topics)}"
                    )
            # (a topic's count is not checked here: storage metadata can say 0 for a topic it holds)
            cams = {c.source for c in plan.cameras}
            kept, left_out = self._record_topics(topics, plan)
            mapped = set(plan.numeric_topics()) | {plan.task_from, plan.split.source} - {None}
            if not record:
                kept = {t: k for t, k in kept.items() if t in mapped}
            undecodable: set[str] = set()
            builder = RecordBuilder(budget=self.limits.max_read_bytes, path=rec.path)
            cam_hash = {c.source: hashlib.sha256() for c in plan.cameras}
            task_text: str | None = plan.task
            wanted = sorted(set(kept) | cams)
            header = plan.clock == "header"
            for topic, log_ns, raw in rec.messages(wanted, start_ns, stop_ns):
                if topic in cams:
                    stamp = rec.image_stamp_ns(topic, raw) if header else None
                    builder.add_frame(
                        topic,
                        t_ns=stamp or log_ns,
                        log_ns=log_ns,
                        msgtype=topics[topic].msgtype,
                        clock="header" if stamp else "log",
                        path=rec.path,
                    )
                    cam_hash[topic].update(rec.raw_bytes(raw))
                    continue
                if topic in undecodable:
                    continue
                try:
                    msg = rec.decode(topic, raw)
                except Exception as e:  # noqa: BLE001 - an unmapped topic that cannot be read is left out, said
                    if topic in mapped:
                        raise
                    undecodable.add(topic)
                    left_out[topic] = f"cannot be decoded ({type(e).__name__}: {e})"
                    continue
                stamp = rm.header_stamp_ns(msg) if header else None
                builder.add(
                    topic,
                    msg,
                    t_ns=stamp or log_ns,
                    log_ns=log_ns,
                    msgtype=topics[topic].msgtype,
                    clock="header" if stamp else "log",
                    path=rec.path,
                    event_kind=kept[topic],
                    nbytes=len(rec.raw_bytes(raw)),
                )
            if plan.task_from and task_text is None:
                task_text = self._task_text(rec, plan.task_from, start_ns, stop_ns)
            path = rec.path
        kept_record = builder.build()
        rendered = render_topic_steps(
            kept_record,
            plan,
            topic_kinds(topics, plan),
            fps=self.fps,
            mode=self.resample_mode,
            path=path,
            dims=self.state_dims + self.action_dims,
            first_recording=self.recordings[0][0],
        )
        aligned, t0 = rendered.aligned, rendered.t0_ns
        tasks = (task_text or "",)
        task_index = np.zeros(len(aligned.timestamps), np.int32)
        digests = tuple(f"{c.name}:{cam_hash[c.source].hexdigest()}" for c in plan.cameras)
        metadata: dict[str, Any] = {
            "recording": list(paths),
            "t0_ns": int(t0),
            "log_window_ns": window,
            "clock": {label: ("header" if h else "log") for label, h in rendered.header_clock.items()},
            "plan": plan.describe(),
            "tasks": list(tasks),
            **aligned.metadata,
            "rate": {
                "clock": plan.state[0].source,
                "measured_hz": self.measured_hz,
                "fps": self.fps,
                "from": "mapping fps" if plan.fps else "measured",
            },
        }
        metadata["record"] = {
            "streams": stream_summary(kept_record),
            "source_bytes": builder.source_bytes,
            "log_minus_header_ns": log_minus_header_ns(kept_record),
            **({"left_out": left_out} if left_out else {}),
        }
        metadata["composition"] = {"kind": "topics", "plan": plan.to_json(), "topics": topic_kinds(topics, plan)}
        notes = [f"{path}: {n}" for n in aligned.metadata.get("notes", ())] + record_notes(kept_record, path)
        unread = {t: why for t, why in left_out.items() if "mapped as a camera" not in why}
        if unread:
            notes.append(
                f"{path}: not kept in the record: " + "; ".join(f"{t} ({why})" for t, why in sorted(unread.items()))
            )
        if notes:
            metadata["notes"] = notes
        return TabularEpisode.of(
            ref=ref,
            state=aligned.state,
            action=aligned.action,
            timestamps=aligned.timestamps,
            task_index=task_index,
            tasks=tasks,
            fps=self.fps,
            media_digests=digests,
            metadata=metadata,
            record=kept_record,
        )

    def _record_topics(self, topics: dict[str, TopicInfo], plan: Plan) -> tuple[dict[str, str | None], dict[str, str]]:
        """Topics the record keeps (-> event kind, None for numeric), and those it leaves out with why.

        Every topic but images is kept unless `--streams` narrows it; the mapped ones always are.
        """
        mapped = set(plan.numeric_topics()) | ({plan.task_from} if plan.task_from else set())
        if plan.split.by == "topic" and plan.split.source:
            mapped.add(plan.split.source)
        patterns = self.options.streams
        kept: dict[str, str | None] = {}
        left: dict[str, str] = {}
        for name, info in topics.items():
            if info.kind in (rm.IMAGE, rm.COMPRESSED_IMAGE):
                if name not in {c.source for c in plan.cameras}:
                    what = "video" if rm.is_video(info.msgtype) else "image"
                    left[name] = f"{what} topic not mapped as a camera"
                continue
            if patterns is not None and name not in mapped and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
                left[name] = "not matched by --streams"
                continue
            kept[name] = _EVENT_KINDS.get(info.kind) or (
                "trigger" if rm.short_type(info.msgtype).rsplit("/", 1)[-1] == "Empty" else None
            )
        return kept, left

    @staticmethod
    def _task_text(rec: Recording, topic: str, start_ns: int | None, stop_ns: int | None) -> str:
        """The instruction in force for a window: the last one published at or before its start
        (instructions are often latched once per recording), else the first inside it."""
        text: str | None = None
        for _, log_ns, raw in rec.messages([topic], None, stop_ns):
            if text is not None and start_ns is not None and log_ns > start_ns:
                break
            try:
                text = str(rm.get_field(rec.decode(topic, raw), "data"))
            except rm.FieldError as e:
                raise SourceError("missing_key", rec.path, f"task topic {topic}: {e}") from None
            if start_ns is None:
                break
        return text or ""

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Each camera's frame at each tick: the latest at or before it, encoded once per message.

        Raises:
            SourceError: a frame is not JPEG/PNG or not a supported raw encoding; the image size
                changes mid-episode.
        """
        from robolake.lake.media.frames import encode_raw

        layout = self.options.video_frames

        ref = episode.ref
        paths = tuple(ref.get("paths"))
        window = ref.get("window")
        start_ns, stop_ns = (window[0], window[1]) if window else (None, None)
        t0 = int(episode.metadata["t0_ns"])
        ticks = np.asarray(episode.timestamps, dtype=np.float64)
        with self.open_recording(paths) as rec:
            topics = rec.topics()
            kinds = {t: info.kind for t, info in topics.items()}
            for cam in self._plan().cameras:
                if rm.is_video(topics[cam.source].msgtype):
                    notes: list[str] = []
                    yield dataclasses.replace(
                        read_video(
                            rec,
                            cam,
                            window=(start_ns, stop_ns),
                            ticks=ticks,
                            t0_ns=t0,
                            header_clock=self._plan().clock == "header",
                            notes=notes,
                        ),
                        camera=cam.name,
                    )
                    episode.metadata.setdefault("notes", []).extend(notes)
                    continue
                # One pass with one message of lookahead: message i is the latest at or before some
                # tick iff a tick falls in [stamp_i, stamp_i+1) (the first also takes earlier ticks,
                # the last every later one), the rule of `resample_latest`, checked below.
                stamps: list[float] = []
                encoded: dict[int, tuple[bytes, str, tuple[int, int]]] = {}
                pending: tuple[int, str, Any] | None = None
                for topic, log_ns, raw in itertools.chain(
                    rec.messages([cam.source], start_ns, stop_ns), [("", 0, None)]
                ):
                    last = raw is None
                    if not last:
                        stamp = rec.image_stamp_ns(topic, raw) if self._plan().clock == "header" else None
                        s_rel = ((stamp if stamp else log_ns) - t0) / _NS
                    if pending is not None and _lands(ticks, pending[0], stamps[-1], np.inf if last else s_rel):
                        encoded[pending[0]] = self._encode(
                            rec,
                            cam,
                            kinds[cam.source],
                            pending[1],
                            pending[2],
                            pending[0],
                            lambda rgb: encode_raw(rgb, layout),
                        )
                    if not last:
                        stamps.append(s_rel)
                        pending = (len(stamps) - 1, topic, raw)
                index = resample_latest(
                    Stream(cam.source, np.asarray(stamps), np.zeros((len(stamps), 0)), rec.path), ticks
                )
                missing = set(index.tolist()) - set(encoded)
                if not stamps or missing:
                    raise SourceError(
                        "frame_count",
                        rec.path,
                        f"camera {cam.name!r}: {cam.source} holds {len(stamps)} messages in the episode window but "
                        f"{len(missing)} frames the episode needs are missing; "
                        "the recording changed since it was checked",
                    )
                codecs = {encoded[i][1] for i in set(index.tolist())}
                if len(codecs) > 1:
                    raise SourceError(
                        "corrupt_video",
                        rec.path,
                        f"camera {cam.name!r} mixes {sorted(codecs)} frames; map one stream per codec",
                    )
                h, w = check_frame_sizes([encoded[i][2] for i in index.tolist()], cam.name, rec.path)
                yield EncodedFrames(
                    camera=cam.name,
                    images=tuple(encoded[i][0] for i in index.tolist()),
                    encoding=codecs.pop(),
                    height=h,
                    width=w,
                )

    @staticmethod
    def _encode(
        rec: Recording, cam: CameraMap, kind: str, topic: str, raw: Any, i: int, encode_frame: Any
    ) -> tuple[bytes, str, tuple[int, int]]:
        """(bytes, codec, (height, width)) of one camera message: recorded JPEG/PNG as is, raw pixels through
        `encode_frame` (-> (bytes, encoding): `lake.codecs.encode_raw`, lossless in the record)."""
        msg = rec.decode(topic, raw)
        try:
            if kind == rm.COMPRESSED_IMAGE:
                data, codec = rm.compressed_image(msg)
                return data, codec, rm.image_size(data)
            rgb = rm.image_rgb(msg)
            data, encoding = encode_frame(rgb)
            return data, encoding, (int(rgb.shape[0]), int(rgb.shape[1]))
        except (rm.FieldError, OSError) as e:
            raise SourceError(
                "corrupt_video", rec.path, f"camera {cam.name!r} ({cam.source}) message {i}: {e}"
            ) from None

    def inspect(self) -> dict[str, Any]:
        """Every topic of each recording (type, count, exact rate, shape, span, role) and a
        suggested mapping; a recording whose plan does not resolve is described all the same."""
        return describe_unit(self)


def _plan_notes(topics: dict[str, TopicInfo], plan: Plan, path: str, state_only: bool) -> list[str]:
    """What the defaults decided that a user may not expect."""
    notes = []
    if plan.action_from_state and "action" in plan.defaults:
        notes.append(f"{path}: no command topic (named like command/cmd/action/target); action = state one tick ahead")
    if "cameras" in plan.defaults and not state_only:
        used = {c.source for c in plan.cameras}
        left = [
            t
            for t, i in sorted(topics.items())
            if i.kind in (rm.IMAGE, rm.COMPRESSED_IMAGE) and t not in used and i.count > 1
        ]
        if left:
            notes.append(
                f"{path}: image topics not used as cameras by default (depth, or raw twin of a /compressed topic): "
                f"{', '.join(left)}; map them under `cameras:` to include them"
            )
    if not plan.cameras:
        notes.append(f"{path}: no camera ingested: state and action only")
    return notes


def _lands(ticks: np.ndarray, i: int, lo: float, hi: float) -> bool:
    """Whether message i, stamped `lo` with the next one at `hi`, is the latest at or before some tick."""
    a = int(np.searchsorted(ticks, lo, side="left")) if i > 0 else 0
    return int(np.searchsorted(ticks, hi, side="left")) > a
