"""The plain loop: RL in one process, no Ray, no scheduler: the meaning of the synchronous mode.

Step every environment through its chunk, generate the next chunks for all of them in one batch,
update the learner on every full micro-batch, repeat. It shares the sampler, the learner and the
seeding rules with the pipeline, and nothing else: the synchronous pipeline, for the same config
and seeds, must produce exactly the trajectories this loop produces (tests check it), which is
what makes the asynchronous-vs-synchronous comparison a comparison of scheduling alone.
"""

from __future__ import annotations

from typing import Any

import torch

from robolake.rl.config import RLConfig
from robolake.rl.generation import generate
from robolake.rl.learner import Learner
from robolake.rl.messages import EpisodeKey, GenRequest, Segment, Transition, chunk_seed
from robolake.rl.policy import PolicyFactory
from robolake.rl.workers import env_seed
from robolake.sim.contract import EnvFactory, Observation

__all__ = ["run_reference"]


def run_reference(
    config: RLConfig, policy_factory: PolicyFactory, env_factory: EnvFactory
) -> tuple[dict[str, list[Transition]], list[dict[str, Any]]]:
    """Run `config` (its mode ignored) as a plain loop; returns (trajectories by episode, ledger)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(config.learner.torch_threads)
    try:
        return _loop(config, policy_factory, env_factory)
    finally:
        torch.set_num_threads(threads)


def _loop(
    config: RLConfig, policy_factory: PolicyFactory, env_factory: EnvFactory
) -> tuple[dict[str, list[Transition]], list[dict[str, Any]]]:
    policy = policy_factory()
    learner = Learner(policy, config.learner, config.sampler, record=True)
    n = config.num_envs
    envs = [env_factory(config.task_of(i)) for i in range(n)]
    episode = [0] * n
    chunk = [0] * n
    seeds = [0] * n
    obs: list[Observation] = [None] * n  # type: ignore[list-item]
    pending: list[list[Transition]] = [[] for _ in range(n)]
    ret = [0.0] * n
    taken_in_episode = [0] * n
    cap = config.max_episode_steps

    def key(i: int) -> EpisodeKey:
        return EpisodeKey(i, 0, episode[i])

    def start(i: int) -> Segment:
        seeds[i] = env_seed(config.seed, i, 0, episode[i])
        obs[i] = envs[i].reset(seeds[i])
        chunk[i], pending[i], ret[i], taken_in_episode[i] = 0, [], 0.0, 0
        return Segment(key(i), config.task_of(i), seeds[i], i // config.envs_per_worker, 0)

    learner.add_many([start(i) for i in range(n)])
    steps = 0
    while steps < config.env_steps:
        requests = [
            GenRequest(key(i), chunk[i], obs[i], chunk_seed(config.seed, i, 0, episode[i], chunk[i])) for i in range(n)
        ]
        responses = generate(policy, requests, config.sampler, learner.version)
        segments: list[Segment] = []
        for i, resp in enumerate(responses):
            done = success = False
            taken = 0
            for a in resp.actions[: config.execute_steps]:
                r = envs[i].step(a)
                taken += 1
                taken_in_episode[i] += 1
                ret[i] += r.reward
                success = success or r.success
                if r.done or (cap is not None and taken_in_episode[i] >= cap):
                    done = True
                    break
            pending[i].append(Transition(obs[i], resp.chain, resp.logp, resp.version, chunk[i], taken))
            steps += taken
            chunk[i] += 1
            if done:
                w = i // config.envs_per_worker
                segments.append(
                    Segment(
                        key(i),
                        config.task_of(i),
                        seeds[i],
                        w,
                        1,
                        tuple(pending[i]),
                        final=True,
                        success=success,
                        ret=ret[i],
                    )
                )
                episode[i] += 1
                segments.append(start(i))
            else:
                obs[i] = envs[i].observe()
        learner.add_many(segments)
        if config.learn:
            learner.train_available()
    # the budget is spent: running episodes end truncated, with what they did so far
    learner.add_many(
        [
            Segment(
                key(i),
                config.task_of(i),
                seeds[i],
                i // config.envs_per_worker,
                1,
                tuple(pending[i]),
                final=True,
                truncated=True,
            )
            for i in range(n)
        ]
    )
    return learner.trajectories(), learner.episodes()
