"""Reading LeRobot videos (h264, AV1, ...) with PyAV: as recorded packets, or frame by frame.

The record (`read_record`) demuxes an episode's packets without re-encoding them and decodes
them once through the lake's own decode path (`lake.record.decode_runs`, no RGB conversion):
that checks that every packet decodes, that the segment holds one frame per step and what size
the frames are, so a video the lake could not decode is quarantined at ingest, not found at
training time. The lossy layouts (`iter_video_frames`) decode frames once, in order, and hand
each on to be re-encoded on the spot, so an episode never holds more than one raw frame.

A segment of a shared video (LeRobot v3.0 keeps many episodes in one mp4) is selected by
timestamp with half a frame of tolerance on both sides, which is how LeRobot itself locates an
episode's frames: a packet belongs to the episode whose span holds its pts. The reader seeks to
the keyframe at or before the segment and stops once it has passed a keyframe after it.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from robolake.lake.media.frames import JPEG_QUALITY, encode_frame
from robolake.lake.media.record import NOPTS, StreamIndex, decode_runs, record_encoding
from robolake.lake.sources.base import EncodedFrames, SourceError

__all__ = ["RecordedVideo", "iter_video_frames", "file_digest", "read_record", "release_videos", "seek_frame"]


@dataclass(frozen=True, kw_only=True)
class RecordedVideo(EncodedFrames):
    """One camera's frames of one episode kept as the source video's own packets.

    `images` holds, per step, the packet that carries that step's frame; `stream` what decoding
    them needs (ingest writes it as the episode's `streams` row).
    """

    stream: StreamIndex


# One video kept open per thread between segments of it: LeRobot v3.0 keeps many episodes in one
# mp4, and opening it again for each episode cost a quarter of reading the episode's packets.
_kept = threading.local()


def _kept_container(path: str) -> Any:
    """`path` open, from this thread's kept container when it is the same file (path, size and
    mtime), else opened now and kept in place of the last."""
    import av

    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    held = getattr(_kept, "video", None)
    if held is not None and held[0] == key:
        return held[1]
    release_videos()
    container = av.open(path)
    _kept.video = (key, container)
    return container


def release_videos() -> None:
    """Close the video this thread keeps open between segments (`read_record(..., keep_open=True)`)."""
    held = getattr(_kept, "video", None)
    _kept.video = None
    if held is not None:
        held[1].close()


@contextmanager
def _segment(
    path: str, start_s: float | None, end_s: float | None, fps: float, *, keep_open: bool = False
) -> Iterator[tuple[Any, Any, Fraction, float | None, float | None]]:
    """`path` open at its video stream, seeked to the keyframe at or before `start_s`, with the
    segment's bounds [lo, hi) in seconds: half a frame early, so a frame stamped a little before
    its step still belongs to it. PyAV errors propagate for the caller to name.

    With `keep_open`, a segment that starts with a seek reads from the container this thread keeps
    open (`_kept_container`): after a seek it reads what a freshly opened file would. A segment at
    the start of the file is read from a fresh open (nothing to seek), and an error closes the
    kept one."""
    import av

    if not os.path.exists(path):
        raise SourceError("missing_video", path, "video file is missing; re-export or re-download it")
    half = 0.5 / fps if fps > 0 else 1e-4
    lo = None if start_s is None else start_s - half
    hi = None if end_s is None else end_s - half
    if keep_open and lo is not None and lo > 0:
        try:
            container = _kept_container(path)
            yield _seeked(container, path, lo, hi)
        except BaseException:
            release_videos()
            raise
        return
    with av.open(path) as container:
        yield _seeked(container, path, lo, hi)


def _seeked(
    container: Any, path: str, lo: float | None, hi: float | None
) -> tuple[Any, Any, Fraction, float | None, float | None]:
    if not container.streams.video:
        raise SourceError("corrupt_video", path, "file has no video stream")
    stream = container.streams.video[0]
    time_base = stream.time_base or Fraction(1, 90000)
    if lo is not None and lo > 0:
        container.seek(max(0, int(lo / time_base)), stream=stream, backward=True)
    return container, stream, time_base, lo, hi


def read_record(
    path: str,
    *,
    start_s: float | None,
    end_s: float | None,
    fps: float,
    source_path: str,
    digest: str,
    keep_open: bool = False,
) -> RecordedVideo:
    """The packets of `path` in [start_s, end_s) (all of it when None), checked to decode.

    `keep_open`: keep the file open for the next segment of it (this thread's; `release_videos`
    closes it), for a reader that reads many episodes of one file in a row.

    Raises:
        SourceError: the file is missing, cannot be demuxed or decoded, or holds packets without
            timestamps.
    """
    import av

    try:
        with _segment(path, start_s, end_s, fps, keep_open=keep_open) as (container, stream, time_base, lo, hi):
            cc = stream.codec_context
            data: list[bytes] = []
            pts: list[int] = []
            dts: list[int] = []
            key: list[bool] = []
            passed: int | None = None  # pts of the first keyframe after the segment
            for p in container.demux(stream):
                if not p.size:
                    continue
                if p.pts is None:
                    raise SourceError(
                        "corrupt_video",
                        path,
                        f"packet {len(data)} has no presentation time stamp; "
                        "re-mux the video (ffmpeg -c copy) so that every packet has one",
                    )
                if passed is not None and not p.is_keyframe and p.pts > passed:
                    break  # past the next keyframe's leading pictures: nothing later is the segment's
                if hi is not None and passed is None and p.is_keyframe and float(p.pts * time_base) >= hi:
                    passed = int(p.pts)
                data.append(bytes(p))
                pts.append(int(p.pts))
                dts.append(NOPTS if p.dts is None else int(p.dts))
                key.append(bool(p.is_keyframe))
            times = np.asarray(pts, dtype=np.float64) * float(time_base)
            owned = np.ones(len(pts), dtype=bool)
            if lo is not None:
                owned &= times >= lo
            if hi is not None:
                owned &= times < hi
            mine = np.flatnonzero(owned)
            if not len(mine):
                raise SourceError("frame_count", path, f"video has no frames in [{start_s}, {end_s}) s")
            step = np.full(len(pts), -1, dtype=np.int32)
            step[mine[np.argsort(np.asarray(pts)[mine], kind="stable")]] = np.arange(len(mine), dtype=np.int32)
            full = StreamIndex(
                codec=cc.codec.canonical_name,
                decoder=cc.codec.name,
                extradata=bytes(cc.extradata or b""),
                width=int(cc.width),
                height=int(cc.height),
                time_base=Fraction(time_base),
                params={
                    **{n: int(getattr(cc, n)) for n in ("color_range", "colorspace", "color_primaries", "color_trc")},
                    "pix_fmt": str(cc.pix_fmt or ""),
                },
                packet_step=step,
                packet_pts=np.asarray(pts, dtype=np.int64),
                packet_dts=np.asarray(dts, dtype=np.int64),
                packet_key=np.asarray(key, dtype=bool),
                extra=tuple(data[i] for i in np.flatnonzero(step < 0)),
                source_path=source_path,
                source_digest=digest,
            )
    except SourceError:
        raise
    except (av.error.FFmpegError, OSError, ValueError) as e:
        raise SourceError("corrupt_video", path, f"video cannot be read ({e}); re-encode or re-export it") from e
    index = full.trimmed()
    packets = [b""] * index.num_steps
    for i in mine.tolist():
        packets[int(step[i])] = data[i]
    sizes: set[tuple[int, int]] = set()
    try:
        for _, frame in decode_runs(index, index.runs(range(index.num_steps)), packets.__getitem__):
            sizes.add((frame.height, frame.width))
    except (av.error.FFmpegError, ValueError, RuntimeError) as e:
        raise SourceError("corrupt_video", path, f"video does not decode ({e}); re-encode or re-export it") from e
    if len(sizes) != 1:
        raise SourceError(
            "frame_size", path, f"video changes frame size mid-episode ({sorted(sizes)}); re-encode it at one size"
        )
    ((height, width),) = sizes
    return RecordedVideo(
        camera="",
        images=tuple(packets),
        encoding=record_encoding(index.codec),
        height=height,
        width=width,
        stream=index,
    )


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

    try:
        with _segment(path, start_s, end_s, fps) as (container, stream, time_base, lo, hi):
            stream.thread_type = "AUTO"
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


def seek_frame(path: str, index: int, fps: float, *, one_thread: bool = False) -> np.ndarray:
    """Decode frame `index` of a video by seeking to its keyframe and decoding forward.

    This is what a per-sample loader does for every frame it reads; robolake uses it only as the
    baseline the lake is measured against. By default with PyAV's decoder settings (what such a
    loader gets); `one_thread` decodes on one thread, as the lake's reader does.
    """
    import av

    target = index / fps
    half = 0.5 / fps
    with av.open(path) as container:
        stream = container.streams.video[0]
        if one_thread:
            stream.thread_count, stream.thread_type = 1, "NONE"
        time_base = stream.time_base or Fraction(1, 90000)
        container.seek(max(0, int((target - half) / time_base)), stream=stream, backward=True)
        for frame in container.decode(stream):
            if frame.pts is not None and float(frame.pts * time_base) >= target - half:
                return frame.to_ndarray(format="rgb24")
    raise SourceError("frame_count", path, f"video has no frame {index} at {target:.3f}s")
