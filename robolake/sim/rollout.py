"""Closed-loop rollouts: many environments on Ray actors, one batched policy call per tick.

The driver owns the policy; workers own the environments: the one `EnvWorker` of
`robolake.sim.worker`, each with `envs_per_worker` slots that run a queue of episodes in the
worker's own thread (`_EpisodeQueue`). Every episode to run, a (task, seed) pair, is assigned
to a slot up front (round-robin), so which episodes run where, and in which order, depends only
on the configuration. A tick is:

1. the driver collects the current observation of every live slot (from the previous tick's
   replies) and makes ONE `policy.act` call for all of them, whatever their task;
2. each worker receives its slots' chunks and executes the first `replan` actions of each (the
   replanning horizon: 1 replans every step, H runs whole chunks open loop), stopping a slot
   early when its episode succeeds or hits the step limit;
3. a slot whose episode ended records it (`EpisodeResult`: success, length, the actions it
   executed and the environment's own success flags) and resets to its next episode.

Workers step their slots in parallel with each other and with nothing else: the policy waits for
all of them (a synchronous evaluator, which keeps results independent of timing; the
asynchronous loop of robolake.rl puts slots of its own, `robolake.rl.workers`, in the same
worker). With `num_workers=0` the worker runs in the driver process, which tests and the naive
baseline of `robolake bench eval` use.
Workers live in an `EnvPool`: started once (Ray actors and MuJoCo models take seconds) and
reused by every rollout passed the pool, as an evaluation does for its policy and baselines.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from robolake.sim.env import ACTION_DIM, Observation, SimEnv, SimEnvConfig, SimEnvFactory
from robolake.sim.policy import Policy
from robolake.sim.tasks import SUITE, resolve_tasks
from robolake.sim.worker import Slot, start_worker

__all__ = ["EpisodeSpec", "EpisodeResult", "EnvPool", "RolloutConfig", "RolloutResult", "rollout"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: the task's short name, the seed, whether to keep its frames, and
    whether to keep every step (`record_steps`: frames, states, rewards and the policy's whole
    chunks, what `robolake eval --record-to` writes into a lake)."""

    task: str
    seed: int
    record_video: bool = False
    record_steps: bool = False


@dataclass
class EpisodeResult:
    """One finished episode.

    Attributes:
        task: Task short name.
        seed: Episode seed.
        success: The environment reported success at some step.
        steps: Steps executed.
        success_flags: Number of steps whose `info["success"]` was set (the episode stops at the
            first, so 0 or 1).
        reward: Sum of rewards.
        actions: float32 [steps, ACTION_DIM] actions executed.
        frames: uint8 [steps + 1, H, W, 3] camera frames when the episode was recorded, else None.
        states: float32 [steps, STATE_DIM] state before each action (with `record_steps`).
        rewards: float32 [steps] reward of each action (with `record_steps`).
        chunks: float32 [calls, H, ACTION_DIM] every chunk the policy returned for the episode,
            all H actions of it, of which the first `replan` ran (with `record_steps`).
        chunk_steps: int64 [calls] the step at which each chunk was asked for (with `record_steps`).
    """

    task: str
    seed: int
    success: bool
    steps: int
    success_flags: int
    reward: float
    actions: np.ndarray
    frames: np.ndarray | None = None
    states: np.ndarray | None = None
    rewards: np.ndarray | None = None
    chunks: np.ndarray | None = None
    chunk_steps: np.ndarray | None = None


class _EpisodeQueue(Slot):
    """A rollout's slot of an `EnvWorker`: runs its queue of episodes, one action chunk per tick.

    Args:
        factory: Builds its environments (one per task and rendering, kept across rollouts).
    """

    def __init__(self, factory: SimEnvFactory) -> None:
        super().__init__()
        self.factory = factory
        self.queue: list[EpisodeSpec] = []
        self.replan: int | None = None
        self.sim: SimEnv | None = None  # the running episode's environment
        self._clear()

    def _clear(self) -> None:
        self.spec: EpisodeSpec | None = None
        self.obs: Observation | None = None
        self.actions: list[np.ndarray] = []
        self.frames: list[np.ndarray] = []
        self.reward = 0.0
        self.flags = 0
        self.states: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.chunks: list[np.ndarray] = []
        self.chunk_steps: list[int] = []

    def _start_next(self) -> None:
        self._clear()
        if not self.queue:
            return
        self.spec = self.queue.pop(0)
        self.sim = env = cast(SimEnv, self.env_for(self.factory, self.spec.task))
        self.obs = env.reset(self.spec.seed)
        if self.spec.record_video or self.spec.record_steps:
            self.frames.append(self.obs.image if self.obs.image is not None else env.render())

    def begin(self, arg: tuple[Sequence[EpisodeSpec], bool, int | None]) -> Observation | None:
        """Take a queue of episodes (rendering every observation or not, executing `replan`
        actions of each chunk) and reset into the first; its observation (None: nothing queued)."""
        queue, render, self.replan = arg
        self.queue = list(queue)
        self.factory = self.factory.rendering(render)
        self._start_next()
        return self.obs

    def advance(self, chunk: np.ndarray | None) -> tuple[Observation | None, EpisodeResult | None]:
        """Execute the first `replan` actions of `chunk` ([k, ACTION_DIM]); the next observation,
        and the episode when it ended (the slot then resets into its next one)."""
        s, env = self, self.sim
        if s.spec is None or chunk is None or env is None:
            return s.obs, None
        full = np.asarray(chunk, dtype=np.float32).reshape(-1, ACTION_DIM)
        if s.spec.record_steps:
            s.chunks.append(full)
            s.chunk_steps.append(len(s.actions))
        finished = False
        for a in full[: self.replan]:
            if s.spec.record_steps:
                assert s.obs is not None  # a live slot has its observation
                s.states.append(s.obs.state)
            r = env.step(a)
            s.actions.append(np.clip(a, -1.0, 1.0))
            s.reward += r.reward
            s.rewards.append(r.reward)
            s.flags += int(r.success)
            s.obs = r.observation
            if s.spec.record_video or s.spec.record_steps:
                s.frames.append(r.observation.image if r.observation.image is not None else env.render())
            if r.success or r.truncated:
                finished = True
                break
        if not finished:
            return s.obs, None
        done = EpisodeResult(
            task=s.spec.task,
            seed=s.spec.seed,
            success=s.flags > 0,
            steps=len(s.actions),
            success_flags=s.flags,
            reward=s.reward,
            actions=np.stack(s.actions).astype(np.float32),
            frames=np.stack(s.frames) if s.frames else None,
            **(self._recorded_steps() if s.spec.record_steps else {}),
        )
        self._start_next()
        return s.obs, done

    def _recorded_steps(self) -> dict[str, np.ndarray]:
        return {
            "states": np.stack(self.states).astype(np.float32),
            "rewards": np.asarray(self.rewards, dtype=np.float32),
            "chunks": np.stack(self.chunks).astype(np.float32),
            "chunk_steps": np.asarray(self.chunk_steps, dtype=np.int64),
        }


@dataclass(frozen=True)
class _EpisodeQueues:
    """The `SlotBuilder` of a rollout worker: `count` episode queues (picklable)."""

    factory: SimEnvFactory
    count: int

    def __call__(self) -> list[Slot]:
        return [_EpisodeQueue(self.factory) for _ in range(self.count)]


@dataclass(frozen=True, kw_only=True)
class RolloutConfig:
    """How rollouts run.

    Attributes:
        replan: Actions of each chunk executed before the policy is asked again (>= 1).
        num_workers: EnvWorker Ray actors; 0 runs one worker in this process.
        envs_per_worker: Environment slots per worker.
        env: Rendering settings (rendering is switched off for policies that never look, unless
            an episode is recorded).
        address: Ray address to join (None: start or reuse a local Ray).
        num_cpus_per_worker: CPUs each worker actor requests.
        max_steps: Cap on every task's episode step limit (short smoke runs), or None.
    """

    replan: int = 4
    num_workers: int = 2
    envs_per_worker: int = 4
    env: SimEnvConfig = field(default_factory=SimEnvConfig)
    address: str | None = None
    num_cpus_per_worker: float = 1.0
    max_steps: int | None = None

    def __post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {self.max_steps}")
        if self.replan < 1 or self.num_workers < 0 or self.envs_per_worker < 1:
            raise ValueError(
                f"need replan >= 1, num_workers >= 0 and envs_per_worker >= 1; got {self.replan}, "
                f"{self.num_workers}, {self.envs_per_worker}"
            )


@dataclass
class RolloutResult:
    """Episodes of one rollout and how fast it ran.

    Attributes:
        episodes: Finished episodes, in (task, seed) order of the specs.
        wall_s: Wall time from the first reset to the last episode.
        env_steps: Actions executed in all environments.
        policy_calls: `policy.act` calls.
        mean_batch: Mean observations per call.
    """

    episodes: list[EpisodeResult]
    wall_s: float
    env_steps: int
    policy_calls: int
    mean_batch: float

    @property
    def actions_per_s(self) -> float:
        return self.env_steps / self.wall_s if self.wall_s > 0 else 0.0


class EnvPool:
    """`EnvWorker`s (`robolake.sim.worker`) started once and reused by several rollouts.

    Starting Ray actors and building MuJoCo environments costs seconds; an evaluation runs the
    policy, the expert and the floors on the same episodes, so it starts one pool and passes it
    to each `rollout`. With `num_workers=0` the single worker lives in this process.

    Args:
        tasks: Task short names the pool's episodes may use (default: the whole suite).
        config: Workers, slots per worker, rendering, step cap (`replan` is the rollout's).
    """

    def __init__(self, tasks: Sequence[str] | None = None, config: RolloutConfig | None = None) -> None:
        self.config = config or RolloutConfig()
        resolved = resolve_tasks(tasks) if tasks is not None else resolve_tasks(sorted(SUITE))
        if self.config.max_steps is not None:
            resolved = [dataclasses.replace(t, max_steps=min(t.max_steps, self.config.max_steps)) for t in resolved]
        self.tasks = {t.name for t in resolved}
        self.local = self.config.num_workers == 0
        build = _EpisodeQueues(
            SimEnvFactory(tuple(resolved), dataclasses.replace(self.config.env, render_images=True)),
            self.config.envs_per_worker,
        )
        if self.local:
            self.workers: list[Any] = [start_worker(build)]
        else:
            from robolake.ray_tasks import ensure_ray

            ensure_ray(self.config.address)
            resources = {"num_cpus": self.config.num_cpus_per_worker}
            self.workers = [
                start_worker(build, index=i, slots=build.count, resources=resources)
                for i in range(self.config.num_workers)
            ]
        self.slots = len(self.workers) * self.config.envs_per_worker

    def call(self, method: str, args: list[Any] | None = None) -> list[Any]:
        """`method(arg)` on every worker (one arg each; `method()` without `args`), in worker order."""
        each = [() for _ in self.workers] if args is None else [(a,) for a in args]
        if self.local:
            return [getattr(w, method)(*a) for w, a in zip(self.workers, each, strict=True)]
        import ray

        return ray.get([getattr(w, method).remote(*a) for w, a in zip(self.workers, each, strict=True)])

    def warm_up(self) -> float:
        """Wait until every worker is up; returns the seconds it took (the pool's start-up cost)."""
        t0 = time.perf_counter()
        self.call("ready")
        return time.perf_counter() - t0

    def close(self) -> None:
        if self.local:
            self.workers[0].close()
        else:
            import ray

            for w in self.workers:
                ray.kill(w)
        self.workers = []

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rollout(
    policy: Policy,
    specs: Sequence[EpisodeSpec],
    config: RolloutConfig | None = None,
    *,
    pool: EnvPool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RolloutResult:
    """Run every episode of `specs` with `policy` in closed loop.

    Args:
        policy: Acts for every live environment, once per tick.
        specs: The episodes.
        config: Replanning horizon, and the pool to start when `pool` is None.
        pool: Workers to run on (left running); None starts one for this call and stops it.
        progress: Called as progress(episodes finished, episodes) when the rollout starts and
            whenever an episode ends.

    Raises:
        ValueError: a spec names a task outside the suite (or the pool), or `specs` is empty.
    """
    config = config or RolloutConfig()
    if not specs:
        raise ValueError("no episodes to run")
    names = sorted({s.task for s in specs})
    resolve_tasks(names)
    own = pool is None
    pool = pool or EnvPool(names, config)
    missing = sorted(set(names) - pool.tasks)
    if missing:
        raise ValueError(
            f"tasks {missing} are not in this EnvPool's tasks {sorted(pool.tasks)}; start the pool with them"
        )
    render = policy.needs_images or any(s.record_video or s.record_steps for s in specs)
    per_slot = pool.config.envs_per_worker
    queues: list[list[EpisodeSpec]] = [[] for _ in range(pool.slots)]
    for i, spec in enumerate(specs):
        queues[i % pool.slots].append(spec)
    per_worker = [queues[w * per_slot : (w + 1) * per_slot] for w in range(len(pool.workers))]

    t0 = time.perf_counter()
    results: list[EpisodeResult] = []
    calls = batch_total = 0
    try:
        starts = [[(q, render, config.replan) for q in qs] for qs in per_worker]
        obs: list[list[Observation | None]] = pool.call("begin", starts)
        if progress is not None:
            progress(0, len(specs))
        while any(o is not None for wo in obs for o in wo):
            live = [(w, j, o) for w, wo in enumerate(obs) for j, o in enumerate(wo) if o is not None]
            chunks = policy.act([o for _, _, o in live])
            calls += 1
            batch_total += len(live)
            per: list[list[np.ndarray | None]] = [[None] * len(wo) for wo in obs]
            for (w, j, _), chunk in zip(live, chunks, strict=True):
                per[w][j] = chunk  # whole: a recorded episode keeps it; the worker runs `replan` of it
            replies: list[list[tuple[Observation | None, EpisodeResult | None]]] = pool.call("advance", per)
            obs = [[o for o, _ in r] for r in replies]
            finished = len(results)
            results.extend(e for r in replies for _, e in r if e is not None)
            if progress is not None and len(results) > finished:
                progress(len(results), len(specs))
    finally:
        if own:
            pool.close()
    wall = time.perf_counter() - t0
    order = {(s.task, s.seed): i for i, s in enumerate(specs)}
    results.sort(key=lambda e: order[(e.task, e.seed)])
    steps = sum(e.steps for e in results)
    log.info("%s: %d episodes, %d steps in %.1fs (%d policy calls)", policy.name, len(results), steps, wall, calls)
    return RolloutResult(results, wall, steps, calls, batch_total / max(calls, 1))
