"""The sim suite: recorder fidelity, evaluator bookkeeping, a short closed-loop eval (needs the sim extra)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import robolake.sim  # noqa: F401  (sets MUJOCO_GL before metaworld imports mujoco)

pytest.importorskip("metaworld")

from robolake.lake.stats.norm import NormStats, VectorStats  # noqa: E402
from robolake.sim import (  # noqa: E402
    ACTION_DIM,
    EMBODIMENT,
    STATE_DIM,
    EnvPool,
    EpisodeSpec,
    ExpertPolicy,
    RandomPolicy,
    RolloutConfig,
    SimEnv,
    SimEnvConfig,
    resolve_tasks,
    rollout,
)
from robolake.sim.evaluate import (  # noqa: E402
    EvalConfig,
    eval_specs,
    evaluate_policy,
    summarize,
    wilson_interval,
)
from robolake.sim.recorder import RecordConfig, _disturb, record_demos, replay_states  # noqa: E402
from robolake.sim.tasks import EVAL_SEEDS, TRAIN_SEEDS, episode_seed  # noqa: E402

SMALL = SimEnvConfig(image_size=32)


def test_reset_is_determined_by_the_seed() -> None:
    env = SimEnv(resolve_tasks("push")[0], SMALL)
    a = env.reset(7)
    env.step(np.ones(ACTION_DIM))
    env.reset(8)
    b = env.reset(7)
    assert a.state.shape == (STATE_DIM,) and a.image is not None and a.image.shape == (32, 32, 3)
    np.testing.assert_array_equal(a.state, b.state)
    np.testing.assert_array_equal(a.image, b.image)
    assert not np.array_equal(a.state, env.reset(8).state)  # another seed, another scene
    env.close()


def test_recorder_writes_what_the_simulator_saw(tmp_path) -> None:
    config = RecordConfig(
        tasks=("reach", "button-press"), episodes_per_task=1, num_workers=0, env=SMALL, seed=3, format="lerobot"
    )
    result = record_demos(tmp_path / "demos", config)
    assert result.episodes + result.failed == 2
    info = json.loads((tmp_path / "demos" / "meta" / "info.json").read_text())
    assert info["robot_type"] == EMBODIMENT and info["total_episodes"] == result.episodes
    tasks = resolve_tasks(config.tasks)
    files = sorted((tmp_path / "demos" / "data").rglob("*.parquet"))
    assert len(files) == result.episodes
    for i, (task, path) in enumerate(zip(tasks, files, strict=True)):
        table = pq.read_table(path)
        states = np.stack(table["observation.state"].to_numpy(zero_copy_only=False)).astype(np.float32)
        actions = np.stack(table["action"].to_numpy(zero_copy_only=False)).astype(np.float32)
        assert states.shape[1] == STATE_DIM and actions.shape[1] == ACTION_DIM
        seed = episode_seed(TRAIN_SEEDS, config.seed, i, 0)
        replayed = replay_states(task, seed, actions, config.action_noise)
        np.testing.assert_allclose(replayed, states, rtol=0, atol=1e-6)
        # ... a different seed does not reproduce them, nor do the commands without the noise
        assert not np.allclose(replay_states(task, seed + 1, actions, config.action_noise), states, atol=1e-3)
        assert not np.allclose(replay_states(task, seed, actions), states, atol=1e-3)


def test_recorder_labels_steps_with_the_expert_command_or_the_executed_action(tmp_path) -> None:
    # The default label is the clean command (the policy learns the expert, not its noise); the
    # executed label is what the arm did, and replays without re-applying any noise.
    task = resolve_tasks("reach")[0]
    seed = episode_seed(TRAIN_SEEDS, 5, 0, 0)
    tables = {}
    for label in ("expert", "executed"):
        config = RecordConfig(
            tasks=("reach",),
            episodes_per_task=1,
            num_workers=0,
            env=SMALL,
            seed=5,
            action_label=label,
            format="lerobot",
        )
        record_demos(tmp_path / label, config)
        (path,) = sorted((tmp_path / label / "data").rglob("*.parquet"))
        tables[label] = pq.read_table(path)
    col = {k: np.stack(t["action"].to_numpy(zero_copy_only=False)).astype(np.float32) for k, t in tables.items()}
    states = np.stack(tables["executed"]["observation.state"].to_numpy(zero_copy_only=False)).astype(np.float32)
    np.testing.assert_allclose(replay_states(task, seed, col["executed"]), states, rtol=0, atol=1e-6)
    n = min(len(col["expert"]), len(col["executed"]))
    noise = col["executed"][:n] - col["expert"][:n]
    assert (
        0.03 < float(np.std(noise[np.abs(col["executed"][:n]) < 1])) < 0.2
    )  # the 0.1 actuation noise, unclipped steps
    env = SimEnv(task, SimEnvConfig(image_size=32, render_images=False))
    obs = env.reset(seed)
    np.testing.assert_allclose(col["expert"][0], ExpertPolicy().act([obs])[0, 0], atol=1e-6)
    env.close()
    with pytest.raises(ValueError, match="action_label"):
        RecordConfig(action_label="noisy")  # type: ignore[arg-type]


def test_demonstrations_go_on_past_the_first_success(tmp_path) -> None:
    # Regression: episodes cut at the first success flag taught the policy to stop at the edge of
    # the goal's tolerance; the expert now keeps acting for steps_after_success more steps.
    import h5py

    lengths = {}
    for extra in (0, 6):
        config = RecordConfig(
            tasks=("reach",), episodes_per_task=1, num_workers=0, env=SMALL, seed=2, steps_after_success=extra
        )
        record_demos(tmp_path / str(extra), config)
        with h5py.File(tmp_path / str(extra) / "episode_0.hdf5") as f:
            lengths[extra] = len(f["action"])
    assert lengths[6] == lengths[0] + 6
    env = SimEnv(resolve_tasks("reach")[0], dataclasses.replace(SMALL, render_images=False))
    env.reset(episode_seed(TRAIN_SEEDS, 2, 0, 0))
    with h5py.File(tmp_path / "6" / "episode_0.hdf5") as f:
        rng = np.random.default_rng(episode_seed(TRAIN_SEEDS, 2, 0, 0))  # the recorder's actuation noise, re-applied
        flags = [env.step(_disturb(c, rng, config.action_noise)).success for c in f["action"][:]]
    env.close()
    assert flags.index(True) == lengths[0] - 1  # the short episode ended exactly at the first success


def test_hdf5_demos_ingest_as_a_raw_log_with_what_the_simulator_saw(tmp_path) -> None:
    # The default output is a raw rig log (ALOHA-layout HDF5); ingest reads it through the front
    # door, keeps the robot's tag and instruction, and the lake's state replays from the seed.
    import h5py

    from robolake.lake import Lake
    from robolake.lake.intake.ingest import ingest

    config = RecordConfig(tasks=("reach", "button-press"), episodes_per_task=1, num_workers=0, env=SMALL, seed=3)
    result = record_demos(tmp_path / "demos", config)
    files = sorted((tmp_path / "demos").glob("episode_*.hdf5"))
    assert result.episodes == len(files) == 2
    with h5py.File(files[0]) as f:
        assert f["observations/images/topview"].shape[1:] == (32, 32, 3) and f.attrs["robot_type"] == EMBODIMENT
    ingest(str(tmp_path / "demos"), str(tmp_path / "lake"))
    lake = Lake.open(str(tmp_path / "lake"))
    eps = lake.episodes(columns=["episode_id", "embodiment", "task", "num_steps"]).to_pylist()
    assert {e["embodiment"] for e in eps} == {EMBODIMENT}
    assert sorted(e["task"] for e in eps) == sorted(t.instruction for t in resolve_tasks(config.tasks))
    assert lake.count("steps") == result.steps and lake.count("media") == result.steps
    reach = next(e for e in eps if e["task"] == resolve_tasks("reach")[0].instruction)
    steps = lake.to_arrow("steps", where=f"episode_id = '{reach['episode_id']}'").sort_by("step_index")
    states = np.stack(steps["state"].to_numpy(zero_copy_only=False)).astype(np.float32)
    actions = np.stack(steps["action"].to_numpy(zero_copy_only=False)).astype(np.float32)
    seed = episode_seed(TRAIN_SEEDS, config.seed, 0, 0)
    np.testing.assert_allclose(
        replay_states(resolve_tasks("reach")[0], seed, actions, config.action_noise), states, atol=1e-6
    )


def test_eval_success_matches_the_environment_flags() -> None:
    specs = [EpisodeSpec("reach", s) for s in (1_000_001, 1_000_002)] + [EpisodeSpec("drawer-open", 1_000_003)]
    cfg = RolloutConfig(num_workers=0, envs_per_worker=2, env=SMALL)
    for policy in (ExpertPolicy(), RandomPolicy(seed=0)):
        result = rollout(policy, specs, cfg)
        assert [(e.task, e.seed) for e in result.episodes] == [(s.task, s.seed) for s in specs]
        for e in result.episodes:
            env = SimEnv(resolve_tasks(e.task)[0], dataclasses.replace(SMALL, render_images=False))
            env.reset(e.seed)
            flags = [env.step(a).success for a in e.actions]
            env.close()
            assert sum(flags) == e.success_flags
            assert e.success == any(flags) and (not e.success or flags[-1])  # stops at the first success
        summary = summarize(result)
        assert summary["tasks"]["reach"]["successes"] == sum(e.success for e in result.episodes if e.task == "reach")
        assert summary["env_steps"] == sum(len(e.actions) for e in result.episodes)
    assert all(e.success for e in rollout(ExpertPolicy(), specs, cfg).episodes)


def test_eval_seeds_are_disjoint_from_training_seeds() -> None:
    specs = eval_specs(["reach", "push"], 5, seed=0)
    assert all(s.seed in EVAL_SEEDS and s.seed not in TRAIN_SEEDS for s in specs)
    assert len({s.seed for s in specs}) == len(specs)


def test_wilson_interval() -> None:
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-3)
    lo, hi = wilson_interval(10, 10)
    assert lo == pytest.approx(0.7225, abs=1e-3) and hi == 1.0
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)


def _untrained_policy():
    from robolake.packers import PackSpec, TokenLengthConfig
    from robolake.sim.learned import LearnedPolicy
    from robolake.training.config import ModelConfig
    from robolake.training.model import GrootModel
    from robolake.training.normalize import PolicyCard

    rng = np.random.default_rng(0)
    stats = NormStats(
        state=VectorStats.of(rng.normal(0, 0.1, (100, STATE_DIM))),
        action=VectorStats.of(rng.uniform(-1, 1, (100, ACTION_DIM))),
    )
    model_config = ModelConfig.preset("tiny", max_state_dim=24, max_action_dim=8, num_embodiments=1)
    spec = PackSpec(
        horizon=model_config.action_horizon,
        tokens=TokenLengthConfig(tokens_per_view=model_config.tokens_per_view, state_tokens=0),
    )
    card = PolicyCard(
        embodiments=[EMBODIMENT],
        normalization="mean_std",
        stats={EMBODIMENT: stats.to_json()},
        pack_spec=spec.to_json(),
        state_dims={EMBODIMENT: STATE_DIM},
        action_dims={EMBODIMENT: ACTION_DIM},
    )
    return LearnedPolicy(GrootModel(model_config), card)


def test_learned_policy_acts_in_environment_units() -> None:
    policy = _untrained_policy()
    env = SimEnv(resolve_tasks("reach")[0], SMALL)
    obs = [env.reset(1_000_000), env.reset(1_000_001)]
    chunks = policy.act(obs)
    assert chunks.shape == (2, policy.chunk_size, ACTION_DIM)
    assert np.all(np.abs(chunks) <= 1.0)
    batch = policy.build_batch(obs)
    assert batch.num_samples == 2 and batch.pixels.shape[-1] == policy.config.image_size
    env.close()


def test_learned_policy_noise_scale_zero_acts_deterministically() -> None:
    sampled, mean_path = _untrained_policy(), _untrained_policy()
    mean_path.noise_scale = 0.0
    env = SimEnv(resolve_tasks("reach")[0], SMALL)
    obs = [env.reset(1_000_000)]
    np.testing.assert_array_equal(mean_path.act(obs), mean_path.act(obs))
    assert not np.array_equal(sampled.act(obs), sampled.act(obs))  # fresh noise every call
    env.close()
    with pytest.raises(ValueError, match="noise_scale"):
        EvalConfig(noise_scale=-1.0)


def test_a_pool_serves_several_rollouts_like_fresh_workers() -> None:
    specs = [EpisodeSpec("reach", 1_000_001), EpisodeSpec("button-press", 1_000_002), EpisodeSpec("reach", 1_000_003)]
    cfg = RolloutConfig(num_workers=0, envs_per_worker=2, env=SMALL, max_steps=60)
    fresh = [rollout(ExpertPolicy(), specs, cfg), rollout(RandomPolicy(seed=3), specs, cfg)]
    with EnvPool(("reach", "button-press"), cfg) as pool:
        # a rendering policy first, then non-rendering ones: the pool switches per rollout
        assert rollout(_untrained_policy(), specs[:1], cfg, pool=pool).episodes[0].steps == 60
        pooled = [rollout(ExpertPolicy(), specs, cfg, pool=pool), rollout(RandomPolicy(seed=3), specs, cfg, pool=pool)]
        with pytest.raises(ValueError, match="not in this EnvPool"):
            rollout(ExpertPolicy(), [EpisodeSpec("push", 1_000_004)], cfg, pool=pool)
    for a, b in zip(fresh, pooled, strict=True):
        assert [(e.task, e.seed, e.success, e.steps) for e in a.episodes] == [
            (e.task, e.seed, e.success, e.steps) for e in b.episodes
        ]
        for ea, eb in zip(a.episodes, b.episodes, strict=True):
            np.testing.assert_array_equal(ea.actions, eb.actions)


def test_short_eval_smoke(ray_session) -> None:
    config = EvalConfig(
        tasks=("reach",),
        episodes=2,
        videos=1,
        rollout=RolloutConfig(num_workers=1, envs_per_worker=2, replan=8, env=SMALL, max_steps=80),
    )
    result, main = evaluate_policy(_untrained_policy(), config)
    assert set(result["tasks"]) == {"reach"}
    for t in result["tasks"].values():
        assert t["episodes"] == 2 and 0.0 <= t["ci95"][0] <= t["success_rate"] <= t["ci95"][1] <= 1.0
    expert = result["baselines"]["expert"]["tasks"]
    assert expert["reach"]["success_rate"] == 1.0  # the expert reaches within 80 steps
    assert 0.0 <= result["floor_mean_success"] <= 1.0 and result["actions_per_s"] > 0
    recorded = [e for e in main.episodes if e.frames is not None]
    assert len(recorded) == 1 and all(len(e.frames) == e.steps + 1 for e in recorded)
    json.dumps(result)
