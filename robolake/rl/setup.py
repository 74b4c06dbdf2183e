"""From command-line choices to the two factories a run needs: environments and the policy.

`--sim metaworld` builds robolake.sim's Meta-World tasks and loads the behaviour-cloned
checkpoint `--init` through `LearnedPolicy` (the closed-loop evaluator's loader). `--sim point`
runs the built-in `PointReachEnv` with a fresh tiny model (or `--init`, a checkpoint of one): a
smoke test of the pipeline that needs no simulator.
"""

from __future__ import annotations

from robolake.rl.env import EnvFactory, PointReachEnv, PointReachFactory
from robolake.rl.policy import ModelPolicyFactory, PolicyFactory

__all__ = ["SIMS", "make_factories"]

SIMS = ("metaworld", "point")


def make_factories(sim: str, tasks: str | None, init: str | None, *, image_size: int = 64) -> tuple[PolicyFactory, EnvFactory, tuple[str, ...]]:
    """(policy factory, env factory, task names) for a simulator choice.

    Raises:
        ValueError: unknown sim or task, or `--init` missing for metaworld.
        FileNotFoundError: `init` names no checkpoint.
        ImportError: the sim extra is missing (metaworld).
    """
    if sim == "metaworld":
        from robolake.rl.sim_env import MetaWorldFactory, SimPolicyFactory
        from robolake.sim import require_sim, resolve_tasks
        from robolake.sim.learned import resolve_checkpoint

        require_sim()
        names = tuple(t.name for t in resolve_tasks(tasks))
        if init is None:
            raise ValueError("--init RUN is required with --sim metaworld: the behaviour-cloned run (robolake train / demo output) RL starts from")
        resolve_checkpoint(init)  # fail before Ray starts
        return SimPolicyFactory(init), MetaWorldFactory(image_size=image_size), names
    if sim == "point":
        names = tuple(n.strip() for n in (tasks or ",".join(PointReachEnv.TASKS)).split(",") if n.strip())
        for n in names:
            if n not in PointReachEnv.TASKS:
                raise ValueError(f"unknown point task {n!r}; choose from {list(PointReachEnv.TASKS)}")
        import torch

        from robolake.training.config import ModelConfig
        from robolake.training.model import GrootModel

        if init is not None:
            from robolake.rl.sim_env import SimPolicyFactory

            return SimPolicyFactory(init), PointReachFactory(image_size=32), names
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = GrootModel(ModelConfig.preset("tiny", max_state_dim=2, max_action_dim=2, num_embodiments=1))
        return ModelPolicyFactory.from_model(model, action_dim=2), PointReachFactory(image_size=32), names
    raise ValueError(f"unknown --sim {sim!r}; choose one of {SIMS}")
