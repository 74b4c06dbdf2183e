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

A node lost mid-job. A Ray node can disappear under a stage (a preempted machine, a raylet
killed for memory); the stage must still end with the same commit, once. What makes it so:

- Every task is retried when its worker or node dies (`TASK_MAX_RETRIES`, passed to Ray Data as
  `max_retries`): a chunk is a pure function of its inputs, so a second run writes the same rows.
  Only system failures are retried (`retry_exceptions=False`; Ray Data adds its own
  `RaySystemError`): a chunk that raises fails the stage at once, as it does on one node. The
  bound (Ray Data's own default is unbounded) turns a task that kills its node every time
  into an error after a few tries instead of a job that never ends.
- Results a finished task left in a lost node's object store are rebuilt from lineage (Ray's
  object reconstruction, on for every retryable task; the inputs come from `from_items`, which
  lives with the driver). A rebuilt result is the task run again, so the same bound applies.
- A task that wrote fragments and died before returning leaves files no result names: the
  driver commits only fragments that came back in a result, so they are never published, and
  the lake's next writer (or `gc`) removes them. Nothing is committed twice because one driver
  commits once, after every chunk has a result.
- A node that joins mid-stage takes the tasks still waiting: the chunks are cut at about two
  per CPU when the stage starts, so there is queued work for it.
- No actor is involved (tasks only), so `max_restarts` does not apply here; Ray Data's own
  actors (the `streaming_split` coordinator) are pinned to the driver's node.

The driver itself is the one thing that cannot be lost: it holds the commit. Killing it leaves
the lake (or the shards directory) at its previous version, as in a one-node run.

`ROBOLAKE_TASK_HOLD` is the fault-injection hook that tests and `bench scale` use to lose a node
at a chosen moment (see `hold_point`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = [
    "ensure_ray",
    "ray_running",
    "chunk",
    "cluster_cpus",
    "fan_out",
    "TASK_MAX_RETRIES",
    "HOLD_ENV",
    "hold_point",
]

T = TypeVar("T")

# A chunk's task runs again when its worker or node dies, at most this many times (also the bound
# on rebuilding a lost result from lineage). A node lost per try costs one; four covers a cluster
# losing several nodes in one stage without hiding a task that kills its node every time.
TASK_MAX_RETRIES = 4

HOLD_ENV = "ROBOLAKE_TASK_HOLD"


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
    # A cluster is joined only when named (here or by RAY_ADDRESS): a bare `ray.init()` would join
    # whichever Ray this machine started last (another user's job, a test's `cluster_utils`
    # cluster) and then refuse `num_cpus`. "local" always starts this process's own.
    address = address or os.environ.get("RAY_ADDRESS") or None
    ray.init(
        address=address or "local",
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
    mapped = ds.map(_JsonTask(task), max_retries=TASK_MAX_RETRIES, retry_exceptions=False)
    for row in mapped.iter_rows():
        yield int(row["chunk"]), json.loads(row["result"])


class _JsonTask:
    def __init__(self, task: Callable[[int], Any]):
        self.task = task

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        index = int(row["chunk"])
        result = json.dumps(self.task(index))
        hold_point(type(self.task).__name__, index)
        return {"chunk": row["chunk"], "result": result}


def hold_point(stage: str, index: int) -> None:
    """Fault-injection hook at the end of a Ray task, after its work (fragments written) and before
    its result returns: inert unless `ROBOLAKE_TASK_HOLD` names a directory.

    With `ROBOLAKE_TASK_HOLD=<dir>`, a task of `stage` (the stage object's class name) for which
    `<dir>/hold-<stage>` exists writes `<dir>/held-<stage>-<index>-<pid>` holding its node id,
    then waits until `<dir>/go-<stage>` exists. A test sees where each task is, removes the node
    one of them runs on (the worst moment: its files are written, its result is not), and lets
    the rest go on.
    """
    where = os.environ.get(HOLD_ENV)
    if not where or not os.path.exists(os.path.join(where, f"hold-{stage}")):
        return
    import time

    import ray

    node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
    marker = os.path.join(where, f"held-{stage}-{index}-{os.getpid()}")
    with open(marker + ".tmp", "w") as f:
        f.write(node)
    os.replace(marker + ".tmp", marker)  # the test never reads half a node id
    go = os.path.join(where, f"go-{stage}")
    while not os.path.exists(go):
        time.sleep(0.05)
