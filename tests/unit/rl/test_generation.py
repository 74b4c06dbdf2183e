"""The generation server's dynamic batching, driven directly on an asyncio loop (no Ray)."""

from __future__ import annotations

import asyncio

import numpy as np
import torch

from robolake.rl.config import GenerationConfig, SamplerConfig
from robolake.rl.env import PointReachEnv
from robolake.rl.generation import GenerationServer
from robolake.rl.messages import EpisodeKey, GenRequest, chunk_seed


def _requests(envs: range) -> list[GenRequest]:
    out = []
    for i in envs:
        env = PointReachEnv(PointReachEnv.TASKS[i % 2], image_size=16)
        env.reset(i)
        out.append(GenRequest(EpisodeKey(i, 0, 0), 0, env.observe(), chunk_seed(0, i, 0, 0, 0)))
    return out


def _serve(server: GenerationServer, rounds: list[tuple[float, range]]) -> list[list]:
    """Send each (delay, environments) round with `act_many` after its delay; every round's answers."""

    async def one(delay: float, envs: range) -> list:
        await asyncio.sleep(delay)
        return await server.act_many(_requests(envs))

    async def main() -> list[list]:
        return list(await asyncio.gather(*(one(d, e) for d, e in rounds)))

    threads = torch.get_num_threads()
    try:
        return asyncio.run(main())
    finally:
        torch.set_num_threads(threads)  # the server sized this process's threads


def test_two_workers_rounds_are_merged_into_one_batch(bc_policy_factory):
    """The second worker's round, 20 ms behind the first, joins its batch (4 = every env), which
    closes as soon as it is full rather than at the round deadline."""
    config = GenerationConfig(round_deadline_s=0.5)
    server = GenerationServer(bc_policy_factory, config, SamplerConfig(sigma=0.2), full_batch=4)
    answers = _serve(server, [(0.0, range(0, 2)), (0.02, range(2, 4))])
    assert dict(server.batch_sizes) == {4: 1}
    assert [[r.request_id for r in a] for a in answers] == [
        [r.request_id for r in _requests(range(0, 2))],
        [r.request_id for r in _requests(range(2, 4))],
    ]
    assert all(np.isfinite(r.chain).all() and r.batch_size == 4 for a in answers for r in a)


def test_a_lone_round_waits_at_most_the_round_deadline(bc_policy_factory):
    """A worker whose peer never asks is served alone once the deadline passes."""
    config = GenerationConfig(round_deadline_s=0.05)
    server = GenerationServer(bc_policy_factory, config, SamplerConfig(sigma=0.2), full_batch=4)
    _serve(server, [(0.0, range(0, 2))])
    assert dict(server.batch_sizes) == {2: 1}


def test_drain_serves_a_waiting_round_at_once(bc_policy_factory):
    """At the end of a run a round must not wait out the deadline for a peer that stopped."""
    config = GenerationConfig(round_deadline_s=3600.0)  # without drain: served in an hour
    server = GenerationServer(bc_policy_factory, config, SamplerConfig(sigma=0.2), full_batch=4)

    async def main() -> list:
        served = asyncio.ensure_future(server.act_many(_requests(range(0, 2))))
        await asyncio.sleep(0.05)
        server.drain()
        return await asyncio.wait_for(served, 600)  # a guard against hanging, not a timing

    threads = torch.get_num_threads()
    try:
        answers = asyncio.run(main())
    finally:
        torch.set_num_threads(threads)
    assert len(answers) == 2 and dict(server.batch_sizes) == {2: 1}
