"""Recorder-like ROS 1 / ROS 2 / MCAP recordings, written with each format's own writer.

These write real recordings (rosbags' rosbag2 and rosbag1 writers, the `mcap` writer), for
tests, benchmarks and demos. The layout is what a teleop rig records: joints at 100 Hz
(`/joint_states`, 3 joints, header stamps with jitter), a command topic at 50 Hz
(`/arm/joint_command`, JointState), a camera at 15 fps (`/wrist/image_raw/compressed` JPEG, or
raw `/top/image_raw` rgb8; a `video` topic among `Layout.extra`, from `testing.video`, is a
`foxglove_msgs/msg/CompressedVideo` / `foxglove.CompressedVideo` camera). Values are smooth
known functions of the header time, and every writer returns what it `Recorded`, so a test can
recompute the resampled episode exactly.
`Layout`'s bad-input knobs (a NaN, a clock jump, a joint that appears, frames that change size,
a camera that never overlaps, pauses) write the recordings ingest must quarantine or split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robolake.testing.images import jpeg

__all__ = [
    "JOINTS",
    "T0_NS",
    "JSON_SCHEMAS",
    "Layout",
    "Recorded",
    "schedule",
    "joint_values",
    "command_values",
    "jpeg_frame",
    "rgb_frame",
    "write_ros2",
    "write_ros1",
    "write_mcap_json",
    "ros1_typestore",
]

JOINTS = ("shoulder", "elbow", "wrist")
T0_NS = 1_700_000_000 * 1_000_000_000


def joint_values(t: np.ndarray | float) -> np.ndarray:
    """Positions of the 3 joints at time t (seconds since T0)."""
    t = np.asarray(t, dtype=np.float64)
    return np.stack([np.sin(t), 0.5 * t, np.cos(2 * t)], axis=-1)


def command_values(t: np.ndarray | float) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64)
    return np.stack([1.0 + t, -t, 2 * t], axis=-1)


def jpeg_frame(i: int, size: tuple[int, int] = (24, 32)) -> bytes:
    """Camera frame `i` as the JPEG a `/compressed` topic carries."""
    img = np.zeros((*size, 3), np.uint8)
    img[..., 0] = (i * 17) % 256
    img[: size[0] // 2, :, 1] = 200
    return jpeg(img, quality=90)


def rgb_frame(i: int, size: tuple[int, int] = (24, 32)) -> np.ndarray:
    """Camera frame `i` as the rgb8 pixels a raw `Image` topic carries."""
    img = np.zeros((*size, 3), np.uint8)
    img[..., 0] = (i * 17) % 256
    img[..., 2] = 99
    return img


@dataclass
class Layout:
    """What to record (seconds are since T0)."""

    seconds: float = 1.0
    joint_hz: float = 100.0
    cmd_hz: float | None = 50.0
    cam_hz: float | None = 15.0
    camera: str = "compressed"  # compressed | raw | none
    jitter_s: float = 0.002
    seed: int = 0
    # bad-input knobs
    nan_at: int | None = None  # joint message index whose position is NaN
    backwards_at: int | None = None  # joint message index whose stamp jumps 0.5 s back
    width_change_at: int | None = None  # joint message index from which a 4th joint appears
    image_resize_at: int | None = None  # camera frame index from which frames are 48x64
    camera_offset_s: float = 0.0  # shift the camera stream in time (no-overlap case)
    gaps: tuple[float, ...] = ()  # pauses inserted (seconds) after each `seconds` block
    offset_s: float = 0.0  # shift every stream (the second file of a split bag)
    burst: int = 1  # joint messages published in bursts of this many sharing one stamp
    extra: dict[str, Any] = field(default_factory=dict)  # topic -> (kind, [(t, value[, log t]), ...]) also recorded


@dataclass
class Recorded:
    """What a writer recorded: stamps (seconds since T0) and values of each stream, and the frames."""

    joint_t: np.ndarray
    joint_v: np.ndarray
    cmd_t: np.ndarray
    cmd_v: np.ndarray
    cam_t: np.ndarray
    frames: list[bytes]


def schedule(layout: Layout) -> dict[str, np.ndarray]:
    """Message times (seconds since T0, jittered) of the `joint`, `cmd` and `cam` streams."""
    rng = np.random.default_rng(layout.seed)

    def times(hz: float, offset: float = 0.0) -> np.ndarray:
        blocks = []
        start = 0.0
        for k in range(len(layout.gaps) + 1):
            n = int(round(layout.seconds * hz))
            blocks.append(start + np.arange(n) / hz)
            start += layout.seconds + (layout.gaps[k] if k < len(layout.gaps) else 0.0)
        t = np.concatenate(blocks) + offset + layout.offset_s
        return t + rng.uniform(-layout.jitter_s, layout.jitter_s, size=len(t)) * (np.arange(len(t)) > 0)

    out = {"joint": times(layout.joint_hz)}
    out["cmd"] = times(layout.cmd_hz) if layout.cmd_hz else np.zeros(0)
    out["cam"] = (
        times(layout.cam_hz, layout.camera_offset_s) if layout.cam_hz and layout.camera != "none" else np.zeros(0)
    )
    return out


def _messages(layout: Layout) -> tuple[list[tuple[int, str, int, Any]], Recorded]:
    """(log_ns, topic, stamp_ns, payload) sorted by log time, and what was recorded."""
    s = schedule(layout)
    jt = s["joint"].copy()
    jv = joint_values(jt)  # each message its own state, even when a burst shares one stamp
    if layout.burst > 1:
        jt = jt[(np.arange(len(jt)) // layout.burst) * layout.burst]
    stamps = jt.copy()
    if layout.backwards_at is not None:
        stamps[layout.backwards_at] -= 0.5
    if layout.nan_at is not None:
        jv[layout.nan_at, 1] = np.nan
    msgs: list[tuple[int, str, int, Any]] = []
    latency = 3_000_000
    for i, (t, st) in enumerate(zip(jt, stamps, strict=True)):
        vals = list(jv[i])
        names = list(JOINTS)
        if layout.width_change_at is not None and i >= layout.width_change_at:
            names.append("gripper")
            vals.append(0.0)
        ns = T0_NS + int(round(st * 1e9))
        msgs.append((T0_NS + int(round(t * 1e9)) + latency, "/joint_states", ns, ("joint", (names, np.array(vals)))))
    cv = command_values(s["cmd"])
    for i, t in enumerate(s["cmd"]):
        ns = T0_NS + int(round(t * 1e9))
        msgs.append((ns + latency, "/arm/joint_command", ns, ("joint", (list(JOINTS), cv[i]))))
    frames: list[bytes] = []
    for i, t in enumerate(s["cam"]):
        size = (48, 64) if layout.image_resize_at is not None and i >= layout.image_resize_at else (24, 32)
        ns = T0_NS + int(round(t * 1e9))
        if layout.camera == "compressed":
            data = jpeg_frame(i, size)
            frames.append(data)
            msgs.append((ns + latency, "/wrist/image_raw/compressed", ns, ("jpeg", data)))
        else:
            img = rgb_frame(i, size)
            frames.append(img.tobytes())
            msgs.append((ns + latency, "/top/image_raw", ns, ("rgb8", img)))
    for topic, (kind, entries) in layout.extra.items():
        for t, value, *logged in entries:  # (t, value) or (t, value, log t): a stamp apart from its log time
            ns = T0_NS + int(round(t * 1e9))
            log_ns = T0_NS + int(round(logged[0] * 1e9)) if logged else ns + latency
            msgs.append((log_ns, topic, ns, (kind, value)))
    msgs.sort(key=lambda m: m[0])
    rec = Recorded(joint_t=stamps, joint_v=jv, cmd_t=s["cmd"], cmd_v=cv, cam_t=s["cam"], frames=frames)
    return msgs, rec


def _ros_msg(ts: Any, ros2: bool, stamp_ns: int, payload: tuple[str, Any]) -> tuple[str, Any]:
    """(msgtype, message object) in the typestore `ts`."""
    T = ts.types
    Time = T["builtin_interfaces/msg/Time"]
    stamp = Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)
    Header = T["std_msgs/msg/Header"]
    header = Header(stamp=stamp, frame_id="base") if ros2 else Header(seq=0, stamp=stamp, frame_id="base")
    kind, value = payload
    if kind == "joint":
        names, vals = value
        empty = np.zeros(0, np.float64)
        return "sensor_msgs/msg/JointState", T["sensor_msgs/msg/JointState"](
            header=header, name=list(names), position=np.asarray(vals, np.float64), velocity=empty, effort=empty
        )
    if kind == "jpeg":
        return "sensor_msgs/msg/CompressedImage", T["sensor_msgs/msg/CompressedImage"](
            header=header, format="rgb8; jpeg compressed bgr8", data=np.frombuffer(value, np.uint8)
        )
    if kind == "rgb8":
        h, w, _ = value.shape
        return "sensor_msgs/msg/Image", T["sensor_msgs/msg/Image"](
            header=header,
            height=h,
            width=w,
            encoding="rgb8",
            is_bigendian=0,
            step=w * 3,
            data=np.ascontiguousarray(value).reshape(-1),
        )
    if kind == "bool":
        return "std_msgs/msg/Bool", T["std_msgs/msg/Bool"](data=bool(value))
    if kind == "string":
        return "std_msgs/msg/String", T["std_msgs/msg/String"](data=str(value))
    if kind == "float64":
        return "std_msgs/msg/Float64", T["std_msgs/msg/Float64"](data=float(value))
    if kind == "int64":  # encoder ticks, an enum
        return "std_msgs/msg/Int64", T["std_msgs/msg/Int64"](data=int(value))
    if kind == "empty":  # a trigger: a button press, a marker
        return "std_msgs/msg/Empty", T["std_msgs/msg/Empty"]()
    if kind == "multiarray":
        Layout_ = T["std_msgs/msg/MultiArrayLayout"]
        return "std_msgs/msg/Float64MultiArray", T["std_msgs/msg/Float64MultiArray"](
            layout=Layout_(dim=[], data_offset=0), data=np.asarray(value, np.float64)
        )
    if kind == "pose_stamped":
        P, Q, Pose = T["geometry_msgs/msg/Point"], T["geometry_msgs/msg/Quaternion"], T["geometry_msgs/msg/Pose"]
        v = np.asarray(value, np.float64)
        return "geometry_msgs/msg/PoseStamped", T["geometry_msgs/msg/PoseStamped"](
            header=header, pose=Pose(position=P(x=v[0], y=v[1], z=v[2]), orientation=Q(x=v[3], y=v[4], z=v[5], w=v[6]))
        )
    V, Q = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    if kind in ("twist", "twist_stamped"):
        v = np.asarray(value, np.float64)
        tw = T["geometry_msgs/msg/Twist"](linear=V(x=v[0], y=v[1], z=v[2]), angular=V(x=v[3], y=v[4], z=v[5]))
        if kind == "twist":
            return "geometry_msgs/msg/Twist", tw
        return "geometry_msgs/msg/TwistStamped", T["geometry_msgs/msg/TwistStamped"](header=header, twist=tw)
    if kind == "tf":  # [(parent, child, [x y z qx qy qz qw]), ...] in one TFMessage
        trs = []
        for parent, child, v in value:
            h = Header(stamp=stamp, frame_id=parent) if ros2 else Header(seq=0, stamp=stamp, frame_id=parent)
            tr = T["geometry_msgs/msg/Transform"](
                translation=V(x=v[0], y=v[1], z=v[2]), rotation=Q(x=v[3], y=v[4], z=v[5], w=v[6])
            )
            trs.append(T["geometry_msgs/msg/TransformStamped"](header=h, child_frame_id=child, transform=tr))
        return "tf2_msgs/msg/TFMessage", T["tf2_msgs/msg/TFMessage"](transforms=trs)
    if kind == "odometry":  # x y z qx qy qz qw, vx vy vz wx wy wz
        v = np.asarray(value, np.float64)
        pose = T["geometry_msgs/msg/Pose"](
            position=T["geometry_msgs/msg/Point"](x=v[0], y=v[1], z=v[2]), orientation=Q(x=v[3], y=v[4], z=v[5], w=v[6])
        )
        tw = T["geometry_msgs/msg/Twist"](linear=V(x=v[7], y=v[8], z=v[9]), angular=V(x=v[10], y=v[11], z=v[12]))
        return "nav_msgs/msg/Odometry", T["nav_msgs/msg/Odometry"](
            header=header,
            child_frame_id="base_link",
            pose=T["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.full(36, 0.01)),
            twist=T["geometry_msgs/msg/TwistWithCovariance"](twist=tw, covariance=np.full(36, 0.02)),
        )
    if kind == "imu":  # qx qy qz qw, wx wy wz, ax ay az
        v = np.asarray(value, np.float64)
        return "sensor_msgs/msg/Imu", T["sensor_msgs/msg/Imu"](
            header=header,
            orientation=Q(x=v[0], y=v[1], z=v[2], w=v[3]),
            orientation_covariance=np.full(9, 0.1),
            angular_velocity=V(x=v[4], y=v[5], z=v[6]),
            angular_velocity_covariance=np.full(9, 0.1),
            linear_acceleration=V(x=v[7], y=v[8], z=v[9]),
            linear_acceleration_covariance=np.full(9, 0.1),
        )
    if kind == "video":  # (format, packet): one message of a foxglove CompressedVideo camera
        fmt, data = value
        return "foxglove_msgs/msg/CompressedVideo", T["foxglove_msgs/msg/CompressedVideo"](
            timestamp=stamp, frame_id="camera", data=np.frombuffer(data, np.uint8), format=fmt
        )
    if kind.startswith("custom:"):  # ("custom:<type>", message builder taking the typestore)
        return kind.split(":", 1)[1], value(ts, header)
    raise ValueError(kind)


def write_ros2(
    path: Path,
    layout: Layout,
    *,
    storage: str = "sqlite3",
    version: int = 9,
    custom_types: dict[str, Any] | None = None,
    compression: str | None = None,
) -> Recorded:
    """A ROS 2 bag directory written by rosbags' rosbag2 Writer (`compression`: None, message or file, zstd)."""
    from rosbags.rosbag2 import Writer
    from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from robolake.testing.video import COMPRESSED_VIDEO_MSG

    ts = get_typestore(Stores.LATEST)
    ts.register(get_types_from_msg(COMPRESSED_VIDEO_MSG, "foxglove_msgs/msg/CompressedVideo"))
    if custom_types:
        ts.register(custom_types)
    msgs, rec = _messages(layout)
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    w = Writer(path, version=version, storage_plugin=plugin)  # type: ignore[arg-type]
    if compression:
        w.set_compression(CompressionMode[compression.upper()], CompressionFormat.ZSTD)
    with w:
        conns: dict[str, Any] = {}
        for log_ns, topic, stamp_ns, payload in msgs:
            msgtype, msg = _ros_msg(ts, True, stamp_ns, payload)
            if topic not in conns:
                conns[topic] = w.add_connection(topic, msgtype, typestore=ts)
            w.write(conns[topic], log_ns, ts.serialize_cdr(msg, msgtype))
    return rec


TF_MSG = "geometry_msgs/TransformStamped[] transforms\n"


def ros1_typestore(custom_types: dict[str, Any] | None = None) -> Any:
    """rosbags' ROS 1 (Noetic) type store, with tf2_msgs/TFMessage (which it lacks) and `custom_types`."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    ts = get_typestore(Stores.ROS1_NOETIC)
    extra = {} if "tf2_msgs/msg/TFMessage" in ts.types else get_types_from_msg(TF_MSG, "tf2_msgs/msg/TFMessage")
    ts.register({**extra, **(custom_types or {})})
    return ts


def write_ros1(
    path: Path, layout: Layout, *, custom_types: dict[str, Any] | None = None, compression: str | None = None
) -> Recorded:
    """A ROS 1 bag written by rosbags' rosbag1 Writer (definitions embedded, as rosbag does; chunks bz2/lz4)."""
    from rosbags.rosbag1 import Writer

    ts = ros1_typestore(custom_types)
    msgs, rec = _messages(layout)
    w = Writer(path)
    if compression:
        w.set_compression(Writer.CompressionFormat[compression.upper()])
    with w:
        conns: dict[str, Any] = {}
        for log_ns, topic, stamp_ns, payload in msgs:
            msgtype, msg = _ros_msg(ts, False, stamp_ns, payload)
            if topic not in conns:
                conns[topic] = w.add_connection(topic, msgtype, typestore=ts)
            w.write(conns[topic], log_ns, ts.serialize_ros1(msg, msgtype))
    return rec


# --- non-ROS MCAP: JSON messages with jsonschema schemas (Foxglove SDK style) ------------------

JSON_SCHEMAS = {
    "robot.JointState": {
        "type": "object",
        "title": "robot.JointState",
        "properties": {
            "timestamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
            "name": {"type": "array", "items": {"type": "string"}},
            "position": {"type": "array", "items": {"type": "number"}},
        },
    },
    "robot.JointCommand": {
        "type": "object",
        "title": "robot.JointCommand",
        "properties": {"timestamp": {"type": "object"}, "positions": {"type": "array", "items": {"type": "number"}}},
    },
    "foxglove.CompressedImage": {
        "type": "object",
        "title": "foxglove.CompressedImage",
        "properties": {
            "timestamp": {"type": "object"},
            "frame_id": {"type": "string"},
            "data": {"type": "string", "contentEncoding": "base64"},
            "format": {"type": "string"},
        },
    },
    "foxglove.RawImage": {
        "type": "object",
        "title": "foxglove.RawImage",
        "properties": {
            "timestamp": {"type": "object"},
            "frame_id": {"type": "string"},
            "width": {"type": "integer"},
            "height": {"type": "integer"},
            "encoding": {"type": "string"},
            "step": {"type": "integer"},
            "data": {"type": "string", "contentEncoding": "base64"},
        },
    },
    "robot.Instruction": {"type": "object", "title": "robot.Instruction", "properties": {"data": {"type": "string"}}},
    "foxglove.CompressedVideo": {
        "type": "object",
        "title": "foxglove.CompressedVideo",
        "properties": {
            "timestamp": {"type": "object"},
            "frame_id": {"type": "string"},
            "data": {"type": "string", "contentEncoding": "base64"},
            "format": {"type": "string"},
        },
    },
}


def write_mcap_json(path: Path, layout: Layout, *, profile: str = "", foreign_topic: str | None = None) -> Recorded:
    """An MCAP file of JSON messages, written with the `mcap` writer.

    `foreign_topic` adds a channel in an encoding robolake does not read (flatbuffer), with one message.
    """
    import base64
    import json

    from mcap.writer import Writer

    msgs, rec = _messages(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile=profile, library="robolake-tests")
        channels: dict[str, int] = {}

        def channel(topic: str, schema: str, encoding: str = "json") -> int:
            if topic not in channels:
                sid = w.register_schema(
                    name=schema,
                    encoding="jsonschema" if encoding == "json" else encoding,
                    data=json.dumps(JSON_SCHEMAS.get(schema, {})).encode(),
                )
                channels[topic] = w.register_channel(topic=topic, message_encoding=encoding, schema_id=sid)
            return channels[topic]

        for seq, (log_ns, topic, stamp_ns, (kind, value)) in enumerate(msgs):
            ts = {"sec": stamp_ns // 1_000_000_000, "nsec": stamp_ns % 1_000_000_000}
            if kind == "joint" and topic == "/joint_states":
                names, vals = value
                body: dict[str, Any] = {"timestamp": ts, "name": list(names), "position": [float(x) for x in vals]}
                cid = channel(topic, "robot.JointState")
            elif kind == "joint":
                body = {"timestamp": ts, "positions": [float(x) for x in value[1]]}
                cid = channel(topic, "robot.JointCommand")
            elif kind == "jpeg":
                body = {
                    "timestamp": ts,
                    "frame_id": "wrist",
                    "data": base64.b64encode(value).decode(),
                    "format": "jpeg",
                }
                cid = channel(topic, "foxglove.CompressedImage")
            elif kind == "rgb8":
                h, wd, _ = value.shape
                body = {
                    "timestamp": ts,
                    "frame_id": "top",
                    "width": wd,
                    "height": h,
                    "encoding": "rgb8",
                    "step": wd * 3,
                    "data": base64.b64encode(value.tobytes()).decode(),
                }
                cid = channel(topic, "foxglove.RawImage")
            elif kind == "string":
                body = {"data": value}
                cid = channel(topic, "robot.Instruction")
            elif kind == "video":
                fmt, data = value
                body = {"timestamp": ts, "frame_id": "camera", "data": base64.b64encode(data).decode(), "format": fmt}
                cid = channel(topic, "foxglove.CompressedVideo")
            else:
                raise ValueError(kind)
            w.add_message(
                channel_id=cid, log_time=log_ns, publish_time=log_ns, sequence=seq, data=json.dumps(body).encode()
            )
        if foreign_topic:
            cid = channel(foreign_topic, "robot.Odometry", encoding="flatbuffer")
            w.add_message(channel_id=cid, log_time=T0_NS + 10_000_000, publish_time=T0_NS, data=b"\x08\x01")
        w.finish()
    return rec
