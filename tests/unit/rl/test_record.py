"""`rl --record-to`: every finished RL episode lands in the lake and replays exactly from its seed."""

from __future__ import annotations

import json

import numpy as np

from robolake.lake import Lake
from robolake.lake.intake.rollouts import decode_chunks
from robolake.lake.media.frames import decode_row
from robolake.lake.where import select_episode_ids
from robolake.rl.config import LearnerConfig, RLConfig, SamplerConfig
from robolake.rl.env import PointReachEnv
from robolake.rl.pipeline import run_rl
from robolake.rl.record import POINT_EMBODIMENT, record_target

from .conftest import TASKS


def test_rl_records_every_finished_episode(ray_session, bc_policy_factory, point_env, tmp_path):
    config = RLConfig(
        tasks=TASKS,
        num_workers=2,
        envs_per_worker=2,
        env_steps=300,
        execute_steps=4,
        segment_chunks=2,
        mode="sync",
        sampler=SamplerConfig(sigma=0.3, start_noise=1.0),
        learner=LearnerConfig(micro_batch=8, group_window=8, min_group=2, lr=3e-4),
        log_every_s=5.0,
    )
    lake_uri = str(tmp_path / "lake")
    target = record_target(
        "point", lake_uri, init=None, policy_factory=bc_policy_factory, run="test", acted={"mode": "sync"}
    )
    result = run_rl(config, bc_policy_factory, point_env, record_to=target)
    finished = [e for e in result.episodes if e["status"] == "finished"]
    assert result.recorded is not None and result.recorded["written"] == len(finished) > 0
    lake = Lake.open(lake_uri)
    assert lake.embodiments()["point2d"] == POINT_EMBODIMENT
    rows = lake.episodes().to_pylist()
    assert sorted(json.loads(r["metadata"])["seed"] for r in rows) == sorted(e["env_seed"] for e in finished)
    assert len(select_episode_ids(lake, "success and source='rollout'")) == sum(e["success"] for e in finished)
    steps = lake.to_arrow("steps").to_pylist()
    media = lake.to_arrow("media").to_pylist()
    for row in rows[:4]:
        meta = json.loads(row["metadata"])
        assert meta["producer"] == "rl" and meta["checkpoint_sha256"] == target.origin.checkpoint_sha256
        mine = sorted((s for s in steps if s["episode_id"] == row["episode_id"]), key=lambda s: s["step_index"])
        frames = [
            decode_row(m["data"], m["encoding"])
            for m in sorted((m for m in media if m["episode_id"] == row["episode_id"]), key=lambda m: m["step_index"])
        ]
        env = PointReachEnv(meta["rl_task"], max_steps=point_env.max_steps, image_size=point_env.image_size)
        obs = env.reset(meta["seed"])
        for t, s in enumerate(mine):  # replay the executed actions from the seed: the same states and frames
            np.testing.assert_array_equal(obs.state, np.asarray(s["state"], np.float32))
            np.testing.assert_array_equal(frames[t], obs.image[0])
            r = env.step(np.asarray(s["action"], np.float32))
            obs = env.observe()
        assert r.success == row["success"] and r.done
        chunks, at = decode_chunks(meta)
        assert len(meta["policy_versions"]) == len(at) and at[0] == 0 and chunks.shape[2] == 2
        np.testing.assert_array_equal(
            np.asarray([s["action"] for s in mine[:4]], np.float32), chunks[0][: min(4, len(mine))]
        )
