"""One closed-loop contract: the evaluator, the recorder and RL share its types, and it is light."""

import subprocess
import sys

import numpy as np


def test_sim_and_rl_export_the_same_contract() -> None:
    import robolake.rl as rl
    import robolake.sim as sim
    from robolake.sim import contract

    for name in ("Observation", "StepResult", "Env", "EnvFactory", "Policy"):
        assert getattr(sim, name) is getattr(contract, name)
        assert getattr(rl, name) is getattr(contract, name)


def test_the_contract_and_the_worker_import_neither_the_simulator_nor_ray() -> None:
    code = (
        "import sys, robolake.sim.contract, robolake.sim.worker; "
        "heavy = [m for m in ('metaworld', 'mujoco', 'ray', 'torch') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_point_reach_speaks_the_contract() -> None:
    from robolake.rl.env import PointReachEnv
    from robolake.sim.contract import Env, Observation, StepResult

    env = PointReachEnv("reach-left")
    assert isinstance(env, Env)
    obs = env.reset(3)
    assert isinstance(obs, Observation) and obs.image is not None and obs.image.shape == (1, 32, 32, 3)
    r = env.step(np.array([-1.0, 0.0], np.float32))
    assert isinstance(r, StepResult) and r.observation.image is None  # step does not render; observe does
    np.testing.assert_array_equal(r.observation.state, env.observe().state)
