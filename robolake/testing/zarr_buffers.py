"""Zarr replay buffers as Diffusion Policy and UMI write them, with the faults real ones come with.

`write_replay_buffer` writes a dataset folder the way Diffusion Policy's real-robot recorder
leaves it: `replay_buffer.zarr` (zarr format 2, as `ReplayBuffer` writes it: `data/<key>`
arrays concatenated over episodes, chunked per episode-length of rows and compressed with
Blosc/zstd, and `meta/episode_ends`), with the keys of its real data (`action`,
`robot_eef_pose`, `robot_joint`, the integer `stage`, the epoch-seconds `timestamp` and a
secondary `robot_timestamp` clock). Cameras are either in the buffer (UMI's `camera0_rgb`,
uint8 frames compressed one per chunk with imagecodecs' JPEG-XL codec through numcodecs, or raw
Blosc frames) or, with `videos=True`, one h264 mp4 per camera per episode written by PyAV in
`videos/<episode>/<camera>.mp4`. Everything is made by the real writers (zarr, numcodecs,
imagecodecs, PyAV), imported when a writer runs.

`faults` adds what real recordings hold: `truncated_mp4` (episode 1's first video cut to half
its bytes, as a killed recorder leaves it: no moov index), `orphan_video` (a video folder past
the last episode), `short_video` (episode 0's first video one frame short of its rows),
`missing_video` (the last episode's video folder absent), `clock_back` (`robot_timestamp`
restarts at every episode, so it goes back between episodes).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from robolake.testing.images import frames

__all__ = ["write_replay_buffer", "write_mp4", "bench_fixture", "FAULTS", "BUFFER_NAME"]

FAULTS = ("truncated_mp4", "orphan_video", "short_video", "missing_video", "clock_back")
BUFFER_NAME = "replay_buffer.zarr"
_T0 = 1_700_000_000.0  # recordings stamp epoch seconds


def write_mp4(path: Path, pixels: np.ndarray, fps: float) -> Path:
    """An h264 mp4 of uint8 [T, H, W, 3] frames (even H, W), one frame per 1/fps, written by PyAV."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=int(fps))
        stream.height, stream.width = int(pixels.shape[1]), int(pixels.shape[2])
        stream.pix_fmt = "yuv420p"
        stream.options = {"bframes": "0", "g": "8"}
        for px in pixels:
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(px), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def write_replay_buffer(
    path: Path,
    *,
    episodes: int = 3,
    steps: int = 20,
    cameras: int = 1,
    image_codec: str | None = "jpegxl",
    videos: bool = False,
    action: bool = True,
    size: tuple[int, int] = (48, 64),
    fps: float = 10.0,
    seed: int = 0,
    faults: tuple[str, ...] = (),
) -> Path:
    """A Diffusion Policy dataset folder: `replay_buffer.zarr` and, with `videos`, `videos/<episode>/<cam>.mp4`.

    Args:
        path: The dataset folder (created); the unit to ingest.
        episodes: Episodes; episode i has `steps + i` rows.
        steps: Rows of episode 0.
        cameras: Cameras: `data/camera<i>_rgb` in the buffer, or `videos/<episode>/<i>.mp4`.
        image_codec: `jpegxl` (UMI: imagecodecs' JPEG-XL, one frame a chunk) or None (raw Blosc
            frames); ignored with `videos`.
        videos: Cameras as mp4s beside the buffer (Diffusion Policy real-robot recordings).
        action: Write `data/action` (UMI writes none: its action is the next pose).
        size: Frame (height, width).
        fps: Rate of the rows and videos.
        seed: Seed of the values.
        faults: Any of `FAULTS`.

    Returns:
        `path`.
    """
    import numcodecs
    import zarr

    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; choose from {FAULTS}")
    rng = np.random.default_rng(seed)
    lengths = [steps + i for i in range(episodes)]
    ends = np.cumsum(lengths).astype(np.int64)
    n = int(ends[-1]) if episodes else 0
    path.mkdir(parents=True, exist_ok=True)
    blosc = numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.NOSHUFFLE)
    root = zarr.open_group(str(path / BUFFER_NAME), mode="w", zarr_format=2)
    data, meta = root.require_group("data"), root.require_group("meta")
    chunk = max(steps, 1)

    def put(name: str, values: np.ndarray, chunks: tuple[int, ...] | None = None, compressor: Any = blosc) -> None:
        arr = data.create_array(
            name,
            shape=values.shape,
            dtype=values.dtype,
            chunks=chunks or (chunk, *values.shape[1:]),
            compressors=compressor,
        )
        arr[...] = values

    pose = np.cumsum(rng.normal(0, 0.01, (n, 6)), axis=0)
    put("robot_eef_pose", pose)
    put("robot_joint", np.cumsum(rng.normal(0, 0.02, (n, 6)), axis=0))
    if action:
        put("action", (pose + rng.normal(0, 0.001, (n, 6))).astype(np.float32))
    starts = np.concatenate([[0], ends[:-1]])
    stage = np.concatenate([np.minimum(np.arange(k) * 3 // max(k, 1), 2) for k in lengths]).astype(np.int64)
    put("stage", stage)
    ep_of = np.repeat(np.arange(episodes), lengths)
    row_in_ep = np.arange(n) - starts[ep_of]
    t = _T0 + ep_of * 30.0 + row_in_ep / fps + rng.uniform(0, 0.002, n)
    put("timestamp", t)
    robot_t = 1000.0 + row_in_ep / fps if "clock_back" in faults else 1000.0 + (t - _T0)
    put("robot_timestamp", robot_t + 0.0005)
    pixels = [frames(n, *size, seed=seed + c) for c in range(cameras)]
    if not videos:
        if image_codec not in ("jpegxl", None):
            raise ValueError(f"image_codec must be 'jpegxl' or None, got {image_codec!r}")
        for c, px in enumerate(pixels):
            if image_codec == "jpegxl":
                from imagecodecs.numcodecs import Jpegxl

                put(f"camera{c}_rgb", px, chunks=(1, *px.shape[1:]), compressor=Jpegxl(level=80, numthreads=1))
            else:
                put(f"camera{c}_rgb", px, chunks=(1, *px.shape[1:]))
    ep_ends = meta.create_array("episode_ends", shape=ends.shape, dtype=np.int64, chunks=(max(len(ends), 1),))
    ep_ends[...] = ends
    if videos:
        _write_videos(path / "videos", pixels, ends, fps, faults)
    return path


def _write_videos(
    folder: Path, pixels: list[np.ndarray], ends: np.ndarray, fps: float, faults: tuple[str, ...]
) -> None:
    starts = np.concatenate([[0], ends[:-1]])
    episodes = len(ends)
    for ep, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        if "missing_video" in faults and ep == episodes - 1:
            continue
        for c, px in enumerate(pixels):
            cut = e - 1 if ("short_video" in faults and ep == 0 and c == 0) else e
            mp4 = write_mp4(folder / str(ep) / f"{c}.mp4", px[s:cut], fps)
            if "truncated_mp4" in faults and ep == min(1, episodes - 1) and c == 0:
                size = os.path.getsize(mp4)
                with open(mp4, "r+b") as f:
                    f.truncate(size // 2)
    if "orphan_video" in faults:
        for c, px in enumerate(pixels):
            write_mp4(folder / str(episodes) / f"{c}.mp4", px[:5], fps)


def bench_fixture(d: Path, episodes: int, steps: int) -> None:
    """A representative replay buffer for `robolake bench ingest`: UMI-style, one 96x96 JPEG-XL camera."""
    write_replay_buffer(d / "replay", episodes=episodes, steps=steps, cameras=1, image_codec="jpegxl", size=(96, 96))
