"""The learner's ledger and its staleness bound (in-process, no Ray)."""

from __future__ import annotations

import numpy as np
import pytest

from robolake.rl.config import LearnerConfig, SamplerConfig
from robolake.rl.env import PointReachEnv
from robolake.rl.learner import Learner
from robolake.rl.messages import EpisodeKey, Segment, Transition
from robolake.rl.sampler import draw_noise, sample_chains


def _episode(policy, key: EpisodeKey, task: str, success: bool, version: int, chunks: int = 4) -> list[Segment]:
    env = PointReachEnv(task, image_size=16)
    obs = env.reset(key.episode)
    m = policy.model
    x0, eps = draw_noise(
        [key.episode * 100 + c for c in range(chunks)], 4, m.config.action_horizon, m.config.max_action_dim
    )
    ch = sample_chains(m, policy.batch([obs] * chunks), x0, eps, policy.action_mask([obs] * chunks), 0.1)
    ts = tuple(Transition(obs, ch.chain[c].numpy(), ch.logp[c].numpy(), version, c, 4) for c in range(chunks))
    return [
        Segment(key, task, key.episode, 0, 0),
        Segment(key, task, key.episode, 0, 1, ts[:2]),
        Segment(key, task, key.episode, 0, 2, ts[2:], final=True, success=success),
    ]


def _learner(factory, micro_batch: int = 4, **kw) -> Learner:
    cfg = LearnerConfig(micro_batch=micro_batch, group_window=8, min_group=2, lr=1e-4, **kw)
    return Learner(factory(), cfg, SamplerConfig(sigma=0.1), record=True)


def test_pieces_out_of_order_are_reassembled(bc_policy_factory):
    learner = _learner(bc_policy_factory)
    segs = _episode(learner.policy, EpisodeKey(0, 0, 0), "reach-left", True, 0)
    for s in reversed(segs):
        learner.add(s)
    (ep,) = learner.episodes()
    assert ep["status"] == "finished" and ep["success"] and ep["chunks"] == 4 and ep["env_steps"] == 16
    assert [t.chunk for t in learner.trajectories()[str(EpisodeKey(0, 0, 0))]] == [0, 1, 2, 3]


def test_lost_worker_truncates_its_running_episodes(bc_policy_factory):
    learner = _learner(bc_policy_factory)
    segs = _episode(learner.policy, EpisodeKey(0, 0, 0), "reach-left", True, 0)
    learner.add_many(segs[:2])
    assert learner.mark_lost(0) == 1
    learner.add(segs[2])  # a late piece of a lost episode changes nothing
    (ep,) = learner.episodes()
    assert ep["status"] == "truncated" and ep["reason"] == "worker_lost" and ep["chunks"] == 2
    assert len(learner.ready) == 0


@pytest.mark.parametrize("mode", ["drop", "correct"])
def test_staleness_bound(bc_policy_factory, mode):
    # one micro-batch of all 32 chunks: staleness is judged at version 3 for all of them
    learner = _learner(bc_policy_factory, micro_batch=32, max_staleness=1, staleness_mode=mode)
    learner.version = 3  # as if three updates had happened
    start = {k: v.clone() for k, v in learner.weights().items()}
    # a failure first, so every later episode meets a group with both outcomes (advantage != 0)
    learner.add_many(_episode(learner.policy, EpisodeKey(9, 0, 0), "reach-left", False, 3))
    assert learner.zero_advantage == 4 and len(learner.ready) == 0
    versions = [3, 2, 1, 0]  # staleness 0, 1, 2, 3: the last two exceed K = 1
    for i, v in enumerate(versions):
        for j, success in enumerate((True, False)):
            key = EpisodeKey(i, 0, j)
            learner.add_many(_episode(learner.policy, key, "reach-left", success, v))
    assert len(learner.ready) == 32
    updates = learner.train_available()
    stats = learner.stats()
    stale_chunks = 2 * 2 * 4  # two versions beyond K, two episodes each, four chunks
    if mode == "drop":
        assert stats["dropped_stale"] == stale_chunks and stats["corrected_stale"] == 0
        assert stats["trained_samples"] == 32 - stale_chunks
        assert stats["staleness_max"] <= 1
    else:
        assert stats["corrected_stale"] == stale_chunks and stats["dropped_stale"] == 0
        assert stats["trained_samples"] == 32
    assert updates == learner.updates == 1
    assert learner.version == 4
    # later chunks are judged against the new version: a v3 chunk is now 1 stale, a v2 chunk 2
    learner.add_many(_episode(learner.policy, EpisodeKey(8, 0, 0), "reach-left", True, 2))
    learner.add_many(_episode(learner.policy, EpisodeKey(8, 0, 1), "reach-left", False, 3))
    taken, corrected = learner._take_micro_batch()
    assert [s.transition.version for s in taken] == ([3] * 4 if mode == "drop" else [2] * 4 + [3] * 4)
    assert corrected == ([False] * 4 if mode == "drop" else [True] * 4 + [False] * 4)
    after = learner.weights()
    assert any(not np.array_equal(start[k].numpy(), after[k].numpy()) for k in start)


def test_finished_episodes_feed_the_stream_without_recording(bc_policy_factory):
    learner = Learner(
        bc_policy_factory(), LearnerConfig(micro_batch=4, group_window=8, min_group=2), SamplerConfig(sigma=0.1)
    )
    learner.add_many(_episode(learner.policy, EpisodeKey(0, 0, 0), "reach-left", False, 0))
    learner.add_many(_episode(learner.policy, EpisodeKey(0, 0, 1), "reach-left", True, 0))
    assert learner.zero_advantage == 4 and len(learner.ready) == 4  # the second episode's chunks, A > 0
    assert learner.trajectories()[str(EpisodeKey(0, 0, 1))] == []  # transitions are not kept
    assert learner.update() and learner.version == 1
