"""The pipeline on a local Ray: exactly-once delivery, routing, staleness, worker loss, sync = plain loop."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from robolake.rl.config import LearnerConfig, RLConfig, SamplerConfig
from robolake.rl.generation import generate
from robolake.rl.messages import EpisodeKey, GenRequest, chunk_seed
from robolake.rl.pipeline import Pipeline, run_rl
from robolake.rl.reference import run_reference

from .conftest import TASKS


def _config(**kw: Any) -> RLConfig:
    base: dict[str, Any] = dict(
        tasks=TASKS,
        num_workers=2,
        envs_per_worker=2,
        env_steps=600,
        execute_steps=4,
        segment_chunks=2,
        # Starting noise too: the tiny point-reach policy then both succeeds and fails within
        # a group, so advantages are non-zero and these short runs exercise the learner.
        sampler=SamplerConfig(sigma=0.3, start_noise=1.0),
        learner=LearnerConfig(
            micro_batch=8, group_window=8, min_group=2, lr=3e-4, max_staleness=1, staleness_mode="drop"
        ),
        log_every_s=0.5,
        record_trajectories=True,
    )
    base.update(kw)
    return RLConfig(**base)


@pytest.mark.parametrize("group_requests", [True, False], ids=["worker_rounds", "per_env"])
def test_async_delivers_every_observation_once_to_its_env(ray_session, bc_policy_factory, point_env, group_requests):
    result = run_rl(_config(mode="async", group_requests=group_requests), bc_policy_factory, point_env)
    served = Counter(result.served)
    assert served and max(served.values()) == 1  # no observation generated twice
    executed = {f"{key}.c{t.chunk}" for key, ts in result.trajectories.items() for t in ts}
    assert executed == set(served)  # every observation answered was executed, none lost
    # the chunk each environment executed is the one sampled for its own observation
    policy = bc_policy_factory()
    for key_str, ts in list(result.trajectories.items())[:3]:
        for t in ts[:2]:
            if t.version:
                continue
            env, inc, ep = (int(p.lstrip("envp")) for p in key_str.split("."))
            req = GenRequest(EpisodeKey(env, inc, ep), t.chunk, t.obs, chunk_seed(0, env, inc, ep, t.chunk))
            (alone,) = generate(policy, [req], _config().sampler, 0)
            np.testing.assert_allclose(alone.chain, t.chain, atol=1e-5)
    s = result.summary
    assert s["env_steps"] >= 600 and s["episodes_finished"] > 0
    assert s["staleness"]["max_consumed"] <= 1  # the bound held
    assert s["learner_updates"] >= 1
    assert set(s["idle_fraction"]) == {"env", "generation", "learner"}
    cpu = s["cpu"]  # every component's process CPU, so a run says how many cores it kept busy
    assert cpu["env_s"] > 0 and cpu["generation_s"] > 0 and cpu["cores_used"] > 0
    total = cpu["env_s"] + cpu["generation_s"] + cpu["learner_s"] + cpu["driver_s"]
    assert cpu["ms_per_env_step"] == pytest.approx(1e3 * total / s["env_steps"])
    # measured over the run's own wall time (budget end), not up to whenever the summary is read
    assert cpu["cores_used"] == pytest.approx(total / s["wall_s"])
    assert result.metrics and all("env_steps_per_s" in r for r in result.metrics)
    assert 0 < cpu["learner_update_s"] <= cpu["learner_s"]  # updates are a part of the learner's CPU
    sizes = {int(k) for k in s["generation"]["batch_sizes"]}
    if group_requests:  # a worker's round is one batch (two rounds may share one)
        assert sizes <= {2, 4}


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_every_mode_learns_from_an_untrained_policy_on_returns(ray_session, random_policy_factory, point_env, mode):
    """The benchmark's quick setting: a policy that never succeeds still updates, on episode
    returns and capped episodes; on success alone it would never update (zero-spread groups)."""
    config = _config(
        mode=mode,
        env_steps=480,
        max_episode_steps=12,
        sampler=SamplerConfig(sigma=0.2),
        learner=LearnerConfig(micro_batch=8, group_window=8, min_group=2, lr=3e-4, reward="return"),
        record_trajectories=False,
    )
    s = run_rl(config, random_policy_factory, point_env).summary
    assert s["learner_updates"] >= 1, s
    assert s["episodes_finished"] >= 480 // 12 // 2  # the cap ended episodes early
    assert s["success_rate"] == 0.0  # every episode failed: the spread came from the returns


def test_returns_travel_with_the_final_piece(ray_session, random_policy_factory, point_env):
    config = _config(mode="sync", env_steps=96, max_episode_steps=8, learn=False, record_trajectories=False)
    result = run_rl(config, random_policy_factory, point_env)
    finished = [e for e in result.episodes if e["status"] == "finished"]
    assert finished and all(e["env_steps"] <= 8 for e in finished)
    assert all(e["return"] < 0 for e in finished if not e["success"])  # minus the distance, every step
    assert len({round(e["return"], 6) for e in finished}) > 1


def test_killed_worker_is_replaced_and_its_episodes_truncated(ray_session, bc_policy_factory, point_env):
    killed: list[int] = []

    def kill_once(pipe) -> None:
        if not killed and ray_session.get(pipe.learner.stats.remote())["episodes_finished"] >= 2:
            ray_session.kill(pipe.workers[0])
            killed.append(0)

    config = _config(mode="async", env_steps=800, learn=False)
    result = run_rl(config, bc_policy_factory, point_env, on_tick=kill_once)
    assert killed and result.summary["workers_replaced"] == 1
    lost = [e for e in result.episodes if e["reason"] == "worker_lost"]
    assert lost and all(e["worker"] == 0 and e["episode"].split(".")[1] == "0" for e in lost)
    assert all(e["status"] in ("finished", "truncated") for e in result.episodes)  # none left running, none lost
    replacement = [e for e in result.episodes if e["worker"] == 0 and e["episode"].split(".")[1] == "1"]
    assert replacement  # the new incarnation ran episodes of its own, with fresh seeds
    assert not {e["env_seed"] for e in replacement} & {e["env_seed"] for e in lost}


def test_sync_mode_equals_the_plain_loop(ray_session, bc_policy_factory, point_env):
    config = _config(mode="sync", env_steps=400)
    pipe = Pipeline(config, bc_policy_factory, point_env)
    try:
        result = pipe.run()
        pipe.restart(config)  # what the benchmark does between runs: same weights, same seeds
        again = pipe.run()
    finally:
        pipe.shutdown()
    assert again.episodes == result.episodes
    plain, plain_episodes = run_reference(config, bc_policy_factory, point_env)
    assert result.summary["learner_updates"] >= 1  # the comparison covers learning, not only sampling
    outcome = {e["episode"]: (e["status"], e["success"], e["chunks"], e["env_steps"]) for e in result.episodes}
    assert outcome == {e["episode"]: (e["status"], e["success"], e["chunks"], e["env_steps"]) for e in plain_episodes}
    for key, ts in plain.items():
        mine = result.trajectories[key]
        assert [t.version for t in mine] == [t.version for t in ts], key
        for a, b in zip(mine, ts, strict=True):
            np.testing.assert_array_equal(a.chain, b.chain)
            np.testing.assert_array_equal(a.obs.state, b.obs.state)
