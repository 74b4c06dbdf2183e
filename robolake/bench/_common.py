"""Helpers shared by the benchmark scripts: timing, paired ratios, tables, JSON output.

These machines are shared and noisy, so a benchmark never reports one timing: it runs its
baseline and its candidate in pairs (A B A B ...), takes the ratio within each pair (both sides
saw the same machine state), and reports the median ratio with its spread (`ratio_summary`).
Rates are totals over totals (all samples of a run over its wall time), never means of per-step
rates. A figure below its stated target is flagged "below target" in the printed table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def ratio_summary(ratios: list[float]) -> dict[str, Any]:
    """Median of paired ratios with their spread: {"median", "min", "max", "values", "repeats"}."""
    if not ratios:
        raise ValueError("no paired measurements")
    return {
        "median": float(statistics.median(ratios)),
        "min": float(min(ratios)),
        "max": float(max(ratios)),
        "values": [float(r) for r in ratios],
        "repeats": len(ratios),
    }


def spread(summary: dict[str, Any]) -> str:
    """ "2.05x (1.91-2.20, 5 pairs)" for a `ratio_summary`."""
    return f"{summary['median']:.2f}x ({summary['min']:.2f}-{summary['max']:.2f}, {summary['repeats']} pairs)"


def print_table(title: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Rows of (name, value) or (name, value, target); a number below its target is flagged."""
    width = max(len(r[0]) for r in rows)
    print(f"\n{title}")
    print("-" * (width + 20))
    for row in rows:
        k, v = row[0], row[1]
        target = row[2] if len(row) > 2 else None
        if isinstance(v, dict) and "median" in v:
            text, number = spread(v), v["median"]
        else:
            text, number = (f"{v:,.3f}" if isinstance(v, float) else str(v)), v
        note = ""
        if target is not None and isinstance(number, (int, float)):
            note = f"  target >= {target:.2f}" + ("  below target" if number < target else "")
        print(f"{k:<{width}}  {text:>16}{note}")


def bench_arguments(
    doc: str | None, argv: list[str] | None, *, quick_help: str = "a shorter run", json_required: bool = True
) -> argparse.Namespace:
    """The options every benchmark takes: `--json PATH` and `--quick`."""
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    p.add_argument("--json", required=json_required, default=None, help="write the figures to this JSON file")
    p.add_argument("--quick", action="store_true", help=quick_help)
    return p.parse_args(argv)


def write_json(path: str, payload: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, sort_keys=True)
    print(f"\nwrote {path}")
