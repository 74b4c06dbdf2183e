"""MCAP files in the encodings robot tools write besides JSON: ROS 1, protobuf, and a mix.

The same teleop rig as `robolake.testing.ros` (joints 100 Hz, commands 50 Hz, a JPEG camera at
15 fps, from the same known functions), so `Recorded` checks apply unchanged:

- `write_mcap_ros1`: what `rosbag-to-mcap` / `mcap convert` make of a ROS 1 bag, written with
  `mcap-ros1-support`'s writer (profile `ros1`, `ros1msg` schemas, `ros1` messages); messages
  are serialized by rosbags, the writer takes them through the `_type` / `_full_text` /
  `serialize` interface of genpy messages.
- `write_mcap_protobuf`: Foxglove-style protobuf, written with `mcap-protobuf-support`'s
  writer (`FileDescriptorSet` schemas): `foxglove.CompressedImage` / `foxglove.RawImage` /
  `foxglove.CompressedVideo` (a `video` topic of `Layout.extra`) and a
  stack's own `robot.JointState` / `robot.JointCommand`, built at run time from descriptors
  (no generated code).
- `write_mcap_mixed`: one file with JSON joint states, ROS 1 commands and a protobuf camera.

The writers import `mcap_ros1` / `mcap_protobuf` (the dev extra) when they run.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from robolake.testing.ros import Layout, Recorded, _messages, _ros_msg, ros1_typestore

__all__ = ["write_mcap_ros1", "write_mcap_protobuf", "write_mcap_mixed", "protobuf_types"]


def _ros1_kind(ts: Any, msgtype: str) -> type:
    """A class the mcap-ros1 writer accepts (`_type`, `_full_text`, `serialize`), backed by rosbags."""
    text, _ = ts.generate_msgdef(msgtype, ros_version=1)
    short = msgtype.replace("/msg/", "/")

    def serialize(self: Any, buf: io.BytesIO) -> None:
        buf.write(bytes(ts.serialize_ros1(self.msg, msgtype)))

    return type(
        "Ros1Message",
        (),
        {
            "_type": short,
            "_full_text": text,
            "__init__": lambda self, msg: setattr(self, "msg", msg),
            "serialize": serialize,
        },
    )


def write_mcap_ros1(path: Path, layout: Layout) -> Recorded:
    """An MCAP file of ROS 1 messages (profile `ros1`), as ROS 1 tools convert bags to MCAP."""
    from mcap_ros1.writer import Writer

    ts = ros1_typestore()
    msgs, rec = _messages(layout)
    kinds: dict[str, type] = {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        w = Writer(f)
        for seq, (log_ns, topic, stamp_ns, payload) in enumerate(msgs):
            msgtype, msg = _ros_msg(ts, False, stamp_ns, payload)
            if msgtype not in kinds:
                kinds[msgtype] = _ros1_kind(ts, msgtype)
            w.write_message(topic, kinds[msgtype](msg), log_time=log_ns, publish_time=log_ns, sequence=seq)
        w.finish()
    return rec


def protobuf_types() -> dict[str, Any]:
    """Message classes `foxglove.CompressedImage`, `foxglove.RawImage`, `foxglove.CompressedVideo`,
    `robot.JointState`, `robot.JointCommand`,
    `robot.Instruction`, built from descriptors at run time."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    specs = {
        "foxglove": {
            "CompressedImage": [
                ("timestamp", 1, "ts"),
                ("frame_id", 4, F.TYPE_STRING),
                ("data", 2, F.TYPE_BYTES),
                ("format", 3, F.TYPE_STRING),
            ],
            "CompressedVideo": [
                ("timestamp", 1, "ts"),
                ("frame_id", 2, F.TYPE_STRING),
                ("data", 3, F.TYPE_BYTES),
                ("format", 4, F.TYPE_STRING),
            ],
            "RawImage": [
                ("timestamp", 1, "ts"),
                ("frame_id", 7, F.TYPE_STRING),
                ("width", 2, F.TYPE_FIXED32),
                ("height", 3, F.TYPE_FIXED32),
                ("encoding", 4, F.TYPE_STRING),
                ("step", 5, F.TYPE_FIXED32),
                ("data", 6, F.TYPE_BYTES),
            ],
        },
        "robot": {
            "JointState": [("timestamp", 1, "ts"), ("name", 2, "rs"), ("position", 3, "rd")],
            "JointCommand": [("timestamp", 1, "ts"), ("positions", 2, "rd")],
            "Instruction": [("data", 1, F.TYPE_STRING)],
        },
    }
    out: dict[str, Any] = {}
    for pkg, messages in specs.items():
        fdp = descriptor_pb2.FileDescriptorProto(
            name=f"{pkg}/messages.proto", package=pkg, syntax="proto3", dependency=["google/protobuf/timestamp.proto"]
        )
        for name, fields in messages.items():
            m = fdp.message_type.add(name=name)
            for fname, number, kind in fields:
                if kind == "ts":
                    m.field.add(
                        name=fname,
                        number=number,
                        type=F.TYPE_MESSAGE,
                        type_name=".google.protobuf.Timestamp",
                        label=F.LABEL_OPTIONAL,
                    )
                elif kind == "rs":
                    m.field.add(name=fname, number=number, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
                elif kind == "rd":
                    m.field.add(name=fname, number=number, type=F.TYPE_DOUBLE, label=F.LABEL_REPEATED)
                else:
                    m.field.add(name=fname, number=number, type=kind, label=F.LABEL_OPTIONAL)
        pool.Add(fdp)
        for name in messages:
            out[f"{pkg}.{name}"] = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{pkg}.{name}"))
    return out


def _protobuf_message(types: dict[str, Any], topic: str, stamp_ns: int, payload: tuple[str, Any]) -> Any:
    kind, value = payload
    ts = {"seconds": stamp_ns // 1_000_000_000, "nanos": stamp_ns % 1_000_000_000}
    if kind == "joint" and topic == "/joint_states":
        names, vals = value
        msg = types["robot.JointState"](name=list(names), position=[float(x) for x in vals])
    elif kind == "joint":
        msg = types["robot.JointCommand"](positions=[float(x) for x in value[1]])
    elif kind == "jpeg":
        msg = types["foxglove.CompressedImage"](frame_id="wrist", data=value, format="jpeg")
    elif kind == "rgb8":
        h, w, _ = value.shape
        msg = types["foxglove.RawImage"](
            frame_id="top", width=w, height=h, encoding="rgb8", step=w * 3, data=value.tobytes()
        )
    elif kind == "string":
        return types["robot.Instruction"](data=value)
    elif kind == "video":
        fmt, data = value
        msg = types["foxglove.CompressedVideo"](frame_id="camera", data=data, format=fmt)
    else:
        raise ValueError(kind)
    msg.timestamp.seconds, msg.timestamp.nanos = ts["seconds"], ts["nanos"]
    return msg


def write_mcap_protobuf(path: Path, layout: Layout) -> Recorded:
    """An MCAP file of protobuf messages (Foxglove schemas and a stack's own), with `mcap-protobuf-support`."""
    from mcap_protobuf.writer import Writer

    types = protobuf_types()
    msgs, rec = _messages(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        w = Writer(f)
        for seq, (log_ns, topic, stamp_ns, payload) in enumerate(msgs):
            w.write_message(
                topic,
                _protobuf_message(types, topic, stamp_ns, payload),
                log_time=log_ns,
                publish_time=log_ns,
                sequence=seq,
            )
        w.finish()
    return rec


def write_mcap_mixed(path: Path, layout: Layout) -> Recorded:
    """One MCAP file, three encodings: JSON `/joint_states`, ROS 1 `/arm/joint_command`, a protobuf camera."""
    import json

    from mcap.writer import Writer
    from mcap_protobuf.schema import register_schema

    types = protobuf_types()
    ts = ros1_typestore()
    msgs, rec = _messages(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile="", library="robolake-tests")
        channels: dict[str, int] = {}
        for seq, (log_ns, topic, stamp_ns, payload) in enumerate(msgs):
            kind, value = payload
            if topic == "/joint_states":
                if topic not in channels:
                    sid = w.register_schema(name="robot.JointState", encoding="jsonschema", data=b'{"type": "object"}')
                    channels[topic] = w.register_channel(topic=topic, message_encoding="json", schema_id=sid)
                names, vals = value
                data = json.dumps(
                    {
                        "timestamp": {"sec": stamp_ns // 10**9, "nsec": stamp_ns % 10**9},
                        "name": list(names),
                        "position": [float(x) for x in vals],
                    }
                ).encode()
            elif kind in ("jpeg", "rgb8"):
                msg = _protobuf_message(types, topic, stamp_ns, payload)
                if topic not in channels:
                    channels[topic] = w.register_channel(
                        topic=topic, message_encoding="protobuf", schema_id=register_schema(w, type(msg))
                    )
                data = msg.SerializeToString()
            else:
                msgtype, rmsg = _ros_msg(ts, False, stamp_ns, payload)
                if topic not in channels:
                    text, _ = ts.generate_msgdef(msgtype, ros_version=1)
                    sid = w.register_schema(name=msgtype.replace("/msg/", "/"), encoding="ros1msg", data=text.encode())
                    channels[topic] = w.register_channel(topic=topic, message_encoding="ros1", schema_id=sid)
                data = bytes(ts.serialize_ros1(rmsg, msgtype))
            w.add_message(channel_id=channels[topic], log_time=log_ns, publish_time=log_ns, sequence=seq, data=data)
        w.finish()
    return rec
