"""The generation server: one Ray actor that batches observations from every environment.

Requests arrive one per environment whenever that environment needs a chunk (`act`). An asyncio
loop collects them into a batch that closes as soon as it holds `max_batch` observations or
`deadline_s` after its first one arrived, whichever comes first, runs the stochastic sampler on
the whole batch in an executor thread (so requests keep arriving and queueing meanwhile), and
resolves each request's own future with its own chunk. A lone environment therefore waits at
most one deadline, never for a full batch of others.

Weights arrive from the learner by version (`set_weights`, a Ray object ref resolved on arrival)
and are swapped in between two batches: generation never waits for the learner, and every chunk
is labelled with the version that produced it, which is what the learner's staleness bound reads.

`act_many` is a worker's whole round of requests (`RLConfig.group_requests`). Rounds are merged
across workers: a batch that starts with a round waits, up to `round_deadline_s`, for the other
workers' rounds, and closes as soon as it holds `full_batch` requests (every environment of the
run: no more can come, since a worker sends its next round only once this one is answered).
Serving each worker's round alone (4 of 8 environments at the default layout) cost async +6% to
+21% CPU per env step over the lockstep mode's batches of 8 (a forward of 4 costs well over half
one of 8); merged, async generates in batches as large as sync's, and the learner still trains
while the environments step and wait. A batch normally closes when every worker's round is in;
the round deadline (500 ms) is a safety net for a worker that died, and `drain` ends the wait
when a run stops. Waiting for every round is what keeps the workers in phase: with a deadline
of 50 ms, under load, one worker's round often came later than that, the two then alternated
with half batches, and batches averaged 4.6. `act_batch` serves a whole list at once with no
deadline: the synchronous mode's lockstep call, on the same sampler code.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from robolake.rl.config import GenerationConfig, SamplerConfig
from robolake.rl.messages import GenRequest, GenResponse
from robolake.rl.policy import PolicyFactory, TrainablePolicy
from robolake.rl.sampler import draw_noise, sample_chains
from robolake.training.threads import set_torch_threads

__all__ = ["GenerationServer", "generate"]

log = logging.getLogger(__name__)


def actor_device() -> torch.device:
    """cuda when Ray gave this actor a GPU (or outside Ray with one visible), else cpu."""
    try:
        import ray

        if ray.is_initialized() and ray.get_runtime_context().worker.mode == ray.WORKER_MODE:
            return torch.device("cuda" if ray.get_gpu_ids() and torch.cuda.is_available() else "cpu")
    except Exception:  # not inside an actor
        pass
    return torch.device("cpu")


def generate(
    policy: TrainablePolicy, requests: Sequence[GenRequest], sampler: SamplerConfig, version: int
) -> list[GenResponse]:
    """Sample one chunk per request in one batch (the server's and the reference loop's shared code)."""
    model = policy.model
    c = model.config
    steps = sampler.num_steps or c.num_inference_steps
    obs = [r.obs for r in requests]
    x0, eps = draw_noise(
        [r.noise_seed for r in requests], steps, c.action_horizon, c.max_action_dim, sampler.start_noise
    )
    chains = sample_chains(model, policy.batch(obs), x0, eps, policy.action_mask(obs), sampler.sigma)
    chain = chains.chain.numpy()
    actions = policy.to_env_actions(chain[:, -1], obs)
    logp = chains.logp.numpy()
    n = len(requests)
    return [GenResponse(r.request_id, actions[i], chain[i], logp[i], version, n) for i, r in enumerate(requests)]


class GenerationServer:
    """Ray actor (async): dynamic batching of observations into stochastic `get_action` calls."""

    def __init__(
        self,
        policy_factory: PolicyFactory,
        config: GenerationConfig,
        sampler: SamplerConfig,
        record: bool = False,
        full_batch: int | None = None,
    ) -> None:
        """`full_batch`: the run's environments (a batch holding that many closes at once); None:
        `config.max_batch`."""
        set_torch_threads(explicit=config.torch_threads)  # this actor's own process: intra- and inter-op
        self.config = config
        self.sampler = sampler
        self.full_batch = full_batch
        self.policy = policy_factory()
        self.policy.model.to(actor_device())
        self._initial = {k: v.detach().clone() for k, v in self.policy.model.state_dict().items()}
        self.version = 0
        self._pending: tuple[int, dict[str, torch.Tensor]] | None = None
        # (request, its future, whether it came in a worker's round); None: `drain` was called
        self._queue: asyncio.Queue[tuple[GenRequest, asyncio.Future[GenResponse], bool] | None] | None = None
        self._draining = False
        self._executor = ThreadPoolExecutor(1)
        self._task: asyncio.Task[None] | None = None
        self.batch_sizes: Counter[int] = Counter()
        self.served: list[str] = []
        self.record = record
        self.busy_s = 0.0
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()

    def ready(self) -> int:
        return self.version

    def reset_clock(self) -> None:
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()
        self.busy_s = 0.0
        self.batch_sizes.clear()

    def restart(
        self, config: GenerationConfig, sampler: SamplerConfig, weights: dict[str, torch.Tensor] | None = None
    ) -> int:
        """Back to the initial weights, or to `weights` (a run's final ones, to evaluate them), as
        version 0 with fresh counters, for another run."""
        self.config, self.sampler = config, sampler
        self.policy.model.load_state_dict(self._initial if weights is None else weights)
        self.version = 0
        self._pending = None
        self._draining = False
        self.served = []
        self.reset_clock()
        return self.version

    def drain(self) -> None:
        """The run is ending: from now until `restart`, a batch closes with what is queued
        instead of waiting for rounds that stopped workers will never send."""
        self._draining = True
        if self._queue is not None:
            self._queue.put_nowait(None)  # wakes a batch that is waiting

    def set_weights(self, version: int, state_dict: dict[str, torch.Tensor]) -> int:
        """Queue weights `version`; they are loaded before the next batch. Returns the version."""
        if self._pending is None or version > self._pending[0]:
            self._pending = (version, state_dict)
        return version

    def _run(self, requests: list[GenRequest]) -> list[GenResponse]:
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] > self.version:
            self.policy.model.load_state_dict(pending[1])
            self.version = pending[0]
        t0 = time.perf_counter()
        out = generate(self.policy, requests, self.sampler, self.version)
        self.busy_s += time.perf_counter() - t0
        self.batch_sizes[len(requests)] += 1
        if self.record:
            self.served.extend(r.request_id for r in requests)
        return out

    def _enqueue(self, request: GenRequest, grouped: bool) -> asyncio.Future[GenResponse]:
        loop = asyncio.get_running_loop()
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = loop.create_task(self._batch_loop())
        fut: asyncio.Future[GenResponse] = loop.create_future()
        self._queue.put_nowait((request, fut, grouped))
        return fut

    async def act(self, request: GenRequest) -> GenResponse:
        """The chunk for one observation (batched with whatever else arrives meanwhile)."""
        return await self._enqueue(request, False)

    async def act_many(self, requests: list[GenRequest]) -> list[GenResponse]:
        """The chunks of a worker's round, in order (batched with whatever else is queued)."""
        futures = [self._enqueue(r, True) for r in requests]
        return list(await asyncio.gather(*futures))

    async def act_batch(self, requests: list[GenRequest]) -> list[GenResponse]:
        """Chunks for a whole list in one batch (the synchronous mode's call)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, list(requests))

    def _closes_at(self) -> int:
        """Requests that close a batch at once: `max_batch`, or every environment when fewer."""
        return min(self.config.max_batch, self.full_batch or self.config.max_batch)

    async def _batch_loop(self) -> None:
        if self._queue is None:
            raise RuntimeError("the batch loop started before its queue (act creates both)")
        loop = asyncio.get_running_loop()
        while True:
            first = await self._queue.get()
            if first is None:
                continue
            batch = [first]
            # a worker's round waits for the other workers' rounds (see the module docstring)
            wait = 0.0 if self._draining else self.config.round_deadline_s if first[2] else self.config.deadline_s
            deadline = loop.time() + wait
            while len(batch) < self._closes_at():
                if not self._queue.empty():
                    item = self._queue.get_nowait()
                elif (remaining := deadline - loop.time()) <= 0:
                    break
                else:
                    try:
                        item = await asyncio.wait_for(self._queue.get(), remaining)
                    except TimeoutError:
                        break
                if item is None:  # drained: serve what is here
                    break
                batch.append(item)
            try:
                results = await loop.run_in_executor(self._executor, self._run, [r for r, _, _ in batch])
            except Exception as e:  # every waiting environment hears of it
                log.exception("generation failed for a batch of %d", len(batch))
                for _, fut, _ in batch:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            for (_, fut, _), res in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(res)

    def stats(self) -> dict[str, Any]:
        sizes = self.batch_sizes
        batches = sum(sizes.values())
        return {
            "version": self.version,
            "batches": batches,
            "requests": sum(k * v for k, v in sizes.items()),
            "batch_size_mean": (sum(k * v for k, v in sizes.items()) / batches) if batches else 0.0,
            "batch_sizes": {str(k): v for k, v in sorted(sizes.items())},
            "busy_s": self.busy_s,
            "wall_s": time.perf_counter() - self._t0,
            "cpu_s": time.process_time() - self._cpu0,
        }

    def served_ids(self) -> list[str]:
        return list(self.served)

    def weights_checksum(self) -> float:
        return float(sum(float(p.detach().double().sum()) for p in self.policy.model.parameters()))
