"""The values that travel between the pipeline's actors (all plain, picklable dataclasses).

env worker --GenRequest--> generation server --GenResponse--> env worker
env worker --Segment (pieces of an episode, Transitions)--> learner --weights by version--> server
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robolake.sim.contract import Observation

__all__ = ["EpisodeKey", "EpisodeRecord", "GenRequest", "GenResponse", "Segment", "Transition", "chunk_seed"]


def chunk_seed(seed: int, env_index: int, incarnation: int, episode: int, chunk: int) -> int:
    """Sampling-noise seed of one chunk: a function of where it sits, never of its batch."""
    h = seed
    for v in (env_index, incarnation, episode, chunk):
        h = (h * 1_000_003 + v + 1) % (2**61 - 1)
    return h


@dataclass(frozen=True, order=True)
class EpisodeKey:
    """Identifies one episode of the run.

    Attributes:
        env_index: Global environment index (worker * envs_per_worker + slot).
        incarnation: How many times that environment's worker was replaced before this episode.
        episode: Episode counter of that environment within its incarnation.
    """

    env_index: int
    incarnation: int
    episode: int

    def __str__(self) -> str:
        return f"env{self.env_index}.{self.incarnation}.ep{self.episode}"


@dataclass(frozen=True)
class GenRequest:
    """One observation asking for an action chunk."""

    key: EpisodeKey
    chunk: int
    obs: Observation
    noise_seed: int

    @property
    def request_id(self) -> str:
        return f"{self.key}.c{self.chunk}"


@dataclass(frozen=True)
class GenResponse:
    """The chunk generated for one request.

    Attributes:
        request_id: The request's id (so the env can check it got its own answer).
        actions: float32 [H, action_dim] in environment units.
        chain: float32 [K+1, H, max_action_dim] the denoising chain (normalised).
        logp: float32 [K] step log-probabilities under the generating policy.
        version: Weight version that generated it.
        batch_size: Size of the batch it was generated in.
    """

    request_id: str
    actions: np.ndarray
    chain: np.ndarray
    logp: np.ndarray
    version: int
    batch_size: int


@dataclass(frozen=True)
class Transition:
    """One executed action chunk: what the learner scores."""

    obs: Observation
    chain: np.ndarray
    logp: np.ndarray
    version: int
    chunk: int
    env_steps: int


@dataclass(frozen=True)
class Segment:
    """A piece of an episode sent to the learner.

    The first piece of every episode (piece 0) is sent at reset, before any step, so the learner
    knows of every episode that started: one lost with its worker is recorded as truncated.

    Attributes:
        key: The episode.
        task: Its task.
        env_seed: The seed it was reset with.
        worker: Index of the worker running it.
        piece: 0, 1, ... in order.
        transitions: Chunks executed since the previous piece.
        final: The episode ended with this piece.
        success: It succeeded (meaningful when final).
        ret: The episode's return, the sum of its per-step rewards (meaningful when final).
        truncated: It ended without an outcome (time limit counts as an outcome: failure;
            truncated means the run's budget ended or its worker was lost).
    """

    key: EpisodeKey
    task: str
    env_seed: int
    worker: int
    piece: int
    transitions: tuple[Transition, ...] = ()
    final: bool = False
    success: bool = False
    truncated: bool = False
    ret: float = 0.0


@dataclass
class EpisodeRecord:
    """The learner's ledger entry of one episode."""

    key: EpisodeKey
    task: str
    env_seed: int
    worker: int
    env_steps: int = 0
    chunks: int = 0
    success: bool = False
    ret: float = 0.0
    status: str = "running"  # running | finished | truncated
    reason: str = ""
    finished_at_env_steps: int = 0
    transitions: list[Transition] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        return {
            "episode": str(self.key),
            "task": self.task,
            "env_seed": self.env_seed,
            "worker": self.worker,
            "env_steps": self.env_steps,
            "chunks": self.chunks,
            "success": self.success,
            "return": self.ret,
            "status": self.status,
            "reason": self.reason,
            "finished_at_env_steps": self.finished_at_env_steps,
        }
