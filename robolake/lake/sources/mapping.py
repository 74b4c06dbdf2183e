"""A mapping: which recorded streams become an episode's state, action, cameras and task.

Raw logs do not say which of their topics or datasets is the robot's state and which is the
command sent to it; a mapping does, in a small YAML or JSON file given with `--map FILE`:

    embodiment: aloha                  # tag
    task: "pick up the cube"           # literal instruction, or
    task_from: /instruction            # the topic / key holding the text
    clock: header                      # header | log   (ROS: header.stamp or log/receive time)
    fps: 30                            # target rate (default: rate of the first state stream)
    resample: ticks                    # ticks | none (a step per message of the first state stream)
    session: overlap                   # folder | overlap | split: files of one folder read as one recording
    state:                             # concatenated in order
      - {source: /joint_states, field: position, names: [j1, j2, j3]}
      - {source: /gripper, field: data}
      - {source: /tf, child_frame: tool0}
      - {source: /odom, field: pose.pose}
    action:
      - {source: /cmd_joint, field: position}
    action_from_state: false           # true: action = state one tick ahead (recorded in metadata)
    cameras: {wrist: /wrist/image/compressed, top: {source: /top/image_raw}}
    split: {by: file}                  # | {by: topic, source: /episode_active} | {by: gap, seconds: 2.0}

`source` is a topic (bags, MCAP), an HDF5 dataset path or an RLDS feature key. `field` is a
dotted path into a message, with list indices as numbers (`pose.pose`, `transforms.0.transform`,
`position.2`); array datasets leave it out, and without it a message's numeric fields are
flattened (the header and covariances skipped). `names` selects and orders the joints of a
JointState by name. `child_frame` picks, from a `tf2_msgs/TFMessage` topic (`/tf`), the
transform of that child frame (x y z qx qy qz qw, stamped by its own header; messages without
it are skipped). `stamps` (HDF5 and other array formats) names the dataset holding the stream's
per-row times in seconds, so streams recorded at different rates can be aligned; without it
every row is one tick at `fps`. `episodes` (HDF5) names a group whose child groups are episodes
(`data` for robomimic-like files); the sources are then relative to each child. An HDF5 source
holding `{i}` (`states_{i}`) names a family of datasets, one episode per index the file holds.

`cameras: {}` (present but empty) means no cameras at all; leaving `cameras` out keeps the
reader's default cameras. `resample: none` lands every message of the first state stream as a
step at its own time instead of fixed-rate ticks (`resample`). `msg_dirs` are read as given
(relative to the mapping file); one outside the mapping's folder is read and reported.
`session` makes several topic-log files under one folder one recording (`topics.session`):
`overlap` (files whose time spans overlap: recorded side by side, one topic per file),
`split` (numbered parts `name_0.bag, name_1.bag, ...` in index order) or `folder` (every file
of a format in the folder); without it each file is its own recording; `--session` overrides it.

The file is loaded into frozen dataclasses and validated here, with errors that name the file
and the key, so a typo fails before Ray starts; whether the sources exist is checked per
recording by the reader (`check_sources`), which quarantines the recording naming what exists.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from robolake.lake.sources.base import SourceError
from robolake.storage import parse_json, parse_yaml, read_document

__all__ = [
    "StreamMap",
    "CameraMap",
    "SplitMap",
    "Mapping",
    "SESSION_MODES",
    "load_mapping",
    "mapping_from_dict",
    "check_sources",
]

_TOP_KEYS = (
    "embodiment",
    "task",
    "task_from",
    "clock",
    "fps",
    "state",
    "action",
    "action_from_state",
    "cameras",
    "split",
    "episodes",
    "msg_dirs",
    "resample",
    "session",
)
_STREAM_KEYS = ("source", "field", "names", "stamps", "child_frame")
_RESAMPLE = ("ticks", "none")
# How files of one folder become one recording (`topics.session`); None: each file is one.
SESSION_MODES = ("folder", "overlap", "split")
_SPLIT_KEYS = ("by", "source", "seconds")


@dataclass(frozen=True, kw_only=True)
class StreamMap:
    """One recorded stream feeding part of the state or action vector.

    Attributes:
        source: Topic, dataset path or feature key.
        field: Dotted path into each message (`position`, `pose.position`); None for arrays.
        names: Joint names to select, in this order (JointState-like messages).
        stamps: Dataset / key holding this stream's times in seconds (array formats).
        child_frame: The transform to take from a TF topic (its `child_frame_id`).
    """

    source: str
    field: str | None = None
    names: tuple[str, ...] | None = None
    stamps: str | None = None
    child_frame: str | None = None

    def __post_init__(self) -> None:
        if not self.source:
            raise ValueError("a mapped stream needs a non-empty 'source'")
        if self.child_frame is not None and not self.child_frame.strip("/"):
            raise ValueError(f"{self.source}: child_frame must name a frame (e.g. base_link)")

    @property
    def label(self) -> str:
        return (
            self.source
            + (f"[{self.child_frame}]" if self.child_frame else "")
            + (f".{self.field}" if self.field else "")
        )


@dataclass(frozen=True, kw_only=True)
class CameraMap:
    """One camera stream.

    Attributes:
        name: Camera name in the lake.
        source: Topic, dataset path or feature key of its images.
        stamps: Dataset / key holding the frame times in seconds (array formats).
    """

    name: str
    source: str
    stamps: str | None = None


@dataclass(frozen=True, kw_only=True)
class SplitMap:
    """How one recording splits into episodes.

    Attributes:
        by: `file` (one episode per recording), `topic` (a boolean stream is true during an
            episode) or `gap` (a pause longer than `seconds` in the state stream ends one).
        source: The topic for `by: topic`: a boolean (true during an episode), a text topic (each
            run of one label, a phase or subtask, is an episode) or triggers (`std_msgs/Empty`:
            each starts an episode, which lasts until the next).
        seconds: The gap for `by: gap`.
    """

    by: Literal["file", "topic", "gap"] = "file"
    source: str | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.by not in ("file", "topic", "gap"):
            raise ValueError(f"split.by must be file, topic or gap, got {self.by!r}")
        if self.by == "topic" and not self.source:
            raise ValueError(
                "split {by: topic} needs 'source': a boolean topic true during an episode, a label topic, or triggers"
            )
        if self.by == "gap" and not (self.seconds and self.seconds > 0):
            raise ValueError("split {by: gap} needs 'seconds' > 0, the pause that ends an episode")


@dataclass(frozen=True, kw_only=True)
class Mapping:
    """What a recording's streams mean. See the module docstring for the file format.

    Attributes:
        state: Streams concatenated into the state vector, in order.
        action: Streams concatenated into the action vector (empty with `action_from_state`).
        cameras: Camera streams, in order.
        embodiment: Embodiment tag (else the reader's default).
        task: Literal instruction.
        task_from: Stream holding the instruction text.
        clock: `header` (message header stamps) or `log` (log / receive time).
        fps: Target rate; None: the rate of the first state stream.
        action_from_state: Action = state one tick ahead.
        split: How a recording splits into episodes.
        episodes: Group whose children are episodes (HDF5).
        msg_dirs: Directories of `.msg` definitions for custom ROS types a bag does not carry
            (sqlite3 ROS 2 bags), relative to the mapping file.
        cameras_given: The mapping has a `cameras:` key; an empty one means no cameras at all
            (without the key the reader's default cameras are used).
        resample: `ticks` (fixed-rate ticks) or `none` (a step per message of the first state
            stream); see `resample`.
        session: `folder`, `overlap` or `split`: which topic-log files of one folder are read
            as one recording (`SourceOptions.session` overrides it); None: one per file.
        path: The file it was loaded from (for messages).
    """

    state: tuple[StreamMap, ...]
    action: tuple[StreamMap, ...] = ()
    cameras: tuple[CameraMap, ...] = ()
    embodiment: str | None = None
    task: str | None = None
    task_from: str | None = None
    clock: Literal["header", "log"] = "header"
    fps: float | None = None
    action_from_state: bool = False
    split: SplitMap = SplitMap()
    episodes: str | None = None
    msg_dirs: tuple[str, ...] = ()
    cameras_given: bool = False
    resample: str = "ticks"
    session: str | None = None
    path: str = "<mapping>"

    def __post_init__(self) -> None:
        where = self.path
        if self.resample not in _RESAMPLE:
            raise ValueError(f"{where}: 'resample' must be ticks or none, got {self.resample!r}")
        if self.session is not None and self.session not in SESSION_MODES:
            raise ValueError(f"{where}: 'session' must be one of {', '.join(SESSION_MODES)}, got {self.session!r}")
        if not self.state:
            raise ValueError(f"{where}: 'state' must list at least one stream ({{source: ..., field: ...}})")
        if not self.action and not self.action_from_state:
            raise ValueError(
                f"{where}: give 'action' streams, or 'action_from_state: true' when the recording has no command stream"
            )
        if self.action and self.action_from_state:
            raise ValueError(f"{where}: 'action' and 'action_from_state: true' exclude each other; keep one")
        if self.task is not None and self.task_from is not None:
            raise ValueError(f"{where}: 'task' and 'task_from' exclude each other; keep one")
        if self.clock not in ("header", "log"):
            raise ValueError(f"{where}: 'clock' must be header or log, got {self.clock!r}")
        if self.fps is not None and not self.fps > 0:
            raise ValueError(f"{where}: 'fps' must be > 0, got {self.fps}")
        names = [c.name for c in self.cameras]
        if len(set(names)) != len(names):
            raise ValueError(f"{where}: camera names repeat: {names}")

    def msg_dir_paths(self) -> tuple[list[str], list[str]]:
        """(absolute `msg_dirs`, notes on those outside the mapping file's folder)."""
        base = os.path.dirname(os.path.abspath(self.path)) if self.path != "<mapping>" else os.getcwd()
        dirs, notes = [], []
        for d in self.msg_dirs:
            full = os.path.realpath(d if os.path.isabs(d) else os.path.join(base, d))
            dirs.append(full)
            if os.path.commonpath([full, os.path.realpath(base)]) != os.path.realpath(base):
                notes.append(
                    f"mapping {self.path} msg_dirs: {d!r} is {full}, outside the mapping's folder; "
                    ".msg files are read from it because the mapping names it"
                )
        return dirs, notes

    def sources(self) -> list[tuple[str, str]]:
        """(key in the mapping, source) of every stream it names."""
        out = [(f"state[{i}].source", s.source) for i, s in enumerate(self.state)]
        out += [(f"action[{i}].source", s.source) for i, s in enumerate(self.action)]
        out += [(f"cameras.{c.name}", c.source) for c in self.cameras]
        for key, streams in (("state", self.state), ("action", self.action)):
            out += [(f"{key}[{i}].stamps", s.stamps) for i, s in enumerate(streams) if s.stamps]
        out += [(f"cameras.{c.name}.stamps", c.stamps) for c in self.cameras if c.stamps]
        if self.task_from:
            out.append(("task_from", self.task_from))
        if self.split.by == "topic" and self.split.source:
            out.append(("split.source", self.split.source))
        return out


def _fail(path: str, key: str, message: str) -> ValueError:
    return ValueError(f"{path}: {key}: {message}")


def _check_keys(d: dict[str, Any], allowed: tuple[str, ...], path: str, where: str) -> None:
    unknown = sorted(set(d) - set(allowed))
    if unknown:
        raise _fail(path, where or "top level", f"unknown key(s) {unknown}; allowed: {', '.join(allowed)}")


def _stream(item: Any, path: str, key: str) -> StreamMap:
    if isinstance(item, str):
        return StreamMap(source=item)
    if not isinstance(item, dict):
        raise _fail(path, key, f"expected {{source: ..., field: ...}} or a source string, got {item!r}")
    _check_keys(item, _STREAM_KEYS, path, key)
    if not isinstance(item.get("source"), str) or not item["source"]:
        raise _fail(path, key, "needs 'source' (a topic, dataset path or feature key)")
    names = item.get("names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names):
        raise _fail(path, f"{key}.names", f"expected a non-empty list of joint names, got {names!r}")
    for opt in ("field", "stamps", "child_frame"):
        if item.get(opt) is not None and not isinstance(item[opt], str):
            raise _fail(path, f"{key}.{opt}", f"expected a string, got {item[opt]!r}")
    return StreamMap(
        source=item["source"],
        field=item.get("field"),
        names=tuple(names) if names else None,
        stamps=item.get("stamps"),
        child_frame=item.get("child_frame"),
    )


def _streams(value: Any, path: str, key: str) -> tuple[StreamMap, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        raise _fail(path, key, f"expected a list of streams, got {type(value).__name__}")
    return tuple(_stream(item, path, f"{key}[{i}]") for i, item in enumerate(value))


def _cameras(value: Any, path: str) -> tuple[CameraMap, ...]:
    if value is None or value == {}:
        return ()
    if not isinstance(value, dict):
        raise _fail(path, "cameras", f"expected {{name: source}}, got {type(value).__name__}")
    out = []
    for name, body in value.items():
        if isinstance(body, str):
            out.append(CameraMap(name=str(name), source=body))
        elif isinstance(body, dict) and isinstance(body.get("source"), str):
            _check_keys(body, ("source", "stamps"), path, f"cameras.{name}")
            out.append(CameraMap(name=str(name), source=body["source"], stamps=body.get("stamps")))
        else:
            raise _fail(path, f"cameras.{name}", f"expected a source string or {{source: ...}}, got {body!r}")
    return tuple(out)


def mapping_from_dict(d: dict[str, Any], path: str = "<mapping>") -> Mapping:
    """Validate a parsed mapping.

    Raises:
        ValueError: naming the file and the key at fault.
    """
    if not isinstance(d, dict):
        raise ValueError(
            f"{path}: a mapping is a YAML/JSON object with 'state', 'action', ... keys; got {type(d).__name__}"
        )
    _check_keys(d, _TOP_KEYS, path, "")
    split_d = d.get("split") or {"by": "file"}
    if not isinstance(split_d, dict):
        raise _fail(path, "split", f"expected {{by: file|topic|gap, ...}}, got {split_d!r}")
    _check_keys(split_d, _SPLIT_KEYS, path, "split")
    fps = d.get("fps")
    if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float))):
        raise _fail(path, "fps", f"expected a number, got {fps!r}")
    for key in ("embodiment", "task", "task_from", "episodes"):
        if d.get(key) is not None and not isinstance(d[key], str):
            raise _fail(path, key, f"expected a string, got {d[key]!r}")
    msg_dirs = d.get("msg_dirs") or []
    if isinstance(msg_dirs, str):
        msg_dirs = [msg_dirs]
    if not isinstance(msg_dirs, list) or not all(isinstance(x, str) for x in msg_dirs):
        raise _fail(path, "msg_dirs", f"expected a list of directories, got {msg_dirs!r}")
    resample = d.get("resample", "ticks")
    if resample is False or resample is None:  # YAML reads a bare `none` as a string, `no`/`null` as these
        resample = "none"
    if resample not in _RESAMPLE:
        raise _fail(path, "resample", f"expected ticks or none, got {resample!r}")
    session = d.get("session")
    if session is not None and session not in SESSION_MODES:
        raise _fail(path, "session", f"expected one of {', '.join(SESSION_MODES)}, got {session!r}")
    if not isinstance(d.get("action_from_state", False), bool):
        raise _fail(path, "action_from_state", f"expected true or false, got {d['action_from_state']!r}")
    try:
        split = SplitMap(
            by=split_d.get("by", "file"),
            source=split_d.get("source"),
            seconds=float(split_d["seconds"]) if split_d.get("seconds") is not None else None,
        )
        return Mapping(
            state=_streams(d.get("state"), path, "state"),
            action=_streams(d.get("action"), path, "action"),
            cameras=_cameras(d.get("cameras"), path),
            embodiment=d.get("embodiment"),
            task=d.get("task"),
            task_from=d.get("task_from"),
            clock=d.get("clock", "header"),
            fps=float(fps) if fps is not None else None,
            action_from_state=bool(d.get("action_from_state", False)),
            split=split,
            episodes=d.get("episodes"),
            msg_dirs=tuple(msg_dirs),
            cameras_given="cameras" in d,
            resample=resample,
            session=session,
            path=path,
        )
    except (TypeError, ValueError) as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith(path) else f"{path}: {msg}") from e


def load_mapping(path: str) -> Mapping:
    """Load and validate a mapping file (`.yaml`, `.yml` or `.json`).

    Raises:
        FileNotFoundError: no such file.
        ValueError: it does not parse, or a key is missing, unknown or of the wrong type.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"mapping file {path} does not exist; write one (see `robolake inspect SRC`)")
    text = read_document(path, "mapping file")
    d = parse_json(text, f"mapping file {path}") if path.endswith(".json") else parse_yaml(text, f"mapping file {path}")
    return mapping_from_dict(d, path)


def check_sources(mapping: Mapping, available: Iterable[str], file: str) -> None:
    """Fail when the mapping names a source this recording lacks, saying which exist.

    Raises:
        SourceError: reason `missing_key`, naming the recording, the mapping key and what exists.
    """
    have = set(available)
    for key, source in mapping.sources():
        if source not in have and source.lstrip("/") not in {h.lstrip("/") for h in have}:
            listed = ", ".join(sorted(have)[:40]) + (" ..." if len(have) > 40 else "")
            raise SourceError(
                "missing_key",
                file,
                f"mapping {mapping.path} {key} names {source!r}, which this recording lacks; "
                f"it has: {listed or 'nothing'}; "
                "fix the mapping (see `robolake inspect`)",
            )
