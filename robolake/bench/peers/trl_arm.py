"""robolake's best-fit-decreasing packer against TRL's, on the same sample lengths.

Rounds of robolake's `best_fit_decreasing` (the plan only, and the plan plus the Arrow take that
builds the packed rows, as TRL's does), TRL's `pack_dataset(strategy="bfd")` as SFTTrainer calls
it, and TRL's `_pack_bfd` on one Arrow table, interleaved, on `bench pack`'s length mixture at
4096 tokens. `bfd_speedup` = TRL `pack_dataset` over robolake's plan on CPU time (one
single-threaded process each side; the wall clock beside it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from robolake.bench._common import Stopwatch, Timing, interleave
from robolake.bench.peers.figures import Arm, bfd_figures
from robolake.bench.peers.process import Peer

__all__ = ["BFD_MAX_TOKENS", "BFD_SAMPLES", "measure_bfd"]

BFD_SAMPLES = {True: 200_000, False: 1_000_000}
BFD_MAX_TOKENS = 4096
PLAN_LOOPS = 20


def measure_bfd(peer: Peer, work: Path, *, quick: bool, samples: int | None = None) -> dict[str, Any]:
    """robolake's BFD against TRL's on the same lengths, interleaved (`samples` lengths, default BFD_SAMPLES)."""
    import numpy as np
    import pyarrow as pa

    from robolake.bench.pack_algorithms import mixture_lengths
    from robolake.packers.binpack import best_fit_decreasing

    n = samples or BFD_SAMPLES[quick]
    lengths, _, _ = mixture_lengths(n)
    path = work / "bfd-lengths.npy"
    np.save(path, lengths)
    loaded = peer.request("load", lengths=str(path))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    table = pa.table(
        {
            "input_ids": pa.ListArray.from_arrays(
                pa.array(offsets), pa.array(np.arange(offsets[-1], dtype=np.int64) % 50_000)
            )
        }
    )
    best_fit_decreasing(lengths[:10_000], BFD_MAX_TOKENS)  # warm imports
    fills: dict[str, float] = {}

    def plan() -> tuple[Timing, int]:
        # PLAN_LOOPS plans per timed run: one takes tens of milliseconds, short enough for a
        # scheduler tick to move its ratio; one untimed plan first pages back in what the peer's
        # gigabytes pushed out
        best_fit_decreasing(lengths, BFD_MAX_TOKENS)
        with Stopwatch(exclude=[peer.pid]) as sw:
            for _ in range(PLAN_LOOPS):
                p = best_fit_decreasing(lengths, BFD_MAX_TOKENS)
        fills["robolake_plan"] = p.fill
        return sw.timing, n * PLAN_LOOPS

    def plan_take() -> tuple[Timing, int]:
        # the plan, then the packed rows TRL's function also builds: samples taken in bin order
        # and re-cut at the bins' token offsets
        best_fit_decreasing(lengths, BFD_MAX_TOKENS)
        with Stopwatch(exclude=[peer.pid]) as sw:
            p = best_fit_decreasing(lengths, BFD_MAX_TOKENS)
            taken = table.take(pa.array(p.order)).combine_chunks()
            values = taken.column("input_ids").chunk(0).flatten()
            bins = np.concatenate([[0], np.cumsum(p.bin_tokens)]).astype(np.int32)
            pa.ListArray.from_arrays(pa.array(bins), values)
        fills["robolake_plan_take"] = p.fill
        return sw.timing, n

    def trl(op: str, key: str) -> Callable[[], tuple[Timing, int]]:
        def run() -> tuple[Timing, int]:
            with Stopwatch(peer.pid) as sw:
                answer = peer.request(op, seq_length=BFD_MAX_TOKENS)
            fills[key] = answer["fill"]
            fills[key + "_rows"] = answer["rows"]
            return Timing(wall_s=answer["wall_s"], cpu_s=sw.timing.cpu_s), int(answer["samples"])

        return run

    arms = {
        "robolake_plan": plan,
        "robolake_plan_take": plan_take,
        "trl_pack_dataset": trl("pack", "trl_pack_dataset"),
        "trl_pack_bfd_table": trl("pack_table", "trl_pack_bfd_table"),
    }
    runs = interleave(arms, repeats=3 if quick else 5, warmup=1)
    built = {k: Arm([t for t, _ in v], [float(s) for _, s in v], {"fill": fills.get(k)}) for k, v in runs.items()}
    figures = bfd_figures(built)
    figures["trl"]["pack_dataset"]["rows"] = fills.get("trl_pack_dataset_rows")
    figures.update(samples=n, max_tokens=BFD_MAX_TOKENS, tokens=loaded["tokens"])
    return figures
