"""The registry of source formats, and discovery of every readable unit under a path.

A *format* says, cheaply and from the files themselves, whether a path holds one unit of it
(`detect`) and how to open a reader over that unit (`open`). A unit is a directory (a LeRobot
dataset, a TFDS/RLDS directory, a ROS 2 bag directory) or a single file (an HDF5 episode file, a
ROS 1 bag, an MCAP file). Discovery walks the whole tree under the source path, top down, and
at each directory asks the directory formats first: a directory one claims is one unit and is
not descended into (its files belong to it). Otherwise each file is offered to the file formats.
Formats are asked in registration order, which is therefore the detection priority.

Nothing is skipped silently: a file that looks like recorded data (by its extension or its
magic bytes) but that no format claims, or that a format claims but `--format` excluded, is
reported as *unrecognised*; a unit that a format claims but cannot open (a truncated HDF5 file,
an unreadable metadata file) is reported as *failed*, and ingest quarantines it. When nothing at
all is readable, discovery raises one `ValueError` line saying what it found and which formats
exist. All of this runs on the driver before Ray starts and before the lake is created or
touched, so a wrong path never leaves an empty lake behind.

Sessions. A file unit is one recording, unless the user asks for sessions (`SourceOptions.session`,
`--session`, or `session:` in a mapping): then the files of one format under one folder that a
format's `SessionHooks` groups (recorded side by side, or the numbered parts of one split
recording) are read as one unit, one reader over all of them (`UnitScan.sessions`, `open_unit`).
Files no session takes are read alone, as without the option; a session that cannot be formed
(a split part missing from the middle) is a failed unit naming what is missing.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from robolake.lake.media.frames import VIDEO_FRAME_LAYOUTS
from robolake.lake.sources.base import SourceError, SourceReader, iso_time
from robolake.lake.sources.limits import ReadLimits
from robolake.lake.sources.mapping import SESSION_MODES

if TYPE_CHECKING:
    from robolake.lake.sources.mapping import Mapping

__all__ = [
    "SourceOptions",
    "SourceFormat",
    "FailedUnit",
    "DiscoveryResult",
    "UnitScan",
    "RESAMPLE_MODES",
    "SESSION_MODES",
    "Session",
    "SessionFile",
    "SessionHooks",
    "find_units",
    "open_unit",
    "register_format",
    "formats",
    "format_names",
    "format_choices",
    "get_format",
    "discover_readers",
]

log = logging.getLogger(__name__)

# Extensions of files that hold recorded data; one of these that no format claims is reported.
DATA_SUFFIXES = (
    ".bag",
    ".db3",
    ".mcap",
    ".hdf5",
    ".h5",
    ".he5",
    ".tfrecord",
    ".parquet",
    ".mp4",
    ".avi",
    ".mkv",
    ".npz",
    ".npy",
    ".pkl",
    ".pickle",
    ".zarr",
    ".rrd",
    ".arrow",
    ".lance",
    ".csv",
)
# Aliases accepted by --format: the synthetic generator writes LeRobot datasets.
_ALIASES = {"synthetic": "lerobot"}
# How streams become steps: `ticks` (fixed-rate ticks, the default) or `none` (every message of
# the first state stream is a step at its own time); see `resample`.
RESAMPLE_MODES = ("ticks", "none")


@dataclass(frozen=True, kw_only=True)
class SourceOptions:
    """What the user said about a source, passed to every reader that discovery opens.

    Attributes:
        embodiment: Force this embodiment tag on every unit.
        mapping: Which keys/topics become state, action, cameras and task (from `--map FILE`).
        state_only: Accept episodes without camera frames (a LeRobot dataset whose videos are
            missing, a log without a camera topic) instead of quarantining them.
        video_frames: How frames are stored (`--frames`): `record` (a source video's own packets,
            images as recorded, raw pixels lossless; the default), or the lossy `jpeg` / `h264`
            (key-referenced); see `robolake.lake.media.frames`.
        video_crf: CRF of the `h264` layout (None: `robolake.lake.media.codecs.VIDEO_CRF`).
        resample: How topic-log and time-stamped HDF5 streams become steps: `ticks` (fixed-rate
            ticks) or `none` (every message of the first state stream is a step at its own
            time); None: the mapping's `resample:` (default `ticks`).
        limits: The memory one read may take (`robolake.lake.sources.limits`); a source that
            declares more is quarantined before anything is allocated.
        session: Which files of one folder are read as one recording (`--session`): `overlap`
            (time spans overlap: recorded side by side), `split` (numbered parts `name_0.bag,
            name_1.bag, ...` in index order) or `folder` (every file of a format in the folder);
            None: the mapping's `session:`, else each file is one recording.
        streams: Glob patterns (`fnmatch`) of the topic / key names to keep in the record
            (`--streams`); None keeps every numeric stream.
    """

    embodiment: str | None = None
    mapping: Mapping | None = None
    state_only: bool = False
    video_frames: str = "record"
    video_crf: int | None = None
    resample: str | None = None
    limits: ReadLimits = field(default_factory=ReadLimits)
    session: str | None = None
    streams: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.embodiment is not None and not self.embodiment.strip():
            raise ValueError("embodiment tag must be a non-empty string (or leave --embodiment out)")
        if self.video_frames not in VIDEO_FRAME_LAYOUTS:
            raise ValueError(f"video_frames must be one of {VIDEO_FRAME_LAYOUTS}, got {self.video_frames!r}")
        if self.video_crf is not None and (self.video_frames != "h264" or not 0 <= self.video_crf <= 51):
            raise ValueError(
                f"video_crf {self.video_crf} needs video_frames='h264' and a value in [0, 51] (--frames h264 --crf N)"
            )
        if self.resample is not None and self.resample not in RESAMPLE_MODES:
            raise ValueError(f"resample must be one of {RESAMPLE_MODES}, got {self.resample!r}")
        if not isinstance(self.limits, ReadLimits):
            raise ValueError(f"limits must be a ReadLimits, got {type(self.limits).__name__}")
        if self.session is not None and self.session not in SESSION_MODES:
            raise ValueError(
                f"session must be one of {SESSION_MODES} (or None: one recording per file), got {self.session!r}"
            )
        if isinstance(self.streams, list):
            object.__setattr__(self, "streams", tuple(self.streams))
        if self.streams is not None and (
            not isinstance(self.streams, tuple)
            or not self.streams
            or not all(isinstance(p, str) and p.strip() for p in self.streams)
        ):
            raise ValueError(
                "streams must be a non-empty tuple of glob patterns, each a non-empty string "
                f"(--streams '/joint*' '/gripper'), got {self.streams!r}"
            )

    @property
    def resample_mode(self) -> str:
        """`resample`, else the mapping's, else `ticks`."""
        if self.resample is not None:
            return self.resample
        return self.mapping.resample if self.mapping is not None else "ticks"

    @property
    def session_mode(self) -> str | None:
        """`session`, else the mapping's, else None (each file one recording)."""
        if self.session is not None:
            return self.session
        return self.mapping.session if self.mapping is not None else None


@dataclass(frozen=True, kw_only=True)
class SessionFile:
    """One file of a session, as probed on the driver.

    Attributes:
        path: The file.
        start_ns: Log time of its first message (None: it holds none).
        end_ns: Log time of its last message.
        streams: Each stream (topic) it holds -> its type.
        left_out: Streams of this file the session does not read: another file of the session
            holds them over the same time, or with another type (said in `Session.notes`).
    """

    path: str
    start_ns: int | None
    end_ns: int | None
    streams: dict[str, str]
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Session:
    """Files of one format under one folder, read as one recording (`SourceOptions.session`).

    Attributes:
        mode: How it was formed (`folder`, `overlap`, `split`).
        files: Its files, in reading order (split parts by index, others by path).
        notes: What a user should hear (a stream two files hold over the same time, and which
            copy is read).
        problem: (reason code, message) when it cannot be ingested (a split part missing from
            the middle); ingest quarantines it and `inspect` says why.
    """

    mode: str
    files: tuple[SessionFile, ...]
    notes: tuple[str, ...] = ()
    problem: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.mode not in SESSION_MODES:
            raise ValueError(f"session mode must be one of {SESSION_MODES}, got {self.mode!r}")
        if not self.files:
            raise ValueError("a session needs at least one file")

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    @property
    def root(self) -> str:
        """Its first file: the unit's path in the lake (episode ids, quarantine rows)."""
        return self.files[0].path

    @property
    def name(self) -> str:
        """Its files in one string, `folder/{a.bag,b.bag}` (for messages)."""
        return session_name(self.paths)

    def describe(self) -> dict[str, Any]:
        """What `robolake inspect` says of it: mode, time span, and per file its span and streams."""
        starts = [f.start_ns for f in self.files if f.start_ns is not None]
        ends = [f.end_ns for f in self.files if f.end_ns is not None]
        t0 = min(starts) if starts else None
        out: dict[str, Any] = {
            "mode": self.mode,
            "name": self.name,
            "start": iso_time(t0),
            "end": iso_time(max(ends)) if ends else None,
            "duration_s": (max(ends) - t0) / 1e9 if ends and t0 is not None else 0.0,
            "files": [
                {
                    "path": f.path,
                    "start_s": (f.start_ns - t0) / 1e9 if f.start_ns is not None and t0 is not None else None,
                    "end_s": (f.end_ns - t0) / 1e9 if f.end_ns is not None and t0 is not None else None,
                    "streams": sorted(f.streams),
                    **({"left_out": list(f.left_out)} if f.left_out else {}),
                }
                for f in self.files
            ],
        }
        if self.problem is not None:
            out["problem"] = f"{self.problem[0]}: {self.problem[1]}"
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def session_name(paths: tuple[str, ...] | list[str]) -> str:
    """Several files in one string: `folder/{a.bag,b.bag}` (one file: its path)."""
    if len(paths) == 1:
        return paths[0]
    folders = {os.path.dirname(p) for p in paths}
    if len(folders) > 1:
        return "{" + ",".join(paths) + "}"
    return os.path.join(folders.pop(), "{" + ",".join(os.path.basename(p) for p in paths) + "}")


@dataclass(frozen=True, kw_only=True)
class SessionHooks:
    """How a file format's files form sessions (`SourceOptions.session`).

    Attributes:
        group: The sessions that files of this format under one folder form in a mode:
            `(paths, mode, options) -> sessions`, each of two files or more (or one that cannot be
            formed, with its `problem`); a file in no session is read alone. Must not raise for
            one bad file: an unreadable file is left to be read (and reported) alone.
        open: A reader over one session (like `SourceFormat.open`).
        inspect: Describe a session whatever `open` makes of it (like `SourceFormat.inspect_unit`).
    """

    group: Callable[[tuple[str, ...], str, SourceOptions], list[Session]]
    open: Callable[[Session, SourceOptions], SourceReader]
    inspect: Callable[[Session, SourceOptions], dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class SourceFormat:
    """One on-disk format a reader understands.

    Attributes:
        name: Short name, used by `--format` (`lerobot`, `hdf5`, `rlds`, `ros2`, ...).
        description: One line for `ingest --help`, `inspect` and the README.
        detect: Cheap test: does this path (a file or a directory) hold one unit of the format?
            Must not raise; reads at most a few bytes or a metadata file.
        open: A reader over one detected unit. Raises ValueError/SourceError when the unit is
            unreadable as a whole (discovery reports it as failed).
        unit: Whether a unit is a directory (not descended into) or a single file.
        inspect_unit: Optional: describe a unit whatever `open` makes of it (a bag with no
            JointState, an HDF5 file of an unknown layout, before its mapping exists): what it
            holds, what a default ingest would do with each stream, and a suggested mapping, for
            `robolake inspect`. Called with the unit's path and the options; must not need a plan.
        sessions: Optional, file formats only: how several of its files form one recording
            (`SourceOptions.session`); None: each file is always its own unit.
    """

    name: str
    description: str
    detect: Callable[[str], bool]
    open: Callable[[str, SourceOptions], SourceReader]
    unit: Literal["directory", "file"]
    inspect_unit: Callable[[str, SourceOptions], dict[str, Any]] | None = None
    sessions: SessionHooks | None = None

    def __post_init__(self) -> None:
        if self.sessions is not None and self.unit != "file":
            raise ValueError(f"format {self.name!r}: only a file format forms sessions of its files")
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"format name {self.name!r} must be a short word ([a-z0-9_-])")
        if self.unit not in ("directory", "file"):
            raise ValueError(f"format {self.name!r}: unit must be 'directory' or 'file', got {self.unit!r}")


@dataclass(frozen=True, kw_only=True)
class FailedUnit:
    """A unit a format claimed but could not open; ingest quarantines it.

    Attributes:
        path: The file or directory.
        format: The format that claimed it.
        reason_code: Class of problem (`corrupt_file`, `missing_key`, ...).
        message: What is wrong and what to do.
        file: The file at fault inside the unit (its metadata file), when known.
        episodes: Episodes the unit declares, when known: each gets a quarantine row.
    """

    path: str
    format: str
    reason_code: str
    message: str
    file: str = ""
    episodes: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class DiscoveryResult:
    """What discovery found under a source path. Iterating it yields the readers.

    Attributes:
        readers: One reader per readable unit, in path order.
        unrecognised: Paths that look like data but that no (selected) format reads, each with why.
        failed: Units a format claimed but could not open.
    """

    readers: tuple[SourceReader, ...]
    unrecognised: tuple[str, ...] = ()
    failed: tuple[FailedUnit, ...] = field(default=())

    def __iter__(self) -> Iterator[SourceReader]:
        return iter(self.readers)

    def __len__(self) -> int:
        return len(self.readers)

    def __getitem__(self, index: int) -> SourceReader:
        return self.readers[index]


_FORMATS: dict[str, SourceFormat] = {}


def register_format(fmt: SourceFormat) -> None:
    """Add a format (or replace one of the same name, keeping its place in the order)."""
    _FORMATS[fmt.name] = fmt


def formats() -> list[SourceFormat]:
    """Registered formats in detection priority (registration order)."""
    return list(_FORMATS.values())


def format_names() -> list[str]:
    return list(_FORMATS)


def format_choices() -> list[str]:
    """What `--format` accepts: `auto`, every registered format, and aliases."""
    return ["auto", *_FORMATS, *(a for a, target in _ALIASES.items() if target in _FORMATS)]


def get_format(name: str) -> SourceFormat:
    """The format called `name` (or an alias of it).

    Raises:
        ValueError: no such format.
    """
    name = _ALIASES.get(name, name)
    if name not in _FORMATS:
        raise ValueError(f"unknown source format {name!r}; use one of {', '.join(format_choices())}")
    return _FORMATS[name]


def _looks_like_data(path: str) -> bool:
    name = os.path.basename(path).lower()
    if name.startswith("."):
        return False
    if any(name.endswith(s) or f"{s}-" in name for s in DATA_SUFFIXES):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    return head.startswith((b"\x89HDF", b"#ROSBAG", b"\x89MCAP", b"SQLite format 3"))


def _claim(path: str, candidates: list[SourceFormat]) -> SourceFormat | None:
    for fmt in candidates:
        try:
            if fmt.detect(path):
                return fmt
        except Exception as e:  # a detect that raises is a bug in that format, not the user's problem
            log.warning("format %s: detect(%s) raised %s: %s", fmt.name, path, type(e).__name__, e)
    return None


@dataclass(frozen=True, kw_only=True)
class UnitScan:
    """What a walk of a source path found, before any reader is opened.

    Attributes:
        src: The absolute source path.
        units: (path, format) of each unit a selected format claims and that is read alone, in
            path order.
        unrecognised: Paths that look like data but that no (selected) format reads, each with why.
        seen: Files seen, by extension (for the message when nothing is readable).
        selected: The formats that were asked.
        sessions: (session, format) of each session of files read as one unit (with a session
            mode only; its files are not in `units`), in path order of their first file.
    """

    src: str
    units: tuple[tuple[str, SourceFormat], ...]
    unrecognised: tuple[str, ...]
    seen: Counter[str]
    selected: tuple[SourceFormat, ...]
    sessions: tuple[tuple[Session, SourceFormat], ...] = ()

    def nothing_readable(self, failed: list[FailedUnit] | tuple[FailedUnit, ...] = ()) -> str:
        """The one-line message for a source where no unit could be read."""
        return _nothing_readable(self.src, self.seen, list(self.unrecognised), list(failed), list(self.selected))


def find_units(src: str, *, format: str = "auto", options: SourceOptions | None = None) -> UnitScan:
    """Every unit of a known format at or below `src` (the whole tree), without opening any.

    With a session mode in `options`, the files that formats group into sessions are probed
    (their topics and time spans; no message is read) and come back as `sessions`.

    Raises:
        ValueError: unknown format, or `src` missing.
    """
    selected = formats() if format == "auto" else [get_format(format)]
    src = os.path.abspath(src)
    if not os.path.exists(src):
        raise ValueError(f"source {src} does not exist; give a dataset directory, a data file, or a folder of them")
    everything = formats()
    units: list[tuple[str, SourceFormat]] = []
    unrecognised: list[str] = []
    seen: Counter[str] = Counter()

    def offer(path: str, kind: Literal["directory", "file"]) -> bool:
        fmt = _claim(path, [f for f in selected if f.unit == kind])
        if fmt is not None:
            units.append((path, fmt))
            return True
        other = _claim(path, [f for f in everything if f.unit == kind and f not in selected])
        if other is not None:
            unrecognised.append(f"{path} (a {other.name} {kind}; --format {format} skips it)")
            return True
        return False

    if os.path.isfile(src):
        seen[os.path.splitext(src)[1].lower() or "(no extension)"] += 1
        if not offer(src, "file") and _looks_like_data(src):
            unrecognised.append(f"{src} (no format reads this file)")
    else:
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if offer(dirpath, "directory"):
                dirnames[:] = []
                continue
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                seen[os.path.splitext(name)[1].lower() or "(no extension)"] += 1
                if name.startswith("."):
                    continue
                if not offer(path, "file") and _looks_like_data(path):
                    unrecognised.append(f"{path} (no format reads this file)")
    alone, sessions = _sessions(units, options.session_mode if options is not None else None, options)
    return UnitScan(
        src=src,
        units=tuple(alone),
        unrecognised=tuple(unrecognised),
        seen=seen,
        selected=tuple(selected),
        sessions=tuple(sessions),
    )


def open_unit(unit: str | Session, fmt: SourceFormat, options: SourceOptions) -> SourceReader | FailedUnit:
    """A reader over one unit (a path, or a session of `UnitScan.sessions`), or why it cannot be opened."""
    if isinstance(unit, Session):
        return _open_session(unit, fmt, options)
    return _opened(unit, fmt, lambda: fmt.open(unit, options))


def _opened(path: str, fmt: SourceFormat, open_it: Callable[[], SourceReader]) -> SourceReader | FailedUnit:
    try:
        return open_it()
    except SourceError as e:
        return FailedUnit(
            path=path, format=fmt.name, reason_code=e.reason_code, message=e.message, file=e.path, episodes=e.episodes
        )
    except (ValueError, OSError) as e:
        return FailedUnit(path=path, format=fmt.name, reason_code="corrupt_file", message=str(e))
    except Exception as e:  # a reader bug on one unit is that unit's problem, not the whole ingest's
        return FailedUnit(
            path=path,
            format=fmt.name,
            reason_code="reader_error",
            message=f"the {fmt.name} reader failed ({type(e).__name__}: {e})",
        )


def _sessions(
    units: list[tuple[str, SourceFormat]], mode: str | None, options: SourceOptions | None
) -> tuple[list[tuple[str, SourceFormat]], list[tuple[Session, SourceFormat]]]:
    """Units as a session mode reads them: (units read alone, sessions).

    Without a mode every unit is read alone. With one, the file units of each format that forms
    sessions are offered, folder by folder, to its `SessionHooks.group`; files of different
    formats never mix.
    """
    if mode is None or options is None:
        return units, []
    alone: list[tuple[str, SourceFormat]] = []
    by_folder: dict[tuple[str, str], tuple[SourceFormat, SessionHooks, list[str]]] = {}
    for path, fmt in units:
        if fmt.sessions is None:
            alone.append((path, fmt))
        else:
            by_folder.setdefault((os.path.dirname(path), fmt.name), (fmt, fmt.sessions, []))[2].append(path)
    sessions: list[tuple[Session, SourceFormat]] = []
    for fmt, hooks, paths in by_folder.values():
        formed = hooks.group(tuple(paths), mode, options) if len(paths) > 1 else []
        taken = {p for s in formed for p in s.paths}
        sessions += [(s, fmt) for s in formed]
        alone += [(p, fmt) for p in paths if p not in taken]
    alone.sort(key=lambda u: u[0])
    sessions.sort(key=lambda s: s[0].root)
    return alone, sessions


def _open_session(session: Session, fmt: SourceFormat, options: SourceOptions) -> SourceReader | FailedUnit:
    """A reader over one session, or why it cannot be read (its `problem`, or what opening it raised)."""
    if session.problem is not None:
        return FailedUnit(
            path=session.root, format=fmt.name, reason_code=session.problem[0], message=session.problem[1]
        )
    if fmt.sessions is None:
        raise ValueError(f"format {fmt.name!r} forms no sessions")
    hooks = fmt.sessions
    return _opened(session.root, fmt, lambda: hooks.open(session, options))


def discover_readers(
    src: str,
    *,
    format: str = "auto",
    options: SourceOptions | None = None,
    embodiment: str | None = None,
) -> DiscoveryResult:
    """Readers for every unit of a known format at or below `src` (the whole tree).

    Args:
        src: A unit (dataset directory or data file) or a directory holding any number of them,
            at any depth.
        format: `auto` (detect each unit's format) or one format name: only that format is read,
            and units of other formats are reported as unrecognised.
        options: Embodiment, mapping and state-only choices, passed to every reader.
        embodiment: Shorthand for `options.embodiment` (kept for older callers).

    Returns:
        The readers, and what was found but not read.

    Raises:
        ValueError: unknown format, `src` missing, or nothing readable under `src` (one line
            saying what was found and which formats exist).
    """
    options = options or SourceOptions(embodiment=embodiment)
    if embodiment is not None and options.embodiment is None:
        options = dataclasses.replace(options, embodiment=embodiment)
    scan = find_units(src, format=format, options=options)
    units = [(path, open_unit(path, fmt, options)) for path, fmt in scan.units]
    units += [(s.root, open_unit(s, fmt, options)) for s, fmt in scan.sessions]
    readers: list[SourceReader] = []
    failed: list[FailedUnit] = []
    for _, opened in sorted(units, key=lambda u: u[0]):
        if isinstance(opened, FailedUnit):
            failed.append(opened)
        else:
            readers.append(opened)
    readers, clashes = _one_width_per_tag(readers)
    failed += clashes
    # Reported in the result (ingest records and prints them, or the ValueError below names them).
    for u in scan.unrecognised:
        log.info("not read: %s", u)
    for f in failed:
        log.info("cannot open %s as %s: %s", f.path, f.format, f.message)
    if not readers:
        raise ValueError(scan.nothing_readable(failed))
    return DiscoveryResult(readers=tuple(readers), unrecognised=scan.unrecognised, failed=tuple(failed))


def _one_width_per_tag(readers: list[SourceReader]) -> tuple[list[SourceReader], list[FailedUnit]]:
    """Units whose spec cannot be built.

    One embodiment tag means one state/action layout in the lake, but which unit's width a tag
    takes is ingest's call (`lake.ingest._check_embodiments`), made after each episode's own
    checks: a unit whose declared width its files contradict must not set the tag's width and
    hold back a good unit beside it, and that is known only once its episodes are read.
    """
    keep: list[SourceReader] = []
    failed: list[FailedUnit] = []
    for r in readers:
        try:
            r.spec()
        except (ValueError, SourceError) as e:
            failed.append(FailedUnit(path=r.root, format=r.format_name, reason_code="shape", message=f"{r.root}: {e}"))
            continue
        keep.append(r)
    return keep, failed


def _nothing_readable(
    src: str, seen: Counter[str], unrecognised: list[str], failed: list[FailedUnit], selected: list[SourceFormat]
) -> str:
    if failed:
        found = "; ".join(f"{f.path}: {f.message}" for f in failed[:3]) + (
            f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
        )
        what = f"{len(failed)} unit(s) could not be opened ({found})"
    elif seen:
        what = "found " + ", ".join(f"{n} {ext}" for ext, n in seen.most_common(6)) + " file(s)"
        if unrecognised:
            what += f", e.g. {unrecognised[0]}"
    else:
        what = "found no files"
    known = ", ".join(f.name for f in formats()) + " (`robolake ingest --help` describes them)"
    hint = "" if len(selected) > 1 else f"; --format {selected[0].name} was given, try --format auto"
    return f"no dataset found under {src}: {what}; readable formats: {known}{hint}"
