"""Loader throughput: packed shards (DataLoader, Ray Data) vs a LeRobot-style per-sample loader.

What is measured: samples/s and real tokens/s delivered to a trainer, by three loaders reading
the SAME samples in the same run, decoding frames to the SAME image size (224 px, what GR00T
N1.5's vision tower sees):

- `packed_dataloader`: `PackedLoader` over packed shards, a DataLoader with 2 workers, each
  batch as many packed sequences as carry about `BATCH_SAMPLES` samples.
- `ray_stream`: `RayPackedStream` over the same shards (read_lance -> decode map ->
  iter_torch_batches), same batch size.
- `per_sample_baseline`: `_baseline.py`, a re-implementation of LeRobot's read path on the
  SOURCE dataset: per sample, random access, an mp4 open + seek to the previous keyframe +
  decode forward per camera (PyAV), the action chunk gathered from the parquet rows, and a
  padded collate; a shuffled DataLoader with 2 workers and `BATCH_SAMPLES` samples per batch.
- `speedup_vs_baseline` = packed_dataloader / per_sample_baseline samples per second.

How: every loader first runs a warm-up (the fork server, worker start, the OS file cache), then
the packed loader and the baseline run full epochs in pairs (packed, baseline, packed, ...; 3
pairs with --quick, 5 otherwise), each timed from the first `next()` to the last batch, worker
start-up included, as a user meets it every epoch. `speedup_vs_baseline` is the median of the
per-pair ratios, `speedup_spread` gives its range (`first_batch_seconds` says how much of it is start-up; it weighs
most in `--quick`, whose epochs are short). The baseline reads the same (episode, step) set the
packed epoch delivered (checked: `same_samples`).

Data: `--data PATH` (any LeRobot dataset), else the real GR00T PickNPlace dataset in ../shared
(256 px h264, one camera, keyframes every 250 frames, as exported) when present, and a synthetic
multi-embodiment dataset at 224 px h264 (1-3 cameras, keyframes every 40 frames) always. The
headline figures come from the real data
when it is there, from the synthetic data otherwise; both are reported under `datasets`. The
cost of a random mp4 read grows with the keyframe interval, which is reported per dataset
(`keyframe_interval`): the speedup is a property of the source encoding as much as of robolake.

`--quick` samples every 2nd step (same stride on all loaders) and a smaller synthetic set.

Usage: robolake bench load --json out.json [--quick]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from robolake.bench._baseline import (  # noqa: E402
    PerSampleDataset,
    baseline_loader,
    baseline_spec,
    keyframe_interval,
    shard_keys,
    source_episodes,
)
from robolake.bench._common import machine, print_table, ratio_summary, write_json  # noqa: E402
from robolake.lake import (
    Lake,  # noqa: E402
    ingest,
)
from robolake.loaders import LoaderConfig, PackedLoader, PackedShards, RayPackedStream, open_shards  # noqa: E402
from robolake.packers import PackSpec, TokenLengthConfig, pack  # noqa: E402
from robolake.ray_tasks import ensure_ray
from robolake.training import ModelConfig  # noqa: E402
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic  # noqa: E402

# The checkout's ../shared (robolake/bench/load.py -> the repository root is three levels up).
REAL_DATA = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data", "gr00t_pick_n_place"
)
IMAGE_SIZE = 224
BATCH_SAMPLES = 32
MAX_TOKENS = 2048
HORIZON = 16
NUM_WORKERS = 2
TARGET_SPEEDUP = 10.0  # packed loader vs the per-sample loader (issue [4])


@dataclass(frozen=True)
class Prepared:
    """One dataset ready to load: its source, lake, pack spec and packed shards."""

    name: str
    src: str
    lake: Lake
    spec: PackSpec
    shards: PackedShards


def prepare(name: str, src: str, work: str, *, step_stride: int) -> Prepared:
    """Ingest `src` into a lake under `work` and pack it with the tiny model's tokens per view."""
    lake_dir, packed_dir = os.path.join(work, name, "lake"), os.path.join(work, name, "packed")
    ingest(src, lake_dir)
    lake = Lake.open(lake_dir)
    tokens = TokenLengthConfig(tokens_per_view=ModelConfig.preset("tiny").tokens_per_view, state_tokens=0)
    spec = PackSpec(max_tokens=MAX_TOKENS, horizon=HORIZON, step_stride=step_stride, tokens=tokens)
    pack(lake, spec, packed_dir)
    return Prepared(name, src, lake, spec, open_shards(packed_dir, lake=lake))


def _epoch(batches: Iterable[Any]) -> dict[str, Any]:
    """Drain one epoch: samples, real tokens, seconds and the (episode, step) keys seen."""
    t0 = time.perf_counter()
    first = None
    samples = tokens = 0
    keys: list[tuple[str, int]] = []
    for batch in batches:
        first = time.perf_counter() - t0 if first is None else first
        packed = getattr(batch, "packed", batch)  # PaddedBatch carries its samples in .packed
        samples += packed.num_samples
        tokens += packed.total_tokens
        keys.extend(packed.sample_keys)
    seconds = time.perf_counter() - t0
    return {"samples": samples, "tokens": tokens, "seconds": seconds, "first_batch_seconds": first or 0.0, "keys": keys}


def _rates(epoch: dict[str, Any], warmup: dict[str, Any]) -> dict[str, Any]:
    s = epoch["seconds"]
    return {
        "samples": epoch["samples"],
        "seconds": s,
        "samples_per_s": epoch["samples"] / s,
        "tokens_per_s": epoch["tokens"] / s,
        "first_batch_seconds": epoch["first_batch_seconds"],
        "warmup_seconds": warmup["seconds"],
    }


def loader_config(shards: PackedShards) -> LoaderConfig:
    """Batches of about BATCH_SAMPLES samples: that many samples' worth of packed sequences."""
    per_seq = shards.manifest.num_samples / shards.manifest.num_sequences
    return LoaderConfig(
        sequences_per_batch=max(1, round(BATCH_SAMPLES / per_seq)),
        image_size=IMAGE_SIZE,
        num_workers=NUM_WORKERS,
        seed=0,
    )


def measure_packed(
    data: Prepared, loader: PackedLoader, warm: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, int]]]:
    """PackedLoader: epoch 0 again (after the warm-up epoch), timed."""
    loader.set_epoch(0)
    epoch = _epoch(loader)
    return _rates(epoch, warm) | {
        "batches": len(loader),
        "sequences_per_batch": loader.config.sequences_per_batch,
    }, epoch["keys"]


def measure_ray(data: Prepared) -> dict[str, Any]:
    """RayPackedStream: a warm-up epoch, then the next epoch, timed."""
    stream = RayPackedStream(data.shards, loader_config(data.shards))
    warm = _epoch(stream)
    return _rates(_epoch(stream), warm)


class _Baseline:
    """The per-sample loader over the shards' samples (a short warm-up run first)."""

    def __init__(self, data: Prepared) -> None:
        self.keys = shard_keys(data.shards)
        self.spec = baseline_spec(data.lake, data.shards, data.spec.tokens, image_size=IMAGE_SIZE)
        self.episodes = source_episodes(data.src, data.lake)
        warm_keys = self.keys[: NUM_WORKERS * BATCH_SAMPLES]
        self.warm = _epoch(
            baseline_loader(
                PerSampleDataset(self.episodes, warm_keys, self.spec), batch_size=BATCH_SAMPLES, num_workers=NUM_WORKERS
            )
        )

    def measure(self, packed_keys: list[tuple[str, int]]) -> dict[str, Any]:
        """One shuffled epoch, timed."""
        epoch = _epoch(
            baseline_loader(
                PerSampleDataset(self.episodes, self.keys, self.spec), batch_size=BATCH_SAMPLES, num_workers=NUM_WORKERS
            )
        )
        return _rates(epoch, self.warm) | {
            "batch_size": BATCH_SAMPLES,
            "same_samples": sorted(epoch["keys"]) == sorted(packed_keys),
        }


def measure_dataset(data: Prepared, repeats: int = 3) -> dict[str, Any]:
    """All three loaders on one prepared dataset; packed and baseline epochs in pairs (A B A B ...)."""
    loader = PackedLoader(data.shards, loader_config(data.shards))
    warm = _epoch(loader)
    base = _Baseline(data)
    pairs = []
    for _ in range(repeats):
        packed_run, keys = measure_packed(data, loader, warm)
        pairs.append((packed_run, base.measure(keys)))
    ratios = [p["samples_per_s"] / b["samples_per_s"] for p, b in pairs]
    mid = sorted(range(repeats), key=lambda i: ratios[i])[repeats // 2]
    packed, baseline = pairs[mid]
    packed["samples_per_s_runs"] = [p["samples_per_s"] for p, _ in pairs]
    baseline["samples_per_s_runs"] = [b["samples_per_s"] for _, b in pairs]
    ray_stream = measure_ray(data)
    m = data.shards.manifest
    first_video = next(iter(source_episodes(data.src, data.lake).values())).videos[0][0]
    return {
        "source": data.src,
        "samples": m.num_samples,
        "sequences": m.num_sequences,
        "samples_per_sequence": m.num_samples / m.num_sequences,
        "tokens": m.total_tokens,
        "step_stride": data.spec.step_stride,
        "keyframe_interval": keyframe_interval(first_video),
        "packed_dataloader": packed,
        "ray_stream": ray_stream,
        "per_sample_baseline": baseline,
        "speedup_vs_baseline": ratio_summary(ratios)["median"],
        "speedup_spread": ratio_summary(ratios),
    }


def lerobot_dataset_check() -> dict[str, Any]:
    """Where LeRobot's own `LeRobotDataset` is measured: not here (it cannot share this environment)."""
    return {
        "measured": False,
        "reason": "LeRobot pins its own torch and needs Python >= 3.12; `robolake bench peers` measures its "
        "LeRobotDataset in an environment of its own, on the same data (robolake/bench/peers/)",
    }


def _synthetic(work: str, quick: bool) -> str:
    src = os.path.join(work, "synthetic-src")
    generate_synthetic(src, SyntheticConfig(seed=0, episodes_per_embodiment=2 if quick else 8, image_size=IMAGE_SIZE))
    return src


def run(quick: bool, data: str | None = None) -> dict[str, Any]:
    """Prepare the datasets, run the three loaders on each, return the figures.

    Args:
        quick: Every 2nd step, a small synthetic set, 3 pairs (5 otherwise).
        data: A LeRobot dataset to measure (default: ../shared's GR00T data when present).

    Raises:
        FileNotFoundError: `data` does not exist.
    """
    ensure_ray(num_cpus=2)
    work = tempfile.mkdtemp(prefix="robolake-bench-load-")
    stride = 2 if quick else 1
    sources = {f"synthetic_{IMAGE_SIZE}": _synthetic(work, quick)}
    if data is not None:
        if not os.path.isdir(data):
            raise FileNotFoundError(f"--data {data} is not a directory; pass a LeRobot dataset")
        sources = {os.path.basename(os.path.abspath(data).rstrip("/")): os.path.abspath(data)} | sources
    elif os.path.isdir(REAL_DATA):
        sources = {"gr00t_pick_n_place": os.path.abspath(REAL_DATA)} | sources
    repeats = 3 if quick else 5
    datasets = {
        name: measure_dataset(prepare(name, src, work, step_stride=stride), repeats) for name, src in sources.items()
    }
    headline = next(iter(datasets))
    head = datasets[headline]
    return {
        "machine": machine(),
        "quick": quick,
        "image_size": IMAGE_SIZE,
        "batch_samples": BATCH_SAMPLES,
        "num_workers": NUM_WORKERS,
        "tokens_per_view": ModelConfig.preset("tiny").tokens_per_view,
        "headline_dataset": headline,
        "datasets": datasets,
        "samples": head["samples"],
        "sequences": head["sequences"],
        "samples_per_sequence": head["samples_per_sequence"],
        "packed_dataloader": head["packed_dataloader"],
        "ray_stream": head["ray_stream"],
        "per_sample_baseline": head["per_sample_baseline"],
        "speedup_vs_baseline": head["speedup_vs_baseline"],
        "lerobot_dataset": lerobot_dataset_check(),
    }


def _table(name: str, d: dict[str, Any]) -> None:
    print_table(
        f"{name} ({d['source']}): {d['samples']} samples, {d['sequences']} packed sequences, "
        f"keyframe every {d['keyframe_interval']:.0f} frames",
        [
            ("packed_dataloader samples/s", d["packed_dataloader"]["samples_per_s"]),
            ("packed_dataloader tokens/s", d["packed_dataloader"]["tokens_per_s"]),
            ("ray_stream samples/s", d["ray_stream"]["samples_per_s"]),
            ("ray_stream tokens/s", d["ray_stream"]["tokens_per_s"]),
            ("per_sample_baseline samples/s", d["per_sample_baseline"]["samples_per_s"]),
            ("per_sample_baseline tokens/s", d["per_sample_baseline"]["tokens_per_s"]),
            ("speedup_vs_baseline", d["speedup_spread"], TARGET_SPEEDUP),
        ],
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--quick", action="store_true", help="every 2nd step, small synthetic set (about three minutes)")
    p.add_argument(
        "--data", default=None, help="a LeRobot dataset to measure (default: ../shared's GR00T data when present)"
    )
    args = p.parse_args(argv)
    res = run(args.quick, args.data)
    for name, d in res["datasets"].items():
        _table(name, d)
    print(f"\nheadline ({res['headline_dataset']}): speedup_vs_baseline {res['speedup_vs_baseline']:.1f}x")
    print(f"lerobot_dataset: not measured: {res['lerobot_dataset']['reason']}")
    write_json(args.json, res)


if __name__ == "__main__":
    main()
