"""Where `robolake rl --record-to LAKE` writes its episodes, and as what.

`record_target` builds the `RolloutTarget` a run hands its workers: the embodiment the episodes
are written as (Meta-World: the sim suite's, exactly as the demonstrations were ingested, so the
rollouts land beside them; `--sim point`: a two-dimensional point with one camera) and their
origin: the checkpoint the run started from, the SHA-256 of its weights (for a run that learns,
the weights change as it goes: each chunk's weight version is in the episode's
`policy_versions`) and the lake, version and tag it was trained on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from robolake.lake import RolloutOrigin, RolloutTarget
from robolake.rl.policy import PolicyFactory
from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec

__all__ = ["POINT_EMBODIMENT", "record_target"]

POINT_EMBODIMENT = EmbodimentSpec(
    tag="point2d",
    state_dim=2,
    action_dim=2,
    state=(SliceSpec(name="xy", start=0, end=2),),
    action=(SliceSpec(name="dxy", start=0, end=2),),
    cameras=("view0",),
    video_keys=(("view0", "view0"),),
    fps=20.0,
    robot_type="point2d",
)


def record_target(
    sim: str,
    lake: str,
    *,
    init: str | None,
    policy_factory: PolicyFactory,
    run: str,
    acted: Mapping[str, Any] | None = None,
    camera: str = "topview",
) -> RolloutTarget:
    """The target of a run's recorded episodes.

    Args:
        sim: "metaworld" or "point".
        lake: The lake URI (created if missing).
        init: The checkpoint the run starts from (None: a fresh model, `--sim point` only).
        policy_factory: Builds the starting policy (its weights are hashed when `init` is None).
        run: The run's id (its output directory).
        acted: How the policy acts (mode, sigma, execute_steps, ...), kept in every episode.
        camera: The Meta-World camera the environments render.

    Raises:
        ValueError: an unknown sim.
    """
    if sim == "metaworld":
        from robolake.sim.record_to_lake import sim_embodiment_spec

        spec = sim_embodiment_spec(camera)
    elif sim == "point":
        spec = POINT_EMBODIMENT
    else:
        raise ValueError(f"unknown --sim {sim!r}; choose metaworld or point")
    if init is not None:
        from robolake.sim.record_to_lake import rollout_origin

        origin = rollout_origin(init, producer="rl", run=run, policy=acted)
    else:
        from robolake.sim.record_to_lake import weights_sha256

        origin = RolloutOrigin(
            producer="rl",
            run=run,
            checkpoint="",
            policy=dict(acted or {}),
            checkpoint_sha256=weights_sha256(policy_factory().model.state_dict()),
        )
    return RolloutTarget(lake=lake, spec=spec, origin=origin)
