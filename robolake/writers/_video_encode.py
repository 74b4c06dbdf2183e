"""Encode RGB frames to mp4 the way LeRobot datasets store camera streams.

One mp4 holds one or more segments (episodes) laid end to end. Frame n of the file gets
pts = n in a 1/fps time base, so a decoder reports frame n at exactly n / fps seconds, and a
segment's frames are found by timestamp alone (LeRobot v3.0's from_timestamp/to_timestamp).
Every segment starts on a forced keyframe, as it would after LeRobot concatenates per-episode
mp4s, so a reader can seek to an episode without decoding the one before it.

Codecs: "h264" is libx264 (preset veryfast, crf 23, closed GOP, forced IDR, no mbtree); "av1" is
libsvtav1 (preset 10, crf 35), LeRobot's own default codec. Both use yuv420p, which needs even
frame sizes. SVT-AV1 prints its banner to stderr; set SVT_LOG=1 in the environment to quiet it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Literal, cast

import numpy as np

__all__ = ["VideoCodec", "VideoOptions", "encode_video"]

VideoCodec = Literal["h264", "av1"]
_ENCODERS = {"h264": "libx264", "av1": "libsvtav1"}


@dataclass(frozen=True, kw_only=True)
class VideoOptions:
    """How camera frames are encoded.

    Attributes:
        codec: "h264" (libx264) or "av1" (libsvtav1). info.json records this name.
        crf: Constant rate factor; None means 23 for h264 and 35 for av1.
        gop: Maximum keyframe interval in frames; None means 2 * fps.
        preset: Encoder speed preset; None means "veryfast" (x264) or "10" (SVT-AV1).
    """

    codec: VideoCodec = "h264"
    crf: int | None = None
    gop: int | None = None
    preset: str | None = None

    def __post_init__(self) -> None:
        if self.codec not in _ENCODERS:
            raise ValueError(f"codec must be one of {sorted(_ENCODERS)}, got {self.codec!r}")
        if self.crf is not None and not 0 <= self.crf <= 63:
            raise ValueError(f"crf must be in [0, 63], got {self.crf}")
        if self.gop is not None and self.gop < 1:
            raise ValueError(f"gop must be >= 1, got {self.gop}")


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
    import av  # lazy: PyAV is only needed when video is written

    options = options or VideoOptions()
    if not segments or any(len(s) == 0 for s in segments):
        raise ValueError("encode_video needs at least one non-empty segment")
    h, w = segments[0].shape[1:3]
    for s in segments:
        if s.dtype != np.uint8 or s.ndim != 4 or s.shape[1:] != (h, w, 3):
            raise ValueError(f"segments must be uint8 [T, {h}, {w}, 3], got {s.dtype} {s.shape}")
    if h % 2 or w % 2:
        raise ValueError(f"yuv420p needs even frame sizes, got {h}x{w}")
    rate = Fraction(fps).limit_denominator(1001)
    gop = options.gop or max(1, round(2 * float(fps)))
    codec_opts: dict[str, object]
    if options.codec == "h264":
        codec_opts = {
            "crf": str(options.crf if options.crf is not None else 23),
            "preset": options.preset or "veryfast",
            "forced-idr": "1",
            # x264's macroblock-tree lookahead reads uninitialized memory on small frames, which
            # makes the bitstream depend on heap contents (measured: 32x32 to 96x96 frames encode
            # differently after other allocations). Without it the output is a function of the
            # frames alone, which the same-seed-same-dataset guarantee needs.
            "x264-params": "mbtree=0",
        }
    else:
        codec_opts = {
            "crf": str(options.crf if options.crf is not None else 35),
            "preset": options.preset or "10",
        }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with av.open(str(path), mode="w") as container:
        stream = cast(
            "av.video.stream.VideoStream", container.add_stream(_ENCODERS[options.codec], rate=rate)
        )
        stream.width, stream.height = w, h
        stream.pix_fmt = "yuv420p"
        stream.time_base = 1 / rate
        stream.codec_context.gop_size = gop
        # Frame-level threads cost more than they give on small frames (measured: 64x64 x264
        # runs ~30% faster on one thread); larger frames keep the encoder's automatic choice.
        if w * h <= 256 * 256:
            stream.codec_context.thread_count = 1
        stream.options = codec_opts
        for seg in segments:
            for i in range(len(seg)):
                frame = av.VideoFrame.from_ndarray(seg[i], format="rgb24")
                frame.pts = n
                if i == 0:
                    frame.pict_type = av.video.frame.PictureType.I
                container.mux(stream.encode(frame))
                n += 1
        container.mux(stream.encode(None))
    return n
