"""`robolake eval` reports progress while it runs: each rollout counts its finished episodes, and an
evaluation names which policy (the trained one, the expert, each floor) is running."""

from __future__ import annotations

import pytest

import robolake.sim  # noqa: F401  (sets MUJOCO_GL before metaworld imports mujoco)

pytest.importorskip("metaworld")

from robolake.sim import (  # noqa: E402
    EpisodeSpec,
    ExpertPolicy,
    RandomPolicy,
    RolloutConfig,
    SimEnvConfig,
    rollout,
)
from robolake.sim.evaluate import EvalConfig, evaluate_policy  # noqa: E402

SMALL = SimEnvConfig(image_size=32)


def test_a_rollout_counts_its_episodes():
    seen: list[tuple[int, int]] = []
    specs = [EpisodeSpec("reach", 1_000_001), EpisodeSpec("reach", 1_000_002), EpisodeSpec("reach", 1_000_003)]
    result = rollout(
        ExpertPolicy(),
        specs,
        RolloutConfig(num_workers=0, envs_per_worker=2, env=SMALL),
        progress=lambda d, t: seen.append((d, t)),
    )
    assert seen[0] == (0, 3) and seen[-1] == (3, 3) and len(result.episodes) == 3
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # only ever forward


def test_an_evaluation_names_each_policy_as_it_runs():
    seen: list[tuple[str, int, int]] = []
    config = EvalConfig(
        tasks=("reach",), episodes=2, rollout=RolloutConfig(num_workers=0, envs_per_worker=2, env=SMALL, max_steps=15)
    )
    evaluate_policy(
        RandomPolicy(seed=1),
        config,
        floors={"random": RandomPolicy(seed=2)},
        progress=lambda name, d, t: seen.append((name, d, t)),
    )
    assert [s[0] for s in seen if s[1] == 0] == ["policy", "expert", "random"]
    assert {(name, t) for name, d, t in seen if d == t} == {("policy", 2), ("expert", 2), ("random", 2)}
