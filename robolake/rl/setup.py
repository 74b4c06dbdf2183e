"""From command-line choices to the two factories a run needs: environments and the policy.

`--sim metaworld` builds robolake.sim's Meta-World tasks and loads the behaviour-cloned
checkpoint `--init` through `LearnedPolicy` (the closed-loop evaluator's loader). `--sim point`
runs the built-in `PointReachEnv` with a fresh tiny model (or `--init`, a checkpoint of one): a
smoke test of the pipeline that needs no simulator.
"""

from __future__ import annotations

from robolake.rl.env import PointReachEnv, PointReachFactory
from robolake.rl.policy import ModelPolicyFactory, PolicyFactory
from robolake.sim.contract import EnvFactory

__all__ = ["SIMS", "make_factories"]

SIMS = ("metaworld", "point")


def make_factories(
    sim: str, tasks: str | None, init: str | None, *, image_size: int = 64
) -> tuple[PolicyFactory, EnvFactory, tuple[str, ...]]:
    """(policy factory, env factory, task names) for a simulator choice.

    Raises:
        ValueError: unknown sim or task, or `--init` missing for metaworld.
        FileNotFoundError: `init` names no checkpoint.
        LegacyCheckpointError: `init` is a pickled checkpoint (nothing is unpickled; convert it
            with `robolake convert-checkpoint RUN --trust`).
        ImportError: the sim extra is missing (metaworld).
    """
    if sim == "metaworld":
        from robolake.sim import MetaWorldFactory, require_sim, resolve_tasks
        from robolake.sim.learned import LearnedPolicyFactory

        require_sim()
        names = tuple(t.name for t in resolve_tasks(tasks))
        if init is None:
            raise ValueError(
                "--init RUN is required with --sim metaworld: the behaviour-cloned run "
                "(robolake train / demo output) RL starts from"
            )
        _check_init(init)
        return LearnedPolicyFactory(init), MetaWorldFactory(image_size=image_size), names
    if sim == "point":
        names = tuple(n.strip() for n in (tasks or ",".join(PointReachEnv.TASKS)).split(",") if n.strip())
        for n in names:
            if n not in PointReachEnv.TASKS:
                raise ValueError(f"unknown point task {n!r}; choose from {list(PointReachEnv.TASKS)}")
        import torch

        from robolake.training.config import ModelConfig
        from robolake.training.model import GrootModel

        if init is not None:
            from robolake.sim.learned import LearnedPolicyFactory

            _check_init(init)
            return LearnedPolicyFactory(init), PointReachFactory(image_size=32), names
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = GrootModel(ModelConfig.preset("tiny", max_state_dim=2, max_action_dim=2, num_embodiments=1))
        return ModelPolicyFactory.from_model(model, action_dim=2), PointReachFactory(image_size=32), names
    raise ValueError(f"unknown --sim {sim!r}; choose one of {SIMS}")


def _check_init(init: str) -> None:
    """Read `--init`'s checkpoint here, before Ray starts, so a missing, damaged or pickled one is
    one line and not an actor's traceback (reading it never unpickles).

    Raises:
        FileNotFoundError: no checkpoint there.
        LegacyCheckpointError: a pickled checkpoint to convert first (the message says how).
        ValueError: it is damaged, or lacks the model config and policy card a policy needs.
    """
    from robolake.training.checkpoint import read_checkpoint
    from robolake.training.normalize import POLICY_CARD_KEY

    ckpt = read_checkpoint(init)
    if "model_config" not in ckpt.extra or POLICY_CARD_KEY not in ckpt.extra:
        raise ValueError(
            f"--init {init}: checkpoint {ckpt.path} lacks the model config or the policy card; "
            "pass a run `robolake train` wrote"
        )
