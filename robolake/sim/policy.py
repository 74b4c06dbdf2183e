"""The baseline policies of the suite.

Each is a `robolake.sim.contract.Policy` (`act(observations) -> [n, H, ACTION_DIM]`, one call per
tick for every environment), the interface the evaluator, the recorder and RL share.

Baselines:
- `ExpertPolicy`, Meta-World's scripted experts (the ceiling; they read the privileged `raw`
  observation), with optional Gaussian action noise (the demonstrator of the recorder).
- `RandomPolicy`, uniform actions in [-1, 1], and `MeanActionPolicy`, the training data's mean
  action: the floor, what "learned nothing" scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robolake.sim.contract import Observation, Policy
from robolake.sim.env import ACTION_DIM
from robolake.sim.tasks import SUITE

__all__ = ["Policy", "ExpertPolicy", "RandomPolicy", "MeanActionPolicy"]


class ExpertPolicy(Policy):
    """Meta-World's scripted expert of each observation's task, with optional action noise.

    Args:
        noise: Std of Gaussian noise added to every action (then clipped to [-1, 1]).
        seed: Seed of the noise.
    """

    name = "expert"

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self._experts: dict[str, object] = {}

    def _expert(self, task: str) -> object:
        if task not in self._experts:
            from robolake.sim._require import require_sim

            require_sim()
            from metaworld import policies

            self._experts[task] = getattr(policies, SUITE[task].expert)()
        return self._experts[task]

    def act(self, observations: Sequence[Observation]) -> np.ndarray:
        out = np.zeros((len(observations), 1, ACTION_DIM), np.float32)
        for i, obs in enumerate(observations):
            out[i, 0] = self._expert(obs.task).get_action(obs.raw)  # type: ignore[attr-defined]
        if self.noise > 0:
            out += self.rng.normal(0.0, self.noise, out.shape).astype(np.float32)
        return np.clip(out, -1.0, 1.0)


class RandomPolicy(Policy):
    """Uniform random actions in [-1, 1] (a floor)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observations: Sequence[Observation]) -> np.ndarray:
        return self.rng.uniform(-1.0, 1.0, (len(observations), 1, ACTION_DIM)).astype(np.float32)


class MeanActionPolicy(Policy):
    """Always the training data's mean action (the floor a regression to the mean scores)."""

    name = "mean-action"

    def __init__(self, mean_action: np.ndarray) -> None:
        mean = np.asarray(mean_action, dtype=np.float32).reshape(-1)
        if mean.shape != (ACTION_DIM,):
            raise ValueError(f"mean_action must have {ACTION_DIM} values, got {mean.shape}")
        self.mean = mean

    def act(self, observations: Sequence[Observation]) -> np.ndarray:
        return np.broadcast_to(self.mean, (len(observations), 1, ACTION_DIM)).copy()
