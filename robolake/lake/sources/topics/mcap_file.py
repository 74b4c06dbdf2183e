"""Reader for MCAP files outside rosbag2: JSON, ROS 1, ROS 2 (CDR) and protobuf channels, mixed.

MCAP is a container; each channel says how its messages are encoded and carries its schema.
What robot stacks write:

* `json` + `jsonschema` (Foxglove SDK users, custom Python/C++ recorders): messages are JSON
  objects; byte fields are base64 strings (the Foxglove convention).
* `ros1` + `ros1msg` (`rosbag-to-mcap`, `mcap convert` of a ROS 1 bag, ROS 1 recorders):
  the schema is the ROS 1 message definition with its dependencies, decoded with rosbags.
* `cdr` + `ros2msg` / `ros2idl` (ROS 2 tools writing outside a bag directory): likewise.
* `protobuf` + a serialized `FileDescriptorSet` (Foxglove's schemas, `mcap-protobuf-support`):
  decoded with the protobuf runtime into plain dicts, so `foxglove.CompressedImage`,
  `foxglove.RawImage` and a stack's own JointState-like types work with no generated code.

Any mix of these in one file is fine: each channel is decoded by its own encoding, with type
stores kept apart (ROS 1 and ROS 2 both define `std_msgs/Header`, differently). Everything
downstream (defaults, mapping, resampling, bad-input checks) is shared with the ROS readers
(`topic_log`). A stamp is `header.stamp`, else a top-level `timestamp` ({sec, nsec} in JSON,
{seconds, nanos} in protobuf), else the MCAP log time. Channels of another encoding (flatbuffer,
cbor, ...) are listed by `inspect`; mapping one quarantines the file naming the encoding.

An MCAP file whose header profile is `ros2` is a rosbag2 storage file and goes to the ROS 2
reader; this one claims the others. Before any chunk is read, the sizes the summary declares for
it are checked against the read budget (`limits`). Several MCAP files of one folder (recorded side
by side, or numbered chunks `name_0.mcap, name_1.mcap, ...`) can be read as one recording
(`--session`, `topics.session`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.limits import ReadLimits
from robolake.lake.sources.registry import Session, SessionFile, SourceFormat, SourceOptions
from robolake.lake.sources.topics import ros_messages as rm
from robolake.lake.sources.topics.log import TopicLogReader
from robolake.lake.sources.topics.plan import Recording, TopicInfo
from robolake.lake.sources.topics.rosbag import mcap_profile, referenced_types
from robolake.lake.sources.topics.session import SessionRecording, session_file, session_hooks

__all__ = ["McapReader", "is_non_ros_mcap", "MCAP_FORMAT", "ENCODINGS"]

ENCODINGS = ("json", "ros1", "cdr", "protobuf")


def is_non_ros_mcap(path: str) -> bool:
    """An MCAP file (magic bytes) whose profile is not `ros2`."""
    if not os.path.isfile(path):
        return False
    profile = mcap_profile(path)
    return profile is not None and profile != "ros2"


def _ros_name(name: str) -> str:
    """`sensor_msgs/JointState` -> `sensor_msgs/msg/JointState` (rosbags' spelling)."""
    parts = name.split("/")
    return f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else name


class _RosStore:
    """One rosbags type store for all channels of one ROS encoding (ros1 or cdr) in a file."""

    def __init__(self, ros2: bool):
        from rosbags.typesys import Stores, get_typestore

        self.ros2 = ros2
        self.base = get_typestore(Stores.LATEST if ros2 else Stores.ROS1_NOETIC)
        self.typs: dict[str, Any] = {}
        self.store: Any = None

    def add(self, name: str, encoding: str, data: bytes) -> str:
        from rosbags.typesys import get_types_from_idl, get_types_from_msg

        text = data.decode("utf-8")
        if encoding == "ros2idl":
            sep = "=" * 80 + "\n"
            for part in text.split(sep)[1:] if text.startswith(sep) else [text]:
                self.typs.update(get_types_from_idl(part.split("\n", 1)[1] if part.startswith("IDL: ") else part))
        else:
            self.typs.update(get_types_from_msg(text, _ros_name(name)))
        self.store = None
        return _ros_name(name)

    def deserializer(self) -> Callable[[bytes, str], Any]:
        if self.store is None:
            from rosbags.typesys import Stores, get_typestore

            todo = [n for _, fields in list(self.typs.values()) for n in referenced_types(fields) if n not in self.typs]
            while todo:  # definitions the schema left out (rare): the standard ones
                n = todo.pop()
                if n not in self.typs and n in self.base.fielddefs:
                    self.typs[n] = self.base.fielddefs[n]
                    todo += [x for x in referenced_types(self.typs[n][1]) if x not in self.typs]
            store = get_typestore(Stores.EMPTY)
            store.register(self.typs)
            self.store = store
        return self.store.deserialize_cdr if self.ros2 else self.store.deserialize_ros1


def _pb_value(value: Any, field: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor

    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.GetOptions().map_entry:
            return {k: _pb_value(v, field.message_type.fields_by_name["value"]) for k, v in value.items()}
        return [_pb_dict(v) for v in value] if _repeated(field) else _pb_dict(value)
    if _repeated(field):
        return list(value)
    return value


def _repeated(field: Any) -> bool:
    label = getattr(field, "label", None)
    return bool(getattr(field, "is_repeated", label == 3))  # LABEL_REPEATED


def _pb_dict(msg: Any) -> dict[str, Any]:
    """A protobuf message as a plain dict of every field (defaults included), bytes kept as bytes."""
    return {f.name: _pb_value(getattr(msg, f.name), f) for f in msg.DESCRIPTOR.fields}


def _protobuf_decoder(name: str, data: bytes) -> Callable[[bytes], Any]:
    """A decoder of messages of type `name` from a serialized FileDescriptorSet."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(data)
    pool = descriptor_pool.DescriptorPool()
    pending = {f.name: f for f in fds.file}
    added: set[str] = set()
    while pending:  # dependencies first, whatever order the writer used
        ready = [f for f in pending.values() if all(d in added or d not in pending for d in f.dependency)]
        if not ready:
            raise ValueError(f"the schema's files depend on each other in a cycle: {sorted(pending)}")
        for f in ready:
            for dep in f.dependency:
                if dep not in added and dep not in pending:  # a well-known type the writer left out
                    pool.AddSerializedFile(descriptor_pool.Default().FindFileByName(dep).serialized_pb)
                    added.add(dep)
            pool.Add(f)
            added.add(f.name)
            del pending[f.name]
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return lambda raw: _pb_dict(cls.FromString(bytes(raw)))


class _McapRecording(Recording):
    def __init__(self, path: str, limits: ReadLimits):
        from mcap.reader import make_reader

        self.path = path
        try:
            self._file: Any = open(path, "rb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise SourceError("corrupt_file", path, f"cannot open the MCAP file ({e})") from None
        try:
            self._reader = make_reader(self._file)
            summary = self._reader.get_summary()
            if summary is None:
                raise ValueError("the file has no summary section (recording interrupted before it was closed)")
            for ci in summary.chunk_indexes:  # before any chunk is decompressed
                where = f"chunk at byte {ci.chunk_start_offset}"
                limits.check_bytes(
                    ci.uncompressed_size, path, where, f"{ci.compression or 'uncompressed'} chunk declares"
                )
                limits.check_bytes(ci.compressed_size, path, where, "stores")
            stats = summary.statistics
            counts = dict(stats.channel_message_counts) if stats else None
            self._span = (int(stats.message_start_time), int(stats.message_end_time)) if stats else None
            if counts is None:
                counts = {}
                for _, channel, message in self._reader.iter_messages():
                    counts[channel.id] = counts.get(channel.id, 0) + 1
                    t = int(message.log_time)
                    self._span = (min(t, self._span[0]), max(t, self._span[1])) if self._span else (t, t)
            if not sum(counts.values()):
                self._span = None
        except SourceError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise SourceError(
                "corrupt_file",
                path,
                f"cannot read the MCAP file ({type(e).__name__}: {e}); it is truncated or corrupt; "
                "re-copy it, or recover it with `mcap recover`",
            ) from None
        self.topic_infos: dict[str, TopicInfo] = {}
        self._schema: dict[str, Any] = {}
        for cid, ch in summary.channels.items():
            schema = summary.schemas.get(ch.schema_id)
            name = schema.name if schema is not None else ch.topic
            have = self.topic_infos.get(ch.topic)
            self.topic_infos[ch.topic] = TopicInfo(
                name=ch.topic,
                msgtype=name,
                count=int(counts.get(cid, 0)) + (have.count if have else 0),
                kind=rm.kind_of(name),
                encoding=ch.message_encoding,
            )
            self._schema[ch.topic] = schema
        self._decoders: dict[str, Callable[[bytes], Any]] = {}
        self._stores: dict[bool, _RosStore] = {}

    def close(self) -> None:
        f = getattr(self, "_file", None)
        if f is not None:
            f.close()
            self._file = None

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self.topic_infos)

    def span_ns(self) -> tuple[int, int] | None:
        """(first, last) log time of its messages, from the summary; None when it holds none."""
        return self._span

    def encodings(self) -> set[str]:
        return {t.encoding for t in self.topic_infos.values()}

    def messages(
        self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None
    ) -> Iterator[tuple[str, int, Any]]:
        if not topics:
            return
        try:
            for _, channel, message in self._reader.iter_messages(
                topics=list(topics), start_time=start_ns, end_time=stop_ns, log_time_order=True
            ):
                yield channel.topic, int(message.log_time), message.data
        except Exception as e:
            raise SourceError(
                "corrupt_file",
                self.path,
                f"cannot read messages ({type(e).__name__}: {e}); the file is truncated or corrupt",
            ) from None

    def _decoder(self, topic: str) -> Callable[[bytes], Any]:
        enc = self.topic_infos[topic].encoding
        schema = self._schema.get(topic)
        if enc == "json":
            return json.loads
        if enc not in ENCODINGS or schema is None:
            raise SourceError(
                "missing_type",
                self.path,
                f"topic {topic} uses message encoding {enc!r}{'' if schema is not None else ' with no schema'}; "
                f"robolake reads {', '.join(ENCODINGS)} channels of MCAP files; "
                "convert the topic or drop it from the mapping",
            )
        try:
            if enc == "protobuf":
                return _protobuf_decoder(schema.name, schema.data)
            ros2 = enc == "cdr"
            store = self._stores.setdefault(ros2, _RosStore(ros2))
            name = store.add(schema.name, schema.encoding, schema.data)
            deser = store.deserializer()
            return lambda raw: deser(bytes(raw), name)
        except Exception as e:
            raise SourceError(
                "missing_type",
                self.path,
                f"topic {topic}: its {schema.encoding} schema {schema.name!r} does not load ({type(e).__name__}: {e}); "
                "the file is damaged or was written by a tool robolake does not know; drop the topic from the mapping",
            ) from None

    def decode(self, topic: str, raw: Any) -> Any:
        if topic not in self._decoders:
            self._decoders[topic] = self._decoder(topic)
        try:
            return self._decoders[topic](raw)
        except SourceError:
            raise
        except Exception as e:
            raise SourceError(
                "corrupt_file", self.path, f"topic {topic}: a message does not decode ({type(e).__name__}: {e})"
            ) from None

    def image_stamp_ns(self, topic: str, raw: Any) -> int | None:
        info = self.topic_infos[topic]
        if info.encoding in ("ros1", "cdr") and rm.short_type(info.msgtype) in (
            "sensor_msgs/Image",
            "sensor_msgs/CompressedImage",
        ):
            try:
                return rm.raw_header_stamp_ns(raw, info.encoding == "cdr") or None
            except Exception:  # a short message: decode it and let the decoder say why
                pass
        return rm.header_stamp_ns(self.decode(topic, raw))


class McapReader(TopicLogReader):
    """One MCAP file of JSON, ROS 1, ROS 2 or protobuf channels (any mix), or a session of them.

    `format_name` says the encodings: `mcap-json`, `mcap-ros1`, `mcap-protobuf`, `mcap-cdr`,
    or `mcap-mixed`.

    Args:
        root: The file (a session's first file).
        options: Mapping, embodiment, state-only.
        describe_only: Open for `inspect` (a plan that does not resolve is kept, not raised).
        session: Files read as one recording (`topics.session`).

    Raises:
        SourceError: the file cannot be read, or the mapping does not fit it.
    """

    def __init__(
        self,
        root: str,
        options: SourceOptions | None = None,
        *,
        describe_only: bool = False,
        session: Session | None = None,
    ):
        self.session = session
        super().__init__(root, format_name="mcap", options=options, describe_only=describe_only)
        encodings = sorted({t.encoding for t in self.topic_infos.values()}) or ["json"]
        self.format_name = f"mcap-{encodings[0]}" if len(encodings) == 1 else "mcap-mixed"
        self.notes += list(session.notes if session else ())

    def _recordings(self) -> list[tuple[str, ...]]:
        return [self.session.paths] if self.session is not None else [(self.root,)]

    def open_recording(self, paths: tuple[str, ...]) -> Recording:
        if self.session is not None:
            return SessionRecording.open(self.session, self._file)
        return self._file(paths[0])

    def _file(self, path: str) -> Recording:
        return _McapRecording(path, self.limits)


def _probe(path: str, options: SourceOptions) -> SessionFile:
    """One MCAP file's topics and span (from its summary), for forming sessions."""
    rec = _McapRecording(path, options.limits)
    try:
        return session_file(path, rec.topics(), rec.span_ns())
    finally:
        rec.close()


def _describe(path: str, options: SourceOptions) -> dict[str, Any]:
    return McapReader(path, options, describe_only=True).inspect()


MCAP_FORMAT = SourceFormat(
    name="mcap",
    description="MCAP file outside rosbag2: JSON, ROS 1, ROS 2 (CDR) or protobuf channels, mixed",
    detect=is_non_ros_mcap,
    open=McapReader,
    unit="file",
    inspect_unit=_describe,
    sessions=session_hooks(_probe, McapReader),
)
