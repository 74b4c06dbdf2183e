"""Frame fingerprints: a few 8x8 luma thumbnails per camera, from frames that decode cheaply.

Two recordings of one take are near-duplicates even when their actions differ (re-labelled,
re-computed from another controller's log, shifted by an offset), and a camera that shows the
same pictures at the same moments is what gives them away. A camera's fingerprint is up to
`FRAMES` frames at evenly spaced steps, each reduced to a `GRID` x `GRID` grid of mean luma
(64 bytes a frame, 512 a camera, stored base64 with their steps in the episode's quality); two
episodes' frames match when every cell of every aligned frame is within `MATCH_LUMA` of 255 (the
doctor's test, `lake.stats.duplicates`). A mean over a block of pixels survives a re-encode, a
resize and sensor noise; a different take of the same task, from the same fixed camera, does
not stay within 8 levels in every cell of eight frames, because the arm is somewhere else in at
least one of them.

Which frames, and what they cost (measured on a loaded 2-core machine, see `bench doctor`):

- JPEG: libjpeg-turbo decodes in the DCT domain at 1/8 scale (simplejpeg, grey): about 0.03 ms a
  64 px frame, 1.5 ms a 256 px frame of pure noise (entropy decoding dominates; camera frames
  hold far fewer bytes). The same decodes give the dark/overexposed sample (`LUMA_SAMPLES`).
- PNG, WebP, FFV1, key-referenced h264 rows: a full decode of the `FRAMES` frames only.
- A recorded video (the record's packets): keyframes only, each an intra picture that decodes
  alone, so no reference chain is decoded; evenly spaced among the episode's keyframes. A video
  with a keyframe every two frames (LeRobot's default) gets eight frames anywhere in the
  episode; the GR00T data (a keyframe every 250 frames) gets its one or two. An episode without
  a keyframe of its own (a segment that starts mid-GOP and is shorter than a GOP) gets none.

Nothing is read again: these are the encoded frames ingest already holds (and `doctor --update`
reads once). A frame that does not decode is left out of the sample, never an error: ingest has
its own checks for that.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robolake.lake.media.record import StreamIndex, decode_runs

__all__ = [
    "FRAMES",
    "GRID",
    "LUMA_SAMPLES",
    "MATCH_LUMA",
    "cells",
    "fingerprint_json",
    "informative",
    "parse_fingerprint",
    "sample_cells",
    "sample_steps",
    "thumbnail",
]

FRAMES = 8  # frames per camera fingerprint
GRID = 8  # thumbnail side: GRID x GRID mean luma cells
MATCH_LUMA = 8  # two frames match when no cell differs by more than this (of 255)
LUMA_SAMPLES = 32  # frames decoded per camera for the dark/overexposed estimate, where decoding is cheap
# 8-bit pixel formats whose first plane is the luma (the rest are converted by swscale)
_PLANAR_Y = frozenset(f"{p}{s}" for p in ("yuv", "yuvj") for s in ("420p", "422p", "444p", "440p", "411p", "410p")) | {
    "nv12",
    "nv21",
    "gray",
}


def _evenly(candidates: np.ndarray, k: int) -> np.ndarray:
    """Up to `k` of `candidates` (ascending) at evenly spaced positions, ascending and unique."""
    if len(candidates) <= k:
        return candidates
    return np.unique(candidates[np.linspace(0, len(candidates) - 1, k).round().astype(int)])


def _video_candidates(stream: StreamIndex) -> np.ndarray:
    """Steps whose packet is a keyframe (an intra picture: decodes with no other packet)."""
    return np.flatnonzero(stream.packet_key[stream.step_packet]).astype(np.int64)


def sample_steps(num_steps: int, encoding: str, stream: StreamIndex | None) -> tuple[np.ndarray, np.ndarray]:
    """(fingerprint steps, luma steps) of a camera: which frames to decode, the second a superset.

    Args:
        num_steps: The camera's steps.
        encoding: Its media-row encoding (`jpeg...` frames are sampled more, for dark/bright).
        stream: A recorded video's stream (keyframes only), or None for images.
    """
    cand = _video_candidates(stream) if stream is not None else np.arange(num_steps, dtype=np.int64)
    fp = _evenly(cand, FRAMES)
    if stream is not None or encoding.split(";", 1)[0] == "jpeg":
        return fp, np.union1d(fp, _evenly(cand, LUMA_SAMPLES))
    return fp, fp


def cells(luma: np.ndarray) -> np.ndarray:
    """float64 [GRID, GRID]: the mean of each cell of a luma image [H, W].

    The image is cropped to a multiple of GRID a side first (at most GRID - 1 edge rows and
    columns dropped), so that every cell averages the same whole pixels: one reshape, no resampling.
    """
    h, w = luma.shape
    if h < GRID or w < GRID:  # a frame smaller than the grid: repeat pixels up to it first
        luma = np.repeat(np.repeat(luma, -(-GRID // h), axis=0), -(-GRID // w), axis=1)
        h, w = luma.shape
    ch, cw = h // GRID, w // GRID
    top, left = (h - ch * GRID) // 2, (w - cw * GRID) // 2
    block = luma[top : top + ch * GRID, left : left + cw * GRID].reshape(GRID, ch, GRID, cw)
    return np.asarray(block.mean(axis=(1, 3), dtype=np.float64))


def thumbnail(luma: np.ndarray) -> np.ndarray:
    """uint8 [GRID, GRID]: `cells` rounded, as the fingerprint stores them."""
    return _round(cells(luma))


def _round(c: np.ndarray) -> np.ndarray:
    return np.asarray(np.clip(np.round(c), 0, 255), dtype=np.uint8)


def _jpeg_luma(data: bytes) -> np.ndarray | None:
    import simplejpeg

    try:
        out = simplejpeg.decode_jpeg(data, colorspace="GRAY", fastdct=True, min_height=GRID, min_width=GRID)
    except ValueError:
        return _image_luma(data)  # CMYK and the like: PIL knows them
    return np.asarray(out)[..., 0]


def _image_luma(data: bytes, encoding: str | None = None) -> np.ndarray | None:
    from robolake.lake.media.codecs import decode_row

    try:
        rgb = decode_row(data, encoding or "png")
    except (OSError, ValueError, RuntimeError):
        return None
    # ITU-R BT.601 luma, as a JPEG's Y (and PIL's "L") has it
    return np.asarray(rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114)


def _frame_cells(frame: Any) -> np.ndarray:
    """A decoded av.VideoFrame's `cells` on the full 0-255 scale (a JPEG's), from its Y plane where it
    has one (no colour conversion)."""
    name = str(frame.format.name)
    if name not in _PLANAR_Y:
        return cells(np.asarray(frame.to_ndarray(format="gray")))
    plane = frame.planes[0]
    y = np.frombuffer(plane, dtype=np.uint8).reshape(plane.height, plane.line_size)[:, : plane.width]
    c = cells(y)
    if name.startswith("yuvj") or name == "gray" or int(getattr(frame, "color_range", 0) or 0) == 2:
        return c
    # limited ("MPEG") range puts black at 16 and white at 235: stretch it so dark and bright mean the same
    return np.clip((c - 16.0) * (255.0 / 219.0), 0.0, 255.0)


def sample_cells(
    images: Sequence[bytes], *, encoding: str, stream: StreamIndex | None, steps: np.ndarray
) -> dict[int, np.ndarray]:
    """Step -> the `cells` (mean luma of each GRID x GRID cell, 0-255) of that step's frame, for
    `steps` (from `sample_steps`). Frames that do not decode are left out."""
    out: dict[int, np.ndarray] = {}
    if not len(steps):
        return out
    if stream is not None:
        import av

        try:
            for step, frame in decode_runs(stream, stream.runs(steps.tolist()), images.__getitem__):
                out[int(step)] = _frame_cells(frame)
        except (av.error.FFmpegError, ValueError, RuntimeError, KeyError, IndexError):
            pass  # keep the frames that did decode: ingest checks the stream on its own
        return out
    jpeg = encoding.split(";", 1)[0] == "jpeg"
    for s in steps.tolist():
        data = images[s]
        luma = _jpeg_luma(data) if jpeg or data[:2] == b"\xff\xd8" else _image_luma(data, encoding)
        if luma is not None and luma.size:
            out[int(s)] = cells(luma)
    return out


def fingerprint_json(sampled: Mapping[int, np.ndarray], steps: np.ndarray) -> dict[str, Any] | None:
    """The stored fingerprint of a camera: {"steps": [...], "luma": base64 of uint8 [K, GRID*GRID]},
    from the `sample_cells` of `steps` that decoded; None with fewer than two of them (nothing to align)."""
    have = [int(s) for s in steps.tolist() if int(s) in sampled]
    if len(have) < 2:
        return None
    grid = _round(np.stack([sampled[s] for s in have])).reshape(len(have), GRID * GRID)
    return {"steps": have, "luma": base64.b64encode(grid.tobytes()).decode("ascii")}


def parse_fingerprint(fp: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps int64 [K], luma uint8 [K, GRID*GRID]) of a stored fingerprint; None where malformed."""
    if not isinstance(fp, Mapping):
        return None
    try:
        steps = np.asarray(fp["steps"], dtype=np.int64)
        grid = np.frombuffer(base64.b64decode(fp["luma"]), dtype=np.uint8)
    except (KeyError, TypeError, ValueError):
        return None
    if steps.ndim != 1 or len(steps) < 2 or grid.size != len(steps) * GRID * GRID:
        return None
    return steps, grid.reshape(len(steps), GRID * GRID)


def informative(grid: np.ndarray) -> bool:
    """Whether a camera's thumbnails [K, GRID*GRID] change over the episode by more than twice the
    match tolerance: a still view (a camera that was off, an empty scene) says nothing about
    which take it is, so it never makes two episodes duplicates."""
    g = grid.astype(np.int16)
    return bool(np.abs(g - g[0]).max() > 2 * MATCH_LUMA)
