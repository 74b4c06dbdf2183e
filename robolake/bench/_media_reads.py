"""Random frame reads against the source's own mp4 seeks, and where the real GR00T data lives.

Shared by `bench media`, `bench scale` and `bench ingest`: each compares the lake's random frame
reads with seeking the source video, on the same picks.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

__all__ = ["SHARED", "random_frame_access", "shared_data"]

SHARED = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data", "gr00t_pick_n_place"
)


def shared_data() -> str | None:
    for cand in (SHARED, os.path.join(os.getcwd(), "..", "shared", "data", "gr00t_pick_n_place")):
        if os.path.isdir(cand):
            return os.path.abspath(cand)
    return None


# ---------------------------------------------------------------------------------------- media


def random_frame_access(src: str, lake: Any, n: int, seed: int = 0, batch: int = 64) -> dict[str, float]:
    """n random (episode, step, camera) frames decoded to RGB from the lake, `batch` per call and
    one per call, then the same frames by mp4 seek-and-decode from the source."""
    from robolake.lake import discover_readers, seek_frame

    readers = {r.root: r for r in discover_readers(src).readers}
    refs = {(r.root, ref.episode_index): ref for r in readers.values() for ref in r.discover()}
    eps = lake.episodes(
        columns=["episode_id", "source_uri", "source_episode_index", "num_steps", "cameras"]
    ).to_pylist()
    rng = random.Random(seed)
    picks = []
    for _ in range(n):
        e = rng.choice(eps)
        picks.append((e, rng.randrange(e["num_steps"]), rng.choice(e["cameras"])))
    keys = [(e["episode_id"], cam, step) for e, step, cam in picks]
    frames = lake.frames()
    frames.positions(keys)  # the per-episode position lookup, once, outside the timings
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        frames.read_many(keys[i : i + batch])
    batch_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for k in keys:
        frames.read_many([k])
    single_s = time.perf_counter() - t0
    # The floor under any layout kept in a Lance table: one single-row take of a 4-byte column
    # at the same positions (no frame bytes, no decode).
    media, pos = lake.dataset("media"), frames.positions(keys)
    t0 = time.perf_counter()
    for p in pos:
        media.take([p], columns=["step_index"])
    take_s = time.perf_counter() - t0

    def seek_all(one_thread: bool) -> float:
        t0 = time.perf_counter()
        for e, step, cam in picks:
            reader, ref = readers[e["source_uri"]], refs[(e["source_uri"], e["source_episode_index"])]
            fps = float(getattr(reader, "fps", 20.0))
            seek_frame(
                os.path.join(reader.root, ref.get(f"video:{cam}")),
                step + round((ref.get(f"from:{cam}") or 0.0) * fps),
                fps,
                one_thread=one_thread,
            )
        return time.perf_counter() - t0

    src_s = seek_all(False)
    one_thread_s = seek_all(True)
    return {
        "lake_per_s": n / batch_s,
        "lake_one_per_call_per_s": n / single_s,
        "source_per_s": n / src_s,
        "speedup": src_s / batch_s,
        "speedup_one_per_call": src_s / single_s,
        "take_floor_speedup": src_s / take_s,
        "speedup_one_per_call_vs_one_thread_seek": one_thread_s / single_s,
    }
