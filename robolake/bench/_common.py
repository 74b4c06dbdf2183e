"""The measuring protocol every benchmark shares: two clocks, interleaved pairs, ratios with spread.

These machines are shared and noisy, so a benchmark never reports one timing:

- **Pairs.** It runs its baseline and its candidate in turn (A B A B ..., `interleave`), takes
  the ratio within each pair (both sides saw the same machine state) and reports the median
  ratio with its range over the pairs (`ratio_summary`). Rates are totals over totals (all
  samples of a run over its seconds), never means of per-step rates. Warm-up runs (imports,
  worker start, the OS file cache) come first and are not counted.
- **Two clocks.** Every run is timed on the wall clock and on CPU time (`Stopwatch`). CPU time
  is the per-process time the kernel charged to the measured process tree: the process itself,
  its live descendants (DataLoader workers, a peer's subprocess) and the descendants that have
  already exited and been reaped (`cpu_seconds`). Another program on the machine makes a
  wall-clock run slower but leaves its CPU time nearly unchanged, as long as the measured work
  is not spinning while it waits for a core; a ratio of CPU times is the figure that holds
  still under load. It says how much work each side did, not how long a user waits: where work
  overlaps (loader workers beside a trainer) the wall clock is the claim and the CPU ratio is
  its load-insensitive companion. Each benchmark says which one its target applies to
  (`target_applies_to`).
- **Stable or flagged.** A ratio whose range strays more than `STABLE_WITHIN` (15%) from its
  median on either side is flagged unstable in its summary and in the printed table: such a
  figure cannot decide a target it spans.

A figure below its stated target is flagged "below target" in the printed table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

T = TypeVar("T")
STABLE_WITHIN = 0.15  # a ratio's min and max within +-15% of its median

__all__ = [
    "MachineInfo",
    "RatioSummary",
    "STABLE_WITHIN",
    "Stopwatch",
    "Timing",
    "bench_arguments",
    "cpu_seconds",
    "interleave",
    "machine",
    "paired",
    "print_table",
    "ratio_summary",
    "spread",
    "timed",
    "two_clock_ratios",
    "write_json",
]


class MachineInfo(TypedDict):
    """Where a benchmark ran (every bench JSON has one, under "machine")."""

    cpus: int | None
    python: str
    platform: str
    load_average: list[float]


class RatioSummary(TypedDict):
    """Paired ratios summarised (`ratio_summary`): the median, its range and whether it is stable."""

    median: float
    min: float
    max: float
    values: list[float]
    repeats: int
    spread: float
    stable: bool


def machine() -> MachineInfo:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()),
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system) charged so far to process `pid` (default this one) and its tree.

    The sum over the live processes of the tree of their own time plus their reaped children's
    (Linux's cutime/cstime), so every CPU second of the tree is counted exactly once, whether
    the process that spent it is still running (a persistent DataLoader worker), has exited and
    been reaped by its parent (a worker of a finished epoch), or was a grandchild reaped by a
    fork server. Time of a descendant that exited but whose parent has not reaped it yet is
    missed until it is.
    """
    return _own_seconds(pid) + _descendant_seconds(pid)


def _own_seconds(pid: int | None) -> float:
    """The process's own CPU time plus its reaped children's."""
    if pid is None:
        own = resource.getrusage(resource.RUSAGE_SELF)
        done = resource.getrusage(resource.RUSAGE_CHILDREN)
        return float(own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime)
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system + t.children_user + t.children_system)


def _descendant_seconds(pid: int | None) -> float:
    """CPU time of the process's live descendants (each with its own reaped children)."""
    import psutil

    total = 0.0
    for child in psutil.Process(pid).children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.Error:  # exited between the listing and the read; its parent reaps it
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return float(total)


@dataclass(frozen=True)
class Timing:
    """One run on both clocks: wall seconds and CPU seconds of the measured process tree."""

    wall_s: float
    cpu_s: float

    def as_dict(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s}


class Stopwatch:
    """`with Stopwatch(pid) as sw: ...`, then `sw.timing`: wall and tree CPU time of the block.

    Args:
        pid: The process whose tree is charged (default this process): a peer's subprocess when
            the work runs there while this process waits for its answer.
        exclude: Live descendants whose own trees are not charged (this process's idle peer
            subprocesses, while it measures its own work beside them).
    """

    def __init__(self, pid: int | None = None, exclude: Sequence[int] = ()) -> None:
        self.pid = pid
        self.exclude = tuple(exclude)
        self.timing = Timing(0.0, 0.0)

    def _others(self) -> float:
        return _descendant_seconds(self.pid) - sum(cpu_seconds(p) for p in self.exclude)

    # Reading the tree through /proc costs this process CPU time of its own: the walk runs
    # before the own-time read on entry and after it on exit, so the block is not charged for it.
    def __enter__(self) -> Stopwatch:
        others = self._others()
        self._cpu = others + _own_seconds(self.pid)
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall
        own = _own_seconds(self.pid)
        self.timing = Timing(wall_s=wall, cpu_s=own + self._others() - self._cpu)


def interleave(arms: Mapping[str, Callable[[], T]], *, repeats: int, warmup: int = 0) -> dict[str, list[T]]:
    """Run every arm in turn (A B C, A B C, ...) `warmup` uncounted then `repeats` counted times.

    Returns every arm's counted results in order, so results at the same position were
    measured in the same round and can be divided pairwise.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    out: dict[str, list[T]] = {name: [] for name in arms}
    for r in range(warmup + repeats):
        for name, fn in arms.items():
            result = fn()
            if r >= warmup:
                out[name].append(result)
    return out


def ratio_summary(ratios: Sequence[float]) -> RatioSummary:
    """Median of paired ratios with their spread.

    Returns a RatioSummary: `spread` is the largest distance of min or max from the median, as a
    fraction of the median; `stable` says whether it is within STABLE_WITHIN.
    """
    if not ratios:
        raise ValueError("no paired measurements")
    median = float(statistics.median(ratios))
    lo, hi = float(min(ratios)), float(max(ratios))
    dev = max(median - lo, hi - median) / median if median > 0 else float("inf")
    return {
        "median": median,
        "min": lo,
        "max": hi,
        "values": [float(r) for r in ratios],
        "repeats": len(ratios),
        "spread": dev,
        "stable": dev <= STABLE_WITHIN,
    }


def paired(numerators: Sequence[float], denominators: Sequence[float]) -> RatioSummary:
    """`ratio_summary` of numerators[i] / denominators[i] (values measured in the same round)."""
    return ratio_summary([a / b for a, b in zip(numerators, denominators, strict=True)])


def two_clock_ratios(
    slow: Sequence[Timing],
    fast: Sequence[Timing],
    *,
    target_applies_to: str,
    slow_work: Sequence[float] | None = None,
    fast_work: Sequence[float] | None = None,
) -> dict[str, Any]:
    """How many times faster `fast` is than `slow`, per round, on each clock.

    With `*_work` (samples, tokens) the ratio is of seconds per unit of work, so runs that did
    slightly different amounts compare fairly. Returns {"wall": summary, "cpu": summary,
    "target_applies_to": "wall" | "cpu", "median": the median on that clock}.
    """
    if target_applies_to not in ("wall", "cpu"):
        raise ValueError(f"target_applies_to must be 'wall' or 'cpu', got {target_applies_to!r}")
    ones = [1.0] * len(slow)
    sw, fw = slow_work or ones, fast_work or ones
    out: dict[str, Any] = {"target_applies_to": target_applies_to}
    for clock in ("wall", "cpu"):
        s = [getattr(t, f"{clock}_s") / w for t, w in zip(slow, sw, strict=True)]
        f = [getattr(t, f"{clock}_s") / w for t, w in zip(fast, fw, strict=True)]
        out[clock] = paired(s, f)
    out["median"] = out[target_applies_to]["median"]
    return out


def spread(summary: RatioSummary | dict[str, Any]) -> str:
    """ "2.05x (1.91-2.20, 5 pairs)" for a `ratio_summary`, "unstable" when its range strays > 15%."""
    text = f"{summary['median']:.2f}x ({summary['min']:.2f}-{summary['max']:.2f}, {summary['repeats']} pairs)"
    return text if summary.get("stable", True) else text + " unstable"


def print_table(title: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Rows of (name, value) or (name, value, target); a number below its target is flagged.

    A value may be a `ratio_summary` or a `two_clock_ratios` dict (shown on the clock its
    target applies to, the other clock beside it).
    """
    width = max(len(r[0]) for r in rows)
    print(f"\n{title}")
    print("-" * (width + 20))
    for row in rows:
        k, v = row[0], row[1]
        target = row[2] if len(row) > 2 else None
        if isinstance(v, dict) and "target_applies_to" in v:
            main, other = v["target_applies_to"], "cpu" if v["target_applies_to"] == "wall" else "wall"
            text = f"{main} {spread(v[main])}; {other} {spread(v[other])}"
            number = v[main]["median"]
        elif isinstance(v, dict) and "median" in v:
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
