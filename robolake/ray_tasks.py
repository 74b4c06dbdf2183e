"""Ray start-up and the one fan-out every stage uses: chunks of work -> Ray Data tasks -> results.

Ingest and pack both cut their work into chunks (episodes, groups of packed sequences), run one
Ray task per chunk and collect small JSON results on the driver (fragment metadata, counts,
quarantine rows). This module is that pattern once: `chunk` sizes the chunks so every CPU gets
about two (enough to balance, few enough that per-task start-up stays small), and `fan_out`
runs `from_items -> map -> iter_rows` and hands back decoded results as they finish.

Results travel as JSON strings: Ray Data would otherwise infer Arrow types for nested lists of
varying shape, which fails on the first empty list.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["ensure_ray", "chunk", "fan_out"]

T = TypeVar("T")


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Start or join Ray once per process (no dashboard, quiet logs).

    A local Ray started here belongs to this process: its workers end when the driver dies
    (Ray's raylet watches its driver; robolake never starts detached actors).
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


def chunk(items: Sequence[T], max_per_task: int) -> list[list[T]]:
    """`items` cut into chunks of at most `max_per_task`, small enough that every CPU gets about two."""
    import ray

    if not items:
        return []
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = max(1, min(max_per_task, -(-len(items) // (2 * cpus))))
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def fan_out(task: Callable[[int], Any], num_chunks: int) -> Iterator[tuple[int, Any]]:
    """Run `task(chunk_index)` for every chunk on Ray Data; yield (chunk_index, result) as they finish.

    `task` must be picklable (a class instance holding its inputs) and return something JSON-able.
    """
    import ray.data

    if num_chunks == 0:
        return
    ds = ray.data.from_items([{"chunk": i} for i in range(num_chunks)], override_num_blocks=max(1, num_chunks))
    for row in ds.map(_JsonTask(task)).iter_rows():
        yield int(row["chunk"]), json.loads(row["result"])


class _JsonTask:
    def __init__(self, task: Callable[[int], Any]):
        self.task = task

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"chunk": row["chunk"], "result": json.dumps(self.task(int(row["chunk"])))}
