"""Video topics: a `CompressedVideo` camera of a bag or MCAP file kept as its own packets.

Foxglove's `CompressedVideo` (ROS 2 `foxglove_msgs/msg/CompressedVideo`, protobuf and JSON
`foxglove.CompressedVideo`) is how MCAP-era recorders log cameras: each message one h264, h265,
AV1 or VP9 packet (one frame, no B-frames, h264/h265 in Annex B with the parameter sets in-band),
its codec in `format`. These packets are exactly what the record keeps bit for bit
(`lake.media.record`): `read_video` turns one camera's messages of one episode into a
`RecordedVideo`, nothing re-encoded.

Which frame a step shows follows the rule of image topics (`topics.log.read_frames`): the latest
frame at or before its tick, the first frame also taking earlier ticks. Frames are stamped like
images (header stamp or `timestamp` field under the header clock, else log time); those stamps
are the packets' pts (ns), and dts = pts (no B-frames). A packet no tick lands on is an extra
packet of the `streams` row (later frames decode from it); a frame several ticks land on is one
packet and repeat entries (`record.StreamIndex.repeats`), so every packet is held once.

An episode window rarely starts on a keyframe (episodes cut by gaps or a phase topic): the
packets from the keyframe at or before the window are read too and kept as extras, so the
episode decodes alone. Keyframes are read from the bitstream: an IDR picture (h264), an IRAP
picture (h265), a temporal unit with a sequence header (AV1: encoders emit one with every key
frame), a key frame header (VP9). The decoder's parameters come from the topic's first message
(its in-band SPS/PPS/VPS, as `extradata`), so a later keyframe without them still decodes.

Faults, each named with the message it is at: a stream with no keyframe to start from (leading
packets before the first keyframe of a recording cannot decode: they are left out, with a note,
and the ticks before the first frame show it), a codec that changes mid-stream, stamps that do
not increase, a packet that does not decode to a frame (every packet is decoded once at ingest,
as `video.read_record` does for video files), a frame size that changes. Those quarantine the
episode; other episodes land.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from robolake.lake.media.record import NOPTS, StreamIndex, record_encoding
from robolake.lake.sources.base import SourceError
from robolake.lake.sources.mapping import CameraMap
from robolake.lake.sources.resample import Stream, resample_latest
from robolake.lake.sources.topics import ros_messages as rm
from robolake.lake.sources.topics.plan import Recording
from robolake.lake.sources.video import RecordedVideo

__all__ = ["read_video", "is_keyframe", "parameter_sets", "CODECS"]

_NS = 1_000_000_000
# `format` of a CompressedVideo -> (codec, decoders to use, first available)
CODECS: dict[str, tuple[str, tuple[str, ...]]] = {
    "h264": ("h264", ("h264",)),
    "h265": ("hevc", ("hevc",)),
    "hevc": ("hevc", ("hevc",)),
    "av1": ("av1", ("libdav1d", "av1", "libaom-av1")),
    "vp9": ("vp9", ("vp9", "libvpx-vp9")),
}
_PARAM_NALS = {"h264": {7, 8}, "hevc": {32, 33, 34}}


def _nal_units(data: bytes) -> Iterator[bytes]:
    """The NAL units of Annex B bytes (start codes 00 00 01 / 00 00 00 01)."""
    starts = []
    i = data.find(b"\x00\x00\x01")
    while i >= 0:
        starts.append(i + 3)
        i = data.find(b"\x00\x00\x01", i + 3)
    for k, s in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else len(data)
        unit = data[s:end]
        yield unit.rstrip(b"\x00") if k + 1 < len(starts) else unit


def _nal_type(codec: str, unit: bytes) -> int:
    if not unit:
        return -1
    return unit[0] & 0x1F if codec == "h264" else (unit[0] >> 1) & 0x3F


def _obu_types(data: bytes) -> Iterator[int]:
    """OBU types of an AV1 temporal unit (low-overhead format: each OBU with its size)."""
    i = 0
    while i < len(data):
        header = data[i]
        kind, has_ext, has_size = (header >> 3) & 0xF, header >> 2 & 1, header >> 1 & 1
        i += 1 + has_ext
        if not has_size:
            yield kind
            return
        size, shift = 0, 0
        while i < len(data):
            b = data[i]
            i += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        yield kind
        i += size


def _vp9_key(data: bytes) -> bool:
    """Whether a VP9 frame's uncompressed header says KEY_FRAME."""
    if not data:
        return False
    bits = "".join(f"{b:08b}" for b in data[:2])
    if bits[:2] != "10":
        return False
    profile = int(bits[3] + bits[2], 2)
    pos = 4 + (1 if profile == 3 else 0)
    if bits[pos] == "1":  # show_existing_frame
        return False
    return bits[pos + 1] == "0"


def is_keyframe(codec: str, data: bytes) -> bool:
    """Whether a packet of `codec` starts a decode on its own (see the essay)."""
    if codec == "h264":
        return any(_nal_type(codec, u) == 5 for u in _nal_units(data))
    if codec == "hevc":
        return any(16 <= _nal_type(codec, u) <= 21 for u in _nal_units(data))
    if codec == "av1":
        return 1 in set(_obu_types(data))
    if codec == "vp9":
        return _vp9_key(data)
    return False


def parameter_sets(codec: str, data: bytes) -> bytes:
    """The in-band parameter sets (h264 SPS/PPS, h265 VPS/SPS/PPS) of a packet, as Annex B."""
    kinds = _PARAM_NALS.get(codec)
    if not kinds:
        return b""
    return b"".join(b"\x00\x00\x00\x01" + u for u in _nal_units(data) if _nal_type(codec, u) in kinds)


@dataclasses.dataclass
class _Packet:
    data: bytes
    fmt: str
    stamp_ns: int
    where: str  # for messages: "message i (t=...)"


def _packet(rec: Recording, cam: CameraMap, topic: str, raw: Any, log_ns: int, header: bool, n: int) -> _Packet:
    msg = rec.decode(topic, raw)
    try:
        data, fmt = rm.compressed_video(msg)
    except rm.FieldError as e:
        raise SourceError("corrupt_video", rec.path, f"camera {cam.name!r} ({topic}) message {n}: {e}") from None
    stamp = rm.header_stamp_ns(msg) if header else None
    return _Packet(data, fmt, int(stamp or log_ns), f"message {n} (log time {log_ns} ns)")


def _codec(cam: CameraMap, topic: str, fmt: str, path: str) -> tuple[str, str]:
    import av

    if fmt not in CODECS:
        raise SourceError(
            "corrupt_video",
            path,
            f"camera {cam.name!r} ({topic}): video format {fmt!r} is not one robolake reads ({', '.join(CODECS)})",
        )
    codec, decoders = CODECS[fmt]
    have = [d for d in decoders if d in av.codecs_available]
    if not have:
        raise SourceError(
            "corrupt_video",
            path,
            f"camera {cam.name!r} ({topic}): this PyAV has no {codec} decoder; install a PyAV build with one",
        )
    return codec, have[0]


def read_video(
    rec: Recording,
    cam: CameraMap,
    *,
    window: tuple[int | None, int | None],
    ticks: np.ndarray,
    t0_ns: int,
    header_clock: bool,
    notes: list[str],
) -> RecordedVideo:
    """One camera's packets of one episode as a recorded video, a packet per step (see the essay).

    Args:
        rec: The open recording.
        cam: The camera (its topic is `cam.source`).
        window: The episode's log-time window [start, stop) in ns (None: open).
        ticks: The steps' times, seconds from `t0_ns`.
        t0_ns: The episode's time origin.
        header_clock: Stamp frames by header / `timestamp` (else log time).
        notes: Where to say what was left out (leading packets without a keyframe).

    Raises:
        SourceError: a fault the essay lists.
    """
    topic = cam.source
    start_ns, stop_ns = window
    before: list[_Packet] = []  # from the last keyframe before the window
    first: _Packet | None = None
    n = 0
    codec = ""
    if start_ns is not None:
        for _, log_ns, raw in rec.messages([topic], None, start_ns):
            p = _packet(rec, cam, topic, raw, log_ns, header_clock, n)
            n += 1
            first = first or p
            if is_keyframe(CODECS.get(p.fmt, (p.fmt,))[0], p.data):
                before = [p]
            elif before:
                before.append(p)
    inside = []
    for _, log_ns, raw in rec.messages([topic], start_ns, stop_ns):
        inside.append(_packet(rec, cam, topic, raw, log_ns, header_clock, n))
        n += 1
    first = first or (inside[0] if inside else None)
    if not inside or first is None:
        raise SourceError("frame_count", rec.path, f"camera {cam.name!r}: {topic} has no message in the episode window")
    packets = before + inside
    codec, decoder = _codec(cam, topic, packets[0].fmt, rec.path)
    for p in packets[1:]:
        if p.fmt != packets[0].fmt:
            raise SourceError(
                "corrupt_video",
                rec.path,
                f"camera {cam.name!r} ({topic}): the codec changes mid-stream ({packets[0].fmt} -> {p.fmt} at "
                f"{p.where}); a recorded video holds one codec: map each part as its own camera or split the episode",
            )
    for a, b in zip(packets, packets[1:], strict=False):
        if b.stamp_ns <= a.stamp_ns:
            raise SourceError(
                "corrupt_video",
                rec.path,
                f"camera {cam.name!r} ({topic}): {b.where} is stamped {b.stamp_ns} ns, not after the frame before it "
                f"({a.stamp_ns} ns); a video's frames decode in stamp order",
            )
    keys = [is_keyframe(codec, p.data) for p in packets]
    if not any(keys):
        raise SourceError(
            "corrupt_video",
            rec.path,
            f"camera {cam.name!r} ({topic}): no keyframe in the episode's {len(inside)} packets or before them; "
            "nothing decodes (restart the recording with the encoder forcing a keyframe)",
        )
    lead = keys.index(True)
    if lead:
        notes.append(
            f"{rec.path}: camera {cam.name!r} ({topic}) starts without a keyframe: its first {lead} packet(s) "
            "cannot decode and are left out; the steps before its first keyframe show that frame"
        )
        packets, keys = packets[lead:], keys[lead:]
        before = before[lead:] if lead < len(before) else []
        inside = packets[len(before) :]
    params = parameter_sets(codec, first.data) if first.fmt == packets[0].fmt else b""
    params = params or parameter_sets(codec, packets[0].data)
    stamps = np.asarray([(p.stamp_ns - t0_ns) / _NS for p in inside], dtype=np.float64)
    index = resample_latest(Stream(topic, stamps, np.zeros((len(stamps), 0)), rec.path), ticks)
    landed: dict[int, list[int]] = {}
    for step, j in enumerate(index.tolist()):
        landed.setdefault(len(before) + int(j), []).append(step)
    steps: list[int] = []
    pts: list[int] = []
    dts: list[int] = []
    key: list[bool] = []
    extra: list[bytes] = []
    images = [b""] * len(ticks)
    for i, p in enumerate(packets):
        on = landed.get(i, [])
        steps.append(on[0] if on else -1)
        pts.append(p.stamp_ns)
        dts.append(p.stamp_ns)
        key.append(keys[i])
        if on:
            images[on[0]] = p.data
        else:
            extra.append(p.data)
        for s in on[1:]:
            steps.append(s)
            pts.append(p.stamp_ns)
            dts.append(NOPTS)
            key.append(False)
    height, width, pix_fmt = _check_decode(cam, topic, codec, decoder, params, packets, rec.path)
    stream = StreamIndex(
        codec=codec,
        decoder=decoder,
        extradata=params,
        width=width,
        height=height,
        time_base=Fraction(1, _NS),
        params={"pix_fmt": pix_fmt},
        packet_step=np.asarray(steps, dtype=np.int32),
        packet_pts=np.asarray(pts, dtype=np.int64),
        packet_dts=np.asarray(dts, dtype=np.int64),
        packet_key=np.asarray(key, dtype=bool),
        extra=tuple(extra),
        source_path=topic,
        source_digest="",
    ).trimmed()
    return RecordedVideo(
        camera=cam.name,
        images=tuple(images),
        encoding=record_encoding(codec),
        height=height,
        width=width,
        stream=stream,
    )


def _check_decode(
    cam: CameraMap, topic: str, codec: str, decoder: str, params: bytes, packets: list[_Packet], path: str
) -> tuple[int, int, str]:
    """Decode every packet once, in order (height, width, pixel format of the frames).

    Raises:
        SourceError: a packet does not decode, or gives no frame; the frame size changes.
    """
    import av

    ctx: Any = av.CodecContext.create(decoder, "r")
    if params:
        ctx.extradata = params
    ctx.thread_count, ctx.thread_type = 1, "NONE"
    sizes: set[tuple[int, int]] = set()
    formats: list[str] = []
    shown: set[int] = set()  # pts of the frames decoded

    def take(frames: Any) -> None:
        for f in frames:
            shown.add(int(f.pts) if f.pts is not None else -1)
            sizes.add((int(f.height), int(f.width)))
            formats.append(str(f.format.name))

    for p in packets:
        pkt = av.Packet(p.data)
        pkt.pts = pkt.dts = p.stamp_ns
        try:
            take(ctx.decode(pkt))
        except (av.error.FFmpegError, ValueError) as e:
            raise SourceError(
                "corrupt_video",
                path,
                f"camera {cam.name!r} ({topic}): the packet of {p.where} does not decode ({e}); "
                "the recording is damaged there: cut the episode before it, or drop the camera",
            ) from None
    try:
        take(ctx.decode(None))
    except (av.error.FFmpegError, ValueError) as e:
        raise SourceError(
            "corrupt_video", path, f"camera {cam.name!r} ({topic}): the stream does not decode ({e})"
        ) from None
    lost = [p for p in packets if p.stamp_ns not in shown]
    if lost:
        raise SourceError(
            "corrupt_video",
            path,
            f"camera {cam.name!r} ({topic}): the packet of {lost[0].where} decodes to no frame "
            f"({len(lost)} of {len(packets)} packets do not); the recording is damaged there: "
            "cut the episode before it, or drop the camera",
        )
    if len(sizes) != 1:
        raise SourceError(
            "frame_size",
            path,
            f"camera {cam.name!r} ({topic}): the frame size changes mid-episode ({sorted(sizes)}); map one stream",
        )
    ((height, width),) = sizes
    return height, width, formats[0]
