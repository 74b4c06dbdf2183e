"""The closed-loop contract: what an environment gives, what it takes, and what acts on it.

Three loops close over environments in robolake: the evaluator (`robolake eval`, a policy
against the suite's evaluation seeds), the recorder (a scripted expert writing demonstrations,
or rollouts written into a lake) and RL (`robolake rl`, environments feeding a generation server
and a learner). They used to have a contract each, so that a new observation field was two
changes and a glue module translated one `Observation` into the other. Here is the one contract
they all speak; a change of observation format is one change, made here.

- `Observation`: what a policy sees at one step: camera frames, the state vector, the language
  instruction, and (for scripted experts only) the simulator's privileged raw observation and
  the task's short name.
- `StepResult`: the outcome of one action: the observation after it (whose image is None unless
  the environment renders every step), the reward, the task's success flag, and whether the
  episode is over (`done`) and ended on its step limit (`truncated`).
- `Env`: a seeded episodic environment: `reset(seed)`, `step(action)`, `observe()` (the
  observation with its camera frames: rendering is what a simulator spends its time on, so an
  environment may render only when asked), `close()`. `EnvFactory` builds one for a task name
  inside a worker, so it must be picklable.
- `Policy`: batched observations in, batched action chunks in the environment's units out,
  `act(observations) -> [n, H, action_dim]`: one call per tick for every environment, whatever
  its task, so that a learned policy runs one forward pass instead of n. Executing a chunk is the
  caller's business, so a policy keeps no per-environment state. RL's trainable policies add the
  model side (`robolake.rl.policy.TrainablePolicy`) on top of the same observations.

This module imports numpy and the standard library only: it is the part of `robolake.sim` that
needs neither the simulator (the `sim` extra) nor Ray, so `robolake.rl` and the built-in
`PointReachEnv` use it without Meta-World installed.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Env", "EnvFactory", "Observation", "Policy", "StepResult"]


@dataclass(frozen=True)
class Observation:
    """What a policy sees at one step.

    Attributes:
        image: uint8 camera frames: [H, W, 3] for an environment with one camera (the
            simulator's `SimEnv`), [V, H, W, 3] for V views (an `Env` built for RL); None when
            the environment did not render this observation.
        state: float32 [state_dim] state vector in the environment's units.
        instruction: The task's language instruction.
        raw: The simulator's full observation (privileged: for scripted experts only), or None.
        task: The task's short name ("" when the environment does not say).
    """

    image: np.ndarray | None
    state: np.ndarray
    instruction: str
    raw: np.ndarray | None = None
    task: str = ""


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """Outcome of one `Env.step`.

    Attributes:
        observation: The observation after the action (image None unless the environment
            renders every step; `Env.observe` renders).
        reward: The environment's reward for this step.
        success: The task's success flag at this step.
        done: The episode is over: it ended by itself (an environment that ends on success) or
            on its step limit. Stepping a done episode again is an error.
        truncated: It ended on its step limit rather than by itself.
    """

    observation: Observation
    reward: float
    success: bool
    done: bool
    truncated: bool


@runtime_checkable
class Env(Protocol):
    """A seeded episodic environment: the same seed and actions give the same episode.

    Attributes:
        action_dim: Width of the actions `step` takes.
    """

    action_dim: int

    def reset(self, seed: int) -> Observation:
        """Start the episode of `seed`; its first observation, rendered."""
        ...

    def step(self, action: np.ndarray) -> StepResult:
        """Apply one action."""
        ...

    def observe(self) -> Observation:
        """The current observation with its camera frames."""
        ...

    def close(self) -> None: ...


class EnvFactory(Protocol):
    """Builds one environment for a task (by short name) inside a worker; must be picklable."""

    def __call__(self, task: str) -> Env: ...


class Policy(abc.ABC):
    """Batched observations -> batched action chunks (see the module docstring).

    Attributes:
        name: Label in reports ("expert", "random", "policy").
        needs_images: Whether `act` reads `Observation.image` (environments skip rendering if not).
        chunk_size: H, actions per chunk that `act` returns.
    """

    name: str = "policy"
    needs_images: bool = False
    chunk_size: int = 1

    @abc.abstractmethod
    def act(self, observations: Sequence[Observation]) -> np.ndarray:
        """float32 [len(observations), chunk_size, action_dim] actions in environment units."""
