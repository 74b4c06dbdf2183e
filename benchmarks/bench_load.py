"""Loader throughput: packed shards (DataLoader, Ray Data) vs a LeRobot-style per-sample loader.

All three read the same samples in the same run, from one synthetic dataset (ingested, packed):

- `packed_dataloader`: `PackedLoader` over the packed shards, DataLoader with 2 workers.
- `ray_stream`: `RayPackedStream` (read_lance -> decode map -> iter_torch_batches).
- `per_sample_baseline`: what a LeRobot-style loader does on the SOURCE dataset: per sample,
  random access by (episode, step), mp4 seek + decode of the frame of every camera (PyAV, as
  `robolake.lake.sources.video.seek_frame`), the action chunk t..t+H-1 gathered from the episode's
  parquet rows (tables cached per worker, as LeRobot memory-maps its HF dataset), and a padded
  collate; DataLoader with 2 workers, as many samples per batch as a packed sequence holds on
  average. It reads a prefix of the same shuffled epoch (it is slow), reported as samples/s.
- `speedup_vs_baseline` = packed_dataloader / per_sample_baseline samples per second.

Packed figures are steady-state epochs (the second epoch, after worker start-up), and also the
first epoch including start-up (`first_epoch_samples_per_s`).

Usage: python benchmarks/bench_load.py --json out.json [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine, print_table, write_json  # noqa: E402

from robolake.lake import Lake  # noqa: E402
from robolake.lake.ingest import ensure_ray, ingest  # noqa: E402
from robolake.lake.sources import discover_readers  # noqa: E402
from robolake.lake.sources.synthetic import SyntheticConfig, generate_synthetic  # noqa: E402
from robolake.lake.sources.video import seek_frame  # noqa: E402
from robolake.loaders import LoaderConfig, PackedLoader, RayPackedStream  # noqa: E402
from robolake.packers.lengths import TokenLengthConfig  # noqa: E402
from robolake.packers.pipeline import pack  # noqa: E402
from robolake.packers.spec import PackSpec  # noqa: E402

IMAGE = 64
HORIZON = 16


def _epoch(iterable: Any) -> tuple[int, int, float, list[tuple[str, int]]]:
    t0 = time.perf_counter()
    samples = tokens = 0
    keys: list[tuple[str, int]] = []
    for batch in iterable:
        samples += batch.num_samples
        tokens += batch.total_tokens
        keys.extend(batch.sample_keys)
    return samples, tokens, time.perf_counter() - t0, keys


def _rates(samples: int, tokens: int, seconds: float) -> dict[str, float]:
    return {"samples": samples, "seconds": seconds, "samples_per_s": samples / seconds, "tokens_per_s": tokens / seconds}


class _PerSampleSource(Dataset):
    """LeRobot-style random access on the source files: mp4 seek+decode per camera, parquet chunk."""

    def __init__(self, src: str, lake: Lake, keys: list[tuple[str, int]]) -> None:
        readers = {r.root: r for r in discover_readers(src)}
        refs = {(r.root, ref.episode_index): ref for r in readers.values() for ref in r.discover()}
        self.keys = keys
        self.episodes: dict[str, dict[str, Any]] = {}
        for e in lake.episodes(columns=["episode_id", "source_uri", "source_episode_index", "task", "cameras", "embodiment"]).to_pylist():
            reader = readers[e["source_uri"]]
            ref = refs[(e["source_uri"], e["source_episode_index"])]
            self.episodes[e["episode_id"]] = {
                "root": reader.root,
                "fps": reader.fps,
                "data": os.path.join(reader.root, ref.get("data_path")),
                "videos": [(os.path.join(reader.root, ref.get(f"video:{c}")), round((ref.get(f"from:{c}") or 0.0) * reader.fps)) for c in e["cameras"]],
                "task": e["task"],
            }
        self._tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def _rows(self, path: str) -> tuple[np.ndarray, np.ndarray]:
        if path not in self._tables:
            import pyarrow.parquet as pq

            t = pq.read_table(path, columns=["observation.state", "action"])
            self._tables[path] = tuple(np.stack(t[c].to_numpy(zero_copy_only=False)).astype(np.float32) for c in ("observation.state", "action"))
        return self._tables[path]

    def __getitem__(self, i: int) -> dict[str, Any]:
        eid, t = self.keys[i]
        ep = self.episodes[eid]
        frames = []
        for path, offset in ep["videos"]:
            img = seek_frame(path, t + offset, ep["fps"])
            if img.shape[0] != IMAGE or img.shape[1] != IMAGE:
                img = np.asarray(torch.nn.functional.interpolate(torch.from_numpy(img).permute(2, 0, 1)[None].float(), size=(IMAGE, IMAGE))[0].permute(1, 2, 0).byte())
            frames.append(img)
        state, action = self._rows(ep["data"])
        idx = np.minimum(np.arange(t, t + HORIZON), len(action) - 1)
        text = np.frombuffer(ep["task"].encode(), dtype=np.uint8).astype(np.int64)
        return {"frames": np.stack(frames), "state": state[t], "action": action[idx], "text": text}


def _padded_collate(items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    n = len(items)
    v = max(x["frames"].shape[0] for x in items)
    sd = max(x["state"].shape[0] for x in items)
    ad = max(x["action"].shape[1] for x in items)
    tl = max(len(x["text"]) for x in items)
    pixels = torch.zeros(n, v, 3, IMAGE, IMAGE, dtype=torch.uint8)
    state = torch.zeros(n, sd)
    action = torch.zeros(n, HORIZON, ad)
    text = torch.zeros(n, tl, dtype=torch.int64)
    for i, x in enumerate(items):
        pixels[i, : x["frames"].shape[0]] = torch.from_numpy(x["frames"]).permute(0, 3, 1, 2)
        state[i, : len(x["state"])] = torch.from_numpy(x["state"])
        action[i, :, : x["action"].shape[1]] = torch.from_numpy(x["action"])
        text[i, : len(x["text"])] = torch.from_numpy(x["text"])
    return {"pixels": pixels, "state": state, "action": action, "text": text}


def _baseline(src: str, lake: Lake, keys: list[tuple[str, int]], batch_size: int) -> dict[str, float]:
    ds = _PerSampleSource(src, lake, keys)
    loader = DataLoader(ds, batch_size=batch_size, num_workers=2, collate_fn=_padded_collate, multiprocessing_context="forkserver")
    it = iter(loader)
    first = next(it)  # worker start-up is not the loader's throughput
    t0 = time.perf_counter()
    samples = 0
    for batch in it:
        samples += batch["state"].shape[0]
    seconds = time.perf_counter() - t0
    return {"samples": samples, "seconds": seconds, "samples_per_s": samples / seconds, "batch_size": batch_size, "first_batch_samples": int(first["state"].shape[0])}


def _lerobot_dataset_check() -> dict[str, Any]:
    """Would `lerobot` install beside torch 2.13 without replacing torch? (pip --dry-run, no install)."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", "lerobot"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"measured": False, "reason": f"pip --dry-run could not run: {e}"}
    if proc.returncode != 0:
        return {"measured": False, "reason": "pip cannot resolve lerobot here: " + proc.stderr.strip()[-600:]}
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"measured": False, "reason": "pip --dry-run gave no report: " + proc.stdout[-300:]}
    installs = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report.get("install", [])}
    if "torch" in installs:
        return {
            "measured": False,
            "reason": f"installing lerobot {installs.get('lerobot')} would replace torch {torch.__version__} with torch {installs['torch']}",
            "would_install": installs,
        }
    return {"measured": False, "reason": "lerobot resolves beside this torch but is not installed in the venv; install it to measure", "would_install": installs}


def run(quick: bool) -> dict[str, Any]:
    """Build the data, run the three loaders on the same samples, return the figures."""
    ensure_ray(num_cpus=2)
    work = tempfile.mkdtemp(prefix="robolake-bench-load-")
    src = os.path.join(work, "synthetic")
    generate_synthetic(src, SyntheticConfig(seed=0, episodes_per_embodiment=4 if quick else 16, image_size=IMAGE))
    ingest(src, os.path.join(work, "lake"))
    lake = Lake.open(os.path.join(work, "lake"))
    spec = PackSpec(max_tokens=2048, horizon=HORIZON, tokens=TokenLengthConfig(tokens_per_view=64, state_tokens=0))
    manifest = pack(lake, spec, os.path.join(work, "packed"))
    packed = os.path.join(work, "packed")
    cfg = LoaderConfig(sequences_per_batch=1, image_size=IMAGE, num_workers=2, seed=0)

    loader = PackedLoader(packed, cfg, lake=lake)
    first = _epoch(loader)
    loader.set_epoch(0)  # the same samples again, workers warm in the fork server
    s, tok, sec, keys = _epoch(loader)
    packed_rates = _rates(s, tok, sec) | {"first_epoch_samples_per_s": first[0] / first[2]}

    ray_stream = RayPackedStream(packed, cfg, lake=lake)
    ray_first = _epoch(ray_stream)
    rs, rtok, rsec, _ = _epoch(ray_stream)
    ray_rates = _rates(rs, rtok, rsec) | {"first_epoch_samples_per_s": ray_first[0] / ray_first[2]}

    per_seq = max(1, round(manifest.num_samples / manifest.num_sequences))
    n_base = min(len(keys), (40 if quick else 80) * per_seq)  # >> the 4 batches 2 workers prefetch
    baseline = _baseline(src, lake, keys[:n_base], per_seq)

    return {
        "machine": machine(),
        "quick": quick,
        "samples": manifest.num_samples,
        "sequences": manifest.num_sequences,
        "samples_per_sequence": per_seq,
        "image_size": IMAGE,
        "packed_dataloader": packed_rates,
        "ray_stream": ray_rates,
        "per_sample_baseline": baseline,
        "speedup_vs_baseline": packed_rates["samples_per_s"] / baseline["samples_per_s"],
        "lerobot_dataset": _lerobot_dataset_check(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--quick", action="store_true", help="small dataset (about two minutes)")
    args = p.parse_args()
    res = run(args.quick)
    print_table(
        f"loader throughput ({res['samples']} samples, {res['sequences']} packed sequences)",
        [
            ("packed_dataloader samples/s", res["packed_dataloader"]["samples_per_s"]),
            ("packed_dataloader tokens/s", res["packed_dataloader"]["tokens_per_s"]),
            ("ray_stream samples/s", res["ray_stream"]["samples_per_s"]),
            ("ray_stream tokens/s", res["ray_stream"]["tokens_per_s"]),
            ("per_sample_baseline samples/s", res["per_sample_baseline"]["samples_per_s"]),
            ("speedup_vs_baseline", res["speedup_vs_baseline"]),
            ("lerobot_dataset", "measured" if res["lerobot_dataset"].get("measured") else "not measured"),
        ],
    )
    write_json(args.json, res)


if __name__ == "__main__":
    main()
