"""Simulated tasks, scripted experts that record demonstrations, and closed-loop evaluation.

Behind the `sim` extra (`pip install 'robolake[sim]'`: Meta-World on MuJoCo, rendered offscreen
with EGL). Importing this package needs only numpy; building an environment imports the simulator
and raises an ImportError naming the extra when it is missing.

The API, bottom up:

- `tasks`: the suite (`SUITE`, `DEFAULT_TASKS`, `resolve_tasks`), one instruction per task, and
  the disjoint seed ranges of demonstrations (`TRAIN_SEEDS`) and evaluation (`EVAL_SEEDS`).
- `contract`: the one closed-loop contract the evaluator, the recorder and robolake.rl share
  (numpy only): `Observation` {image, state, instruction, raw, task}, `StepResult`, the `Env`
  protocol and its `EnvFactory`, and `Policy`, `act(observations) -> [n, H, action_dim]` (one
  batched call for every environment of a tick).
- `env`: `SimEnv(task, SimEnvConfig)`, an `Env` of one Meta-World task; `MetaWorldFactory`, the
  episodic `Env` RL drives (renders when observed, ends at success). One embodiment,
  `EMBODIMENT` ("sawyer"), 19-dim state, 4-dim action.
- `policy`: baselines `ExpertPolicy` (ceiling), `RandomPolicy` and `MeanActionPolicy` (floors).
- `learned`: `LearnedPolicy.from_checkpoint(run_dir)`, a trained checkpoint as a Policy, with the
  lake's normalisation applied on the way in and undone on the way out (`build_batch` exposes the
  exact model inputs, for RL).
- `worker`: `EnvWorker`, the one environment worker (a Ray actor or a local object) every closed
  loop runs its environments in: `Slot`s built by an `EnvFactory`, one thread each or the
  caller's, lockstep (`begin`/`advance`/`finish`) or free-running (`run`/`stop`) verbs, and the
  per-process CPU accounting `robolake bench rl` reports.
- `rollout`: `EnvPool` (workers started once, shared by several rollouts) and
  `rollout(policy, specs, RolloutConfig, pool=)`, the synchronous closed loop with a replanning
  horizon.
- `recorder`: `record_demos(out, RecordConfig)`, expert demonstrations under actuation noise
  recorded on Ray actors, deterministic for a seed, written as raw ALOHA-layout HDF5 logs (or a
  LeRobot dataset) that `robolake ingest` reads.
- `evaluate`: `evaluate_checkpoint(...)`, success per task with Wilson 95% intervals beside the
  expert and a floor, JSON, plot and rollout videos (what `robolake eval` runs).
"""

import os

# MuJoCo picks its GL backend when first imported (by us or by metaworld): offscreen EGL unless
# the user chose one. Set here, before anything below can import it.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("LP_NUM_THREADS", "1")

from robolake.sim._require import SIM_EXTRA_HINT, require_sim  # noqa: E402
from robolake.sim.contract import Env, EnvFactory, Observation, Policy, StepResult
from robolake.sim.env import (
    ACTION_DIM,
    ACTION_NAMES,
    EMBODIMENT,
    STATE_DIM,
    STATE_NAMES,
    MetaWorldEnv,
    MetaWorldFactory,
    SimEnv,
    SimEnvConfig,
    SimEnvFactory,
    state_vector,
)
from robolake.sim.policy import ExpertPolicy, MeanActionPolicy, RandomPolicy
from robolake.sim.rollout import (
    EnvPool,
    EpisodeResult,
    EpisodeSpec,
    RolloutConfig,
    RolloutResult,
    rollout,
)
from robolake.sim.tasks import (
    DEFAULT_TASKS,
    EVAL_SEEDS,
    SUITE,
    TRAIN_SEEDS,
    SimTask,
    episode_seed,
    resolve_tasks,
)
from robolake.sim.worker import EnvWorker, Slot

__all__ = [
    "ACTION_DIM",
    "ACTION_NAMES",
    "DEFAULT_TASKS",
    "EMBODIMENT",
    "EVAL_SEEDS",
    "Env",
    "EnvFactory",
    "EnvPool",
    "EnvWorker",
    "EpisodeResult",
    "EpisodeSpec",
    "ExpertPolicy",
    "MeanActionPolicy",
    "MetaWorldEnv",
    "MetaWorldFactory",
    "Observation",
    "Policy",
    "RandomPolicy",
    "RolloutConfig",
    "RolloutResult",
    "SIM_EXTRA_HINT",
    "STATE_DIM",
    "STATE_NAMES",
    "SUITE",
    "SimEnv",
    "SimEnvConfig",
    "SimEnvFactory",
    "Slot",
    "SimTask",
    "StepResult",
    "TRAIN_SEEDS",
    "episode_seed",
    "require_sim",
    "resolve_tasks",
    "rollout",
    "state_vector",
]
