"""A tiny real environment for tests, speaking the closed-loop contract (`robolake.sim.contract`).

The RL pipeline drives any `Env` of the contract: reset with a seed (the same seed gives the same
episode under the same actions), stepped one action at a time, and observed only when the policy
needs an observation: once per action chunk. Rendering is what costs in a simulator, so `step`
does not render; `observe` does.

`PointReachEnv` is a real environment, not a mock of one: a point in the plane that must reach
the goal its instruction names, rendered into a small image. It costs microseconds per step, so
scheduler tests run hundreds of episodes in seconds, and its expert (`PointReachEnv.expert`) lets
a behaviour-cloned start policy be trained for it in the same test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robolake.sim.contract import Env, Observation, StepResult

__all__ = ["PointReachEnv", "PointReachFactory"]


_GOALS = {
    "reach-left": (-0.6, 0.0),
    "reach-right": (0.6, 0.0),
    "reach-up": (0.0, 0.6),
    "reach-down": (0.0, -0.6),
}


class PointReachEnv:
    """A point mass reaching the goal named by its instruction (tasks: see `PointReachEnv.TASKS`).

    State: [x, y]. Action: [dx, dy] in [-1, 1], moving the point by `speed * action`. Success:
    within `radius` of the goal; the episode ends on success or after `max_steps`. Reward: 1 on
    the step that succeeds, otherwise minus the distance to the goal. The image (1 view,
    `image_size` square) marks the point in white on a grey floor.
    """

    TASKS = tuple(_GOALS)

    def __init__(
        self, task: str, *, max_steps: int = 40, image_size: int = 32, speed: float = 0.05, radius: float = 0.12
    ) -> None:
        if task not in _GOALS:
            raise ValueError(f"unknown point-reach task {task!r}; choose one of {sorted(_GOALS)}")
        self.task = task
        self.action_dim = 2
        self.max_steps = max_steps
        self.image_size = image_size
        self.speed = speed
        self.radius = radius
        self.goal = np.asarray(_GOALS[task], dtype=np.float32)
        self.pos = np.zeros(2, np.float32)
        self.t = 0

    @property
    def instruction(self) -> str:
        return f"move the point {self.task.split('-')[1]}"

    def reset(self, seed: int) -> Observation:
        rng = np.random.default_rng(seed)
        self.pos = rng.uniform(-0.3, 0.3, size=2).astype(np.float32)
        self.t = 0
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        a = np.clip(np.asarray(action, dtype=np.float32)[:2], -1.0, 1.0)
        self.pos = np.clip(self.pos + self.speed * a, -1.0, 1.0).astype(np.float32)
        self.t += 1
        success = bool(np.linalg.norm(self.pos - self.goal) < self.radius)
        timeout = self.t >= self.max_steps
        return StepResult(
            observation=Observation(image=None, state=self.pos.copy(), instruction=self.instruction),
            # shaped, so that a return separates episodes that all fail (LearnerConfig.reward)
            reward=1.0 if success else -float(np.linalg.norm(self.pos - self.goal)),
            success=success,
            done=success or timeout,
            truncated=timeout and not success,
        )

    def observe(self) -> Observation:
        s = self.image_size
        img = np.full((1, s, s, 3), 96, dtype=np.uint8)
        px = np.clip(((self.pos + 1.0) / 2.0 * (s - 1)).round().astype(int), 0, s - 1)
        img[0, max(px[1] - 1, 0) : px[1] + 2, max(px[0] - 1, 0) : px[0] + 2] = 255
        return Observation(image=img, state=self.pos.copy(), instruction=self.instruction)

    def expert(self) -> np.ndarray:
        """The scripted expert's next action: straight at the goal at full speed."""
        d = self.goal - self.pos
        return np.clip(d / max(self.speed, 1e-6), -1.0, 1.0).astype(np.float32)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class PointReachFactory:
    """EnvFactory of `PointReachEnv` (picklable)."""

    max_steps: int = 40
    image_size: int = 32

    def __call__(self, task: str) -> Env:
        return PointReachEnv(task, max_steps=self.max_steps, image_size=self.image_size)
