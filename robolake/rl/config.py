"""Configuration of an RL run: the pipeline's shape, each component's knobs and resources.

Every Ray actor gets its CPUs, GPUs and custom resources from a `Resources` value here, never
from a constant in the code, so the same run moves from a laptop (fractions of two cores) to a
cluster (`address="auto"`, a GPU for the learner and one for the generation server) by changing
the config alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "GenerationConfig",
    "LatencyProfile",
    "LearnerConfig",
    "RLConfig",
    "Resources",
    "SamplerConfig",
]

MODES = ("async", "sync")


@dataclass(frozen=True, kw_only=True)
class Resources:
    """Ray resources one actor asks for.

    Attributes:
        num_cpus: CPUs (fractions allowed: several actors may share a core).
        num_gpus: GPUs (fractions allowed). An actor given a GPU runs its model on it.
        custom: Custom resources, e.g. {"node:10.0.0.2": 0.01} to pin an actor to a node.
    """

    num_cpus: float = 0.25
    num_gpus: float = 0.0
    custom: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.num_cpus < 0 or self.num_gpus < 0 or any(v < 0 for v in self.custom.values()):
            raise ValueError(
                f"resources must be >= 0, got num_cpus={self.num_cpus} num_gpus={self.num_gpus} custom={self.custom}"
            )

    def ray_options(self) -> dict[str, Any]:
        """Keyword arguments for `ActorClass.options(...)`."""
        opts: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.custom:
            opts["resources"] = dict(self.custom)
        return opts


@dataclass(frozen=True, kw_only=True)
class SamplerConfig:
    """The stochastic Euler sampler whose chains the policy gradient scores (see sampler.py).

    Attributes:
        num_steps: Euler steps per action chunk (None: the model's `num_inference_steps`).
        sigma: Standard deviation of the Gaussian noise added after every Euler step, in
            normalised action units (the lake's mean/std normalisation). From a 600-step BC
            policy, 30k env steps of async RL on reach took the evaluator's success on the same
            40 episodes from 0.30 to 0.53 at sigma 0.1 and to 0.65 at 0.2 (the default).
        start_noise: Scale of the chain's starting point x_0 ~ N(0, start_noise^2 I). 0 (the
            default) starts every chain where the closed-loop evaluator does (its
            `noise_scale` is 0), so all exploration is the per-step noise the policy gradient
            scores. At 1, most of the variation in executed actions comes from x_0, whose
            density does not depend on the weights: the lucky x_0 behind a success earns no
            gradient. The same reach run at start_noise 1 (sigma 0.1) ended at 0.35.
    """

    num_steps: int | None = None
    sigma: float = 0.2
    start_noise: float = 0.0

    def __post_init__(self) -> None:
        if self.num_steps is not None and self.num_steps < 1:
            raise ValueError(f"SamplerConfig.num_steps must be >= 1 or None, got {self.num_steps}")
        if not self.sigma > 0:
            raise ValueError(f"SamplerConfig.sigma must be > 0 (the log-probability needs noise), got {self.sigma}")
        if self.start_noise < 0:
            raise ValueError(f"SamplerConfig.start_noise must be >= 0, got {self.start_noise}")


@dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """The generation server's dynamic batching.

    Attributes:
        max_batch: A batch closes as soon as it holds this many observations (or every
            environment of the run, when there are fewer).
        deadline_s: ...or this long after its first observation arrived, whichever comes first.
        round_deadline_s: The same for a batch that starts with a worker's round of requests
            (`RLConfig.group_requests`): the longest it waits for the other workers' rounds.
            Normally a batch closes before, when every worker's round is in; the deadline is a
            safety net for a worker that died. At 50 ms, on 2 cores under a load of ~25, the
            drift between two workers' rounds often exceeded it and batches averaged 4.6 of 8
            (async acting CPU +23% over sync's); at 500 ms they averaged 7.8-8.0 (see
            generation.py).
        resources: Ray resources of the server actor.
        torch_threads: torch intra-op threads in the server process.
    """

    max_batch: int = 16
    deadline_s: float = 0.005
    round_deadline_s: float = 0.5
    resources: Resources = field(default_factory=lambda: Resources(num_cpus=0.5))
    torch_threads: int = 1

    def __post_init__(self) -> None:
        if self.max_batch < 1 or self.deadline_s < 0 or self.round_deadline_s < 0 or self.torch_threads < 1:
            raise ValueError(
                f"need max_batch >= 1, deadline_s >= 0, round_deadline_s >= 0, torch_threads >= 1; got "
                f"{self.max_batch}, {self.deadline_s}, {self.round_deadline_s}, {self.torch_threads}"
            )


@dataclass(frozen=True, kw_only=True)
class LearnerConfig:
    """The learner: streamed micro-batches, PPO-clipped objective, bounded staleness.

    Attributes:
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        grad_clip: Max global gradient norm.
        micro_batch: Action chunks per micro-batch (one forward/backward).
        micro_batches_per_update: Micro-batches accumulated per optimizer step; every step
            publishes a new weight version.
        clip_eps: PPO ratio clip range (per denoising step).
        max_staleness: K: a chunk generated by a policy more than K versions older than the
            learner's is dropped ("drop") or importance-corrected ("correct").
        staleness_mode: "drop" or "correct" (truncated importance weight, see objective.py).
            "drop" by default. It discards a lot: the reward is per episode, so a chunk waits
            for its episode to end, and an episode of ~20 chunks in 8 environments spans ~10
            updates of 16 chunks (a Meta-World reach run with K = 2 dropped 2,150 chunks and
            trained on 1,527). But it keeps the learner current: when the learner is slower
            than generation, "correct" trains on the whole backlog, falls further behind
            (mean staleness 22 versions in the same run) and the corrected updates ruined the
            policy (reach success 0.28 -> 0.00, against 0.28 -> 0.60 with "drop").
        is_truncation: Cap of the importance weight in "correct" mode.
        group_window: Episodes per task in the group whose returns normalise an episode's
            advantage (the group-relative baseline).
        min_group: Fewer finished episodes of a task than this: advantage 0 (no gradient yet).
        resources: Ray resources of the learner actor.
        torch_threads: torch intra-op threads in the learner process.
        freeze_backbone: Train only the action head (state encoder, DiT, action decoder).
        reward: What an episode's advantage is computed from: "success" (the task's success
            flag, the objective RL fine-tuning optimises) or "return" (the sum of the
            environment's per-step rewards: Meta-World's shaped reward). From an untrained
            policy every episode fails, every success-group has zero spread and the learner
            never updates; "return" gives every episode its own value, which is what `robolake
            bench rl` uses without `--init` so that the learner's work is part of what it times.
    """

    lr: float = 1e-5
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch: int = 16
    micro_batches_per_update: int = 1
    clip_eps: float = 0.2
    max_staleness: int = 2
    staleness_mode: Literal["drop", "correct"] = "drop"
    is_truncation: float = 2.0
    group_window: int = 32
    min_group: int = 4
    resources: Resources = field(default_factory=lambda: Resources(num_cpus=0.5))
    torch_threads: int = 1
    freeze_backbone: bool = False
    reward: Literal["success", "return"] = "success"

    def __post_init__(self) -> None:
        if self.reward not in ("success", "return"):
            raise ValueError(f"LearnerConfig.reward must be 'success' or 'return', got {self.reward!r}")
        if not self.lr > 0 or self.grad_clip <= 0 or self.weight_decay < 0:
            raise ValueError(
                f"need lr > 0, grad_clip > 0, weight_decay >= 0; got {self.lr}, {self.grad_clip}, {self.weight_decay}"
            )
        if self.micro_batch < 1 or self.micro_batches_per_update < 1:
            raise ValueError("LearnerConfig.micro_batch and micro_batches_per_update must be >= 1")
        if not 0 < self.clip_eps < 1:
            raise ValueError(f"LearnerConfig.clip_eps must be in (0, 1), got {self.clip_eps}")
        if self.max_staleness < 0:
            raise ValueError(f"LearnerConfig.max_staleness must be >= 0, got {self.max_staleness}")
        if self.staleness_mode not in ("drop", "correct"):
            raise ValueError(f"LearnerConfig.staleness_mode must be 'drop' or 'correct', got {self.staleness_mode!r}")
        if self.is_truncation < 1:
            raise ValueError(f"LearnerConfig.is_truncation must be >= 1, got {self.is_truncation}")
        if self.group_window < 2 or not 2 <= self.min_group <= self.group_window:
            raise ValueError(
                f"need group_window >= 2 and 2 <= min_group <= group_window; got {self.group_window}, {self.min_group}"
            )
        if self.torch_threads < 1:
            raise ValueError(f"LearnerConfig.torch_threads must be >= 1, got {self.torch_threads}")


@dataclass(frozen=True, kw_only=True)
class LatencyProfile:
    """Extra per-step delay injected in the environment worker (emulates long-tailed simulators).

    Attributes:
        kind: "none", "lognormal" (median `scale_s`, log-std `shape`) or "pareto" (minimum
            `scale_s`, tail index `shape`; smaller is heavier).
        scale_s: Scale of the delay in seconds.
        shape: Shape parameter (see `kind`).
        cap_s: Upper bound of one delay (a stuck simulator is a fault, not latency).
    """

    kind: Literal["none", "lognormal", "pareto"] = "none"
    scale_s: float = 0.002
    shape: float = 1.0
    cap_s: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("none", "lognormal", "pareto"):
            raise ValueError(f"LatencyProfile.kind must be none, lognormal or pareto, got {self.kind!r}")
        if self.scale_s < 0 or self.shape <= 0 or self.cap_s <= 0:
            raise ValueError("LatencyProfile needs scale_s >= 0, shape > 0, cap_s > 0")

    def draw(self, rng: Any) -> float:
        """One delay in seconds from numpy Generator `rng`."""
        if self.kind == "none" or self.scale_s == 0:
            return 0.0
        if self.kind == "lognormal":
            d = self.scale_s * math.exp(self.shape * float(rng.standard_normal()))
        else:
            d = self.scale_s * (1.0 + float(rng.pareto(self.shape)))
        return min(d, self.cap_s)


@dataclass(frozen=True, kw_only=True)
class RLConfig:
    """One RL run.

    Attributes:
        mode: "async" (components run decoupled) or "sync" (lockstep: step all envs, generate,
            update).
        tasks: Task names; environment i runs tasks[i % len(tasks)].
        num_workers: Environment worker actors.
        envs_per_worker: Environments each worker holds.
        env_steps: Budget: the run ends once this many environment steps were taken.
        execute_steps: Actions executed from each chunk before asking for the next one
            (the replanning horizon; <= the model's action horizon).
        max_episode_steps: End an episode (as a failure, unless it succeeded) after this many
            env steps, below the task's own limit; None: the task's limit. Short episodes give
            a short run finished episodes to learn from (`robolake bench rl --quick`).
        group_requests: Asynchronous mode: each worker sends the generation requests of its
            environments together, one call per round of its environments, and their finished
            pieces in one call to the learner; workers, the server and the learner still never
            wait for each other. False: one call per environment and chunk, so a slow
            environment never holds up its worker's other environments (the heavy-tail case),
            at Ray's per-call CPU cost (~1.7 ms a call on 2 shared cores, ~0.2 ms per env step
            at 8 steps a chunk) and smaller generation batches.
        segment_chunks: An episode travels to the learner in pieces of at most this many
            chunks, so a lost worker costs at most one piece.
        seed: Seeds episode resets (per environment and episode) and sampling noise (per chunk).
        sampler: The stochastic Euler sampler.
        generation: The generation server.
        learner: The learner.
        worker_resources: Ray resources of each environment worker.
        latency: Delay profile injected per environment step.
        learn: False runs rollouts only (no updates): for evaluation and tests.
        log_every_s: Seconds between metric rows.
        ray_address: Ray cluster address (None: a local Ray, or the one already started).
        record_trajectories: Keep every transition the learner receives (tests compare them).
    """

    mode: Literal["async", "sync"] = "async"
    tasks: tuple[str, ...]
    num_workers: int = 2
    envs_per_worker: int = 4
    env_steps: int = 10_000
    execute_steps: int = 8
    max_episode_steps: int | None = None
    group_requests: bool = True
    segment_chunks: int = 8
    seed: int = 0
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    worker_resources: Resources = field(default_factory=lambda: Resources(num_cpus=0.25))
    latency: LatencyProfile = field(default_factory=LatencyProfile)
    learn: bool = True
    log_every_s: float = 2.0
    ray_address: str | None = None
    record_trajectories: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"RLConfig.mode must be one of {MODES}, got {self.mode!r}")
        if not self.tasks:
            raise ValueError("RLConfig.tasks is empty; name at least one task")
        for name in ("num_workers", "envs_per_worker", "env_steps", "execute_steps", "segment_chunks"):
            if getattr(self, name) < 1:
                raise ValueError(f"RLConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(f"RLConfig.max_episode_steps must be >= 1 or None, got {self.max_episode_steps}")
        if self.log_every_s <= 0:
            raise ValueError(f"RLConfig.log_every_s must be > 0, got {self.log_every_s}")

    @property
    def num_envs(self) -> int:
        return self.num_workers * self.envs_per_worker

    def task_of(self, env_index: int) -> str:
        """The task environment `env_index` (global, 0-based) runs."""
        return self.tasks[env_index % len(self.tasks)]
