"""`robolake demo`: the whole flow on the embedded default (a local lake directory, a local Ray).

Generates the synthetic multi-embodiment teleoperation dataset, ingests it into a lake under
`out/`, packs it and prints what each stage produced.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from robolake.lake import Lake
from robolake.lake.ingest import IngestConfig, ingest
from robolake.lake.sources.synthetic import SyntheticConfig, generate_synthetic
from robolake.packers import PackSpec, TokenLengthConfig, pack

__all__ = ["DemoConfig", "run_demo"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """What the demo runs.

    Attributes:
        out: Directory for the dataset, lake, shards and report.
        quick: Fewer episodes and steps (for tests).
        seed: Seed of the synthetic data and the packing.
    """

    out: str = "demo_out"
    quick: bool = False
    seed: int = 0


def run_demo(config: DemoConfig, progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Run the demo and return its figures."""
    out = os.path.abspath(config.out)
    os.makedirs(out, exist_ok=True)
    figures: dict[str, Any] = {}
    src = os.path.join(out, "synthetic")
    syn = SyntheticConfig(seed=config.seed, episodes_per_embodiment=3 if config.quick else 8, max_length=80 if config.quick else 160)
    t0 = time.perf_counter()
    if not os.path.isdir(src):
        print(f"[1/3] generating synthetic teleoperation data in {src}")
        generate_synthetic(src, syn)
    figures["generate_s"] = time.perf_counter() - t0

    print(f"[2/3] ingesting into the lake {os.path.join(out, 'lake')} (Ray Data)")
    result = ingest(src, os.path.join(out, "lake"), IngestConfig(), progress=progress)
    lake = Lake.open(os.path.join(out, "lake"))
    figures["ingest"] = {"episodes": result.ingested, "skipped": result.skipped, "frames": result.frames, "seconds": result.seconds}
    summary = lake.summary()
    for name, e in summary["embodiments"].items():
        print(f"      {name:<18} {e['episodes']:>3} episodes {e['steps']:>6} steps  cameras: {', '.join(e['cameras'])}")

    print("[3/3] packing samples into cu_seqlens shards (best-fit-decreasing, 2048 tokens)")
    spec = PackSpec(max_tokens=2048, horizon=16, tokens=TokenLengthConfig(tokens_per_view=64, state_tokens=0), seed=config.seed)
    m = pack(lake, spec, os.path.join(out, "packed"), overwrite=True, progress=progress)
    figures["pack"] = {"samples": m.num_samples, "sequences": m.num_sequences, "fill": m.fill, "padded_fill": m.padded_fill}
    print(f"      {m.num_samples} samples -> {m.num_sequences} sequences, fill {m.fill:.3f} (padded batches: {m.padded_fill:.3f})")
    print(f"lake version {lake.version}; run `robolake info {lake.uri}` to look at it")
    return figures
