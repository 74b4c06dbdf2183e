"""`robolake bench pack`: packing algorithms on 1M realistic lengths, and the Ray Data pipeline.

- `algorithms` (from pack_algorithms.py): ffd, bfd and window {fill, samples_per_s} on
  1,000,000 lengths at max_tokens 4096, `padded_fill`, and `reference_samples_per_s` of a
  pure-Python BFD on the same lengths, in the same run.
- `pipeline`: {samples_per_s, fill, padded_fill} packing a synthetic multi-embodiment lake end to
  end through `robolake.packers.pack` (sample index, plan, Ray Data materialise + write, commit).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

from robolake.bench import pack_algorithms as bench_pack_algorithms  # noqa: E402
from robolake.bench._common import machine, print_table, write_json  # noqa: E402
from robolake.lake import IngestConfig, ingest
from robolake.packers import PackSpec, TokenLengthConfig, pack  # noqa: E402
from robolake.ray_tasks import ensure_ray
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic  # noqa: E402


def run_pipeline(quick: bool) -> dict[str, Any]:
    ensure_ray(num_cpus=2)
    work = tempfile.mkdtemp(prefix="robolake-bench-pack-")
    generate_synthetic(os.path.join(work, "syn"), SyntheticConfig(seed=0, episodes_per_embodiment=4 if quick else 16))
    ingest(os.path.join(work, "syn"), os.path.join(work, "lake"), IngestConfig())
    spec = PackSpec(max_tokens=4096, tokens=TokenLengthConfig(tokens_per_view=256, state_tokens=0))
    t0 = time.perf_counter()
    m = pack(os.path.join(work, "lake"), spec, os.path.join(work, "packed"))
    seconds = time.perf_counter() - t0
    return {
        "samples": m.num_samples,
        "sequences": m.num_sequences,
        "samples_per_s": m.num_samples / seconds,
        "fill": m.fill,
        "padded_fill": m.padded_fill,
        "padding_removed": 1.0 - m.padded_fill,
        "max_tokens": spec.max_tokens,
    }


def run(quick: bool) -> dict[str, Any]:
    return {
        "machine": machine(),
        "quick": quick,
        "algorithms_run": bench_pack_algorithms.run(quick),
        "pipeline": run_pipeline(quick),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    res = run(args.quick)
    algo = res["algorithms_run"]
    # Lift the headline keys to the top level.
    res["algorithms"] = algo["algorithms"]
    res["padded_fill"] = algo["padded_fill"]
    res["reference_samples_per_s"] = algo["reference_samples_per_s"]
    bench_pack_algorithms.print_table(algo)
    pl = res["pipeline"]
    print_table(
        "pack pipeline (synthetic lake, Ray Data, max_tokens 4096)",
        [
            ("samples", pl["samples"]),
            ("sequences", pl["sequences"]),
            ("samples/s", pl["samples_per_s"]),
            ("fill", pl["fill"]),
            ("padded fill", pl["padded_fill"]),
        ],
    )
    write_json(args.json, res)


if __name__ == "__main__":
    main()
