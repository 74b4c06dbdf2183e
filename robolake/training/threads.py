"""How many threads torch computes with: chosen by each entry point from the cores left to it.

torch sizes its intra-op pool to the whole machine. That suits a process that has the machine to
itself; beside DataLoader workers, Ray actors or someone else's job it does not. OpenMP's threads
wait for each other at every parallel region, so when one of them is descheduled (another
process holds its core) the whole step waits: on a loaded 2-core machine `robolake train
--shards` ran at 0.3-25 s a step with torch's default, and steadily at 0.3-0.5 s with
`OMP_NUM_THREADS=1`. robolake applies that fix itself, at every entry point that computes with
torch (the trainer, `robolake eval`, the demo, the RL actors, the benchmarks that train), instead
of leaving it to each user to discover.

`choose_threads` decides the intra-op count, first rule that applies:

1. an explicit count (`RunConfig.torch_threads`, `robolake train --torch-threads`, an RL actor's
   `torch_threads`);
2. `ROBOLAKE_TORCH_THREADS` in the environment;
3. `OMP_NUM_THREADS`, when the user set it: torch read it at start-up and robolake keeps it;
4. otherwise the cores this process may run on (`os.sched_getaffinity`, so `taskset`, cgroup
   cpusets and Slurm allocations count, not the machine's total) minus the cores `reserved` for
   the job's other busy processes (the loader's worker processes, environment actors), at least 1.

The inter-op pool (`torch.jit.fork`, a few parallel operators; its idle threads sleep rather than
spin) gets a quarter of that, at least 1. torch takes an inter-op count only before its first
parallel work and only once per process, so after that the count already in effect stays and is
what gets reported. `set_torch_threads` applies a choice and returns what is in effect, which the
trainer reports in `TrainResult.threads` and in every metrics row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

__all__ = ["ENV_VAR", "ThreadChoice", "available_cores", "choose_threads", "set_torch_threads"]

ENV_VAR = "ROBOLAKE_TORCH_THREADS"
Source = Literal["explicit", "ROBOLAKE_TORCH_THREADS", "OMP_NUM_THREADS", "cores"]


@dataclass(frozen=True, kw_only=True)
class ThreadChoice:
    """torch's thread counts for one process, and why.

    Attributes:
        intra_op: Threads of one operator (`torch.set_num_threads`).
        inter_op: Threads running operators side by side (`torch.set_num_interop_threads`).
        source: Which rule decided: "explicit", "ROBOLAKE_TORCH_THREADS", "OMP_NUM_THREADS" or
            "cores" (the cores left after `reserved`).
        cores: Cores this process may run on.
        reserved: Cores left to the job's other processes (loader workers, environment actors).
    """

    intra_op: int
    inter_op: int
    source: Source
    cores: int
    reserved: int

    def __post_init__(self) -> None:
        if self.intra_op < 1 or self.inter_op < 1 or self.cores < 1 or self.reserved < 0:
            raise ValueError(
                f"need intra_op, inter_op, cores >= 1 and reserved >= 0; got {self.intra_op}, {self.inter_op}, "
                f"{self.cores}, {self.reserved}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "intra_op": self.intra_op,
            "inter_op": self.inter_op,
            "source": self.source,
            "cores": self.cores,
            "reserved": self.reserved,
        }

    def describe(self) -> str:
        """One line for a CLI user: the counts and the rule that chose them."""
        why = {
            "explicit": "as asked",
            "ROBOLAKE_TORCH_THREADS": f"from {ENV_VAR}",
            "OMP_NUM_THREADS": "from OMP_NUM_THREADS",
            "cores": f"{self.cores} cores, {self.reserved} of them kept for worker processes",
        }[self.source]
        return f"torch threads {self.intra_op} intra-op, {self.inter_op} inter-op ({why})"


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows: no affinity call
        return max(1, os.cpu_count() or 1)


def _count(value: str, name: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}; unset it to let robolake choose")
    return n


def _omp_threads(env: Mapping[str, str]) -> int | None:
    """OMP_NUM_THREADS's outermost count ("4" or "4,2"), or None when unset or not a count."""
    first = env.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) >= 1 else None


def choose_threads(
    *,
    reserved: int = 0,
    explicit: int | None = None,
    environ: Mapping[str, str] | None = None,
    cores: int | None = None,
) -> ThreadChoice:
    """The thread counts for a process that leaves `reserved` cores to the job's other processes.

    Args:
        reserved: Cores the job's other busy processes use (loader workers, environment actors).
        explicit: A count asked for by the caller; wins over the environment.
        environ: The environment to read (default `os.environ`).
        cores: Cores available (default `available_cores()`).

    Raises:
        ValueError: `explicit` < 1, `reserved` < 0, or ROBOLAKE_TORCH_THREADS is not a count >= 1.
    """
    env = os.environ if environ is None else environ
    cores = available_cores() if cores is None else cores
    if reserved < 0:
        raise ValueError(f"reserved must be >= 0, got {reserved}")
    source: Source
    if explicit is not None:
        if explicit < 1:
            raise ValueError(f"torch threads must be >= 1, got {explicit}")
        intra, source = explicit, "explicit"
    elif env.get(ENV_VAR, "").strip():
        intra, source = _count(env[ENV_VAR], ENV_VAR), "ROBOLAKE_TORCH_THREADS"
    elif _omp_threads(env) is not None:
        intra, source = cast(int, _omp_threads(env)), "OMP_NUM_THREADS"
    else:
        intra, source = max(1, cores - reserved), "cores"
    return ThreadChoice(intra_op=intra, inter_op=max(1, intra // 4), source=source, cores=cores, reserved=reserved)


def set_torch_threads(*, reserved: int = 0, explicit: int | None = None) -> ThreadChoice:
    """Choose (`choose_threads`) and apply torch's thread counts; returns the counts in effect.

    The inter-op count is applied only where torch still accepts it (before this process's first
    parallel work, once); the count reported is always the one in effect.
    """
    import torch

    choice = choose_threads(reserved=reserved, explicit=explicit)
    torch.set_num_threads(choice.intra_op)
    if torch.get_num_interop_threads() != choice.inter_op:
        try:
            torch.set_num_interop_threads(choice.inter_op)
        except RuntimeError:  # parallel work already started, or set once already: it stays
            pass
    return ThreadChoice(
        intra_op=torch.get_num_threads(),
        inter_op=torch.get_num_interop_threads(),
        source=choice.source,
        cores=choice.cores,
        reserved=reserved,
    )
