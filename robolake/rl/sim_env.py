"""The simulator suite of robolake.sim behind the RL pipeline's environment and policy protocols.

`MetaWorldFactory` builds `MetaWorldEnv`s: a `robolake.sim.SimEnv` that renders only when the
policy asks for an observation (once per chunk, not once per step: rendering is what a CPU
simulator spends its time on) and ends an episode at its first success, as the evaluator does.

`SimPolicyFactory` loads a trained checkpoint with `robolake.sim.learned.LearnedPolicy` and
exposes it as an RL `Policy`: the batch is `LearnedPolicy.build_batch` (the frame resized as the
loader resizes, the lake's state normalisation, the pack's tokenizer and embodiment id) and actions
leave through `LearnedPolicy.unnormalize`, so RL acts on exactly the inputs and outputs the
closed-loop evaluator uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from robolake.rl.env import Env, Observation, StepResult
from robolake.schemas.batch import PackedBatch

__all__ = ["MetaWorldEnv", "MetaWorldFactory", "SimPolicy", "SimPolicyFactory"]


class MetaWorldEnv:
    """A robolake.sim task as an RL `Env` (see the module docstring)."""

    def __init__(self, task: str, image_size: int, camera: str) -> None:
        from robolake.sim import SimEnv, SimEnvConfig, resolve_tasks

        (spec,) = resolve_tasks([task])
        self.task = spec.name
        self.instruction = spec.instruction
        self.action_dim = 4
        self._env = SimEnv(spec, SimEnvConfig(image_size=image_size, camera=camera, render_images=False))
        self._state = np.zeros(0, np.float32)

    def reset(self, seed: int) -> Observation:
        self._state = self._env.reset(seed).state
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        r = self._env.step(action)
        self._state = r.observation.state
        return StepResult(
            reward=r.reward, success=r.success, done=r.success or r.truncated, truncated=r.truncated and not r.success
        )

    def observe(self) -> Observation:
        return Observation(image=self._env.render()[None], state=self._state, instruction=self.instruction)

    def close(self) -> None:
        self._env.close()


@dataclass(frozen=True)
class MetaWorldFactory:
    """EnvFactory of `MetaWorldEnv` (picklable).

    Attributes:
        image_size: Rendered frame side (the recorded demonstrations' resolution).
        camera: Meta-World camera.
    """

    image_size: int = 64
    camera: str = "topview"

    def __call__(self, task: str) -> Env:
        return MetaWorldEnv(task, self.image_size, self.camera)


def _sim_observation(o: Observation) -> Any:
    from robolake.sim import Observation as SimObservation

    return SimObservation(o.image[0] if o.image.ndim == 4 else o.image, o.state, o.instruction, np.zeros(0), "")


class SimPolicy:
    """`LearnedPolicy` as an RL Policy."""

    def __init__(self, learned: Any) -> None:
        self.learned = learned
        self.model = learned.model

    def batch(self, observations: Sequence[Observation]) -> PackedBatch:
        batch: PackedBatch = self.learned.build_batch([_sim_observation(o) for o in observations])
        return batch.to("cpu")

    def action_mask(self, observations: Sequence[Observation]) -> torch.Tensor:
        mask: torch.Tensor = self.learned.batcher.action_mask(len(observations))
        return mask

    def to_env_actions(self, chunks: np.ndarray, observations: Sequence[Observation]) -> list[np.ndarray]:
        out = self.learned.unnormalize(torch.from_numpy(np.asarray(chunks)))
        return [np.asarray(a, np.float32) for a in out]


@dataclass(frozen=True)
class SimPolicyFactory:
    """PolicyFactory of a checkpoint (file, checkpoints directory or run directory) as a `SimPolicy`."""

    checkpoint: str

    def __call__(self) -> SimPolicy:
        from robolake.sim.learned import LearnedPolicy

        return SimPolicy(LearnedPolicy.from_checkpoint(self.checkpoint))
