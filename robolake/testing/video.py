"""Video packets as a camera that logs `CompressedVideo` messages sends them (for the writers).

`video_packets` encodes real frames (`images.frames`) with PyAV's libx264 (or libx265 / SVT-AV1)
the way foxglove's schema asks: one frame a packet, no B-frames, h264/h265 in Annex B with the
parameter sets in-band on every keyframe. `video_topic` lays them out as a `Layout.extra` topic
(kind `video`: (format, packet) per message), which `ros.write_ros2`, `ros.write_mcap_json` and
`mcap.write_mcap_protobuf` write as `foxglove_msgs/msg/CompressedVideo` / `foxglove.CompressedVideo`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from robolake.testing.images import frames

__all__ = ["video_packets", "video_topic", "decode_packets", "COMPRESSED_VIDEO_MSG"]

# foxglove_msgs/msg/CompressedVideo (ROS 2), as the foxglove_msgs package defines it
COMPRESSED_VIDEO_MSG = "builtin_interfaces/Time timestamp\nstring frame_id\nuint8[] data\nstring format\n"
_ENCODERS = {"h264": "libx264", "h265": "libx265", "av1": "libsvtav1"}


def video_packets(n: int, *, size: tuple[int, int] = (48, 64), gop: int = 8, fmt: str = "h264") -> list[bytes]:
    """`n` packets (one frame each) of a `fmt` stream of `frames(n, *size)`, a keyframe every `gop`."""
    import av

    ctx: Any = av.CodecContext.create(_ENCODERS[fmt], "w")
    ctx.width, ctx.height = size[1], size[0]
    ctx.pix_fmt = "yuv420p"
    ctx.time_base = Fraction(1, 30)
    ctx.framerate = Fraction(30, 1)
    ctx.gop_size = gop
    ctx.max_b_frames = 0
    if fmt == "h264":
        ctx.options = {"preset": "ultrafast", "tune": "zerolatency", "bframes": "0", "keyint_min": str(gop)}
    elif fmt == "h265":
        ctx.options = {"preset": "ultrafast", "x265-params": f"bframes=0:keyint={gop}:min-keyint={gop}:log-level=none"}
    else:
        ctx.options = {"preset": "12"}
    out: list[bytes] = []
    for i, rgb in enumerate(frames(n, *size)):
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
        frame.pts = i
        out += [bytes(p) for p in ctx.encode(frame)]
    out += [bytes(p) for p in ctx.encode(None)]
    if len(out) != n:
        raise RuntimeError(f"{_ENCODERS[fmt]} gave {len(out)} packets for {n} frames; expected one a frame")
    return out


def video_topic(
    seconds: float,
    hz: float,
    *,
    size: tuple[int, int] = (48, 64),
    gop: int = 8,
    fmt: str = "h264",
    start_s: float = 0.0,
) -> tuple[list[tuple[float, Any]], list[bytes]]:
    """(`Layout.extra` entries of a video topic at `hz` over `seconds`, its packets)."""
    n = int(round(seconds * hz))
    packets = video_packets(n, size=size, gop=gop, fmt=fmt)
    times = start_s + np.arange(n) / hz
    return [(float(t), (fmt, p)) for t, p in zip(times, packets, strict=True)], packets


def decode_packets(packets: list[bytes], decoder: str = "h264") -> list[np.ndarray]:
    """RGB frames of `packets` decoded in order with a fresh PyAV decoder (the reference decode)."""
    import av

    ctx: Any = av.CodecContext.create(decoder, "r")
    out = []
    for i, data in enumerate(packets):
        p = av.Packet(data)
        p.pts = i
        out += [f.to_ndarray(format="rgb24") for f in ctx.decode(p)]
    out += [f.to_ndarray(format="rgb24") for f in ctx.decode(None)]
    return out
