"""One Meta-World task as a robot would see it: camera image, state vector, instruction; 4-D actions.

`SimEnv` wraps a goal-observable Meta-World environment so that what a policy receives looks like
a recorded rig: an RGB frame at the training resolution, a state vector, and the task's language
instruction (`Observation`). Actions are Meta-World's 4-D commands (end-effector xyz delta and
gripper effort, each in [-1, 1]).

The state vector (`STATE_NAMES`, 19 dims) is the hand position and gripper opening, the first
object's position and the goal position, and three displacements: object - hand, goal - hand and
goal - object. The displacements are redundant on purpose: every expert here is a controller on
one of them (reach: goal - hand; push and pick-place: object - hand, then goal - object; drawer
and button: object - hand), so with them in the state a small policy learns a near-linear map
instead of having to discover the subtraction from a few hundred demonstrations (measured: with
positions alone the tiny preset reached 0.2 / 0 / 0 on reach / push / pick-place after 800 steps).
Object orientations and the padding Meta-World appends are left out: they are constant for most
tasks, and a dimension that is constant in the training data has a near-zero standard deviation,
so normalising a slightly different evaluation value by it would blow it up. The full simulator
observation stays available as `Observation.raw` for scripted experts (privileged information a
learned policy never reads).

Determinism: `reset(seed)` clears MuJoCo's data, draws the task's random initial scene from
`seed` only and freezes it, so (task, seed) fixes the episode whatever ran before in the process.
Rendering is the expensive part on a CPU (Mesa's software EGL): shadows, reflections, the skybox
and multisampling are turned off, which cuts a 64 px frame from ~75 ms to ~10 ms here, and frames
are rendered only when asked for (`render_images=False` for policies that never look).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robolake.sim._require import require_sim
from robolake.sim.contract import Env, Observation, StepResult
from robolake.sim.tasks import SimTask, resolve_tasks

__all__ = [
    "ACTION_DIM",
    "ACTION_NAMES",
    "EMBODIMENT",
    "MetaWorldEnv",
    "MetaWorldFactory",
    "Observation",
    "STATE_DIM",
    "STATE_NAMES",
    "SimEnv",
    "SimEnvConfig",
    "SimEnvFactory",
    "StepResult",
    "state_vector",
]

EMBODIMENT = "sawyer"
STATE_NAMES: tuple[str, ...] = (
    "hand_x",
    "hand_y",
    "hand_z",
    "gripper",
    "obj_x",
    "obj_y",
    "obj_z",
    "goal_x",
    "goal_y",
    "goal_z",
    "obj_hand_dx",
    "obj_hand_dy",
    "obj_hand_dz",
    "goal_hand_dx",
    "goal_hand_dy",
    "goal_hand_dz",
    "goal_obj_dx",
    "goal_obj_dy",
    "goal_obj_dz",
)
ACTION_NAMES: tuple[str, ...] = ("dx", "dy", "dz", "grip")
STATE_DIM = len(STATE_NAMES)
ACTION_DIM = len(ACTION_NAMES)


def state_vector(raw: np.ndarray) -> np.ndarray:
    """The 19-dim state (`STATE_NAMES`) of a Meta-World observation, float32.

    Meta-World's 39-dim observation: hand (0:3), gripper (3), first object (4:7), ..., goal (36:39).
    """
    r = np.asarray(raw, dtype=np.float64)
    hand, grip, obj, goal = r[0:3], r[3:4], r[4:7], r[36:39]
    return np.concatenate([hand, grip, obj, goal, obj - hand, goal - hand, goal - obj]).astype(np.float32)


@dataclass(frozen=True, kw_only=True)
class SimEnvConfig:
    """How environments render.

    Attributes:
        image_size: Side of the square RGB frame (even, for yuv420p video).
        camera: Meta-World camera name ("topview", "corner", "corner2", "corner3", ...).
        render_images: Render a frame with every observation; False leaves `Observation.image` None.
    """

    image_size: int = 64
    camera: str = "topview"
    render_images: bool = True

    def __post_init__(self) -> None:
        if self.image_size < 8 or self.image_size % 2:
            raise ValueError(f"image_size must be an even number >= 8, got {self.image_size}")


class SimEnv:
    """A seeded Meta-World task giving `Observation`s and taking 4-D actions (an `Env` whose
    episodes end only on the step limit: stopping at success is the caller's choice)."""

    action_dim = ACTION_DIM

    def __init__(self, task: SimTask, config: SimEnvConfig | None = None) -> None:
        metaworld, mujoco = require_sim()
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE

        self.task = task
        self.config = config or SimEnvConfig()
        key = f"{task.env_name}-goal-observable"
        if key not in ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE:
            raise ValueError(f"Meta-World has no environment {task.env_name!r}; check SimTask.env_name")
        self._mujoco = mujoco
        env_cls: Any = ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[key]
        self._env: Any = env_cls(seed=0)
        self._env.max_path_length = max(self._env.max_path_length, task.max_steps)
        self._renderer: Any = None
        self.steps = 0
        self.seed: int | None = None
        self._raw: np.ndarray | None = None

    # -- rendering ------------------------------------------------------------------------------

    def _render(self) -> np.ndarray:
        if self._renderer is None:
            mj = self._mujoco
            self._env.model.vis.quality.offsamples = 0
            size = self.config.image_size
            self._renderer = mj.Renderer(self._env.model, size, size)
            for flag in (mj.mjtRndFlag.mjRND_SHADOW, mj.mjtRndFlag.mjRND_REFLECTION, mj.mjtRndFlag.mjRND_SKYBOX):
                self._renderer.scene.flags[flag] = 0
        self._renderer.update_scene(self._env.data, camera=self.config.camera)
        frame = self._renderer.render()
        # MuJoCo's "corner" cameras come out upside down; the top view does not.
        return np.ascontiguousarray(frame[::-1] if self.config.camera.startswith("corner") else frame)

    def render(self) -> np.ndarray:
        """The current camera frame, uint8 [image_size, image_size, 3] (even with render_images off)."""
        return self._render()

    def _observation(self, raw: np.ndarray) -> Observation:
        self._raw = raw
        image = self._render() if self.config.render_images else None
        return Observation(image, state_vector(raw), self.task.instruction, raw.copy(), self.task.name)

    def observe(self) -> Observation:
        """The current observation with its camera frame (even with render_images off).

        Raises:
            RuntimeError: called before `reset`.
        """
        if self._raw is None:
            raise RuntimeError("call SimEnv.reset(seed) before observe()")
        raw = self._raw
        return Observation(self._render(), state_vector(raw), self.task.instruction, raw.copy(), self.task.name)

    # -- episode --------------------------------------------------------------------------------

    def reset(self, seed: int) -> Observation:
        """Start the episode of `seed` (the same seed always gives the same initial scene)."""
        env = self._env
        self._mujoco.mj_resetData(env.model, env.data)
        env._freeze_rand_vec = False
        env.seeded_rand_vec = True
        env.seed(int(seed))
        raw, _ = env.reset()
        env._freeze_rand_vec = True
        self.steps, self.seed = 0, int(seed)
        return self._observation(np.asarray(raw, dtype=np.float64))

    def step(self, action: np.ndarray) -> StepResult:
        """Apply one action (clipped to [-1, 1]).

        Raises:
            RuntimeError: called before `reset` or after the step limit.
        """
        if self.seed is None:
            raise RuntimeError("call SimEnv.reset(seed) before step()")
        if self.steps >= self.task.max_steps:
            raise RuntimeError(f"episode of {self.task.name} is over ({self.task.max_steps} steps); reset it")
        a = np.clip(np.asarray(action, dtype=np.float32).reshape(-1)[:ACTION_DIM], -1.0, 1.0)
        raw, reward, _, _, info = self._env.step(a)
        self.steps += 1
        obs = self._observation(np.asarray(raw, dtype=np.float64))
        over = self.steps >= self.task.max_steps
        success = bool(info.get("success", 0.0) > 0.5)
        return StepResult(observation=obs, reward=float(reward), success=success, done=over, truncated=over)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._env.close()


@dataclass(frozen=True)
class SimEnvFactory:
    """`EnvFactory` of `SimEnv` for a set of tasks (picklable and hashable: a slot keeps one
    environment per factory and task).

    Attributes:
        tasks: The tasks it builds (their step limits as given).
        config: Rendering settings of every environment.
    """

    tasks: tuple[SimTask, ...]
    config: SimEnvConfig = field(default_factory=SimEnvConfig)

    def __call__(self, task: str) -> SimEnv:
        """Raises: ValueError when `task` is not one of `tasks`."""
        for t in self.tasks:
            if t.name == task:
                return SimEnv(t, self.config)
        raise ValueError(f"task {task!r} is not one of this factory's tasks {[t.name for t in self.tasks]}")

    def rendering(self, render: bool) -> SimEnvFactory:
        """The same factory with `render_images` set to `render`."""
        return dataclasses.replace(self, config=dataclasses.replace(self.config, render_images=render))


class MetaWorldEnv:
    """A suite task as the episodic `Env` RL drives: it renders only when observed (views
    [1, H, W, 3], once per chunk rather than once per step: rendering is what a CPU simulator
    spends its time on) and ends an episode at its first success, as the evaluator does."""

    def __init__(self, task: str, image_size: int = 64, camera: str = "topview") -> None:
        (spec,) = resolve_tasks([task])
        self.task = spec.name
        self.instruction = spec.instruction
        self.action_dim = ACTION_DIM
        self._env = SimEnv(spec, SimEnvConfig(image_size=image_size, camera=camera, render_images=False))
        self._state = np.zeros(0, np.float32)

    def reset(self, seed: int) -> Observation:
        self._state = self._env.reset(seed).state
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        r = self._env.step(action)
        self._state = r.observation.state
        return StepResult(
            observation=r.observation,
            reward=r.reward,
            success=r.success,
            done=r.success or r.truncated,
            truncated=r.truncated and not r.success,
        )

    def observe(self) -> Observation:
        return Observation(image=self._env.render()[None], state=self._state, instruction=self.instruction)

    def close(self) -> None:
        self._env.close()


@dataclass(frozen=True)
class MetaWorldFactory:
    """`EnvFactory` of `MetaWorldEnv` (picklable).

    Attributes:
        image_size: Rendered frame side (the recorded demonstrations' resolution).
        camera: Meta-World camera.
    """

    image_size: int = 64
    camera: str = "topview"

    def __call__(self, task: str) -> Env:
        return MetaWorldEnv(task, self.image_size, self.camera)
