"""Ray start-up and the one fan-out every stage uses: chunks of work -> Ray Data tasks -> results.

Ingest and pack both cut their work into chunks (episodes, groups of packed sequences), run one
Ray task per chunk and collect small JSON results on the driver (fragment metadata, counts,
quarantine rows). This module is that pattern once: `chunk` sizes the chunks so every CPU gets
about two (enough to balance, few enough that per-task start-up stays small), and `fan_out`
runs `from_items -> map -> iter_rows` and hands back decoded results as they finish.

Results travel as JSON strings: Ray Data would otherwise infer Arrow types for nested lists of
varying shape, which fails on the first empty list.

Small inputs do not wait for Ray: starting a local Ray costs seconds, more than the whole job. With
`local=True` the same task objects run here, one chunk after another, and their results make the
same JSON round trip, so the driver code after the fan-out (the commit) is the same either way and
so is what it writes. `chunk` then cuts at `max_per_task` (there are no CPUs to balance over) and
`cluster_cpus` counts one.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["ensure_ray", "ray_running", "chunk", "cluster_cpus", "fan_out"]

T = TypeVar("T")


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Start or join Ray once per process (no dashboard, quiet logs).

    A local Ray started here belongs to this process and ends with it, however it ends. Ray
    ties its GCS and raylet to the driver (prctl fate-sharing) and its workers die with the
    raylet, but the raylet's agents (dashboard and runtime-env agents) are left orphaned for a
    minute or more after a `kill -9` of the driver, and they sit in their own process groups, so
    a `killpg` of the driver does not reach workers either. A small reaper process therefore
    watches the driver through a pipe and, when the pipe closes, kills every process of this
    local Ray session it has seen (pid and start time checked, so never a stranger).
    """
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    ray.init(
        address=address,
        num_cpus=None if address else num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        ignore_reinit_error=True,
    )
    if address is None:
        _start_reaper()


_REAPER = r"""
import os, select, sys
import psutil
roots, seen = [int(p) for p in sys.argv[1:]], {}
def look():
    for pid in roots:
        try:
            top = psutil.Process(pid)
            for p in [top, *top.children(recursive=True)]:
                seen.setdefault((p.pid, p.create_time()), p)
        except psutil.Error:
            pass
while True:
    look()
    ready, _, _ = select.select([0], [], [], 0.5)
    if ready and not os.read(0, 64):
        break
look()
for p in seen.values():
    try:
        if p.is_running():
            p.kill()
    except psutil.Error:
        pass
"""

_reaper: Any = None  # the reaper's Popen and the pipe end that keeps it waiting, for this process


def _start_reaper() -> None:
    """Start the reaper of this process's local Ray session (see `ensure_ray`)."""
    global _reaper
    import subprocess
    import sys

    try:
        import ray._private.worker as ray_worker

        node: Any = ray_worker._global_node
        pids = [info.process.pid for infos in node.all_processes.values() for info in infos if info.process is not None]
    except Exception:  # Ray's internals moved: Ray's own fate-sharing is all there is
        return
    if not pids:
        return
    read_end, write_end = os.pipe()  # non-inheritable: only this process holds the write end
    proc = subprocess.Popen(
        [sys.executable, "-c", _REAPER, *map(str, pids)],
        stdin=read_end,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives a killpg of the driver's group, which is the point
    )
    os.close(read_end)
    _reaper = (proc, write_end)


def ray_running() -> bool:
    """Whether this process has started or joined Ray (without importing it when it has not)."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


def cluster_cpus(local: bool = False) -> int:
    """CPUs the chunks are spread over: the Ray cluster's (at least 1), or 1 in this process."""
    if local:
        return 1
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def chunk(items: Sequence[T], max_per_task: int, *, local: bool = False) -> list[list[T]]:
    """`items` cut into chunks of at most `max_per_task`, small enough that every CPU gets about two
    (in this process, with `local`: chunks of `max_per_task`)."""
    if not items:
        return []
    size = max_per_task if local else min(max_per_task, -(-len(items) // (2 * cluster_cpus())))
    size = max(1, size)
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def fan_out(task: Callable[[int], Any], num_chunks: int, *, local: bool = False) -> Iterator[tuple[int, Any]]:
    """Run `task(chunk_index)` for every chunk on Ray Data; yield (chunk_index, result) as they finish.

    `task` must be picklable (a class instance holding its inputs) and return something JSON-able.
    With `local`, the chunks run in this process in order, their results through the same JSON
    round trip.
    """
    if num_chunks == 0:
        return
    if local:
        for i in range(num_chunks):
            yield i, json.loads(json.dumps(task(i)))
        return
    import ray.data

    ds = ray.data.from_items([{"chunk": i} for i in range(num_chunks)], override_num_blocks=max(1, num_chunks))
    # One map with small results: Ray Data's per-operator resource reservation only holds CPUs back
    # for operators that do not exist (on 2 CPUs it ran the tasks mostly one at a time, measured).
    ds.context.op_resource_reservation_enabled = False
    for row in ds.map(_JsonTask(task)).iter_rows():
        yield int(row["chunk"]), json.loads(row["result"])


class _JsonTask:
    def __init__(self, task: Callable[[int], Any]):
        self.task = task

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"chunk": row["chunk"], "result": json.dumps(self.task(int(row["chunk"])))}
