"""The one environment worker: a Ray actor (or a local object) hosting a few environment slots.

Every closed loop in robolake runs its environments here: the evaluator's rollouts
(`robolake.sim.rollout`: a queue of (task, seed) episodes per slot, the policy acting on the
driver), the demonstration recorder (`robolake.sim.recorder`: a scripted expert running a queue
of episodes inside the slot) and RL (`robolake.rl.workers`: one environment per slot, talking to
the generation server and the learner). What differs between them is what a slot does with its
environment, a `Slot`; what they share is here, once:

- the actor: `start_worker` makes an `EnvWorker` in this process or as a Ray actor, sized by
  one rule (`ray_options`): a worker whose slots run on threads of their own accepts calls
  concurrently (its `run` blocks while `stats` and `stop` come in), one that runs them in the
  calling thread takes one call at a time;
- the environments: a slot builds them with an `EnvFactory`, once per task (and factory), and
  keeps them across episodes and rollouts (building a simulator takes seconds);
- the threads: with `threads=True` every slot has one long-lived thread that does everything
  with its environment, in every mode and across restarts (an EGL rendering context is current
  in one thread only); without, slots run one after another in the calling thread;
- the verbs: lockstep (`begin`, `advance`, `finish`: one input per slot in, one output per slot
  out, in slot order, so results never depend on timing) and free-running (`run` until `stop`,
  or until every slot is done);
- the accounting: `stats` sums the slots' counters and adds the worker's wall time and its
  process's CPU seconds (every thread, the offscreen renderer's too), which `robolake bench rl`
  reports per component.

This module imports the contract and the standard library only; Ray is imported when an actor
is started.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from robolake.sim.contract import Env, EnvFactory

__all__ = ["EnvWorker", "Slot", "SlotBuilder", "ray_options", "start_worker"]


class Slot:
    """One environment slot of an `EnvWorker`: the environments it built and what it does with them.

    A use overrides the verbs it speaks; the others raise NotImplementedError.
    """

    def __init__(self) -> None:
        self.envs: dict[Hashable, Env] = {}

    def env_for(self, factory: EnvFactory, task: str) -> Env:
        """The environment of `task` built by `factory` (hashable), built on first use and kept."""
        key = (factory, task)
        if key not in self.envs:
            self.envs[key] = factory(task)
        return self.envs[key]

    def begin(self, arg: Any) -> Any:
        """Lockstep: start (reset) with this slot's input; its first output."""
        raise NotImplementedError(f"{type(self).__name__} does not run in lockstep")

    def advance(self, arg: Any) -> Any:
        """Lockstep: one input (an action chunk, a generation response) in, one output out."""
        raise NotImplementedError(f"{type(self).__name__} does not run in lockstep")

    def finish(self) -> Any:
        """Lockstep: end what is running (the budget ended)."""
        raise NotImplementedError(f"{type(self).__name__} does not run in lockstep")

    def run(self, stop: threading.Event) -> Any:
        """Free-running: work until `stop` is set or the slot has nothing left to do."""
        raise NotImplementedError(f"{type(self).__name__} does not run freely")

    def take(self) -> list[Any]:
        """What the slot kept for the driver since the last call (recorded episodes)."""
        return []

    def counters(self) -> dict[str, float]:
        """Counters that `EnvWorker.stats` sums over slots."""
        return {}

    def reset_clock(self) -> None:
        """Zero the timing counters (a measurement starts)."""

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs.clear()


SlotBuilder = Callable[[], Sequence[Slot]]  # picklable; called inside the worker, where the environments live


class EnvWorker:
    """Hosts the slots `build()` returns (see the module docstring); a Ray actor or a local object.

    Args:
        build: Makes the slots, inside the worker (environments are built where they run).
        index: The worker's number (reported by `stats`).
        threads: One long-lived thread per slot (True), or every call in the calling thread.
    """

    def __init__(self, build: SlotBuilder, *, index: int = 0, threads: bool = False) -> None:
        self.index = index
        self.slots: list[Slot] = list(build())
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()
        self._threads = (
            [ThreadPoolExecutor(1, thread_name_prefix=f"env{index}.{j}") for j in range(len(self.slots))]
            if threads
            else None
        )

    def _each(self, fn: Callable[[Slot, Any], Any], args: Sequence[Any] | None = None) -> list[Any]:
        """`fn(slot, arg)` for every slot (on its thread when the worker has them), in slot order."""
        if args is None:
            args = [None] * len(self.slots)
        elif len(args) != len(self.slots):
            raise ValueError(f"worker {self.index} holds {len(self.slots)} environments but got {len(args)} inputs")
        if self._threads is None:
            return [fn(s, a) for s, a in zip(self.slots, args, strict=True)]
        futures = [ex.submit(fn, s, a) for ex, s, a in zip(self._threads, self.slots, args, strict=True)]
        return [f.result() for f in futures]

    def ready(self) -> int:
        """The number of slots, once the worker (and every environment its slots built) is up."""
        return len(self.slots)

    def rebuild(self, fn: Callable[[Sequence[Slot]], Sequence[Slot]]) -> int:
        """Replace the slots by `fn(slots)` (which may keep their environments); restarts the wall clock."""
        slots = list(fn(self.slots))
        if len(slots) != len(self.slots):
            raise ValueError(f"rebuild keeps the worker's {len(self.slots)} slots, got {len(slots)}")
        self.slots = slots
        self._t0 = time.perf_counter()
        return len(self.slots)

    # -- lockstep --------------------------------------------------------------------------------

    def begin(self, args: Sequence[Any] | None = None) -> list[Any]:
        """`slot.begin(arg)` for every slot (one input each, or None), in parallel; outputs in slot order."""
        return self._each(lambda s, a: s.begin(a), args)

    def advance(self, args: Sequence[Any]) -> list[Any]:
        """`slot.advance(arg)` for every slot, in parallel; outputs in slot order.

        Raises:
            ValueError: not one input per slot.
        """
        return self._each(lambda s, a: s.advance(a), args)

    def finish(self) -> list[Any]:
        """`slot.finish()` for every slot; outputs in slot order."""
        return self._each(lambda s, _: s.finish())

    # -- free-running ----------------------------------------------------------------------------

    def run(self) -> list[Any]:
        """Run every slot until `stop` (or until each is done); their results in slot order.

        Raises:
            BaseException: the first error of a slot, after every slot was stopped.
        """
        self._stop.clear()
        errors: list[BaseException] = []

        def guarded(slot: Slot, _: Any) -> Any:
            try:
                return slot.run(self._stop)
            except BaseException as e:  # surfaced to the caller below
                errors.append(e)
                self._stop.set()
                return None

        out = self._each(guarded)
        if errors:
            raise errors[0]
        return out

    def stop(self) -> None:
        self._stop.set()

    # -- the driver's view -----------------------------------------------------------------------

    def take(self) -> list[Any]:
        """What every slot kept for the driver since the last call, in slot order."""
        return [x for s in self.slots for x in s.take()]

    def reset_clock(self) -> None:
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()
        for s in self.slots:
            s.reset_clock()

    def stats(self) -> dict[str, Any]:
        """{"worker", the slots' counters summed, "slots", "wall_s", "cpu_s" (this process, every thread)}."""
        summed: dict[str, float] = {}
        for s in self.slots:
            for k, v in s.counters().items():
                summed[k] = summed.get(k, 0) + v
        return {
            "worker": self.index,
            **summed,
            "slots": len(self.slots),
            "wall_s": time.perf_counter() - self._t0,
            "cpu_s": time.process_time() - self._cpu0,  # every thread of this process, the renderer's too
        }

    def close(self) -> None:
        for s in self.slots:
            s.close()


@functools.cache
def _actor_class() -> Any:
    import ray

    return ray.remote(EnvWorker)


def ray_options(slots: int, *, threads: bool, resources: dict[str, Any]) -> dict[str, Any]:
    """`ActorClass.options(...)` of an `EnvWorker`: `resources` (num_cpus, num_gpus, ...) and its
    concurrency. A threaded worker takes calls concurrently (`stats` and `stop` while `run` blocks);
    one without threads takes one call at a time, so its environments stay in one thread."""
    return {**resources, "max_concurrency": slots + 8} if threads else dict(resources)


def start_worker(
    build: SlotBuilder,
    *,
    index: int = 0,
    threads: bool = False,
    slots: int = 1,
    resources: dict[str, Any] | None = None,
) -> Any:
    """An `EnvWorker` in this process (`resources` None) or as a Ray actor asking for `resources`
    (Ray must be initialised); `slots` is how many slots `build` makes (it sizes the actor)."""
    if resources is None:
        return EnvWorker(build, index=index, threads=threads)
    return (
        _actor_class()
        .options(**ray_options(slots, threads=threads, resources=resources))
        .remote(build, index=index, threads=threads)
    )
