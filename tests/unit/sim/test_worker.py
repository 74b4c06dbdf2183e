"""The one environment worker: slots built inside it, lockstep in slot order, free-running until
stop, one thread per slot when asked, the slots' counters and the process CPU in `stats`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from robolake.rl.env import PointReachFactory
from robolake.sim.worker import EnvWorker, Slot, ray_options, start_worker

FACTORY = PointReachFactory(max_steps=5, image_size=8)


class _Walker(Slot):
    """Steps its point-reach environment: one action per `advance`, until stopped when free-running."""

    def __init__(self, task: str, fail: bool = False) -> None:
        super().__init__()
        self.task = task
        self.fail = fail
        self.steps = 0
        self.thread = ""

    def begin(self, seed: Any) -> np.ndarray:
        self.thread = threading.current_thread().name
        return self.env_for(FACTORY, self.task).reset(seed).state

    def advance(self, action: np.ndarray) -> float:
        self.steps += 1
        return self.env_for(FACTORY, self.task).step(action).reward

    def finish(self) -> int:
        return self.steps

    def run(self, stop: threading.Event) -> int:
        if self.fail:
            raise RuntimeError("slot broke")
        while not stop.wait(0.001) and self.steps < 3:
            self.steps += 1
        return self.steps

    def counters(self) -> dict[str, float]:
        return {"env_steps": self.steps}


@dataclass(frozen=True)
class _Build:
    tasks: tuple[str, ...]
    fail: bool = False

    def __call__(self) -> list[Slot]:
        return [_Walker(t, self.fail) for t in self.tasks]


@pytest.mark.parametrize("threads", [False, True])
def test_lockstep_answers_in_slot_order(threads: bool) -> None:
    w = start_worker(_Build(("reach-left", "reach-right")), index=3, threads=threads)
    assert w.ready() == 2
    first = w.begin([1, 2])
    assert [s.tobytes() for s in first] == [FACTORY("reach-left").reset(s).state.tobytes() for s in (1, 2)]
    w.advance([np.ones(2, np.float32), -np.ones(2, np.float32)])
    assert w.finish() == [1, 1]
    names = {s.thread for s in w.slots}  # type: ignore[attr-defined]
    assert (len(names) == 2) if threads else (names == {threading.current_thread().name})
    stats = w.stats()
    assert (stats["worker"], stats["env_steps"], stats["slots"]) == (3, 2, 2) and stats["cpu_s"] >= 0
    with pytest.raises(ValueError, match="holds 2 environments but got 1 inputs"):
        w.advance([np.zeros(2, np.float32)])
    w.close()
    assert all(not s.envs for s in w.slots)


def test_run_until_done_or_stopped_and_errors_surface() -> None:
    w = EnvWorker(_Build(("reach-left", "reach-right")), threads=True)
    assert w.run() == [3, 3]
    broken = EnvWorker(_Build(("reach-left",), fail=True), threads=True)
    with pytest.raises(RuntimeError, match="slot broke"):
        broken.run()


def test_rebuild_keeps_the_number_of_slots() -> None:
    w = EnvWorker(_Build(("reach-left",)))
    assert w.rebuild(lambda slots: [_Walker("reach-right")]) == 1
    with pytest.raises(ValueError, match="keeps the worker's 1 slots"):
        w.rebuild(lambda slots: [])


def test_a_threaded_worker_takes_concurrent_calls_and_a_plain_one_does_not() -> None:
    assert ray_options(4, threads=True, resources={"num_cpus": 0.25}) == {"num_cpus": 0.25, "max_concurrency": 12}
    assert ray_options(4, threads=False, resources={"num_cpus": 1.0}) == {"num_cpus": 1.0}


def test_evaluation_the_recorder_and_rl_host_their_environments_here() -> None:
    from robolake.rl.config import RLConfig
    from robolake.rl.workers import EnvSlot, WorkerSlots
    from robolake.sim.rollout import EnvPool, RolloutConfig

    with EnvPool(("reach",), RolloutConfig(num_workers=0, envs_per_worker=2)) as pool:
        assert isinstance(pool.workers[0], EnvWorker) and pool.workers[0].ready() == 2
    config = RLConfig(tasks=("reach-left", "reach-right"), num_workers=1, envs_per_worker=2)
    rl = start_worker(WorkerSlots(0, 0, config, FACTORY, None, None), threads=True)
    assert isinstance(rl, EnvWorker) and all(isinstance(s, EnvSlot) for s in rl.slots)
    starts = rl.begin()
    assert [seg.task for seg, _ in starts] == ["reach-left", "reach-right"]
    assert rl.stats()["episodes"] == 0 and rl.finish()[0].truncated
