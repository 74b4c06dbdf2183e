"""Episodes from topic logs: the part every bag and MCAP reader shares.

A ROS 1 bag, a ROS 2 bag and an MCAP file differ in how they store messages, not in what a
reader must do with them: find which topics are the state, the action, the cameras and the task
(from the mapping, or from defaults that fit common recorder layouts), cut the recording into
episodes, resample every stream onto fixed-rate ticks, and report problems per episode. This
module does that over a small `Recording` interface (list topics; iterate raw messages of some
topics in log-time order; decode one; read its header stamp), which each storage implements.

Which topic becomes what (the mapping, or defaults) is decided in `topic_plan`.

Work is split the way ingest runs it. `discover` (driver) opens each recording only to find its
episode windows: for `split: {by: gap}` and `{by: topic}` it reads log times and a boolean topic,
never the big messages. `read_tabular` (worker) decodes the numeric topics of one window, hashes
the camera messages' bytes (so a re-ingest recognises the episode before any image decode) and
resamples (`resample.align`). `read_frames` reads the camera topics again and picks the latest frame
at or before each tick from their header stamps (read from the serialized bytes), in one pass
with one message of lookahead, and decodes only the frames that land: CompressedImage bytes
pass through unchanged, raw Images are encoded once per message, not once per tick.

Episode windows are spans of log time; the clock used for resampling can be the header stamps.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import itertools
import logging
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from robolake.lake.sources import ros_messages as rm
from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    TabularEpisode,
    content_hash,
)
from robolake.lake.sources.mapping import CameraMap, Mapping, StreamMap
from robolake.lake.sources.resample import (
    Stream,
    align,
    check_frame_sizes,
    resample_latest,
    stack_rows,
)
from robolake.lake.sources.topic_plan import TopicInfo, resolve_plan, slice_name, topic_key
from robolake.schemas.embodiment import EmbodimentSpec

__all__ = ["TopicInfo", "Recording", "TopicLogReader"]

log = logging.getLogger(__name__)

_NS = 1_000_000_000


class Recording(abc.ABC):
    """One recording opened for reading (a bag, a split bag, an MCAP file). Use as a context manager.

    Implementations raise SourceError (`corrupt_file`) for unreadable storage, and
    (`missing_type`) when a topic's message definition is unknown.
    """

    path: str

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicInfo]: ...

    @abc.abstractmethod
    def messages(self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None) -> Iterator[tuple[str, int, Any]]:
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


class _Numeric:
    """Reads one numeric stream: decode, stamp, vector (joints ordered by name).

    A JointState topic can be fed by several publishers with different joints (an arm driver
    and a gripper driver both on `/joint_states`). With `names:` in the mapping, each message
    fills the named joints it carries: messages are grouped by which of them they hold, each
    group becomes its own stream (resampled on its own times), and the groups' columns are put
    back in `names` order after alignment.
    """

    def __init__(self, s: StreamMap, info: TopicInfo, clock: str):
        self.s, self.info, self.clock = s, info, clock
        self.field = s.field
        self.names: tuple[str, ...] | None = s.names
        self.groups: dict[tuple[str, ...], tuple[list[int], list[np.ndarray]]] = {}
        self.count = 0
        self.header_clock: bool | None = None

    @property
    def t(self) -> list[int]:
        return [t for ts, _ in self.groups.values() for t in ts[:1]]

    @property
    def first_row(self) -> np.ndarray:
        return next(iter(self.groups.values()))[1][0]

    def add(self, rec: Recording, log_ns: int, msg: Any) -> None:
        if self.field is None:
            self.field = rm.default_field(self.info.msgtype, msg)
        key: tuple[str, ...] = ()
        try:
            if self.info.kind == rm.JOINT_STATE:
                have = tuple(rm.get_field(msg, "name"))
                if self.names is None:
                    self.names = have
                if self.s.names is None and set(have) != set(self.names):
                    several = not set(have) & set(self.names)
                    raise SourceError(
                        "shape", rec.path,
                        f"{self.s.source}: the JointState joints change at message {self.count} "
                        f"({list(self.names)} -> {list(have)}); "
                        + ("several publishers share the topic: list the joints to keep under `names:` in the mapping"
                           if several else "select fixed joints with `names:` in the mapping or split the recording where the robot changed"),
                    )
                key = tuple(n for n in self.names if n in have)
                if not key:
                    self.count += 1
                    return  # a publisher of joints the mapping does not want
                row = rm.joint_vector(msg, self.field or "position", key)
            else:
                row = rm.to_vector(msg, self.field)
        except rm.FieldError as e:
            raise SourceError("missing_key", rec.path, f"{self.s.source} ({rm.short_type(self.info.msgtype)}) message {self.count}: {e}") from None
        stamp = rm.header_stamp_ns(msg) if self.clock == "header" else None
        if self.header_clock is None:
            self.header_clock = stamp is not None
        ts, rows = self.groups.setdefault(key, ([], []))
        ts.append(stamp if (self.header_clock and stamp is not None) else log_ns)
        rows.append(row)
        self.count += 1

    def streams(self, t0: int, path: str) -> list[tuple[Stream, list[int]]]:
        """One stream per group of messages, with the output columns (of this stream's vector) it fills.

        Raises:
            SourceError: no messages; a named joint no message carries; a width change.
        """
        if not self.groups:
            raise SourceError("empty", path, f"{self.s.source} has no messages in this episode; record it or drop it from the mapping")
        if list(self.groups) == [()] or self.names is None:
            ((ts, rows),) = self.groups.values()
            return [(Stream(self.s.source, _rel(ts, t0), stack_rows(rows, self.s.source, path), path), [])]
        missing = [n for n in self.names if not any(n in k for k in self.groups)]
        if missing:
            raise SourceError("missing_key", path, f"{self.s.source}: no message carries joints {missing}; joints there: "
                              f"{sorted({n for k in self.groups for n in k})}")
        col = {n: i for i, n in enumerate(self.names)}
        out = []
        for key, (ts, rows) in self.groups.items():
            name = self.s.source if len(self.groups) == 1 else f"{self.s.source}[{','.join(key)}]"
            out.append((Stream(name, _rel(ts, t0), stack_rows(rows, name, path), path), [col[n] for n in key]))
        return out


def _rel(ns: Sequence[int], t0: int) -> np.ndarray:
    return (np.asarray(ns, dtype=np.int64) - t0).astype(np.float64) / _NS


class TopicLogReader:
    """Episodes of one unit of topic logs: one or more recordings with one layout.

    Subclasses say how recordings are found (`_recordings`) and opened (`_open`).

    Args:
        root: The unit's path (a bag directory, a bag file, an MCAP file).
        format_name: Source format reported in the lake (`ros2-sqlite3`, `ros1`, `mcap-json`, ...).
        mapping: The user's mapping, if any.
        embodiment: Forced embodiment tag.
        state_only: Accept recordings without a camera topic.

    Raises:
        SourceError: the first recording cannot be opened, or the mapping does not fit it.
    """

    format_name: str

    def __init__(self, root: str, *, format_name: str, mapping: Mapping | None = None, embodiment: str | None = None,
                 state_only: bool = False):
        self.root = os.path.abspath(root)
        self.format_name = format_name
        self.mapping = mapping
        self.state_only = state_only
        self._joint_names: tuple[str, ...] = ()
        self.notes: list[str] = []  # things a user should hear that are not errors (ingest reports them)
        self.recordings: list[tuple[str, ...]] = self._recordings()
        if not self.recordings:
            raise SourceError("empty", self.root, "no recording files found")
        with self._open(self.recordings[0]) as rec:
            self._topics = rec.topics()
            self.plan = resolve_plan(self._topics, mapping, rec.path, state_only=state_only)
            self.notes += _plan_notes(self._topics, self.plan, rec.path)
            self._state_dims, self._action_dims, first_t = self._probe(rec)
        self.tag = embodiment or (mapping.embodiment if mapping and mapping.embodiment else self._default_tag())
        self.fps = float(self.plan.fps or first_t or 0.0)
        if not self.fps > 0:
            raise SourceError("empty", self.root, f"{self.plan.state[0].source} has too few messages to tell its rate; give `fps:` in a mapping")

    # --- for subclasses -------------------------------------------------------------------

    def _recordings(self) -> list[tuple[str, ...]]:
        raise NotImplementedError

    def _open(self, paths: tuple[str, ...]) -> Recording:
        raise NotImplementedError

    def _default_tag(self) -> str:
        """A tag from the layout, so recordings of one robot share it and different widths do not:
        the joint names' common prefix (`panda_joint1..7` -> `panda`) or the state topic, then the
        state and action widths (`panda_7x8`)."""
        prefix = os.path.commonprefix(list(self._joint_names)) if len(self._joint_names) > 1 else ""
        prefix = re.sub(r"(_?joint)?[_0-9]*$", "", prefix.lower())
        if len(prefix) < 3:
            prefix = self.plan.state[0].source
        name = re.sub(r"[^a-z0-9]+", "_", prefix.lower()).strip("_") or "robot"
        s_dim = sum(self._state_dims)
        a_dim = s_dim if self.plan.action_from_state else sum(self._action_dims)
        return f"{name}_{s_dim}x{a_dim}"

    # --- probing --------------------------------------------------------------------------

    def _probe(self, rec: Recording) -> tuple[list[int], list[int], float]:
        """Widths of each state/action stream (first message) and the first state stream's rate."""
        plan = self.plan
        first: dict[str, Any] = {}
        times: list[int] = []
        need = set(plan.numeric_topics())
        for t in need:
            if self._topics[t].count == 0:
                raise SourceError("empty", rec.path, f"mapped topic {t} has no messages; record it or map another topic")
        state_topic = plan.state[0].source
        for topic, log_ns, raw in rec.messages(sorted(need)):
            if topic not in first:
                first[topic] = rec.decode(topic, raw)
            if topic == state_topic and len(times) < 1000:
                times.append(log_ns)
            if len(first) == len(need) and len(times) >= 1000:
                break

        for t in sorted(need - set(first)):  # metadata counted messages the storage does not hold
            raise SourceError("empty", rec.path, f"mapped topic {t} has no messages; record it or map another topic")

        def width(s: StreamMap) -> int:
            if s.names and self._topics[s.source].kind == rm.JOINT_STATE:
                if s is plan.state[0]:
                    self._joint_names = tuple(s.names)
                return len(s.names)  # the first message may come from a publisher of other joints
            reader = _Numeric(s, self._topics[s.source], "log")
            reader.add(rec, 0, first[s.source])
            if s is plan.state[0] and reader.names:
                self._joint_names = tuple(reader.names)
            return int(reader.first_row.shape[0])

        sd = [width(s) for s in plan.state]
        ad = [] if plan.action_from_state else [width(s) for s in plan.action]
        return sd, ad, _nice_rate(_robust_rate(times))

    # --- SourceReader ---------------------------------------------------------------------

    def spec(self) -> EmbodimentSpec:
        used: set[str] = set()
        state, start = {}, 0
        for s, d in zip(self.plan.state, self._state_dims, strict=True):
            state[slice_name(s, used)] = {"start": start, "end": start + d}
            start += d
        action, a0 = {}, 0
        if self.plan.action_from_state:
            action = {f"{k}": dict(v) for k, v in state.items()}
            a0 = start
        else:
            used_a: set[str] = set()
            for s, d in zip(self.plan.action, self._action_dims, strict=True):
                action[slice_name(s, used_a)] = {"start": a0, "end": a0 + d}
                a0 += d
        modality = {"state": state, "action": action, "video": {c.name: {"original_key": c.source} for c in self.plan.cameras}}
        return EmbodimentSpec.from_modality_json(modality, tag=self.tag, state_dim=start, action_dim=a0, fps=self.fps,
                                                 robot_type=self.format_name)

    def discover(self) -> list[EpisodeRef]:
        refs: list[EpisodeRef] = []
        for i, paths in enumerate(self.recordings):
            windows: list[tuple[int, int] | None] = [None]
            problem: tuple[str, str, str] | None = None
            if self.plan.split.by != "file":
                try:
                    windows = list(self._windows(paths))
                except SourceError as e:
                    problem = (e.reason_code, e.path, e.message)
                    windows = [None]
            for w in windows:
                loc: dict[str, Any] = {"paths": list(paths), "recording": i, "window": list(w) if w else None}
                if problem:
                    loc["problem"] = list(problem)
                refs.append(EpisodeRef(source_uri=self.root, source_format=self.format_name, episode_index=len(refs),
                                       embodiment=self.tag, location=tuple(sorted(loc.items()))))
        return refs

    def _windows(self, paths: tuple[str, ...]) -> Iterator[tuple[int, int]]:
        split = self.plan.split
        with self._open(paths) as rec:
            topics = rec.topics()
            if split.by == "topic":
                src = topic_key(topics, split.source or "")
                if src not in topics:
                    raise SourceError("missing_key", rec.path, f"split topic {split.source} is not in this recording; topics: {sorted(topics)}")
                flags: list[tuple[int, bool]] = []
                for _, log_ns, raw in rec.messages([src]):
                    msg = rec.decode(src, raw)
                    flags.append((log_ns, bool(rm.to_vector(msg, "data" if rm.kind_of(topics[src].msgtype) == rm.BOOL else None)[0])))
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
                src = self.plan.state[0].source
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

    def _check_ref(self, ref: EpisodeRef) -> None:
        problem = ref.get("problem")
        if problem:
            raise SourceError(problem[0], problem[1], problem[2])

    def read_tabular(self, ref: EpisodeRef) -> TabularEpisode:
        """Decode, check and resample one episode's numeric streams; hash its camera bytes.

        Raises:
            SourceError: a mapped topic is missing or empty, a clock runs backwards, values are
                NaN/inf or change width, the streams do not overlap.
        """
        self._check_ref(ref)
        paths = tuple(ref.get("paths"))
        window = ref.get("window")
        start_ns, stop_ns = (window[0], window[1]) if window else (None, None)
        plan = self.plan
        with self._open(paths) as rec:
            topics = rec.topics()
            if paths != self.recordings[0]:
                resolve_plan(topics, self.mapping, rec.path, state_only=self.state_only)  # same topics in this one?
            for t in plan.numeric_topics() + [c.source for c in plan.cameras]:
                if t not in topics:
                    raise SourceError("missing_key", rec.path, f"topic {t} is not in this recording; topics here: {sorted(topics)}")
                if topics[t].count == 0:
                    raise SourceError("empty", rec.path, f"mapped topic {t} has no messages; record it or map another topic")
            readers = {s.label + str(i): _Numeric(s, topics[s.source], plan.clock) for i, s in enumerate((*plan.state, *plan.action))}
            by_topic: dict[str, list[_Numeric]] = {}
            for r in readers.values():
                by_topic.setdefault(r.s.source, []).append(r)
            cam_t: dict[str, list[int]] = {c.source: [] for c in plan.cameras}
            cam_hash = {c.source: hashlib.sha256() for c in plan.cameras}
            task_text: str | None = plan.task
            wanted = sorted(set(by_topic) | set(cam_t))
            for topic, log_ns, raw in rec.messages(wanted, start_ns, stop_ns):
                if topic in cam_t:
                    stamp = rec.image_stamp_ns(topic, raw) if plan.clock == "header" else None
                    cam_t[topic].append(stamp if stamp else log_ns)
                    cam_hash[topic].update(rec.raw_bytes(raw))
                if topic in by_topic:
                    msg = rec.decode(topic, raw)
                    for r in by_topic[topic]:
                        r.add(rec, log_ns, msg)
            if plan.task_from and task_text is None:
                task_text = self._task_text(rec, plan.task_from, start_ns, stop_ns)
            path = rec.path
        firsts = [t for r in readers.values() for t in r.t] + [ts[0] for ts in cam_t.values() if ts]
        if not firsts:
            raise SourceError("empty", path, f"the episode window holds no messages of {wanted}")
        t0 = min(firsts)
        n_state = len(plan.state)
        parts: list[list[tuple[Stream, list[int]]]] = [r.streams(t0, path) for r in readers.values()]
        for r, pieces, want in zip(readers.values(), parts, self._state_dims + self._action_dims, strict=False):
            got = sum(int(np.shape(st.values)[1]) for st, _ in pieces)
            if got != want:
                raise SourceError(
                    "shape", path,
                    f"{r.s.source} has {got} values per message here but {want} in {self.recordings[0][0]}; "
                    "one unit must keep one layout: ingest it with its own --embodiment, or select joints with `names:`",
                )
        state_perm, action_perm = _columns(parts[:n_state]), _columns(parts[n_state:])
        cams = {c.name: Stream(c.source, _rel(cam_t[c.source], t0), np.zeros((len(cam_t[c.source]), 0)), path) for c in plan.cameras}
        aligned = align(state=[st for p in parts[:n_state] for st, _ in p], action=[st for p in parts[n_state:] for st, _ in p],
                        cameras=cams, fps=self.fps, action_from_state=plan.action_from_state, path=path)
        if state_perm is not None or action_perm is not None:
            aligned = dataclasses.replace(
                aligned,
                state=_permute(aligned.state, state_perm),
                action=_permute(aligned.action, state_perm if plan.action_from_state else action_perm),
            )
        tasks = (task_text or "",)
        task_index = np.zeros(len(aligned.timestamps), np.int32)
        digests = tuple(f"{c.name}:{cam_hash[c.source].hexdigest()}" for c in plan.cameras)
        metadata: dict[str, Any] = {
            "recording": list(paths),
            "t0_ns": int(t0),
            "log_window_ns": window,
            "clock": {r.s.source: ("header" if r.header_clock else "log") for r in readers.values()},
            "plan": plan.describe(),
            "tasks": list(tasks),
            **aligned.metadata,
        }
        return TabularEpisode(
            ref=ref, state=aligned.state.astype(np.float32), action=aligned.action.astype(np.float32),
            timestamps=aligned.timestamps, task_index=task_index, tasks=tasks, success=None, fps=self.fps,
            content_hash=content_hash(state=aligned.state, action=aligned.action, timestamps=aligned.timestamps,
                                      tasks=tasks, task_index=task_index, media_digests=digests),
            metadata=metadata,
        )

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
        from robolake.lake.media import encode_frame

        ref = episode.ref
        paths = tuple(ref.get("paths"))
        window = ref.get("window")
        start_ns, stop_ns = (window[0], window[1]) if window else (None, None)
        t0 = int(episode.metadata["t0_ns"])
        ticks = np.asarray(episode.timestamps, dtype=np.float64)
        with self._open(paths) as rec:
            kinds = {t: info.kind for t, info in rec.topics().items()}
            for cam in self.plan.cameras:
                # One pass with one message of lookahead: message i is the latest at or before some
                # tick iff a tick falls in [stamp_i, stamp_i+1) (the first also takes earlier ticks,
                # the last every later one), the rule of `resample_latest`, checked below.
                stamps: list[float] = []
                encoded: dict[int, tuple[bytes, str, tuple[int, int]]] = {}
                pending: tuple[int, str, Any] | None = None
                for topic, log_ns, raw in itertools.chain(rec.messages([cam.source], start_ns, stop_ns), [("", 0, None)]):
                    last = raw is None
                    if not last:
                        stamp = rec.image_stamp_ns(topic, raw) if self.plan.clock == "header" else None
                        s_rel = ((stamp if stamp else log_ns) - t0) / _NS
                    if pending is not None and _lands(ticks, pending[0], stamps[-1], np.inf if last else s_rel):
                        encoded[pending[0]] = self._encode(rec, cam, kinds[cam.source], pending[1], pending[2], pending[0], encode_frame)
                    if not last:
                        stamps.append(s_rel)
                        pending = (len(stamps) - 1, topic, raw)
                index = resample_latest(Stream(cam.source, np.asarray(stamps), np.zeros((len(stamps), 0)), rec.path), ticks)
                missing = set(index.tolist()) - set(encoded)
                if not stamps or missing:
                    raise SourceError(
                        "frame_count", rec.path,
                        f"camera {cam.name!r}: {cam.source} holds {len(stamps)} messages in the episode window but "
                        f"{len(missing)} frames the episode needs are missing; the recording changed since it was checked",
                    )
                codecs = {encoded[i][1] for i in set(index.tolist())}
                if len(codecs) > 1:
                    raise SourceError("corrupt_video", rec.path, f"camera {cam.name!r} mixes {sorted(codecs)} frames; map one stream per codec")
                h, w = check_frame_sizes([encoded[i][2] for i in index.tolist()], cam.name, rec.path)
                yield EncodedFrames(camera=cam.name, images=tuple(encoded[i][0] for i in index.tolist()),
                                    encoding=codecs.pop(), height=h, width=w)

    @staticmethod
    def _encode(rec: Recording, cam: CameraMap, kind: str, topic: str, raw: Any, i: int, encode_frame: Any) -> tuple[bytes, str, tuple[int, int]]:
        """(bytes, codec, (height, width)) of one camera message: recorded JPEG/PNG as is, raw pixels as JPEG."""
        msg = rec.decode(topic, raw)
        try:
            if kind == rm.COMPRESSED_IMAGE:
                data, codec = rm.compressed_image(msg)
                return data, codec, rm.image_size(data)
            rgb = rm.image_rgb(msg)
            return encode_frame(rgb), "jpeg", (int(rgb.shape[0]), int(rgb.shape[1]))
        except (rm.FieldError, OSError) as e:
            raise SourceError("corrupt_video", rec.path, f"camera {cam.name!r} ({cam.source}) message {i}: {e}") from None

    def inspect(self) -> dict[str, Any]:
        """Topics (type, count, rate, span) of each recording, and what the reader would map."""
        out_recs: list[dict[str, Any]] = []
        for paths in self.recordings:
            try:
                with self._open(paths) as rec:
                    topics = rec.topics()
                    times: dict[str, list[int]] = {t: [] for t in topics}
                    first: dict[str, Any] = {}
                    for topic, log_ns, raw in rec.messages(sorted(topics)):
                        times[topic].append(log_ns)
                        if topic not in first:
                            first[topic] = raw
                    looks = {t: _first_look(rec, t, topics[t], raw) for t, raw in first.items()}
            except SourceError as e:
                out_recs.append({"path": paths[0], "error": e.message})
                continue
            entry: dict[str, Any] = {}
            for name, info in sorted(topics.items()):
                ts = times[name]
                span = (ts[-1] - ts[0]) / _NS if len(ts) > 1 else 0.0
                entry[name] = {
                    "type": info.msgtype, "count": len(ts) or info.count,
                    "rate_hz": round((len(ts) - 1) / span, 3) if span > 0 else 0.0,
                    "start_s": ts[0] / _NS if ts else None, "end_s": ts[-1] / _NS if ts else None,
                    **looks.get(name, {}),
                }
            all_t = [t for ts in times.values() for t in ts]
            out_recs.append({
                "path": paths[0] if len(paths) == 1 else list(paths),
                "duration_s": (max(all_t) - min(all_t)) / _NS if all_t else 0.0,
                "topics": entry,
            })
        return {
            "format": self.format_name,
            "path": self.root,
            "embodiment": self.tag,
            "recordings": out_recs,
            "episodes": len(self.recordings) if self.plan.split.by == "file" else None,
            "fps": self.fps,
            "cameras": [c.name for c in self.plan.cameras],
            "mapping": self.plan.describe(),
            "state_dim": sum(self._state_dims),
            "action_dim": sum(self._state_dims) if self.plan.action_from_state else sum(self._action_dims),
        }


def _columns(parts: list[list[tuple[Stream, list[int]]]]) -> np.ndarray | None:
    """Where each aligned column goes, when a JointState came in groups; None when in order."""
    dest: list[int] = []
    offset = 0
    grouped = False
    for pieces in parts:
        width = sum(int(np.shape(st.values)[1]) for st, _ in pieces)
        for st, cols in pieces:
            if cols:
                grouped = grouped or len(pieces) > 1 or cols != list(range(len(cols)))
                dest += [offset + c for c in cols]
            else:
                dest += list(range(offset, offset + int(np.shape(st.values)[1])))
        offset += width
    return np.asarray(dest, dtype=np.int64) if grouped else None


def _permute(values: np.ndarray, dest: np.ndarray | None) -> np.ndarray:
    if dest is None:
        return values
    out = np.empty_like(values)
    out[:, dest] = values
    return out


def _first_look(rec: Recording, topic: str, info: TopicInfo, raw: Any) -> dict[str, Any]:
    """Fields and shape of a topic's first message, for `inspect` (what a mapping can name)."""
    try:
        msg = rec.decode(topic, raw)
    except SourceError as e:
        return {"error": e.message}
    out: dict[str, Any] = {"fields": rm.message_fields(msg), "header_stamp": rm.header_stamp_ns(msg) is not None}
    try:
        if info.kind == rm.JOINT_STATE:
            out["joints"] = [str(n) for n in rm.get_field(msg, "name")]
            out["shape"] = [len(out["joints"])]
        elif info.kind == rm.COMPRESSED_IMAGE:
            data, codec = rm.compressed_image(msg)
            out["shape"], out["codec"] = list(rm.image_size(data)), codec
        elif info.kind == rm.IMAGE:
            out["shape"] = [int(rm.get_field(msg, "height")), int(rm.get_field(msg, "width"))]
            out["encoding"] = str(rm.get_field(msg, "encoding"))
        elif info.kind == rm.NUMERIC:
            field = rm.default_field(info.msgtype, msg)
            out["default_field"] = field
            out["shape"] = [int(rm.to_vector(msg, field).shape[0])]
    except (rm.FieldError, OSError, ValueError) as e:
        out["note"] = str(e)
    return out


def _plan_notes(topics: dict[str, TopicInfo], plan: Any, path: str) -> list[str]:
    """What the defaults decided that a user may not expect."""
    notes = []
    if plan.action_from_state and "action" in plan.defaults:
        notes.append(f"{path}: no command topic (named like command/cmd/action/target); action = state one tick ahead")
    if "cameras" in plan.defaults:
        used = {c.source for c in plan.cameras}
        left = [t for t, i in sorted(topics.items()) if i.kind in (rm.IMAGE, rm.COMPRESSED_IMAGE) and t not in used]
        if left:
            notes.append(f"{path}: image topics not used as cameras by default (depth, raw twin of a /compressed topic, "
                         f"or empty): {', '.join(left)}; map them under `cameras:` to include them")
    if not plan.cameras:
        notes.append(f"{path}: --state-only: no camera topic, ingesting state and action only")
    return notes


def _lands(ticks: np.ndarray, i: int, lo: float, hi: float) -> bool:
    """Whether message i, stamped `lo` with the next one at `hi`, is the latest at or before some tick."""
    a = int(np.searchsorted(ticks, lo, side="left")) if i > 0 else 0
    return int(np.searchsorted(ticks, hi, side="left")) > a


def _robust_rate(times_ns: Sequence[int]) -> float:
    """Messages per second from log times: 1 / mean interval, leaving out pauses (intervals over
    twice the median). A median alone is biased by jitter; a plain mean by pauses between takes."""
    dt = np.diff(np.asarray(times_ns, dtype=np.int64)).astype(np.float64)
    dt = dt[dt > 0]
    if dt.size == 0:
        return 0.0
    kept = dt[dt <= 2 * np.median(dt)]
    return float(_NS / kept.mean())


def _nice_rate(rate: float) -> float:
    """A measured rate snapped to a whole number when within 2% of one (100.3 Hz of jitter -> 100)."""
    if rate <= 0:
        return 0.0
    r = round(rate)
    return float(r) if r > 0 and abs(rate - r) / r < 0.02 else round(rate, 3)
