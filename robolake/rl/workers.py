"""Environment workers: Ray actors that each hold several environments.

Asynchronous mode (`run`): every environment gets its own thread in the worker and loops on its
own: observe, ask the generation server for a chunk, execute `execute_steps` actions of it, send
finished pieces of the episode to the learner (fire and forget), repeat. No environment waits
for another: while one steps, its neighbours' requests are in flight or being served.

Synchronous mode (`begin` / `advance`): the coordinator hands every environment its chunk at
once; the worker executes them all (each on its environment's thread) and returns the next requests and the
finished pieces, so the coordinator can forward them in a fixed order.

Each episode announces itself to the learner at reset (piece 0, acknowledged before the first
step), so when a worker dies the learner knows which episodes it was running and records them as
truncated. The replacement worker comes up with the next `incarnation`, which enters every seed:
its episodes never repeat the lost ones.

Per-step delays of a `LatencyProfile` are slept in the stepping thread (a simulator waiting on
rendering or contacts), and counted as the environment's busy time.

Recording (`robolake rl --record-to LAKE`, a `RolloutTarget`): each environment also keeps what
a lake episode needs, observing before every action rather than once per chunk (so recording
costs a render per step): the state and frames the policy would see, the action executed, its
reward, and every whole chunk with the weight version that generated it. A finished episode
becomes a `RolloutEpisode` the worker holds until the coordinator takes it (`take_recorded`);
episodes cut off by the budget, or lost with their worker, are not recorded.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from robolake.lake import RolloutEpisode, RolloutTarget
from robolake.rl.config import RLConfig
from robolake.rl.messages import (
    EpisodeKey,
    GenRequest,
    GenResponse,
    Segment,
    Transition,
    chunk_seed,
)
from robolake.sim.contract import Env, EnvFactory, Observation

__all__ = ["EnvSlot", "EnvWorker", "env_seed"]

log = logging.getLogger(__name__)


_SEED_BASE = 2_000_000  # above robolake.sim's demonstration and evaluation seed ranges
_SEED_SPAN = 2**31 - 1 - _SEED_BASE


def env_seed(seed: int, env_index: int, incarnation: int, episode: int) -> int:
    """Reset seed of one episode: distinct across environments, incarnations and episodes, and
    never a seed robolake.sim records demonstrations or evaluates on (RL must not train on the
    evaluation's initial scenes)."""
    return _SEED_BASE + (seed * 7_919 + env_index * 1_000_003 + incarnation * 100_003 + episode) % _SEED_SPAN


class EnvSlot:
    """One environment and its current episode (used by the worker and the reference loop)."""

    def __init__(
        self,
        env_index: int,
        worker: int,
        incarnation: int,
        config: RLConfig,
        env_factory: EnvFactory,
        env: Env | None = None,
        record: RolloutTarget | None = None,
    ) -> None:
        self.record = record
        self.recording: _Recording | None = None
        self.recorded: list[RolloutEpisode] = []
        self.env_index = env_index
        self.worker = worker
        self.incarnation = incarnation
        self.config = config
        self.task = config.task_of(env_index)
        self.env = env if env is not None else env_factory(self.task)
        self.rng = np.random.default_rng((config.seed, env_index, incarnation, 17))
        self.episode = -1
        self.key = EpisodeKey(env_index, incarnation, 0)
        self.seed = 0
        self.chunk = 0
        self.piece = 0
        self.pending: list[Transition] = []
        self.obs: Observation | None = None
        self.env_steps = 0
        self.episodes = 0
        self.busy_s = 0.0
        self.wait_s = 0.0

    def start_episode(self) -> tuple[Segment, GenRequest]:
        """Reset into the next episode: its announcement (piece 0) and first request."""
        t0 = time.perf_counter()
        self.episode += 1
        self.key = EpisodeKey(self.env_index, self.incarnation, self.episode)
        self.seed = env_seed(self.config.seed, self.env_index, self.incarnation, self.episode)
        self.obs = self.env.reset(self.seed)
        self.recording = _Recording() if self.record is not None else None
        self.chunk, self.piece, self.pending = 0, 1, []
        self.busy_s += time.perf_counter() - t0
        return Segment(self.key, self.task, self.seed, self.worker, 0), self.request()

    def request(self) -> GenRequest:
        assert self.obs is not None
        seed = chunk_seed(self.config.seed, self.env_index, self.incarnation, self.episode, self.chunk)
        return GenRequest(self.key, self.chunk, self.obs, seed)

    def _piece(self, **final: Any) -> Segment:
        seg = Segment(self.key, self.task, self.seed, self.worker, self.piece, tuple(self.pending), **final)
        self.piece += 1
        self.pending = []
        return seg

    def execute(self, resp: GenResponse) -> tuple[list[Segment], GenRequest]:
        """Execute the chunk answering the current request; pieces to send and the next request.

        Raises:
            RuntimeError: `resp` answers another environment's request (a scheduler bug).
        """
        expected = self.request().request_id
        if resp.request_id != expected:
            raise RuntimeError(f"environment {self.env_index} got the chunk of {resp.request_id}, expected {expected}")
        assert self.obs is not None
        t0 = time.perf_counter()
        done = success = False
        steps = 0
        rec = self.recording
        if rec is not None:
            rec.chunk(resp.actions, resp.version)
        for a in resp.actions[: self.config.execute_steps]:
            if rec is not None:
                rec.before(self.obs if steps == 0 else self.env.observe(), a)
            result = self.env.step(a)
            if rec is not None:
                rec.rewards.append(result.reward)
            delay = self.config.latency.draw(self.rng)
            if delay:
                time.sleep(delay)
            steps += 1
            success = success or result.success
            if result.done:
                done = True
                break
        self.pending.append(Transition(self.obs, resp.chain, resp.logp, resp.version, self.chunk, steps))
        self.env_steps += steps
        self.chunk += 1
        out: list[Segment] = []
        if done:
            if rec is not None and self.record is not None:
                self.recorded.append(
                    rec.episode(self.record, task=self.task, seed=self.seed, success=success, key=str(self.key))
                )
            out.append(self._piece(final=True, success=success))
            self.episodes += 1
            self.busy_s += time.perf_counter() - t0
            start, req = self.start_episode()
            out.append(start)
            return out, req
        if len(self.pending) >= self.config.segment_chunks:
            out.append(self._piece())
        self.obs = self.env.observe()
        self.busy_s += time.perf_counter() - t0
        return out, self.request()

    def truncate(self, reason: str) -> Segment:
        """Close the running episode without an outcome (budget end)."""
        return self._piece(final=True, truncated=True)


class _Recording:
    """The steps of one episode being recorded (see the module docstring)."""

    def __init__(self) -> None:
        self.states: list[np.ndarray] = []
        self.frames: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.chunks: list[np.ndarray] = []
        self.chunk_steps: list[int] = []
        self.versions: list[int] = []
        self.instruction = ""

    def chunk(self, actions: np.ndarray, version: int) -> None:
        self.chunks.append(np.asarray(actions, np.float32))
        self.chunk_steps.append(len(self.actions))
        self.versions.append(int(version))

    def before(self, obs: Observation, action: np.ndarray) -> None:
        self.instruction = obs.instruction
        self.states.append(np.asarray(obs.state, np.float32))
        self.frames.append(np.asarray(obs.image, np.uint8))
        self.actions.append(np.asarray(action, np.float32))

    def episode(self, target: RolloutTarget, *, task: str, seed: int, success: bool, key: str) -> RolloutEpisode:
        """Raises: ValueError when the observations have another number of views than the target's cameras."""
        frames = np.stack(self.frames)  # [T, V, H, W, 3]
        cams = target.spec.cameras
        if frames.shape[1] != len(cams):
            raise ValueError(
                f"observations have {frames.shape[1]} views but the rollout target names cameras {list(cams)}"
            )
        return RolloutEpisode(
            embodiment=target.spec.tag,
            task=self.instruction,
            seed=seed,
            states=np.stack(self.states),
            actions=np.stack(self.actions),
            frames=tuple((c, np.ascontiguousarray(frames[:, v])) for v, c in enumerate(cams)),
            rewards=np.asarray(self.rewards, np.float32),
            success=success,
            chunks=np.stack(self.chunks),
            chunk_steps=np.asarray(self.chunk_steps, np.int64),
            fps=target.spec.fps,
            info={"rl_task": task, "rl_episode": key, "policy_versions": self.versions},
        )


class EnvWorker:
    """Ray actor holding `config.envs_per_worker` environments (see the module docstring)."""

    def __init__(
        self,
        worker: int,
        incarnation: int,
        config: RLConfig,
        env_factory: EnvFactory,
        server: Any,
        learner: Any,
        record: RolloutTarget | None = None,
    ) -> None:
        self.worker = worker
        self.record = record
        self.config = config
        self.server = server
        self.learner = learner
        first = worker * config.envs_per_worker
        self.slots = [
            EnvSlot(first + j, worker, incarnation, config, env_factory, record=record)
            for j in range(config.envs_per_worker)
        ]
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()
        self._env_factory = env_factory
        # One long-lived thread per environment does everything with it, in both modes and
        # across restarts: an EGL rendering context is current in one thread only.
        self._threads = [ThreadPoolExecutor(1, thread_name_prefix=f"env{s.env_index}") for s in self.slots]

    def restart(self, config: RLConfig) -> int:
        """Start over under `config` (same layout and tasks) with fresh episode counters, keeping
        the environments (building a simulator is slow): a benchmark runs both modes on the same
        seeds without new actors."""
        if config.envs_per_worker != self.config.envs_per_worker or config.tasks != self.config.tasks:
            raise ValueError("restart keeps the environments: envs_per_worker and tasks must not change")
        self.config = config
        self.slots = [
            EnvSlot(s.env_index, self.worker, 0, config, self._env_factory, env=s.env, record=self.record)
            for s in self.slots
        ]
        self._t0 = time.perf_counter()
        return len(self.slots)

    def ready(self) -> int:
        return len(self.slots)

    def take_recorded(self) -> list[RolloutEpisode]:
        """The episodes recorded since the last call (with a `RolloutTarget`), in slot order."""
        out = [e for s in self.slots for e in s.recorded]
        for s in self.slots:
            s.recorded = []
        return out

    def reset_clock(self) -> None:
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()
        for s in self.slots:
            s.busy_s = s.wait_s = 0.0

    # -- asynchronous --------------------------------------------------------------------------

    def _loop(self, slot: EnvSlot) -> None:
        import ray

        start, req = slot.start_episode()
        ray.get(self.learner.add.remote(start))
        while not self._stop.is_set():
            t0 = time.perf_counter()
            resp = ray.get(self.server.act.remote(req))
            slot.wait_s += time.perf_counter() - t0
            segments, req = slot.execute(resp)
            for seg in segments:
                ref = self.learner.add.remote(seg)
                if seg.piece == 0:
                    ray.get(ref)  # the learner knows of every episode before it takes a step
        ray.get(self.learner.add.remote(slot.truncate("budget")))

    def run(self) -> dict[str, Any]:
        """Run every environment until `stop`; returns `stats()`."""
        self._stop.clear()
        errors: list[BaseException] = []

        def guarded(slot: EnvSlot) -> None:
            try:
                self._loop(slot)
            except BaseException as e:  # surfaced to the coordinator below
                errors.append(e)
                self._stop.set()

        futures = [ex.submit(guarded, s) for ex, s in zip(self._threads, self.slots, strict=True)]
        for f in futures:
            f.result()
        if errors:
            raise errors[0]
        return self.stats()

    def stop(self) -> None:
        self._stop.set()

    def stats(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "env_steps": sum(s.env_steps for s in self.slots),
            "episodes": sum(s.episodes for s in self.slots),
            "busy_s": sum(s.busy_s for s in self.slots),
            "wait_s": sum(s.wait_s for s in self.slots),
            "slots": len(self.slots),
            "wall_s": time.perf_counter() - self._t0,
            "cpu_s": time.process_time() - self._cpu0,  # every thread of this process, the renderer's too
        }

    # -- synchronous ---------------------------------------------------------------------------

    def begin(self) -> tuple[list[GenRequest], list[Segment]]:
        """Reset every environment: first requests and announcements, in slot order."""
        starts = [
            f.result() for f in [ex.submit(s.start_episode) for ex, s in zip(self._threads, self.slots, strict=True)]
        ]
        return [r for _, r in starts], [seg for seg, _ in starts]

    def advance(self, responses: list[GenResponse]) -> tuple[list[GenRequest], list[Segment], int]:
        """Execute one chunk in every environment (in parallel): next requests and pieces, in slot
        order, and this worker's env steps so far."""
        if len(responses) != len(self.slots):
            raise ValueError(
                f"worker {self.worker} holds {len(self.slots)} environments but got {len(responses)} chunks"
            )
        futures = [ex.submit(s.execute, r) for ex, s, r in zip(self._threads, self.slots, responses, strict=True)]
        results = [f.result() for f in futures]
        return (
            [r for _, r in results],
            [seg for segs, _ in results for seg in segs],
            sum(s.env_steps for s in self.slots),
        )

    def finish(self) -> list[Segment]:
        """Truncate every running episode (the budget ended), in slot order."""
        return [s.truncate("budget") for s in self.slots]
