"""Closed-loop rollouts of the sim suite written back into a lake (`robolake eval --record-to`).

The evaluator runs each recorded episode with `EpisodeSpec(record_steps=True)`, so the worker
keeps what a lake episode needs: the frame and state before every action, the executed action,
the reward, and every whole chunk the policy returned (`EpisodeResult.states`, `frames`,
`rewards`, `chunks`, `chunk_steps`). `rollout_episodes` turns those into `RolloutEpisode`s of
the suite's embodiment, and `robolake.lake.intake.rollouts.write_rollouts` writes them through the
lake's one write protocol, beside the demonstrations: the same embodiment tag, camera name,
state and action layout and control rate as a demonstration the recorder logged and ingest read
(`sim_embodiment_spec`), so demos and rollouts pack into one mixture.

`rollout_origin` reads what the rollouts are owed from the checkpoint: the SHA-256 of its
weights (names, dtypes, shapes and bytes, in name order: the same weights give the same hash
whatever file format holds them) and the lake, version and tag it was trained on (the
checkpoint's lineage, or its policy card's lake and version for a checkpoint without one).

`replay_episode` re-runs recorded actions from the seed in a fresh environment and returns the
states and frames it sees: a rollout episode in the lake must equal it exactly (the tests check
it, frame bytes included).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robolake.lake import RolloutEpisode, RolloutOrigin, RolloutWriteResult, write_rollouts
from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec
from robolake.sim.env import ACTION_DIM, EMBODIMENT, STATE_DIM, SimEnv, SimEnvConfig
from robolake.sim.recorder import FPS
from robolake.sim.rollout import RolloutResult
from robolake.sim.tasks import SimTask, resolve_tasks

__all__ = [
    "replay_episode",
    "rollout_episodes",
    "rollout_origin",
    "record_rollouts",
    "sim_embodiment_spec",
    "weights_sha256",
]


def sim_embodiment_spec(camera: str) -> EmbodimentSpec:
    """The suite's embodiment as ingest reads the recorder's demonstration logs (ALOHA-layout
    HDF5: state `qpos`, action `action`, one camera), so rollouts and demos share one spec."""
    return EmbodimentSpec(
        tag=EMBODIMENT,
        state_dim=STATE_DIM,
        action_dim=ACTION_DIM,
        state=(SliceSpec(name="qpos", start=0, end=STATE_DIM),),
        action=(SliceSpec(name="action", start=0, end=ACTION_DIM),),
        cameras=(camera,),
        video_keys=((camera, f"observations/images/{camera}"),),
        fps=float(FPS),
        robot_type=EMBODIMENT,
    )


def weights_sha256(state: Mapping[str, Any]) -> str:
    """SHA-256 of a model state dict: names, dtypes, shapes and bytes, in name order."""
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name]
        t = t.detach().cpu().contiguous() if isinstance(t, torch.Tensor) else torch.as_tensor(t)
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\0".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def rollout_origin(
    checkpoint: str | os.PathLike[str], *, producer: str, run: str, policy: Mapping[str, Any] | None = None
) -> RolloutOrigin:
    """The origin record of rollouts of `checkpoint` (a checkpoint, checkpoints or run directory).

    Raises:
        FileNotFoundError: no checkpoint there.
    """
    from robolake.training.checkpoint import read_checkpoint
    from robolake.training.normalize import POLICY_CARD_KEY

    ckpt = read_checkpoint(checkpoint)
    lineage = ckpt.lineage or {}
    card = ckpt.extra.get(POLICY_CARD_KEY) or {}
    trained_on = {
        "lake_uri": lineage.get("lake_uri", card.get("lake_uri")),
        "lake_version": lineage.get("lake_version", card.get("lake_version")),
        "lake_tag": lineage.get("lake_tag", card.get("lake_tag")),
    }
    return RolloutOrigin(
        producer=producer,
        run=run,
        checkpoint=str(ckpt.path),
        checkpoint_sha256=weights_sha256(ckpt.model_state()),
        trained_on=trained_on,
        policy=dict(policy or {}),
    )


def rollout_episodes(result: RolloutResult, camera: str, info: Mapping[str, Any] | None = None) -> list[RolloutEpisode]:
    """The recorded episodes of `result` (those run with `record_steps`) as lake rollouts, each
    with `info` in its metadata (beside its `sim_task`).

    Raises:
        ValueError: no episode of `result` was run with `record_steps`.
    """
    out = []
    by_name = {t.name: t for t in resolve_tasks(sorted({e.task for e in result.episodes}))}
    for e in result.episodes:
        if e.states is None or e.frames is None or e.rewards is None or e.chunks is None or e.chunk_steps is None:
            continue
        out.append(
            RolloutEpisode(
                embodiment=EMBODIMENT,
                task=by_name[e.task].instruction,
                seed=e.seed,
                states=e.states,
                actions=e.actions,
                frames=((camera, e.frames[: e.steps]),),
                rewards=e.rewards,
                success=e.success,
                chunks=e.chunks,
                chunk_steps=e.chunk_steps,
                fps=float(FPS),
                info={"sim_task": e.task, **(info or {})},
            )
        )
    if not out:
        raise ValueError("no episode of this rollout kept its steps; run them with EpisodeSpec(record_steps=True)")
    return out


def record_rollouts(
    lake: str, result: RolloutResult, origin: RolloutOrigin, env: SimEnvConfig, info: Mapping[str, Any] | None = None
) -> RolloutWriteResult:
    """Write the recorded episodes of `result` into `lake` (created if missing), `info` added to
    each episode's metadata (e.g. `{"seed_range": "eval"}`)."""
    return write_rollouts(
        lake, rollout_episodes(result, env.camera, info), origin, spec=sim_embodiment_spec(env.camera)
    )


def replay_episode(
    task: SimTask | str, seed: int, actions: Sequence[np.ndarray] | np.ndarray, env: SimEnvConfig | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(states [T, STATE_DIM], frames uint8 [T, H, W, 3]) seen before each of `actions`, replayed
    from `seed` in a fresh environment."""
    (spec,) = resolve_tasks([task.name if isinstance(task, SimTask) else task])
    sim = SimEnv(spec, env or SimEnvConfig())
    try:
        obs = sim.reset(seed)
        states, frames = [], []
        for a in actions:
            states.append(obs.state)
            frames.append(obs.image if obs.image is not None else sim.render())
            obs = sim.step(np.asarray(a, np.float32)).observation
        return np.stack(states), np.stack(frames)
    finally:
        sim.close()
