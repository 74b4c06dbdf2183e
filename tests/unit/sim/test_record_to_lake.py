"""`eval --record-to`: sim rollouts land as episodes that replay exactly, beside the demonstrations."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import robolake.sim  # noqa: F401  (sets MUJOCO_GL before metaworld imports mujoco)

pytest.importorskip("metaworld")

from robolake.lake import Lake  # noqa: E402
from robolake.lake.intake.rollouts import RolloutOrigin, decode_chunks  # noqa: E402
from robolake.lake.media.frames import decode_row  # noqa: E402
from robolake.lake.where import select_episode_ids  # noqa: E402
from robolake.sim import EMBODIMENT, EpisodeSpec, ExpertPolicy, RolloutConfig, SimEnvConfig, rollout  # noqa: E402
from robolake.sim.evaluate import EvalConfig, evaluate_checkpoint  # noqa: E402
from robolake.sim.record_to_lake import (  # noqa: E402
    record_rollouts,
    replay_episode,
    sim_embodiment_spec,
    weights_sha256,
)

SMALL = SimEnvConfig(image_size=32)
ORIGIN = RolloutOrigin(producer="eval", run="test", checkpoint="expert", checkpoint_sha256="0" * 64)


def _lake_episode(lake: Lake, eid: str) -> tuple[dict, np.ndarray, np.ndarray, list[bytes]]:
    row = next(e for e in lake.episodes().to_pylist() if e["episode_id"] == eid)
    steps = sorted(
        (s for s in lake.to_arrow("steps").to_pylist() if s["episode_id"] == eid), key=lambda s: s["step_index"]
    )
    media = sorted(
        (m for m in lake.to_arrow("media").to_pylist() if m["episode_id"] == eid), key=lambda m: m["step_index"]
    )
    return (
        row,
        np.asarray([s["state"] for s in steps], np.float32),
        np.asarray([s["action"] for s in steps], np.float32),
        [decode_row(m["data"], m["encoding"]) for m in media],
    )


def test_recorded_rollouts_replay_exactly_from_their_seed(tmp_path) -> None:
    specs = [EpisodeSpec("reach", 1_000_011, record_steps=True), EpisodeSpec("push", 1_000_012, record_steps=True)]
    cfg = RolloutConfig(num_workers=0, envs_per_worker=2, replan=3, env=SMALL, max_steps=80)
    result = rollout(ExpertPolicy(), specs, cfg)
    wrote = record_rollouts(str(tmp_path / "lake"), result, ORIGIN, SMALL)
    assert wrote.written == 2
    lake = Lake.open(str(tmp_path / "lake"))
    assert lake.embodiments()[EMBODIMENT] == sim_embodiment_spec(SMALL.camera)
    for eid, e in zip(wrote.episode_ids, result.episodes, strict=True):
        row, states, actions, frames = _lake_episode(lake, eid)
        meta = json.loads(row["metadata"])
        assert meta["seed"] == e.seed and meta["sim_task"] == e.task and row["success"] == e.success
        replayed_states, replayed_frames = replay_episode(e.task, meta["seed"], actions, SMALL)
        np.testing.assert_array_equal(states, replayed_states)  # state before every action, exactly
        np.testing.assert_array_equal(np.stack(frames), replayed_frames)  # and the frame, pixel for pixel
        chunks, at = decode_chunks(meta)
        k = min(3, chunks.shape[1])  # the first `replan` actions of every chunk ran
        assert len(at) == -(-len(actions) // k) and at[0] == 0
        for c, t in zip(chunks, at, strict=True):
            n = min(k, len(actions) - t)
            np.testing.assert_array_equal(actions[t : t + n], np.clip(c[:n], -1, 1))
        assert meta["rewards"] == pytest.approx(e.rewards.tolist())
    assert len(select_episode_ids(lake, "success and source='rollout'")) == sum(e.success for e in result.episodes) >= 1


def _checkpoint(tmp_path) -> str:
    """An untrained policy saved the way `robolake train` saves one, with its lineage."""
    import torch

    from robolake.lake.stats.norm import NormStats, VectorStats
    from robolake.packers import PackSpec, TokenLengthConfig
    from robolake.sim import ACTION_DIM, STATE_DIM
    from robolake.training.checkpoint import save_checkpoint
    from robolake.training.config import ModelConfig
    from robolake.training.model import GrootModel
    from robolake.training.normalize import PolicyCard

    rng = np.random.default_rng(0)
    stats = NormStats(
        state=VectorStats.of(rng.normal(0, 0.1, (100, STATE_DIM))),
        action=VectorStats.of(rng.uniform(-1, 1, (100, ACTION_DIM))),
    )
    config = ModelConfig.preset("tiny", max_state_dim=24, max_action_dim=8, num_embodiments=1)
    spec = PackSpec(
        horizon=config.action_horizon, tokens=TokenLengthConfig(tokens_per_view=config.tokens_per_view, state_tokens=0)
    )
    card = PolicyCard(
        embodiments=[EMBODIMENT],
        normalization="mean_std",
        stats={EMBODIMENT: stats.to_json()},
        pack_spec=spec.to_json(),
        state_dims={EMBODIMENT: STATE_DIM},
        action_dims={EMBODIMENT: ACTION_DIM},
    )
    torch.manual_seed(0)
    model = GrootModel(config)
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    save_checkpoint(
        tmp_path / "run" / "checkpoints",
        step=1,
        model=model,
        optimizer=opt,
        scheduler=sched,
        extra={"model_config": dataclasses.asdict(config), "policy": card.to_json()},
        lineage={"lake_uri": "/data/lake", "lake_version": 7, "lake_tag": "split:train"},
    )
    return str(tmp_path / "run")


def test_eval_record_to_writes_every_policy_episode_with_its_checkpoint(tmp_path) -> None:
    from robolake.training.checkpoint import read_checkpoint

    run = _checkpoint(tmp_path)
    config = EvalConfig(
        tasks=("reach", "push"),
        episodes=2,
        videos=1,
        baselines=False,
        rollout=RolloutConfig(num_workers=0, envs_per_worker=2, replan=8, env=SMALL, max_steps=24),
    )
    lake_uri = str(tmp_path / "rollouts")
    result = evaluate_checkpoint(run, config, out_dir=str(tmp_path / "eval"), record_to=lake_uri)
    assert result["recorded"]["written"] == 4 and len(result["videos"]) == 2  # one GIF per task, as without recording
    lake = Lake.open(lake_uri)
    sha = weights_sha256(read_checkpoint(run).model_state())
    metas = [json.loads(m) for m in lake.episodes(columns=["metadata"])["metadata"].to_pylist()]
    assert sorted(m["seed"] for m in metas) == sorted(result["config"]["eval_seeds"])
    for m in metas:
        assert m["source"] == "rollout" and m["producer"] == "eval" and m["checkpoint_sha256"] == sha
        assert m["trained_on"] == {"lake_uri": "/data/lake", "lake_version": 7, "lake_tag": "split:train"}
        assert m["seed_range"] == "eval" and m["policy"]["replan"] == 8 and m["policy"]["noise_scale"] == 0.0
    eid = lake.episodes(columns=["episode_id"])["episode_id"][0].as_py()
    row, states, actions, frames = _lake_episode(lake, eid)
    meta = json.loads(row["metadata"])
    replayed_states, replayed_frames = replay_episode(meta["sim_task"], meta["seed"], actions, SMALL)
    np.testing.assert_array_equal(states, replayed_states)
    np.testing.assert_array_equal(np.stack(frames), replayed_frames)
    chunks, at = decode_chunks(meta)
    assert chunks.shape[1:] == (16, 4) and np.array_equal(
        at, np.arange(0, len(actions), 8)
    )  # whole chunks, 8 of each ran
    np.testing.assert_array_equal(actions[:8], chunks[0][:8])
    again = evaluate_checkpoint(run, config, record_to=lake_uri)  # deterministic policy: the same episodes
    assert again["recorded"]["written"] == 0 and again["recorded"]["skipped"] == 4


def test_rollouts_and_demos_share_one_lake_and_one_mixture(tmp_path, ray_session) -> None:
    from robolake.lake.intake.ingest import ingest
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.packers.mix import MixSpec
    from robolake.sim.recorder import RecordConfig, record_demos

    lake_uri = str(tmp_path / "lake")
    record_demos(tmp_path / "demos", RecordConfig(tasks=("reach",), episodes_per_task=1, num_workers=0, env=SMALL))
    ingest(str(tmp_path / "demos"), lake_uri)
    demo_spec = Lake.open(lake_uri).embodiments()[EMBODIMENT]
    result = rollout(
        ExpertPolicy(),
        [EpisodeSpec("reach", 1_000_021, record_steps=True)],
        RolloutConfig(num_workers=0, envs_per_worker=1, env=SMALL, max_steps=40),
    )
    record_rollouts(lake_uri, result, ORIGIN, SMALL)
    lake = Lake.open(lake_uri)
    assert lake.embodiments()[EMBODIMENT] == demo_spec == sim_embodiment_spec(SMALL.camera)
    spec = PackSpec(
        max_tokens=256,
        tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0),
        mix=MixSpec.parse("source=rollout:0.5,recorded:0.5"),
    )
    m = pack(lake, spec, str(tmp_path / "packed"))
    assert m.mixture is not None and m.mixture["max_abs_error"] < 0.01
