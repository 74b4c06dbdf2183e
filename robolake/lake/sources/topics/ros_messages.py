"""Turning logged messages into numbers, frames and text.

Bags and MCAP files hold messages, not arrays. A reader needs, per mapped topic, a float vector
per message (state, action), encoded image bytes (cameras), a string (task) or a boolean (episode
split), and a time stamp. This module does that for the message types robot recorders log, for
messages decoded by rosbags (dataclass-like objects) and for JSON messages (dicts) alike:

- `sensor_msgs/JointState`: one field (`position` by default, or `velocity`/`effort`), with joints
  selected and ordered by name. Recorders do not promise a joint order per message, so the order
  is taken from the mapping's `names`, or else from the first message, and every message is
  reordered by name to it.
- `geometry_msgs` Pose/Twist/Transform/Wrench/Point/Vector3/Quaternion (and their Stamped
  forms): numeric fields flattened in declaration order (Pose = x y z qx qy qz qw, Twist =
  linear xyz, angular xyz). A Stamped message defaults to its inner field.
- `nav_msgs/Odometry` (pose then twist, 13 values), `sensor_msgs/Imu` (orientation, angular
  velocity, linear acceleration, 10 values), `*WithCovariance*`: flattened with every
  `*covariance` field skipped (a 6x6 covariance is 36 numbers of bookkeeping, not state).
- `tf2_msgs/TFMessage` (`/tf`, `/tf_static`): one message holds transforms of many frames, so a
  stream names its `child_frame`; the transform of that frame is the vector (x y z qx qy qz qw)
  and its own header stamp the time (`tf_transform`).
- `std_msgs` Float32/Float64/Int*/Bool/*MultiArray: `data`.
- Anything else: the dotted `field` the mapping names, or all numeric fields flattened (the
  header skipped), so custom types whose definitions the bag carries work without code.
- `foxglove_msgs/CompressedVideo` (ROS 2) and `foxglove.CompressedVideo` (protobuf, JSON): one
  h264/h265/AV1/VP9 packet a message, its codec in `format` (`compressed_video`). A camera like a
  `CompressedImage` (kind COMPRESSED_IMAGE: its bytes pass through), kept as a recorded video
  (`topics.video`), never decoded into images.
- `sensor_msgs/Image`: raw pixels (rgb8, bgr8, mono8, rgba8, bgra8, mono16, 8UC1/8UC3) to an RGB
  array, which the reader encodes once as JPEG; `CompressedImage`: the JPEG/PNG bytes as
  recorded, never re-encoded (the codec is read from the bytes, not from the free-text `format`).

Time stamps: `header.stamp` when a message has one (or a top-level `timestamp`, the foxglove
schemas' field), else the log (receive) time. For image
topics the stamp is read straight from the serialized bytes (the header is the first field of a
ROS Image/CompressedImage), so deciding which frame lands on which tick never decodes pixels.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import math
import re
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "FieldError",
    "short_type",
    "kind_of",
    "get_field",
    "message_fields",
    "default_field",
    "to_vector",
    "joint_vector",
    "header_stamp_ns",
    "raw_header_stamp_ns",
    "image_rgb",
    "compressed_image",
    "compressed_video",
    "is_video",
    "sniff_image",
    "image_size",
    "camera_name",
    "tf_transform",
    "tf_frames",
]

# Message kinds a reader treats specially; everything else is "numeric" or "other".
JOINT_STATE = "joint_state"
IMAGE = "image"
COMPRESSED_IMAGE = "compressed_image"
STRING = "string"
BOOL = "bool"
TF = "tf"
NUMERIC = "numeric"


class FieldError(ValueError):
    """A message lacks the field a mapping names, or holds something that is not numbers."""


def short_type(msgtype: str) -> str:
    """`sensor_msgs/msg/JointState` and `sensor_msgs/JointState` -> `sensor_msgs/JointState`."""
    parts = msgtype.replace(".", "/").split("/")
    if len(parts) == 3 and parts[1] in ("msg", "srv", "action"):
        parts = [parts[0], parts[2]]
    return "/".join(parts)


def kind_of(msgtype: str) -> str:
    """What a reader can do with messages of `msgtype` (by its ROS or foxglove schema name)."""
    name = short_type(msgtype)
    base = name.rsplit("/", 1)[-1]
    if name == "sensor_msgs/JointState" or base == "JointState":
        return JOINT_STATE
    if name == "sensor_msgs/CompressedImage" or base in ("CompressedImage", "CompressedVideo"):
        return COMPRESSED_IMAGE
    if name == "sensor_msgs/Image" or base in ("Image", "RawImage"):
        return IMAGE
    if name == "std_msgs/String" or base.endswith(("String", "Instruction", "Text")):
        return STRING
    if name == "std_msgs/Bool" or base == "Bool":
        return BOOL
    if name in ("tf2_msgs/TFMessage", "tf/tfMessage") or base in ("TFMessage", "tfMessage", "FrameTransforms"):
        return TF
    return NUMERIC


def _fields(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        return list(obj)
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj) if not f.name.startswith("__")]
    return []


def message_fields(msg: Any) -> list[str]:
    """Top-level field names of a message (attributes of a ROS message, keys of a JSON dict)."""
    return _fields(msg)


def get_field(msg: Any, path: str | None) -> Any:
    """The value at dotted `path` in a message (attributes of ROS messages, keys of JSON dicts).

    Raises:
        FieldError: a path element is missing; the message names the fields that exist there.
    """
    value = msg
    if not path:
        return value
    walked = []
    for part in path.split("."):
        walked.append(part)
        if isinstance(value, dict):
            if part not in value:
                raise FieldError(f"field {'.'.join(walked)!r} does not exist; fields there: {_fields(value)}")
            value = value[part]
        elif isinstance(value, (list, tuple, np.ndarray)) and part.isdigit():
            if int(part) >= len(value):
                raise FieldError(
                    f"field {'.'.join(walked)!r} does not exist; {'.'.join(walked[:-1])} holds {len(value)} items"
                )
            value = value[int(part)]
        else:
            if part.startswith("__") or not hasattr(value, part):
                raise FieldError(f"field {'.'.join(walked)!r} does not exist; fields there: {_fields(value)}")
            value = getattr(value, part)
    return value


def default_field(msgtype: str, sample: Any = None) -> str | None:
    """The field a topic's numbers come from when the mapping names none."""
    kind = kind_of(msgtype)
    if kind == JOINT_STATE:
        return "position"
    base = short_type(msgtype).rsplit("/", 1)[-1]
    if base.endswith("Stamped"):
        inner = base[: -len("Stamped")].lower()
        fields = _fields(sample) if sample is not None else []
        if inner in fields:
            return inner
        others = [f for f in fields if f != "header"]
        if len(others) == 1:
            return others[0]
        return None
    fields = _fields(sample) if sample is not None else []
    if "data" in fields and (base.endswith("MultiArray") or base in _SCALAR_TYPES or len(fields) == 1):
        return "data"
    return None


_SCALAR_TYPES = {
    "Float32",
    "Float64",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "UInt8",
    "UInt16",
    "UInt32",
    "UInt64",
    "Bool",
    "Byte",
    "Char",
}
_SKIP = {"header", "layout", "frame_id", "child_frame_id", "name", "timestamp"}


def _skipped(name: str) -> bool:
    return name in _SKIP or name.endswith("covariance")


def _flatten(value: Any, out: list[float], where: str) -> None:
    if isinstance(value, bool):
        out.append(1.0 if value else 0.0)
    elif isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        out.append(float(value))
    elif isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise FieldError(f"{where} holds {value.dtype} values, not numbers")
        out.extend(value.astype(np.float64).reshape(-1).tolist())
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _flatten(v, out, f"{where}[{i}]")
    elif isinstance(value, dict) or dataclasses.is_dataclass(value):
        for name in _fields(value):
            if _skipped(name):
                continue
            v = value[name] if isinstance(value, dict) else getattr(value, name)
            if isinstance(v, (str, bytes)):
                continue
            _flatten(v, out, f"{where}.{name}" if where else name)
    elif value is None:
        out.append(math.nan)  # JSON null: reported as non-finite by the caller
    else:
        raise FieldError(f"{where or 'message'} holds a {type(value).__name__}, not numbers; name a numeric field")


def to_vector(msg: Any, field: str | None) -> np.ndarray:
    """float64 vector of a message's `field` (or of all its numeric fields).

    Raises:
        FieldError: the field is missing or not numeric.
    """
    value = get_field(msg, field)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(np.float64).reshape(-1)
    out: list[float] = []
    _flatten(value, out, field or "")
    return np.asarray(out, dtype=np.float64)


def joint_vector(msg: Any, field: str, names: Sequence[str]) -> np.ndarray:
    """A JointState field with joints in the order of `names`.

    Raises:
        FieldError: a joint in `names` is absent from the message, or the field has fewer
            values than the message has joints.
    """
    have = list(get_field(msg, "name"))
    values = np.asarray(get_field(msg, field), dtype=np.float64).reshape(-1)
    if list(names) == have and len(values) == len(have):
        return values
    if len(values) != len(have):
        raise FieldError(f"JointState.{field} has {len(values)} values for {len(have)} joints")
    index = {n: i for i, n in enumerate(have)}
    missing = [n for n in names if n not in index]
    if missing:
        raise FieldError(f"joints {missing} are not in this JointState message; joints there: {have}")
    return values[[index[n] for n in names]]


def _stamp_ns(stamp: Any) -> int | None:
    """ns of a ROS 2 Time (sec, nanosec), a ROS 1 time (sec, nsec), a JSON stamp or a protobuf
    Timestamp (seconds, nanos)."""
    if isinstance(stamp, dict):
        sec = stamp.get("sec", stamp.get("secs", stamp.get("seconds")))
        nsec = stamp.get("nanosec", stamp.get("nsec", stamp.get("nsecs", stamp.get("nanos", 0))))
    else:
        sec = getattr(stamp, "sec", getattr(stamp, "seconds", None))
        nsec = getattr(stamp, "nanosec", getattr(stamp, "nanos", 0))
    if sec is None:
        return None
    return int(sec) * 1_000_000_000 + int(nsec or 0)


def header_stamp_ns(msg: Any) -> int | None:
    """`header.stamp` in ns, or a top-level `timestamp` (JSON {sec, nsec}, protobuf {seconds, nanos}, a
    ROS Time: the foxglove schemas); None if absent or zero."""
    header = msg.get("header") if isinstance(msg, dict) else getattr(msg, "header", None)
    stamp = None
    if header is not None:
        stamp = header.get("stamp") if isinstance(header, dict) else getattr(header, "stamp", None)
    elif isinstance(msg, dict) and isinstance(msg.get("timestamp"), dict):
        stamp = msg["timestamp"]
    elif dataclasses.is_dataclass(msg) and hasattr(getattr(msg, "timestamp", None), "sec"):
        stamp = getattr(msg, "timestamp")  # noqa: B009 - a dataclass of any message type
    if stamp is None:
        return None
    ns = _stamp_ns(stamp)
    return ns or None  # a zero stamp means the publisher never set it


def tf_frames(msg: Any) -> list[tuple[str, str]]:
    """(parent, child) frame ids of the transforms a TF message holds."""
    out = []
    for tr in get_field(msg, "transforms") or []:
        header = get_field(tr, "header")
        out.append((str(get_field(header, "frame_id")).lstrip("/"), str(get_field(tr, "child_frame_id")).lstrip("/")))
    return out


def tf_transform(msg: Any, child_frame: str) -> Any | None:
    """The TransformStamped of `child_frame` in a TF message (None when this message lacks it)."""
    want = child_frame.lstrip("/")
    for tr in get_field(msg, "transforms") or []:
        if str(get_field(tr, "child_frame_id")).lstrip("/") == want:
            return tr
    return None


def raw_header_stamp_ns(raw: bytes | memoryview, ros2: bool) -> int:
    """The `header.stamp` of a serialized message whose first field is a std_msgs/Header.

    ROS 2 CDR: a 4-byte encapsulation (byte 1 says the byte order) then int32 sec, uint32 nanosec.
    ROS 1: uint32 seq, then uint32 sec, uint32 nsec, little-endian.
    """
    if ros2:
        order = "<" if raw[1] & 1 else ">"
        sec, nsec = struct.unpack_from(f"{order}iI", raw, 4)
    else:
        sec, nsec = struct.unpack_from("<II", raw, 4)
    return int(sec) * 1_000_000_000 + int(nsec)


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, str):  # JSON-encoded byte fields are base64 (foxglove convention)
        return base64.b64decode(data)
    if isinstance(data, np.ndarray):
        return data.tobytes()
    if isinstance(data, list):
        return bytes(data)
    return bytes(data)


_ENCODINGS = {
    "rgb8": (3, np.uint8),
    "bgr8": (3, np.uint8),
    "rgba8": (4, np.uint8),
    "bgra8": (4, np.uint8),
    "mono8": (1, np.uint8),
    "8uc1": (1, np.uint8),
    "8uc3": (3, np.uint8),
    "mono16": (1, np.uint16),
    "16uc1": (1, np.uint16),
}


def image_rgb(msg: Any) -> np.ndarray:
    """RGB uint8 [H, W, 3] of a raw `sensor_msgs/Image` (or foxglove RawImage).

    Raises:
        FieldError: an encoding this reader does not convert, or a buffer too small for its size.
    """
    height, width = int(get_field(msg, "height")), int(get_field(msg, "width"))
    encoding = str(get_field(msg, "encoding")).lower()
    if encoding not in _ENCODINGS:
        raise FieldError(f"image encoding {encoding!r} is not supported (supported: {sorted(_ENCODINGS)})")
    channels, dtype = _ENCODINGS[encoding]
    data = _as_bytes(get_field(msg, "data"))
    itemsize = np.dtype(dtype).itemsize
    step = int(get_field(msg, "step")) if "step" in _fields(msg) else width * channels * itemsize
    step = step or width * channels * itemsize
    if len(data) < step * height or step < width * channels * itemsize:
        raise FieldError(f"image buffer holds {len(data)} bytes, too few for {width}x{height} {encoding} (step {step})")
    rows = np.frombuffer(data, dtype=np.uint8, count=step * height).reshape(height, step)
    big = bool(msg.get("is_bigendian", 0) if isinstance(msg, dict) else getattr(msg, "is_bigendian", 0))
    pixels = rows[:, : width * channels * itemsize].copy().view(np.dtype(dtype).newbyteorder(">" if big else "<"))
    pixels = pixels.reshape(height, width, channels)
    if dtype == np.uint16:  # 16-bit depth/mono: keep the top byte, enough for a preview channel
        pixels = (pixels >> 8).astype(np.uint8)
    if encoding.startswith("bgr"):
        pixels = pixels[:, :, [2, 1, 0]]
    if channels == 1:
        return np.repeat(pixels, 3, axis=2)
    return np.ascontiguousarray(pixels[:, :, :3])


def sniff_image(data: bytes) -> str | None:
    """`jpeg` or `png` from an encoded image's magic bytes; None for anything else."""
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    return None


def image_size(data: bytes) -> tuple[int, int]:
    """(height, width) of JPEG/PNG bytes, from the header alone (no pixel decode)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return im.height, im.width


def compressed_image(msg: Any) -> tuple[bytes, str]:
    """The recorded bytes of a `sensor_msgs/CompressedImage` and their codec (`jpeg` or `png`).

    Raises:
        FieldError: the bytes are neither JPEG nor PNG (e.g. a `compressedDepth` stream).
    """
    data = _as_bytes(get_field(msg, "data"))
    codec = sniff_image(data)
    if codec is None:
        fmt = str(msg.get("format", "") if isinstance(msg, dict) else getattr(msg, "format", ""))
        raise FieldError(
            f"compressed image bytes are neither JPEG nor PNG (format {fmt!r}); "
            "map only jpeg/png camera topics, or republish this one as sensor_msgs/Image"
        )
    return data, codec


def is_video(msgtype: str) -> bool:
    """Whether messages of `msgtype` are packets of a video (`CompressedVideo`), not images."""
    return short_type(msgtype).rsplit("/", 1)[-1] == "CompressedVideo"


def compressed_video(msg: Any) -> tuple[bytes, str]:
    """The packet bytes of a `CompressedVideo` message, as recorded, and its `format` (lower case).

    Raises:
        FieldError: the message has no `data` or `format` field.
    """
    return _as_bytes(get_field(msg, "data")), str(get_field(msg, "format")).strip().lower()


def camera_name(topic: str) -> str:
    """A camera name from an image topic: `/wrist/image_raw/compressed` -> `wrist`."""
    parts = [p for p in topic.strip("/").split("/") if p]
    noise = re.compile(r"^(image(_raw|_rect(_color)?|_color)?|compressed|color|raw|rgb)$")
    kept = [p for p in parts if not noise.match(p.lower())]
    name = "_".join(kept or parts or ["camera"])
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "camera"
