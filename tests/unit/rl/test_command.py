"""`robolake rl` end to end on the built-in point environment, and the Meta-World adapter."""

from __future__ import annotations

import json

import numpy as np
import pytest

import robolake.sim  # noqa: F401  (sets MUJOCO_GL before metaworld imports mujoco)
from robolake.rl.config import RLConfig
from robolake.rl.reference import run_reference


@pytest.mark.slow
def test_rl_command_writes_metrics_plot_and_checkpoint(ray_session, tmp_path):
    from robolake.cli import main

    out = tmp_path / "rl"
    rc = main(
        [
            "rl",
            "--sim",
            "point",
            "--tasks",
            "reach-left,reach-right",
            "--mode",
            "sync",
            "--steps",
            "160",
            "--out",
            str(out),
            "--workers",
            "1",
            "--envs-per-worker",
            "2",
            "--execute-steps",
            "4",
            "--log-every",
            "0.2",
        ]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "sync" and summary["env_steps"] >= 160
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows and {
        "env_steps_per_s",
        "gen_batch_size_mean",
        "learner_updates_per_s",
        "staleness_mean",
        "idle_fraction",
    } <= set(rows[0])
    assert (out / "rl.png").stat().st_size > 0
    assert list((out / "checkpoints").glob("step_*/model.safetensors"))
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert episodes and all(e["status"] in ("finished", "truncated") for e in episodes)


@pytest.mark.slow  # six runs (three schedulers, two profiles): ~100 s on 2 shared cores
def test_bench_rl_writes_the_issue_json(ray_session, tmp_path):
    from robolake.bench.rl import main

    path = tmp_path / "rl.json"
    rc = main(
        [
            "--json",
            str(path),
            "--sim",
            "point",
            "--quick",
            "--steps",
            "480",
            "--tasks",
            "reach-left,reach-right",
            "--pairs",
            "1",
            "--workers",
            "1",
            "--envs-per-worker",
            "2",
            "--execute-steps",
            "4",
            "--max-episode-steps",
            "12",
            "--eval-episodes",
            "8",
        ]
    )
    assert rc == 0
    r = json.loads(path.read_text())
    assert r["config"]["modes"] == ["async", "async_per_env", "sync"] and r["config"]["reward"] == "return"
    for mode in ("async", "async_per_env", "sync"):
        for m in (r[mode], r["heavy_tail"][mode]):
            assert m["env_steps_per_s"] > 0 and set(m["idle_fraction"]) == {"env", "generation", "learner"}
            assert m["learner_updates"] > 0 and m["learner_updates_per_s"] > 0  # every mode learned
            assert "learner_samples_per_s" in m and isinstance(m["success_curve"], list)
            assert m["cores_used"] > 0 and m["cpu_ms_per_env_step"] > 0
            stages = m["cpu_ms_per_env_step_by_stage"]
            assert sum(stages.values()) == pytest.approx(m["cpu_ms_per_env_step"])
            assert 0 < m["acting_cpu_ms_per_env_step"] < m["cpu_ms_per_env_step"]
    ev = r["evaluation"]  # before and after on the same evaluation episodes, with Wilson intervals
    assert ev["episodes"] >= 4 and ev["before"]["episodes"] == ev["episodes"]
    assert set(ev["after"]) == {"async", "async_per_env", "sync"}
    for scored in (ev["before"], *ev["after"].values()):
        lo, hi = scored["ci95"]
        assert 0 <= lo <= scored["success_rate"] <= hi <= 1 and scored["mean_return"] is not None
    v = r["async_per_env"]["vs_sync"]
    assert v["speedup_min"] <= v["speedup"] <= v["speedup_max"]
    assert v["fraction_of_ceiling"] == pytest.approx(r["async_per_env"]["cores_used"] / r["cores"])
    assert r["speedup_min"] <= r["speedup"] <= r["speedup_max"]
    assert r["heavy_tail"]["speedup"] > 0
    # the ceiling is every core busy at async's own CPU cost per step, over sync's throughput
    expected = (r["cores"] * 1e3 / r["async"]["cpu_ms_per_env_step"]) / r["sync"]["env_steps_per_s"]
    assert r["cpu_ceiling_speedup"] == pytest.approx(expected)
    assert path.with_suffix(".png").stat().st_size > 0


def test_bench_rl_fails_a_mode_that_never_updates(ray_session, tmp_path):
    from robolake.bench.rl import main

    argv = ["--json", str(tmp_path / "rl.json"), "--sim", "point", "--steps", "40", "--pairs", "1", "--workers", "1"]
    argv += ["--envs-per-worker", "2", "--execute-steps", "4", "--modes", "async", "--reward", "success"]
    with pytest.raises(RuntimeError, match="zero learner updates"):
        main(argv)


def test_rl_command_names_the_missing_init(tmp_path):
    pytest.importorskip("metaworld")
    from robolake.rl.setup import make_factories

    with pytest.raises(ValueError, match="--init RUN is required"):
        make_factories("metaworld", "reach", None)


def test_metaworld_env_runs_in_the_plain_loop(tmp_path):
    pytest.importorskip("metaworld")
    import torch

    from robolake.rl.policy import ModelPolicyFactory
    from robolake.sim import ACTION_DIM, STATE_DIM, MetaWorldFactory
    from robolake.training.model import GrootModel

    from .conftest import small_config

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GrootModel(
            small_config().__class__.preset("tiny", **{**small_config().__dict__, "max_state_dim": STATE_DIM})
        )
    factory = ModelPolicyFactory.from_model(model, action_dim=ACTION_DIM)
    env = MetaWorldFactory(image_size=16)("reach")
    obs = env.reset(5)
    assert obs.image.shape == (1, 16, 16, 3) and obs.state.shape == (STATE_DIM,) and obs.instruction
    config = RLConfig(tasks=("reach",), num_workers=1, envs_per_worker=1, env_steps=16, execute_steps=8, learn=False)
    traj, episodes = run_reference(config, factory, MetaWorldFactory(image_size=16))
    (ts,) = traj.values()
    assert sum(t.env_steps for t in ts) == 16
    again, _ = run_reference(config, factory, MetaWorldFactory(image_size=16))
    np.testing.assert_array_equal(next(iter(again.values()))[1].obs.state, ts[1].obs.state)  # seeded: same episode
