"""Readers for ROS 2 bags (sqlite3 and MCAP storage) and ROS 1 bags, without a ROS install.

Storage is read with the pure-Python `rosbags` library. What a unit is, decided from the files:

- a ROS 2 bag directory: `metadata.yaml` with `rosbag2_bagfile_information` (any version rosbags
  reads, 1-9; split bags list several storage files), or, when `metadata.yaml` was lost, a
  directory holding storage files named `<dir>_<N>.db3` / `<dir>_<N>.mcap` (what `ros2 bag
  record` writes): the files are read directly, in index order, as one recording; the same
  when a metadata.yaml is there but does not open (cut short, a version rosbags does not know);
- a ROS 2 storage file on its own: a `.db3` SQLite file, or an `.mcap` whose header profile is
  `ros2` (an MCAP of another profile goes to the non-ROS MCAP reader);
- a ROS 1 bag: a file starting `#ROSBAG V2.0`.

Message definitions. ROS 1 bags and MCAP files carry every topic's definition; rosbags turns
them into a type store, so custom types decode with no code. SQLite ROS 2 bags written before
Iron carry none: standard types then come from rosbags' built-in store (latest ROS 2 / Noetic);
a custom type needs its `.msg` file, found in a `msg/` (or `msgs/`) folder inside or beside the
bag, laid out `<pkg>/msg/<Type>.msg`, or under a directory listed in `ROBOLAKE_ROS_MSG_PATH`
(colon-separated, like ROS's own package path). Without it the episode is quarantined with the
type's name and these options.

Sessions. ROS 1 bags and ROS 2 storage files on their own can be read several as one recording
(`--session`, `topics.session`): the readers then take the `Session` and open its files as a
`SessionRecording`; a ROS 2 bag directory is one unit already (its split storage files are one
recording) and forms no sessions.

Reading is bounded. A ROS 1 bag's bz2/lz4 chunks are decompressed with the output capped at the
read budget (`limits`), so a chunk that expands past it is refused, not allowed to fill memory;
a ROS 2 bag's metadata.yaml may only name storage files inside its own directory; `.msg` files
are looked up in the named folders only (at most `MAX_MSG_FILES`, symlinks not followed).
"""

from __future__ import annotations

import heapq
import logging
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.limits import ReadLimits, bounded_decompress
from robolake.lake.sources.registry import Session, SessionFile, SourceFormat, SourceOptions
from robolake.lake.sources.topics import ros_messages as rm
from robolake.lake.sources.topics.log import TopicLogReader
from robolake.lake.sources.topics.plan import Recording, TopicInfo
from robolake.lake.sources.topics.session import SessionRecording, session_file, session_hooks

__all__ = [
    "Ros2Reader",
    "Ros1Reader",
    "is_ros2_bag_dir",
    "is_ros2_storage_file",
    "is_ros1_bag",
    "mcap_profile",
    "ROS2_FORMAT",
    "ROS2_FILE_FORMAT",
    "ROS1_FORMAT",
    "MSG_PATH_ENV",
]

log = logging.getLogger(__name__)

MSG_PATH_ENV = "ROBOLAKE_ROS_MSG_PATH"
MAX_MSG_FILES = 10_000  # .msg files read from all search folders together (a folder named by mistake, e.g. /)
_MCAP_MAGIC = b"\x89MCAP0\r\n"


# --- detection ------------------------------------------------------------------------------


def _head(path: str, n: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def mcap_profile(path: str) -> str | None:
    """The profile string of an MCAP file's header record (`ros2`, `ros1`, `` ...); None if not MCAP."""
    head = _head(path, 8 + 1 + 8 + 4 + 256)
    if not head.startswith(_MCAP_MAGIC) or len(head) < 21 or head[8] != 0x01:
        return None
    n = int.from_bytes(head[17:21], "little")
    return head[21 : 21 + n].decode("utf-8", "replace")


def _split_parts(path: str) -> list[str]:
    """Storage files of a metadata-less bag directory: `<dir>_<N>.db3|mcap`, in index order."""
    name = os.path.basename(os.path.normpath(path))
    pat = re.compile(re.escape(name) + r"(?:_(\d+))?\.(db3|mcap)$")  # rosbags itself writes <dir>.db3
    found = []
    try:
        entries = os.listdir(path)
    except OSError:
        return []
    for e in entries:
        m = pat.match(e)
        if m:
            found.append((int(m.group(1) or -1), os.path.join(path, e)))
    return [p for _, p in sorted(found)]


def is_ros2_bag_dir(path: str) -> bool:
    """A ROS 2 bag directory: rosbag2 metadata.yaml, or split storage files named after the directory."""
    if not os.path.isdir(path):
        return False
    meta = os.path.join(path, "metadata.yaml")
    if os.path.isfile(meta):
        return b"rosbag2_bagfile_information" in _head(meta, 4096)
    return bool(_split_parts(path))


def is_ros2_storage_file(path: str) -> bool:
    """A single ROS 2 storage file: a SQLite .db3, or an .mcap with the ros2 profile."""
    if not os.path.isfile(path):
        return False
    if path.endswith(".db3"):
        return _head(path, 16).startswith(b"SQLite format 3")
    return path.endswith(".mcap") and mcap_profile(path) == "ros2"


def is_ros1_bag(path: str) -> bool:
    return os.path.isfile(path) and _head(path, 13) == b"#ROSBAG V2.0\n"


# --- message definitions -------------------------------------------------------------------


def referenced_types(fields: Any) -> Iterator[str]:
    from rosbags.interfaces import Nodetype

    def walk(desc: Any) -> Iterator[str]:
        kind, detail = desc
        if kind == Nodetype.NAME:
            yield detail
        elif kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            yield from walk(detail[0])

    for _, desc in fields:
        yield from walk(desc)


def _msg_search_dirs(root: str, extra: Sequence[str] = ()) -> list[str]:
    here = root if os.path.isdir(root) else os.path.dirname(root)
    dirs = list(extra) + [os.path.join(d, sub) for d in (here, os.path.dirname(here)) for sub in ("msg", "msgs")]
    dirs += [d for d in os.environ.get(MSG_PATH_ENV, "").split(os.pathsep) if d]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _msg_files(dirs: Sequence[str]) -> list[str]:
    """`.msg` files under each directory, symlinked folders not followed, at most MAX_MSG_FILES."""
    out: list[str] = []
    for d in dirs:
        for dirpath, dirnames, filenames in os.walk(d, followlinks=False):
            dirnames.sort()
            out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".msg")]
            if len(out) >= MAX_MSG_FILES:
                log.warning(
                    "more than %d .msg files under %s; reading the first ones only", MAX_MSG_FILES, ", ".join(dirs)
                )
                return out[:MAX_MSG_FILES]
    return out


def load_msg_dirs(dirs: Sequence[str]) -> dict[str, Any]:
    """Types parsed from `<pkg>/msg/<Type>.msg` files under each directory (a package dir works too)."""
    from rosbags.typesys import get_types_from_msg

    typs: dict[str, Any] = {}
    for f in _msg_files(dirs):
        parent = os.path.dirname(f)
        pkg = (
            os.path.basename(os.path.dirname(parent)) if os.path.basename(parent) == "msg" else os.path.basename(parent)
        )
        name = f"{pkg}/msg/{os.path.splitext(os.path.basename(f))[0]}"
        try:
            with open(f) as fh:
                typs.update(get_types_from_msg(fh.read(), name))
        except Exception as e:  # one unparsable .msg file must not hide the others
            log.info("cannot parse %s (%s); skipped", f, e)
    return typs


def _missing_type_message(topic: str, msgtype: str, root: str) -> str:
    pkg, _, name = rm.short_type(msgtype).partition("/")
    return (
        f"topic {topic} has type {msgtype}, whose definition this bag does not carry (SQLite ROS 2 bags recorded "
        f"before Iron store none) and which is not a standard ROS type; put {pkg}/msg/{name}.msg in a `msg/` folder "
        f"beside the bag ({os.path.join(os.path.dirname(root.rstrip('/')), 'msg', pkg, 'msg', name + '.msg')}) or in a "
        f"directory named by {MSG_PATH_ENV}, or drop the topic from the mapping"
    )


# --- recordings ------------------------------------------------------------------------------


class _RosRecording(Recording):
    """One ROS recording over rosbags readers (a bag dir, split storage files, or a ROS 1 bag)."""

    def __init__(
        self,
        paths: tuple[str, ...],
        *,
        ros2: bool,
        root: str,
        msg_dirs: Sequence[str] = (),
        limits: ReadLimits | None = None,
    ):
        from pathlib import Path

        self.path = paths[0] if len(paths) == 1 else os.path.dirname(paths[0])
        self.ros2, self.root, self.msg_dirs = ros2, root, tuple(msg_dirs)
        self.limits = limits or ReadLimits()
        self._readers: list[Any] = []
        try:
            if ros2:
                from rosbags.rosbag2 import Reader as Reader2

                self._readers = [Reader2(Path(p)) for p in paths]
            else:
                from rosbags.rosbag1 import Reader as Reader1

                self._readers = [Reader1(Path(p)) for p in paths]
            for r in self._readers:
                r.open()
                if not ros2:
                    _bound_chunks(r, self.limits, self.path)
        except SourceError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise SourceError("corrupt_file", self.path, _corrupt_message(self.path, e, ros2)) from None
        self._connections = [c for r in self._readers for c in r.connections]
        self._msgtype = {c.topic: c.msgtype for c in self._connections}
        self._store: Any = None
        self._unresolved: set[str] = set()
        self._deser: Any = None

    def close(self) -> None:
        for r in self._readers:
            try:
                r.close()
            except Exception:  # noqa: S112 - a reader that never opened has nothing to close
                continue
        self._readers = []

    def span_ns(self) -> tuple[int, int] | None:
        """(first, last) log time of its messages, from the storage's index; None when it holds none."""
        # rosbags' end_time is one past the last message; an empty bag says (2**63 - 1, 0) or (0, 0)
        ends = [(int(r.start_time), int(r.end_time) - 1) for r in self._readers]
        spans = [(a, max(a, b)) for a, b in ends if 0 < a < 2**63 - 1 and b >= a - 1]
        return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None

    def topics(self) -> dict[str, TopicInfo]:
        out: dict[str, TopicInfo] = {}
        for c in self._connections:
            have = out.get(c.topic)
            count = max(int(c.msgcount), 0) + (have.count if have else 0)
            out[c.topic] = TopicInfo(
                name=c.topic,
                msgtype=c.msgtype,
                count=count,
                kind=rm.kind_of(c.msgtype),
                encoding="cdr" if self.ros2 else "ros1",
            )
        return out

    def messages(
        self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None
    ) -> Iterator[tuple[str, int, Any]]:
        wanted = set(topics)
        gens = []
        for r in self._readers:
            conns = [c for c in r.connections if c.topic in wanted]
            if conns:  # an empty list would mean "every connection" to rosbags
                gens.append(r.messages(connections=conns, start=start_ns, stop=stop_ns))
        try:
            for conn, t, raw in heapq.merge(*gens, key=lambda x: x[1]):
                yield conn.topic, int(t), raw
        except SourceError:
            raise
        except Exception as e:
            raise SourceError("corrupt_file", self.path, _corrupt_message(self.path, e, self.ros2)) from None

    def _typestore(self) -> Any:
        if self._store is not None:
            return self._store
        from rosbags.interfaces import MessageDefinitionFormat
        from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

        base = get_typestore(Stores.LATEST if self.ros2 else Stores.ROS1_NOETIC)
        typs: dict[str, Any] = {}
        for c in self._connections:
            try:
                if c.msgdef.format == MessageDefinitionFormat.MSG:
                    typs.update(get_types_from_msg(c.msgdef.data, c.msgtype))
                elif c.msgdef.format == MessageDefinitionFormat.IDL:
                    sep = "=" * 80 + "\n"
                    for part in c.msgdef.data.split(sep)[1:] if c.msgdef.data.startswith(sep) else [c.msgdef.data]:
                        typs.update(get_types_from_idl(part.split("\n", 1)[1] if part.startswith("IDL: ") else part))
            except Exception as e:  # a definition rosbags cannot parse: the topic becomes undecodable
                self._unresolved.add(c.msgtype)
                typs.pop(c.msgtype, None)
                del e
        user: dict[str, Any] | None = None
        todo = [c.msgtype for c in self._connections if c.msgtype not in typs]
        todo += [n for _, fields in list(typs.values()) for n in referenced_types(fields) if n not in typs]
        while todo:
            name = todo.pop()
            if name in typs:
                continue
            if name in base.fielddefs:
                typs[name] = base.fielddefs[name]
            else:
                if user is None:
                    user = load_msg_dirs(_msg_search_dirs(self.root, self.msg_dirs))
                if name in user:
                    typs[name] = user[name]
                else:
                    self._unresolved.add(name)
                    continue
            todo.extend(n for n in referenced_types(typs[name][1]) if n not in typs)
        store = get_typestore(Stores.EMPTY)
        try:
            store.register(typs)
        except Exception as e:
            raise SourceError(
                "missing_type",
                self.path,
                f"the bag's message definitions do not load ({e}); re-record or give .msg files",
            ) from None
        # a type is only decodable when all the types it uses are known
        bad = set(self._unresolved)
        changed = True
        while changed:
            changed = False
            for name, (_, fields) in typs.items():
                if name not in bad and any(n in bad or n not in typs for n in referenced_types(fields)):
                    bad.add(name)
                    changed = True
        self._unresolved = bad
        self._store = store
        self._deser = store.deserialize_cdr if self.ros2 else store.deserialize_ros1
        return store

    def decode(self, topic: str, raw: Any) -> Any:
        self._typestore()
        msgtype = self._msgtype[topic]
        if msgtype in self._unresolved:
            raise SourceError("missing_type", self.path, _missing_type_message(topic, msgtype, self.root))
        try:
            return self._deser(raw, msgtype)
        except Exception as e:
            raise SourceError(
                "corrupt_file",
                self.path,
                f"topic {topic} ({msgtype}): a message does not decode ({type(e).__name__}: {e}); "
                "the bag is corrupt or its "
                "definition differs from the one used to record; re-record or give the right .msg file",
            ) from None

    def image_stamp_ns(self, topic: str, raw: Any) -> int | None:
        if self._msgtype.get(topic) not in ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage"):
            return rm.header_stamp_ns(self.decode(topic, raw))  # a custom image type: no layout to rely on
        try:
            stamp = rm.raw_header_stamp_ns(raw, self.ros2)
        except Exception:
            return rm.header_stamp_ns(self.decode(topic, raw))
        return stamp or None


def _probe(path: str, options: SourceOptions, *, ros2: bool) -> SessionFile:
    """One ROS 1 bag or ROS 2 storage file's topics and span, for forming sessions (no message read)."""
    rec = _RosRecording((path,), ros2=ros2, root=path, limits=options.limits)
    try:
        return session_file(path, rec.topics(), rec.span_ns())
    finally:
        rec.close()


def _probe_ros1(path: str, options: SourceOptions) -> SessionFile:
    return _probe(path, options, ros2=False)


def _probe_ros2(path: str, options: SourceOptions) -> SessionFile:
    return _probe(path, options, ros2=True)


def _bound_chunks(reader: Any, limits: ReadLimits, path: str) -> None:
    """Swap each chunk's decompressor of an open rosbags ROS 1 reader for one capped at the read budget.

    rosbags decompresses a chunk whole (`bz2.decompress`, `lz4.frame.decompress`) the first time
    a message of it is read; a chunk of zeros expands a thousandfold. rosbags keeps one
    `Chunk(datasize, datapos, decompressor)` per chunk in `reader.chunks`: if that changes, the
    bag is refused rather than read unbounded.
    """
    from rosbags.rosbag1 import reader as r1

    chunks = getattr(reader, "chunks", None)
    if chunks is None and not getattr(reader, "chunk_infos", None):
        return  # a bag without chunks: nothing is decompressed
    kinds = {id(fn): name for name, fn in getattr(r1, "decompressors", {}).items()}
    if not isinstance(chunks, dict) or not kinds:
        raise SourceError(
            "corrupt_file",
            path,
            "this rosbags version keeps ROS 1 chunks in a way robolake cannot bound; "
            "install the rosbags version robolake pins",
        )
    for pos, chunk in list(chunks.items()):
        kind = kinds.get(id(chunk.decompressor))
        if kind is None or not hasattr(chunk, "_replace"):
            raise SourceError("corrupt_file", path, f"chunk at byte {pos} uses a decompressor robolake cannot bound")
        limits.check_bytes(chunk.datasize, path, f"chunk at byte {pos}", "stores")
        chunks[pos] = chunk._replace(
            decompressor=bounded_decompress(kind or "none", limits.max_read_bytes, path, f"chunk at byte {pos}")
        )


def _corrupt_message(path: str, e: Exception, ros2: bool) -> str:
    fix = "re-copy it from the robot" + ("" if ros2 else ", or run `rosbag reindex` on it")
    return f"cannot read the bag ({type(e).__name__}: {e}); it is truncated or corrupt; {fix}"


# --- readers ---------------------------------------------------------------------------------


class Ros2Reader(TopicLogReader):
    """A ROS 2 bag directory (with or without metadata.yaml) or a single ROS 2 storage file.

    Args:
        root: The bag directory or storage file (a session's first file).
        options: Mapping, embodiment, state-only.
        describe_only: Open for `inspect` (a plan that does not resolve is kept, not raised).
        session: Storage files on their own read as one recording (`topics.session`).

    Raises:
        SourceError: the bag cannot be opened or the mapping does not fit it.
    """

    def __init__(
        self,
        root: str,
        options: SourceOptions | None = None,
        *,
        describe_only: bool = False,
        session: Session | None = None,
    ):
        options = options or SourceOptions()
        self.session = session
        self._storage = _storage_of(root)
        self._msg_dirs, notes = _mapping_msg_dirs(options)
        super().__init__(root, format_name=f"ros2-{self._storage}", options=options, describe_only=describe_only)
        self.notes += notes + list(session.notes if session else ())

    def _recordings(self) -> list[tuple[str, ...]]:
        if self.session is not None:
            return [self.session.paths]
        if os.path.isfile(self.root):
            return [(self.root,)]
        meta = os.path.join(self.root, "metadata.yaml")
        if os.path.isfile(meta):
            _check_storage_paths(self.root, meta)
            problem = _metadata_problem(self.root)
            if problem is None:
                return [(self.root,)]
            storage = _storage_files(self.root)
            if not storage:
                raise SourceError("corrupt_file", meta, f"{problem}, and no .db3/.mcap storage files are beside it")
            log.info("%s: %s; reading the %d storage file(s) directly", meta, problem, len(storage))
            self.notes.append(f"{meta}: {problem}; read its {len(storage)} storage file(s) directly")
            return [tuple(storage)]
        parts = _split_parts(self.root)
        return [tuple(parts)] if parts else []

    def open_recording(self, paths: tuple[str, ...]) -> Recording:
        if self.session is not None:
            return SessionRecording.open(self.session, self._file)
        return _RosRecording(paths, ros2=True, root=self.root, msg_dirs=self._msg_dirs, limits=self.limits)

    def _file(self, path: str) -> Recording:
        return _RosRecording((path,), ros2=True, root=self.root, msg_dirs=self._msg_dirs, limits=self.limits)


def _mapping_msg_dirs(options: SourceOptions) -> tuple[tuple[str, ...], list[str]]:
    """The mapping's `msg_dirs` (absolute), and notes on those outside the mapping's folder."""
    if options.mapping is None:
        return (), []
    dirs, notes = options.mapping.msg_dir_paths()
    return tuple(dirs), notes


def _check_storage_paths(root: str, meta: str) -> None:
    """A metadata.yaml may name storage files inside its bag directory only.

    Raises:
        SourceError: `bad_metadata`, naming the entry that points elsewhere.
    """
    import yaml

    try:
        with open(meta) as f:
            info = (yaml.safe_load(f) or {}).get("rosbag2_bagfile_information") or {}
    except Exception:  # unparsable: rosbags says why, and the storage files are read directly
        return
    files = list(info.get("relative_file_paths") or []) + [
        x.get("path", "") for x in info.get("files") or [] if isinstance(x, dict)
    ]
    base = os.path.realpath(root)
    for rel in files:
        full = os.path.realpath(os.path.join(base, str(rel)))
        if os.path.commonpath([full, base]) != base:
            raise SourceError(
                "bad_metadata",
                meta,
                f"relative_file_paths: {rel!r} points outside the bag directory ({full}); "
                "robolake reads a bag's own files only: "
                "move the storage file into the bag directory and fix metadata.yaml",
            )


def _metadata_problem(root: str) -> str | None:
    """Why rosbags cannot open a bag directory through its metadata.yaml (unparsable, incomplete,
    a newer version, naming missing files); None if it opens."""
    from pathlib import Path

    from rosbags.rosbag2 import Reader as Reader2

    try:
        reader = Reader2(Path(root))
        reader.open()
        reader.close()
    except Exception as e:
        return f"the bag does not open through metadata.yaml ({type(e).__name__}: {e})"
    return None


def _storage_files(root: str) -> list[str]:
    """Every .db3/.mcap file of a bag directory, in split-index order (`<name>_<N>.<ext>`)."""

    def key(name: str) -> tuple[str, int, str]:
        m = re.match(r"^(.*?)(?:_(\d+))?\.(db3|mcap)$", name)
        return (m.group(1), int(m.group(2) or -1), name) if m else (name, -1, name)

    names = [n for n in os.listdir(root) if n.endswith((".db3", ".mcap")) and os.path.isfile(os.path.join(root, n))]
    return [os.path.join(root, n) for n in sorted(names, key=key)]


def _storage_of(root: str) -> str:
    if os.path.isfile(root):
        return "mcap" if root.endswith(".mcap") else "sqlite3"
    meta = os.path.join(root, "metadata.yaml")
    if os.path.isfile(meta):
        m = re.search(rb"storage_identifier:\s*(\w+)", _head(meta, 1 << 16))
        if m:
            return m.group(1).decode()
    parts = _split_parts(root) or _storage_files(root)
    return "mcap" if parts and parts[0].endswith(".mcap") else "sqlite3"


class Ros1Reader(TopicLogReader):
    """A ROS 1 bag file (format 2.0), or a session of them read as one recording.

    Args:
        root: The bag (a session's first bag).
        options: Mapping, embodiment, state-only.
        describe_only: Open for `inspect` (a plan that does not resolve is kept, not raised).
        session: Bags read as one recording (`topics.session`).

    Raises:
        SourceError: the bag cannot be opened (truncated, unindexed) or the mapping does not fit it.
    """

    def __init__(
        self,
        root: str,
        options: SourceOptions | None = None,
        *,
        describe_only: bool = False,
        session: Session | None = None,
    ):
        options = options or SourceOptions()
        self.session = session
        self._msg_dirs, notes = _mapping_msg_dirs(options)
        super().__init__(root, format_name="ros1", options=options, describe_only=describe_only)
        self.notes += notes + list(session.notes if session else ())

    def _recordings(self) -> list[tuple[str, ...]]:
        return [self.session.paths] if self.session is not None else [(self.root,)]

    def open_recording(self, paths: tuple[str, ...]) -> Recording:
        if self.session is not None:
            return SessionRecording.open(self.session, self._file)
        return self._file(paths[0])

    def _file(self, path: str) -> Recording:
        return _RosRecording((path,), ros2=False, root=self.root, msg_dirs=self._msg_dirs, limits=self.limits)


def _describe_ros2(path: str, options: SourceOptions) -> dict[str, Any]:
    return Ros2Reader(path, options, describe_only=True).inspect()


def _describe_ros1(path: str, options: SourceOptions) -> dict[str, Any]:
    return Ros1Reader(path, options, describe_only=True).inspect()


ROS2_FORMAT = SourceFormat(
    name="ros2",
    description="ROS 2 bag directory, sqlite3 or MCAP storage (metadata.yaml, or <dir>_N.db3/.mcap files)",
    detect=is_ros2_bag_dir,
    open=Ros2Reader,
    unit="directory",
    inspect_unit=_describe_ros2,
)
ROS2_FILE_FORMAT = SourceFormat(
    name="ros2-file",
    description="ROS 2 storage file on its own (.db3, or .mcap with the ros2 profile)",
    detect=is_ros2_storage_file,
    open=Ros2Reader,
    unit="file",
    inspect_unit=_describe_ros2,
    sessions=session_hooks(_probe_ros2, Ros2Reader),
)
ROS1_FORMAT = SourceFormat(
    name="ros1",
    description="ROS 1 bag file (#ROSBAG V2.0), uncompressed or bz2/lz4 chunks",
    detect=is_ros1_bag,
    open=Ros1Reader,
    unit="file",
    inspect_unit=_describe_ros1,
    sessions=session_hooks(_probe_ros1, Ros1Reader),
)
