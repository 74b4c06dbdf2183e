"""Decoding LeRobot videos (h264, AV1, ...) with PyAV, frame by frame.

Frames are decoded once, in order, and each is handed on (or JPEG-encoded) on the spot, so an
episode never holds more than one raw frame in memory. A segment of a shared video (LeRobot
v3.0 keeps many episodes in one mp4) is selected by timestamp with half a frame of tolerance on
both sides, which is how LeRobot itself locates an episode's frames.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from fractions import Fraction
from functools import lru_cache

import numpy as np

from robolake.lake.media import JPEG_QUALITY, encode_frame
from robolake.lake.sources.base import SourceError

__all__ = ["iter_video_frames", "file_digest", "seek_frame"]


@lru_cache(maxsize=64)
def _digest_cached(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digest(path: str) -> str:
    """sha256 of a file's bytes (cached per process by path, size and mtime).

    Raises:
        SourceError: the file is missing.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SourceError("missing_video", path, "video file is missing; re-export or re-download it") from None
    return _digest_cached(path, st.st_size, st.st_mtime_ns)


def iter_video_frames(
    path: str,
    *,
    start_s: float | None = None,
    end_s: float | None = None,
    fps: float,
    encode_jpeg: bool = True,
    quality: int = JPEG_QUALITY,
) -> Iterator[tuple[float, bytes | np.ndarray, int, int]]:
    """Yield (timestamp, frame, height, width) for each frame of `path` in [start_s, end_s).

    Frames are JPEG bytes when `encode_jpeg`, else RGB uint8 arrays.

    Raises:
        SourceError: the file is missing or cannot be decoded.
    """
    import av

    if not os.path.exists(path):
        raise SourceError("missing_video", path, "video file is missing; re-export or re-download it")
    half = 0.5 / fps if fps > 0 else 1e-4
    lo = None if start_s is None else start_s - half
    hi = None if end_s is None else end_s - half
    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise SourceError("corrupt_video", path, "file has no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            time_base = stream.time_base or Fraction(1, 90000)
            if lo is not None and lo > 0:
                container.seek(max(0, int(lo / time_base)), stream=stream, backward=True)
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                t = float(frame.pts * time_base)
                if lo is not None and t < lo:
                    continue
                if hi is not None and t >= hi:
                    break
                if encode_jpeg:
                    yield t, encode_frame(frame.to_ndarray(format="rgb24"), quality), frame.height, frame.width
                else:
                    yield t, frame.to_ndarray(format="rgb24"), frame.height, frame.width
    except SourceError:
        raise
    except (av.error.FFmpegError, OSError, ValueError) as e:
        raise SourceError("corrupt_video", path, f"video cannot be decoded ({e}); re-encode or re-export it") from e


def seek_frame(path: str, index: int, fps: float) -> np.ndarray:
    """Decode frame `index` of a video by seeking to its keyframe and decoding forward.

    This is what a per-sample loader does for every frame it reads; robolake uses it only as the
    baseline the lake is measured against.
    """
    import av

    target = index / fps
    half = 0.5 / fps
    with av.open(path) as container:
        stream = container.streams.video[0]
        time_base = stream.time_base or Fraction(1, 90000)
        container.seek(max(0, int((target - half) / time_base)), stream=stream, backward=True)
        for frame in container.decode(stream):
            if frame.pts is not None and float(frame.pts * time_base) >= target - half:
                return frame.to_ndarray(format="rgb24")
    raise SourceError("frame_count", path, f"video has no frame {index} at {target:.3f}s")
