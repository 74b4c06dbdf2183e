"""Ingest throughput against its practical limit, and random frame access: lake vs source mp4.

- `frames_per_s`: `robolake.lake.ingest` of the synthetic dataset (validation, hashing,
  quarantine checks, frame encode, fragment writes, one commit).
- `limit_frames_per_s`: the same episodes only read, decoded, JPEG-encoded and written to Lance by
  the same Ray Data parallelism, with no validation: what ingest could reach at best.
- `random_frame_access`: 1,000 random (episode, step, camera) frames decoded to RGB, from the
  lake (one Lance take + JPEG decode) and from the source files (mp4 seek + decode), same run.
  Measured on the synthetic data and, when ../shared is present, on the real GR00T dataset.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from typing import Any, cast

import lance
import pyarrow as pa
import pyarrow.parquet as pq

from robolake.bench._common import machine, print_table, write_json  # noqa: E402
from robolake.lake import Lake  # noqa: E402
from robolake.lake.ingest import IngestConfig, ensure_ray, ingest  # noqa: E402
from robolake.lake.sources import discover_readers
from robolake.lake.sources.lerobot import LeRobotReader  # noqa: E402
from robolake.lake.sources.video import iter_video_frames, seek_frame  # noqa: E402
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic  # noqa: E402

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "gr00t_pick_n_place")


def _limit_ingest(src: str, out: str) -> int:
    """Read, decode, encode, write to Lance on Ray Data, no validation; returns frames written."""
    import ray.data

    jobs = []
    for reader in cast(list[LeRobotReader], discover_readers(src)):  # this limit reads LeRobot layouts
        for ref in reader.discover():
            jobs.append((reader.root, ref.get("data_path"), [(c, ref.get(f"video:{c}"), ref.get(f"from:{c}"), ref.get(f"to:{c}")) for c in reader.cameras], reader.fps))

    # The same chunking as ingest: about two tasks per CPU.
    per_task = max(1, -(-len(jobs) // 4))
    chunks = [jobs[i : i + per_task] for i in range(0, len(jobs), per_task)]

    def load(row: dict[str, Any]) -> dict[str, Any]:
        frames = []
        rows = 0
        for root, data_path, videos, fps in chunks[int(row["i"])]:
            rows += pq.read_table(os.path.join(root, data_path)).num_rows
            for cam, rel, lo, hi in videos:
                for j, (t, img, _h, _w) in enumerate(iter_video_frames(os.path.join(root, rel), start_s=lo, end_s=hi, fps=fps)):
                    frames.append({"episode": data_path, "camera": cam, "step": j, "t": t, "data": img})
        table = pa.Table.from_pylist(frames, schema=schema)
        frags = lance.fragment.write_fragments(table, out, schema=schema) if frames else []
        return {"n": len(frames), "rows": rows, "frags": [f.to_json() for f in frags]}

    import json as _json

    schema = pa.schema([("episode", pa.string()), ("camera", pa.string()), ("step", pa.int64()), ("t", pa.float64()), ("data", pa.binary())])
    lance.write_dataset(pa.Table.from_pylist([], schema=schema), out, schema=schema, mode="overwrite")
    base = lance.dataset(out).version
    ds = ray.data.from_items([{"i": i} for i in range(len(chunks))], override_num_blocks=len(chunks))
    results = list(ds.map(lambda r: {"r": _json.dumps(load(r))}).iter_rows())
    parsed = [_json.loads(r["r"]) for r in results]
    frags = [lance.FragmentMetadata.from_json(_json.dumps(f)) for p in parsed for f in p["frags"]]
    lance.LanceDataset.commit(out, lance.LanceOperation.Append(frags), read_version=base)
    return sum(p["n"] for p in parsed)


def _random_access(src: str, lake: Lake, n: int, seed: int = 0) -> dict[str, float]:
    readers = {r.root: r for r in discover_readers(src)}
    eps = lake.episodes(columns=["episode_id", "source_uri", "source_episode_index", "num_steps", "cameras"]).to_pylist()
    refs = {(r.root, ref.episode_index): ref for r in readers.values() for ref in r.discover()}
    rng = random.Random(seed)
    picks = []
    for _ in range(n):
        e = rng.choice(eps)
        picks.append((e, rng.randrange(e["num_steps"]), rng.choice(e["cameras"])))
    frames = lake.frames()
    t0 = time.perf_counter()
    for e, step, cam in picks:
        frames.read(e["episode_id"], cam, step)
    lake_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for e, step, cam in picks:
        reader = readers[e["source_uri"]]
        ref = refs[(e["source_uri"], e["source_episode_index"])]
        offset = ref.get(f"from:{cam}") or 0.0
        seek_frame(os.path.join(reader.root, ref.get(f"video:{cam}")), step + round(offset * reader.fps), reader.fps)  # type: ignore[attr-defined]
    src_s = time.perf_counter() - t0
    return {"frames": n, "lake_per_s": n / lake_s, "source_per_s": n / src_s, "speedup": src_s / lake_s}


def run(quick: bool) -> dict[str, Any]:
    ensure_ray(num_cpus=2)
    work = tempfile.mkdtemp(prefix="robolake-bench-ingest-")
    cfg = SyntheticConfig(seed=0, episodes_per_embodiment=4 if quick else 12)
    src = os.path.join(work, "synthetic")
    generate_synthetic(src, cfg)

    # Warm Ray's worker pool first, then alternate the two measurements and keep each one's best:
    # the machine is shared and noisy, and the first Ray Data job pays for starting workers.
    _limit_ingest(src, os.path.join(work, "warmup.lance"))
    limit_s = ingest_s = float("inf")
    for rep in range(2):
        t0 = time.perf_counter()
        limit_frames = _limit_ingest(src, os.path.join(work, "limit.lance"))
        limit_s = min(limit_s, time.perf_counter() - t0)
        t0 = time.perf_counter()
        result = ingest(src, os.path.join(work, f"lake{rep}"), IngestConfig())
        ingest_s = min(ingest_s, time.perf_counter() - t0)
    lake = Lake.open(os.path.join(work, "lake0"))

    out: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "episodes": result.ingested,
        "frames": result.frames,
        "frames_per_s": result.frames / ingest_s,
        "limit_frames_per_s": limit_frames / limit_s,
        "ratio_to_limit": (result.frames / ingest_s) / (limit_frames / limit_s),
        "random_frame_access": _random_access(src, lake, 1000),
    }
    if os.path.isdir(SHARED):
        real_lake = os.path.join(work, "real_lake")
        ingest(SHARED, real_lake, IngestConfig())
        out["random_frame_access_real"] = _random_access(os.path.abspath(SHARED), Lake.open(real_lake), 300 if quick else 1000)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    res = run(args.quick)
    rows = [
        ("episodes", res["episodes"]),
        ("frames", res["frames"]),
        ("ingest frames/s", res["frames_per_s"]),
        ("limit frames/s (read+decode+write only)", res["limit_frames_per_s"]),
        ("ratio_to_limit", res["ratio_to_limit"]),
        ("random frames/s, lake", res["random_frame_access"]["lake_per_s"]),
        ("random frames/s, source mp4", res["random_frame_access"]["source_per_s"]),
        ("random access speedup", res["random_frame_access"]["speedup"]),
    ]
    if "random_frame_access_real" in res:
        r = res["random_frame_access_real"]
        rows += [("real data: lake frames/s", r["lake_per_s"]), ("real data: mp4 frames/s", r["source_per_s"]), ("real data: speedup", r["speedup"])]
    print_table("robolake bench ingest", rows)
    write_json(args.json, res)


if __name__ == "__main__":
    main()
