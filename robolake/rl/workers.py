"""RL's environment slots: what one environment does in the one `EnvWorker` (robolake.sim.worker).

The pipeline starts `num_workers` workers (`WorkerSlots`: `envs_per_worker` `EnvSlot`s each,
one long-lived thread per environment) and drives them in one of two ways:

Asynchronous mode (`run`): every environment loops on its own thread: observe, ask the
generation server for a chunk, execute `execute_steps` actions of it, send finished pieces of
the episode to the learner (fire and forget), repeat. With `RLConfig.group_requests` (the
default) a worker's environments ask together: each deposits its request and pieces in the
worker's `RequestRound`, and the last to arrive sends them all, one call to the server
(`act_many`) and one to the learner, then hands each environment its chunk. Workers, the server
and the learner still run decoupled (while one worker steps, the other's batch is generated and
the learner trains); what grouping buys is Ray's per-call CPU, paid once per round of a worker
instead of once per environment and chunk, and generation batches as large as the lockstep's
half. Without it no environment waits for another: while one steps, its neighbours' requests
are in flight or being served.

Synchronous mode (`begin` / `advance` / `finish`): the coordinator hands every environment its
chunk at once; the worker executes them all (each on its environment's thread) and returns the
next requests and the finished pieces, so the coordinator can forward them in a fixed order.

Each episode announces itself to the learner at reset (piece 0, acknowledged before the first
step), so when a worker dies the learner knows which episodes it was running and records them as
truncated. The replacement worker comes up with the next `incarnation`, which enters every seed:
its episodes never repeat the lost ones.

Per-step delays of a `LatencyProfile` are slept in the stepping thread (a simulator waiting on
rendering or contacts), and counted as the environment's busy time. An episode ends on the
environment's own `done`, or after `RLConfig.max_episode_steps` steps (a failure unless it
succeeded); its return (the sum of the step rewards) travels with its final piece.

Recording (`robolake rl --record-to LAKE`, a `RolloutTarget`): each environment also keeps what
a lake episode needs, observing before every action rather than once per chunk (so recording
costs a render per step): the state and frames the policy would see, the action executed, its
reward, and every whole chunk with the weight version that generated it. A finished episode
becomes a `RolloutEpisode` the worker holds until the coordinator takes it (`EnvWorker.take`);
episodes cut off by the budget, or lost with their worker, are not recorded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
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
from robolake.sim.worker import Slot

__all__ = ["EnvSlot", "RequestRound", "WorkerSlots", "env_seed", "restart_slots"]

log = logging.getLogger(__name__)


_SEED_BASE = 2_000_000  # above robolake.sim's demonstration and evaluation seed ranges
_SEED_SPAN = 2**31 - 1 - _SEED_BASE


def env_seed(seed: int, env_index: int, incarnation: int, episode: int) -> int:
    """Reset seed of one episode: distinct across environments, incarnations and episodes, and
    never a seed robolake.sim records demonstrations or evaluates on (RL must not train on the
    evaluation's initial scenes)."""
    return _SEED_BASE + (seed * 7_919 + env_index * 1_000_003 + incarnation * 100_003 + episode) % _SEED_SPAN


class EnvSlot(Slot):
    """One environment and its current episode: a slot of the one `EnvWorker` (robolake.sim.worker).

    Args:
        env_index: The environment's global number (it fixes the task and enters every seed).
        worker: The worker holding it.
        incarnation: How many workers at this place died before (enters every seed).
        config: The run.
        env_factory: Builds the environment (unless `env` is given: a restart keeps it).
        env: An environment to reuse.
        record: Where finished episodes are recorded, or None.
        server: The generation server's actor (free-running mode).
        learner: The learner's actor (free-running mode).
        group: The worker's `RequestRound` and this slot's place in it (free-running mode with
            `RLConfig.group_requests`), or None: the slot asks on its own.
    """

    def __init__(
        self,
        env_index: int,
        worker: int,
        incarnation: int,
        config: RLConfig,
        env_factory: EnvFactory | None,
        env: Env | None = None,
        record: RolloutTarget | None = None,
        server: Any = None,
        learner: Any = None,
        group: tuple[RequestRound, int] | None = None,
    ) -> None:
        super().__init__()
        self.group = group
        self.record = record
        self.recording: _Recording | None = None
        self.recorded: list[RolloutEpisode] = []
        self.env_index = env_index
        self.worker = worker
        self.incarnation = incarnation
        self.config = config
        self.server = server
        self.learner = learner
        self.task = config.task_of(env_index)
        if env is None:
            if env_factory is None:
                raise ValueError("EnvSlot needs an env_factory or an env")
            env = env_factory(self.task)
        self.env = self.envs[self.task] = env
        self.rng = np.random.default_rng((config.seed, env_index, incarnation, 17))
        self.episode = -1
        self.key = EpisodeKey(env_index, incarnation, 0)
        self.seed = 0
        self.chunk = 0
        self.piece = 0
        self.pending: list[Transition] = []
        self.obs: Observation | None = None
        self.ret = 0.0
        self.episode_steps = 0
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
        self.ret, self.episode_steps = 0.0, 0
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
        cap = self.config.max_episode_steps
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
            self.episode_steps += 1
            self.ret += result.reward
            success = success or result.success
            if result.done or (cap is not None and self.episode_steps >= cap):
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
            out.append(self._piece(final=True, success=success, ret=self.ret))
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

    # -- the worker's verbs ------------------------------------------------------------------------

    def begin(self, arg: Any = None) -> tuple[Segment, GenRequest]:
        """Lockstep: reset into the first episode (its announcement and first request)."""
        return self.start_episode()

    def advance(self, resp: GenResponse) -> tuple[list[Segment], GenRequest, int]:
        """Lockstep: execute `resp`; pieces to send, the next request and this slot's env steps so far."""
        segments, req = self.execute(resp)
        return segments, req, self.env_steps

    def finish(self) -> Segment:
        return self.truncate("budget")

    def run(self, stop: threading.Event) -> None:
        """Free-running: ask the server, execute, send pieces to the learner (fire and forget), until `stop`."""
        import ray

        if self.group is not None:
            self._run_grouped(stop, *self.group)
            return
        start, req = self.start_episode()
        ray.get(self.learner.add.remote(start))
        while not stop.is_set():
            t0 = time.perf_counter()
            resp = ray.get(self.server.act.remote(req))
            self.wait_s += time.perf_counter() - t0
            segments, req = self.execute(resp)
            for seg in segments:
                ref = self.learner.add.remote(seg)
                if seg.piece == 0:
                    ray.get(ref)  # the learner knows of every episode before it takes a step
        ray.get(self.learner.add.remote(self.truncate("budget")))

    def _run_grouped(self, stop: threading.Event, group: RequestRound, place: int) -> None:
        """Free-running with the worker's other environments asking together (see `RequestRound`)."""
        import ray

        start, req = self.start_episode()
        segments = [start]
        while not stop.is_set():
            t0 = time.perf_counter()
            resp = group.exchange(place, segments, req, stop)
            self.wait_s += time.perf_counter() - t0
            segments = []
            if resp is None:  # stopped before the round was sent
                break
            segments, req = self.execute(resp)
        group.flush(segments)
        ray.get(self.learner.add.remote(self.truncate("budget")))

    def take(self) -> list[Any]:
        out, self.recorded = self.recorded, []
        return list(out)

    def counters(self) -> dict[str, float]:
        return {"env_steps": self.env_steps, "episodes": self.episodes, "busy_s": self.busy_s, "wait_s": self.wait_s}

    def reset_clock(self) -> None:
        self.busy_s = self.wait_s = 0.0


class RequestRound:
    """One worker's environments asking the server together (`RLConfig.group_requests`).

    Each environment's thread deposits its next request and its finished pieces (`exchange`)
    and waits; the last of the round to arrive sends every request in one `act_many` call and
    every piece in one `add_many` call, then wakes each environment with its own chunk. Pieces
    that announce an episode (piece 0) are acknowledged before anyone steps, as in the
    per-environment loop. A round is never abandoned once sent (every chunk served is
    executed); when the run stops before a round is complete, each environment withdraws its
    request and `flush` sends whatever pieces were deposited, so the ledger misses none.

    Args:
        size: Environments of the worker.
        server: The generation server's actor.
        learner: The learner's actor.
    """

    def __init__(self, size: int, server: Any, learner: Any) -> None:
        self.size = size
        self.server = server
        self.learner = learner
        self.cond = threading.Condition()
        self.requests: dict[int, GenRequest] = {}
        self.segments: list[Segment] = []
        self.responses: dict[int, GenResponse] = {}
        self.round = 0
        self.sending = False
        self.error: BaseException | None = None

    def exchange(
        self, place: int, segments: list[Segment], request: GenRequest, stop: threading.Event
    ) -> GenResponse | None:
        """Deposit `request` and `segments`; the chunk answering `request`, or None when `stop`
        was set before the round was sent.

        Raises:
            RuntimeError: the round's calls failed (the sender's error, for every environment).
        """
        with self.cond:
            self.requests[place] = request
            self.segments.extend(segments)
            mine = self.round
            if len(self.requests) < self.size:
                while self.round == mine and self.error is None:
                    if stop.is_set() and not self.sending:
                        del self.requests[place]
                        return None
                    self.cond.wait(0.05)  # wakes for `stop`, which sets no condition
                if self.error is not None:
                    raise RuntimeError(f"the worker's generation round failed: {self.error}") from self.error
                return self.responses[place]
            places = sorted(self.requests)
            requests = [self.requests[p] for p in places]
            segs, self.segments, self.requests = self.segments, [], {}
            self.sending = True
        try:
            responses = self._send(requests, segs)
        except BaseException as e:
            with self.cond:
                self.error, self.sending = e, False
                self.cond.notify_all()
            raise
        with self.cond:
            self.responses = dict(zip(places, responses, strict=True))
            self.round += 1
            self.sending = False
            self.cond.notify_all()
            return self.responses[place]

    def _send(self, requests: list[GenRequest], segments: list[Segment]) -> list[GenResponse]:
        import ray

        served = self.server.act_many.remote(requests)
        if segments:
            added = self.learner.add_many.remote(segments)
            if any(s.piece == 0 for s in segments):
                ray.get(added)  # the learner knows of every episode before it takes a step
        return list(ray.get(served))

    def flush(self, segments: list[Segment]) -> None:
        """Send `segments` and every piece still deposited to the learner, and wait for them."""
        import ray

        with self.cond:
            segs, self.segments = [*self.segments, *segments], []
        if segs:
            ray.get(self.learner.add_many.remote(segs))


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


@dataclass(frozen=True, eq=False)
class WorkerSlots:
    """The `SlotBuilder` of one RL worker: `config.envs_per_worker` environments (picklable).

    Attributes:
        worker: The worker's number.
        incarnation: Its incarnation (a replacement's is one more).
        config: The run.
        env_factory: Builds each environment.
        server: The generation server's actor.
        learner: The learner's actor.
        record: Where finished episodes are recorded, or None.
    """

    worker: int
    incarnation: int
    config: RLConfig
    env_factory: EnvFactory
    server: Any
    learner: Any
    record: RolloutTarget | None = None

    def __call__(self) -> list[EnvSlot]:
        first = self.worker * self.config.envs_per_worker
        group = _round(self.config, self.server, self.learner)
        return [
            EnvSlot(
                first + j,
                self.worker,
                self.incarnation,
                self.config,
                self.env_factory,
                record=self.record,
                server=self.server,
                learner=self.learner,
                group=(group, j) if group is not None else None,
            )
            for j in range(self.config.envs_per_worker)
        ]


def _round(config: RLConfig, server: Any, learner: Any) -> RequestRound | None:
    """The `RequestRound` a worker's slots share, or None when they ask one by one."""
    if not config.group_requests or server is None or learner is None:
        return None
    return RequestRound(config.envs_per_worker, server, learner)


def restart_slots(config: RLConfig, slots: Sequence[Slot]) -> list[EnvSlot]:
    """`slots` started over under `config` (same layout and tasks) with fresh episode counters,
    keeping their environments (building a simulator is slow): a benchmark runs both modes on the
    same seeds without new actors (`EnvWorker.rebuild`).

    Raises:
        ValueError: `config` changes the number of environments per worker or the tasks.
    """
    old = [s for s in slots if isinstance(s, EnvSlot)]
    if len(old) != len(slots) or not old:
        raise ValueError("restart_slots restarts the slots of an RL worker")
    if config.envs_per_worker != old[0].config.envs_per_worker or config.tasks != old[0].config.tasks:
        raise ValueError("restart keeps the environments: envs_per_worker and tasks must not change")
    group = _round(config, old[0].server, old[0].learner)
    return [
        EnvSlot(
            s.env_index,
            s.worker,
            0,
            config,
            None,
            env=s.env,
            record=s.record,
            server=s.server,
            learner=s.learner,
            group=(group, j) if group is not None else None,
        )
        for j, s in enumerate(old)
    ]
