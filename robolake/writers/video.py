"""Encode RGB frames to mp4 the way LeRobot datasets store camera streams: one settings table.

One mp4 holds one or more segments (episodes) laid end to end. Frame n of the file gets
pts = n in a 1/fps time base, so a decoder reports frame n at exactly n / fps seconds, and a
segment's frames are found by timestamp alone (LeRobot v3.0's from_timestamp/to_timestamp).
Every segment starts on a forced keyframe, as it would after LeRobot concatenates per-episode
mp4s, so a reader can seek to an episode without decoding the one before it.

`Mp4Writer` encodes one frame at a time (an export streams files of hundreds of megabytes);
`encode_video` writes whole segments through it. Every mp4 robolake writes (the LeRobot writer,
so export, the synthetic generator and the sim recorder) takes its settings from `CODECS`:

    codec  encoder    crf  preset    fixed options
    h264   libx264    23   veryfast  forced-idr, x264-params mbtree=0 (closed GOP)
    av1    libsvtav1  35   10        -

Both use `PIX_FMT` (yuv420p, which needs even frame sizes) and a keyframe at least every
`GOP_SECONDS` of frames. x264's macroblock-tree lookahead reads uninitialized memory on small
frames, which makes the bitstream depend on heap contents (measured: 32x32 to 96x96 frames
encode differently after other allocations); without it the output is a function of the frames
alone, which the same-seed-same-dataset guarantee needs. Frame-level threads cost more than they
give on small frames (measured: 64x64 x264 runs ~30% faster on one thread), so frames up to
`SINGLE_THREAD_PIXELS` are encoded on one thread. SVT-AV1 prints its banner to stderr; set
SVT_LOG=1 in the environment to quiet it.

`Mp4Remuxer` writes packets that are already encoded (an export of the lake's record with
`--copy-video`): no encoder runs, the bytes are the source's. Each segment's packets keep their
decode order; frame n of the file is stamped n / fps and every packet's dts is its decode
position less a fixed reorder delay (16 frames, H.264's largest, for streams with B-frames; 0
otherwise), so dts stays below pts across segments laid end to end. The muxer needs the stream's
codec parameters (`extradata`): PyAV takes them from an opened codec context, so the remuxer
opens the codec's encoder (never fed a frame) and then sets the source's extradata on it. A
file holds segments of one set of parameters (codec, extradata, size, pixel format); a segment
of others starts a new file (`accepts`).

The lake's key-referenced h264 media (`robolake.lake.media.codecs.KeyframeEncoder`) is a different
stream (raw h264 packets, each P frame predicted from its GOP's keyframe) with its own settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

if TYPE_CHECKING:
    import av

__all__ = [
    "CODECS",
    "GOP_SECONDS",
    "PIX_FMT",
    "SINGLE_THREAD_PIXELS",
    "CodecSettings",
    "EncodedSegment",
    "Mp4Remuxer",
    "Mp4Writer",
    "VideoCodec",
    "VideoOptions",
    "encode_video",
]

VideoCodec = Literal["h264", "av1"]


@dataclass(frozen=True, kw_only=True)
class CodecSettings:
    """One codec's encoder and defaults.

    Attributes:
        encoder: FFmpeg encoder name.
        crf: Constant rate factor unless `VideoOptions.crf` says otherwise.
        preset: Speed preset unless `VideoOptions.preset` says otherwise.
        options: Encoder options always set, in order.
    """

    encoder: str
    crf: int
    preset: str
    options: tuple[tuple[str, str], ...] = ()


CODECS: Mapping[str, CodecSettings] = {
    "h264": CodecSettings(
        encoder="libx264",
        crf=23,
        preset="veryfast",
        options=(("forced-idr", "1"), ("x264-params", "mbtree=0")),
    ),
    "av1": CodecSettings(encoder="libsvtav1", crf=35, preset="10"),
}
PIX_FMT = "yuv420p"
GOP_SECONDS = 2.0  # default keyframe interval: 2 * fps frames
SINGLE_THREAD_PIXELS = 256 * 256


@dataclass(frozen=True, kw_only=True)
class VideoOptions:
    """How camera frames are encoded (what `CODECS` leaves to the caller).

    Attributes:
        codec: A key of `CODECS`: "h264" (libx264) or "av1" (libsvtav1). info.json records this name.
        crf: Constant rate factor; None means the codec's default (h264 23, av1 35).
        gop: Maximum keyframe interval in frames; None means GOP_SECONDS * fps.
        preset: Encoder speed preset; None means the codec's default (x264 veryfast, SVT-AV1 10).
    """

    codec: VideoCodec = "h264"
    crf: int | None = None
    gop: int | None = None
    preset: str | None = None

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ValueError(f"codec must be one of {sorted(CODECS)}, got {self.codec!r}")
        if self.crf is not None and not 0 <= self.crf <= 63:
            raise ValueError(f"crf must be in [0, 63], got {self.crf}")
        if self.gop is not None and self.gop < 1:
            raise ValueError(f"gop must be >= 1, got {self.gop}")


class Mp4Writer:
    """An mp4 written frame by frame: frame n is stamped n / fps.

    Attributes:
        path: The file.
        frames: Frames written so far.
        encoded_bytes: Bytes the encoder has produced so far (the file on disk lags behind by
            the muxer's buffer).
    """

    def __init__(self, path: str | Path, *, width: int, height: int, fps: float, options: VideoOptions | None = None):
        import av  # lazy: PyAV is only needed when video is written

        if width % 2 or height % 2:
            raise ValueError(
                f"{path}: frames are {height}x{width} (h x w), but {PIX_FMT} video needs even frame sizes; "
                "resize or crop them"
            )
        options = options or VideoOptions()
        codec = CODECS[options.codec]
        self.path, self.frames, self.encoded_bytes = Path(path), 0, 0
        self._shape = (height, width, 3)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rate = Fraction(fps).limit_denominator(1001)
        container = av.open(str(self.path), mode="w")
        stream = cast("av.video.stream.VideoStream", container.add_stream(codec.encoder, rate=rate))
        stream.width, stream.height = width, height
        stream.pix_fmt = PIX_FMT
        stream.time_base = 1 / rate
        stream.codec_context.gop_size = options.gop or max(1, round(GOP_SECONDS * float(fps)))
        if width * height <= SINGLE_THREAD_PIXELS:
            stream.codec_context.thread_count = 1
        stream.options = {
            "crf": str(options.crf if options.crf is not None else codec.crf),
            "preset": options.preset or codec.preset,
            **dict(codec.options),
        }
        self._container: av.container.OutputContainer | None = container
        self._stream = stream

    def accepts(self, segment: EncodedSegment | None) -> bool:
        """Whether the next episode can go into this file: frames to encode, not packets to copy."""
        return segment is None

    def write(self, frame: np.ndarray, *, keyframe: bool = False) -> None:
        """Append one uint8 RGB [H, W, 3] frame; `keyframe` forces an IDR frame (a segment start)."""
        import av

        if frame.dtype != np.uint8 or frame.shape != self._shape:
            raise ValueError(f"{self.path}: frame {frame.dtype} {frame.shape}, expected uint8 {self._shape}")
        vf = av.VideoFrame.from_ndarray(frame, format="rgb24")
        vf.pts = self.frames
        if keyframe:
            vf.pict_type = av.video.frame.PictureType.I
        self._mux(self._stream.encode(vf))
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and close the file."""
        if self._container is not None:
            self._mux(self._stream.encode(None))
            self._container.close()
            self._container = None

    def _mux(self, packets: list[av.Packet]) -> None:
        if self._container is None:
            raise ValueError(f"{self.path} is closed")
        self.encoded_bytes += sum(p.size for p in packets)
        self._container.mux(packets)

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def encode_video(
    path: str | Path,
    segments: Sequence[np.ndarray],
    *,
    fps: float,
    options: VideoOptions | None = None,
) -> int:
    """Encode `segments` (each uint8 [T, H, W, 3], same H, W) end to end into one mp4.

    Args:
        path: Output file; parent directories are created.
        segments: Frame arrays laid end to end; each one starts on a keyframe.
        fps: Frame rate; frame n is stamped n / fps.
        options: Codec settings (default h264).

    Returns:
        The number of frames written.

    Raises:
        ValueError: no frames, or frames of the wrong dtype/shape.
    """
    if not segments or any(len(s) == 0 for s in segments):
        raise ValueError("encode_video needs at least one non-empty segment")
    h, w = segments[0].shape[1:3] if segments[0].ndim == 4 else (0, 0)
    for s in segments:
        if s.dtype != np.uint8 or s.ndim != 4 or s.shape[1:] != (h, w, 3):
            raise ValueError(f"segments must be uint8 [T, {h}, {w}, 3], got {s.dtype} {s.shape}")
    with Mp4Writer(path, width=w, height=h, fps=fps, options=options) as mp4:
        for seg in segments:
            for i in range(len(seg)):
                mp4.write(seg[i], keyframe=i == 0)
        return mp4.frames


_REMUX_ENCODERS = {"h264": "libx264", "hevc": "libx265", "av1": "libsvtav1"}  # opened only for codec parameters
REMUX_CODECS = tuple(_REMUX_ENCODERS)
_MAX_REORDER = 16  # frames a decoder may hold back (H.264's largest DPB)


@dataclass(frozen=True, kw_only=True, eq=False)
class EncodedSegment:
    """One episode's frames as encoded packets, to be copied into an mp4 without re-encoding.

    Attributes:
        codec: `h264`, `hevc` or `av1`.
        extradata: The stream's codec parameters (avcC, hvcC, av1C).
        width: Frame width.
        height: Frame height.
        pix_fmt: Pixel format of the decoded frames.
        packets: Packet bytes in decode order; the first is a keyframe.
        frame_index: Per packet, its frame's position in the segment (0..n-1, presentation order).
        keyframes: Per packet, whether the source marks it a keyframe (the mp4's seek index).
    """

    codec: str
    extradata: bytes
    width: int
    height: int
    pix_fmt: str
    packets: tuple[bytes, ...]
    frame_index: tuple[int, ...] = field(default=())
    keyframes: tuple[bool, ...] = field(default=())

    def __post_init__(self) -> None:
        if len(self.keyframes) != len(self.packets) or not self.keyframes or not self.keyframes[0]:
            raise ValueError("keyframes must flag every packet, and a segment must start on a keyframe")
        if self.codec not in _REMUX_ENCODERS:
            raise ValueError(f"can copy {sorted(_REMUX_ENCODERS)} packets into mp4, not {self.codec!r}")
        if sorted(self.frame_index) != list(range(len(self.packets))):
            raise ValueError("frame_index must give each packet one frame position 0..n-1")

    @property
    def params(self) -> tuple[str, bytes, int, int, str]:
        return (self.codec, bytes(self.extradata), self.width, self.height, self.pix_fmt)

    @property
    def reorder(self) -> int:
        """How many frames its decode order runs ahead of its presentation order (0: no B-frames)."""
        return max((i - f for i, f in enumerate(self.frame_index)), default=0)


class Mp4Remuxer:
    """An mp4 that segments of encoded packets are appended to, frame n stamped n / fps.

    Attributes:
        path: The file.
        frames: Frames written so far.
        encoded_bytes: Packet bytes written so far.
    """

    def __init__(self, path: str | Path, *, fps: float, first: EncodedSegment):
        import av

        self.path, self.frames, self.encoded_bytes, self._packets = Path(path), 0, 0, 0
        self._params = first.params
        self._delay = 0 if first.reorder == 0 else _MAX_REORDER
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rate = Fraction(fps).limit_denominator(1001)
        self._tb = 1 / rate
        container = av.open(str(self.path), mode="w")
        stream = cast("av.video.stream.VideoStream", container.add_stream(_REMUX_ENCODERS[first.codec], rate=rate))
        stream.width, stream.height, stream.pix_fmt = first.width, first.height, first.pix_fmt
        stream.time_base = self._tb
        ctx = stream.codec_context
        ctx.time_base = self._tb
        ctx.open()  # the muxer takes its parameters from an opened context; the encoder never runs
        ctx.extradata = bytes(first.extradata)
        self._container: av.container.OutputContainer | None = container
        self._stream = stream

    def accepts(self, segment: EncodedSegment | None) -> bool:
        """Whether `segment` can follow in this file (same parameters, reorder within the delay)."""
        return segment is not None and segment.params == self._params and segment.reorder <= self._delay

    def write_segment(self, segment: EncodedSegment) -> int:
        """Append one segment's packets; returns its number of frames."""
        import av

        if self._container is None:
            raise ValueError(f"{self.path} is closed")
        if not self.accepts(segment):
            raise ValueError(
                f"{self.path}: a segment of other codec parameters or deeper reordering cannot join this file"
            )
        for i, (data, f) in enumerate(zip(segment.packets, segment.frame_index, strict=True)):
            p = av.Packet(data)
            p.stream = self._stream
            p.time_base = self._tb
            p.pts, p.dts = self.frames + f, self._packets + i - self._delay
            if segment.keyframes[i]:
                p.is_keyframe = True
            self._container.mux(p)
            self.encoded_bytes += len(data)
        self._packets += len(segment.packets)
        self.frames += len(segment.packets)
        return len(segment.packets)

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
            self._container = None

    def __enter__(self) -> Mp4Remuxer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
