"""The coordinator: builds the actors, runs them asynchronously or in lockstep, and measures.

Asynchronous (`mode="async"`): environment workers, the generation server and the learner all
run at once. The coordinator only watches: every `log_every_s` it reads each component's
counters (a metrics row), stops everything once the environment-step budget is spent, and
replaces a worker that died (its running episodes are recorded as truncated by the learner).

Synchronous (`mode="sync"`): the same actors in lockstep, as synchronous RL frameworks run them:
every environment executes its chunk, then the server generates for all of them in one batch,
then the learner updates on every full micro-batch that became ready and the server loads the
new weights; only then do the environments move again. Pieces of episodes reach the learner in
environment order, so a run is reproducible and equals the plain loop of `reference.py`.

With a `RolloutTarget` (`robolake rl --record-to LAKE`), every episode that finishes is recorded
by its worker and, after the run, written into the lake as rollout episodes in one version
(`robolake.lake.intake.rollouts`); `RLResult.recorded` says what landed.

Both modes count the same things the same way, so the comparison isolates scheduling: env steps/s
(total over wall time), learner samples/s, and each component's idle fraction, 1 - busy / wall
(environments: stepping, including injected latency; server: sampling; learner: updating).
Each actor also reports its process's CPU seconds (all threads, the offscreen renderer's too),
so a run states how many cores it kept busy and its CPU cost per environment step: on a machine
with fewer cores than components, overlap cannot buy more than the idle cores of the lockstep run.
The machine's CPU use by everyone else over the run (`cpu.others_s`, from /proc/stat) says how
many of the cores were this run's to use. The learner's update CPU is reported apart
(`cpu.learner_update_s`): it scales with the chunks trained, not with env steps, so the CPU a
scheduler adds per env step is the rest ("acting").
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robolake.lake import RolloutTarget
from robolake.rl.config import RLConfig
from robolake.rl.policy import PolicyFactory
from robolake.rl.workers import WorkerSlots, restart_slots
from robolake.sim.contract import EnvFactory
from robolake.sim.worker import start_worker

__all__ = ["Pipeline", "RLResult", "run_rl", "success_curve"]

log = logging.getLogger(__name__)

Progress = Callable[[dict[str, Any]], None]


@dataclass
class RLResult:
    """Outcome of one run.

    Attributes:
        summary: Totals: throughput, idle fractions, staleness, success (see `Pipeline.summary`).
        metrics: The metric rows written during the run.
        episodes: The learner's ledger, one dict per episode.
        weights: Final policy weights (CPU state dict).
        trajectories: Per episode, its transitions (with `record_trajectories`).
        served: Request ids the server answered, in order (with `record_trajectories`).
        recorded: With a `RolloutTarget`: the lake, version, episodes written and skipped,
            successes and steps; None without.
    """

    summary: dict[str, Any]
    metrics: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    weights: dict[str, Any]
    trajectories: dict[str, Any] = field(default_factory=dict)
    served: list[str] = field(default_factory=list)
    recorded: dict[str, Any] | None = None


def machine_busy_s() -> float | None:
    """CPU seconds the whole machine was busy since boot (all processes, anyone's; steal counts:
    capacity taken from this machine), from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:9]]  # user .. steal (guest is inside user)
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle and iowait


def success_curve(episodes: list[dict[str, Any]], env_steps: int, bins: int = 10) -> list[list[float]]:
    """[[env_steps at the end of the bin, success rate of episodes finished in it], ...] (empty bins skipped)."""
    done = [e for e in episodes if e["status"] == "finished"]
    if not done or env_steps <= 0:
        return []
    width = max(1, -(-env_steps // bins))
    out = []
    for b in range(bins):
        lo, hi = b * width, (b + 1) * width
        inside = [
            e for e in done if lo < e["finished_at_env_steps"] <= hi or (b == 0 and e["finished_at_env_steps"] == 0)
        ]
        if inside:
            out.append([float(min(hi, env_steps)), sum(e["success"] for e in inside) / len(inside)])
    return out


class Pipeline:
    """The actors of one run and the loop that drives them (see the module docstring)."""

    def __init__(
        self,
        config: RLConfig,
        policy_factory: PolicyFactory,
        env_factory: EnvFactory,
        *,
        metrics_path: str | Path | None = None,
        progress: Progress | None = None,
        record_to: RolloutTarget | None = None,
    ) -> None:
        from robolake.ray_tasks import ensure_ray

        ensure_ray(config.ray_address)
        import ray

        from robolake.rl.generation import GenerationServer
        from robolake.rl.learner import LearnerActor

        self.ray = ray
        self.config = config
        self.env_factory = env_factory
        self.record_to = record_to
        self.recorded: dict[str, Any] | None = None
        self.progress = progress
        self.metrics_path = Path(metrics_path) if metrics_path else None
        self.rows: list[dict[str, Any]] = []
        g, lc = config.generation, config.learner
        server_cls: Any = ray.remote(GenerationServer)
        learner_cls: Any = ray.remote(LearnerActor)
        self.server: Any = server_cls.options(max_concurrency=10_000, **g.resources.ray_options()).remote(
            policy_factory, g, config.sampler, config.record_trajectories, config.num_envs
        )
        self.learner: Any = learner_cls.options(max_concurrency=64, **lc.resources.ray_options()).remote(
            policy_factory, lc, config.sampler, config.record_trajectories
        )
        self.incarnations = [0] * config.num_workers
        self.workers = [self._new_worker(i) for i in range(config.num_workers)]
        self.replaced = 0
        ray.get([self.server.ready.remote(), self.learner.ready.remote(), *[w.ready.remote() for w in self.workers]])

    def restart(self, config: RLConfig, weights: dict[str, Any] | None = None) -> None:
        """Make the same actors ready for another run under `config` (another mode or latency
        profile; the same layout and tasks): initial weights (or `weights` for the generation
        server, e.g. a run's final ones to evaluate with `learn=False`), empty ledger, fresh seeds.

        Raises:
            ValueError: `config` changes the number of workers, environments or the tasks.
        """
        c = self.config
        if (config.num_workers, config.envs_per_worker, config.tasks) != (c.num_workers, c.envs_per_worker, c.tasks):
            raise ValueError(
                "Pipeline.restart keeps the actors: num_workers, envs_per_worker and tasks must not change"
            )
        self.config = config
        self.rows = []
        self.replaced = 0
        self.ray.get(
            [
                self.server.restart.remote(config.generation, config.sampler, weights),
                self.learner.restart.remote(config.learner, config.sampler),
                *[w.rebuild.remote(functools.partial(restart_slots, config)) for w in self.workers],
            ]
        )

    def run(self, on_tick: Callable[[Pipeline], None] | None = None) -> RLResult:
        """Run `config.mode` to the end of the budget and return the result."""
        if self.config.mode == "async":
            self.run_async(on_tick)
        else:
            self.run_sync(on_tick)
        if self.record_to is not None:
            self.recorded = self.write_recorded()
        return self.result()

    def write_recorded(self) -> dict[str, Any]:
        """Take every worker's recorded episodes and write them into the `RolloutTarget`'s lake."""
        assert self.record_to is not None  # run() calls this only with a target
        episodes = [e for part in self.ray.get([w.take.remote() for w in self.workers]) for e in part]
        if not episodes:
            return {
                "lake": self.record_to.lake,
                "lake_version": None,
                "written": 0,
                "skipped": 0,
                "successes": 0,
                "steps": 0,
            }
        r = self.record_to.write(episodes)
        return {
            "lake": r.lake_uri,
            "lake_version": r.lake_version,
            "written": r.written,
            "skipped": r.skipped,
            "successes": r.successes,
            "steps": r.steps,
        }

    def _new_worker(self, index: int) -> Any:
        c = self.config
        slots = WorkerSlots(
            index, self.incarnations[index], c, self.env_factory, self.server, self.learner, self.record_to
        )
        return start_worker(
            slots, index=index, threads=True, slots=c.envs_per_worker, resources=c.worker_resources.ray_options()
        )

    # -- measuring -------------------------------------------------------------------------------

    def _reset_clocks(self) -> None:
        self.ray.get([a.reset_clock.remote() for a in (self.server, self.learner, *self.workers)])
        self._t0 = time.perf_counter()
        self._steps_before: list[int] = [0] * len(self.workers)  # steps of replaced workers' predecessors
        self._dead_busy = 0.0
        self._dead_slot_s = 0.0
        self._dead_cpu = 0.0
        self._cpu0 = time.process_time()
        self._machine0 = machine_busy_s()
        self._last = (self._t0, 0, 0)

    def _poll(self, timeout: float = 10.0) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
        refs = [w.stats.remote() for w in self.workers]
        workers = []
        for i, ref in enumerate(refs):
            try:
                workers.append(self.ray.get(ref, timeout=timeout))
            except Exception:  # a dead worker: the watchdog replaces it
                workers.append(
                    {
                        "worker": i,
                        "env_steps": 0,
                        "episodes": 0,
                        "busy_s": 0.0,
                        "wait_s": 0.0,
                        "slots": 0,
                        "wall_s": 0.0,
                        "cpu_s": 0.0,
                    }
                )
        server, learner = self.ray.get([self.server.stats.remote(), self.learner.stats.remote()], timeout=timeout)
        return workers, server, learner

    def env_steps(self, workers: list[dict[str, Any]]) -> int:
        return sum(w["env_steps"] for w in workers) + sum(self._steps_before)

    def _row(
        self,
        workers: list[dict[str, Any]],
        server: dict[str, Any],
        learner: dict[str, Any],
        at: tuple[float, float] | None = None,
    ) -> dict[str, Any]:
        """One metrics row; `at` = (perf_counter, driver process_time) of the stats (default: now)."""
        now, driver_cpu = at if at is not None else (time.perf_counter(), time.process_time())
        wall = now - self._t0
        steps = self.env_steps(workers)
        t_last, steps_last, trained_last = self._last
        dt = max(now - t_last, 1e-9)
        self._last = (now, steps, learner["trained_samples"])
        slot_s = sum(w["slots"] for w in workers) * wall + self._dead_slot_s
        env_busy = sum(w["busy_s"] for w in workers) + self._dead_busy
        row = {
            "mode": self.config.mode,
            "t": round(wall, 3),
            "env_steps": steps,
            "env_steps_per_s": (steps - steps_last) / dt,
            "episodes_finished": learner["episodes_finished"],
            "episodes_truncated": learner["episodes_truncated"],
            "gen_batches": server["batches"],
            "gen_batch_size_mean": server["batch_size_mean"],
            "policy_version_server": server["version"],
            "learner_version": learner["version"],
            "learner_updates": learner["updates"],
            "learner_updates_per_s": learner["updates"] / max(wall, 1e-9),
            "learner_samples": learner["trained_samples"],
            "learner_samples_per_s": (learner["trained_samples"] - trained_last) / dt,
            "staleness_mean": learner["staleness_mean"],
            "staleness_max": learner["staleness_max"],
            "dropped_stale": learner["dropped_stale"],
            "corrected_stale": learner["corrected_stale"],
            "idle_fraction": {
                "env": 1.0 - env_busy / slot_s if slot_s > 0 else 0.0,
                "generation": 1.0 - server["busy_s"] / wall if wall > 0 else 0.0,
                "learner": 1.0 - learner["busy_s"] / wall if wall > 0 else 0.0,
            },
            "cpu": self._cpu(workers, server, learner, wall, steps, driver_cpu),
            "workers_replaced": self.replaced,
        }
        for k in ("last_loss", "last_clip_fraction", "last_approx_kl", "last_grad_norm"):
            if k in learner:
                row[k] = learner[k]
        return row

    def _cpu(
        self,
        workers: list[dict[str, Any]],
        server: dict[str, Any],
        learner: dict[str, Any],
        wall: float,
        steps: int,
        driver_cpu: float,
    ) -> dict[str, float]:
        """CPU seconds per component since the clocks were reset, cores kept busy, ms per env step."""
        parts = {
            "env_s": sum(w["cpu_s"] for w in workers) + self._dead_cpu,
            "generation_s": server["cpu_s"],
            "learner_s": learner["cpu_s"],
            "driver_s": driver_cpu - self._cpu0,
        }
        total = sum(parts.values())
        return {
            **parts,
            # the part of learner_s spent in updates (the rest: receiving pieces, publishing weights)
            "learner_update_s": learner.get("update_cpu_s", 0.0),
            "cores_used": total / wall if wall > 0 else 0.0,
            "ms_per_env_step": 1e3 * total / steps if steps else 0.0,
        }

    def _emit(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if self.metrics_path is not None:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with self.metrics_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
        if self.progress is not None:
            self.progress(row)

    # -- asynchronous ----------------------------------------------------------------------------

    def _replace(self, index: int, last: dict[str, Any] | None) -> Any:
        """A new worker for `index` (the next incarnation); the old one's episodes are truncated."""
        lost = self.ray.get(self.learner.mark_lost.remote(index))
        log.warning("environment worker %d died; %d running episodes recorded as truncated; replacing it", index, lost)
        if last is not None:
            self._steps_before[index] += last["env_steps"]
            self._dead_busy += last["busy_s"]
            self._dead_slot_s += last["slots"] * last["wall_s"]
            self._dead_cpu += last["cpu_s"]
        self.incarnations[index] += 1
        self.replaced += 1
        worker = self._new_worker(index)
        self.ray.get(worker.ready.remote())
        self.ray.get(worker.reset_clock.remote())
        self.workers[index] = worker
        return worker

    def run_async(self, on_tick: Callable[[Pipeline], None] | None = None) -> None:
        ray = self.ray
        c = self.config
        self._reset_clocks()
        learner_run: Any = None
        if c.learn:
            learner_run = self.learner.run.remote(self.server)
        runs = {i: w.run.remote() for i, w in enumerate(self.workers)}
        last_stats: dict[int, dict[str, Any]] = {}
        next_log = time.perf_counter() + c.log_every_s
        while True:
            done, _ = ray.wait(list(runs.values()), num_returns=len(runs), timeout=min(0.2, c.log_every_s))
            for ref in done:
                index = next(i for i, r in runs.items() if r == ref)
                try:
                    ray.get(ref)
                    raise RuntimeError(f"environment worker {index} stopped before the budget was spent")
                except ray.exceptions.RayActorError:
                    worker = self._replace(index, last_stats.get(index))
                    runs[index] = worker.run.remote()
            workers, server, learner = self._poll()
            for w in workers:
                if w["slots"]:
                    last_stats[w["worker"]] = w
            if on_tick is not None:
                on_tick(self)
            if self.env_steps(workers) >= c.env_steps:
                break
            if time.perf_counter() >= next_log:
                self._emit(self._row(workers, server, learner))
                next_log += c.log_every_s
        # the server first, so that no round waits for a peer that has stopped asking
        ray.get(self.server.drain.remote())
        ray.get([w.stop.remote() for w in self.workers])
        ray.get(list(runs.values()))
        if learner_run is not None:
            # The budget is spent: the learner first trains on every whole update still ready
            # (stale chunks are dropped as they come up), inside the run's wall time, so both
            # modes end having trained on what their finished episodes gave: the lockstep mode
            # trains it at every tick, and an asynchronous run that stopped with a backlog
            # would be credited with throughput it did not pay for.
            per_update = c.learner.micro_batch * c.learner.micro_batches_per_update
            while ray.get(self.learner.stats.remote())["ready"] >= per_update:
                time.sleep(0.05)
            ray.get(self.learner.stop.remote())
            ray.get(learner_run)
        self._wall = time.perf_counter() - self._t0
        self._final = self._poll()
        self._final_at = (self._t0 + self._wall, time.process_time())
        self._machine1 = machine_busy_s()

    # -- synchronous -----------------------------------------------------------------------------

    def run_sync(self, on_tick: Callable[[Pipeline], None] | None = None) -> None:
        ray = self.ray
        c = self.config
        self._reset_clocks()
        begun = [start for part in ray.get([w.begin.remote() for w in self.workers]) for start in part]
        requests = [r for _, r in begun]
        ray.get(self.learner.add_many.remote([s for s, _ in begun]))
        next_log = time.perf_counter() + c.log_every_s
        steps = 0
        per = c.envs_per_worker
        while steps < c.env_steps:
            responses = ray.get(self.server.act_batch.remote(requests))
            parts = ray.get([w.advance.remote(responses[i * per : (i + 1) * per]) for i, w in enumerate(self.workers)])
            out = [r for part in parts for r in part]  # (pieces, next request, env steps) per environment
            requests = [r for _, r, _ in out]
            steps = sum(n for _, _, n in out)
            ray.get(self.learner.add_many.remote([s for segs, _, _ in out for s in segs]))
            if c.learn:
                version, refs = ray.get(self.learner.train_available.remote())
                if refs:
                    ray.get(self.server.set_weights.remote(version, refs[0]))
            if on_tick is not None:
                on_tick(self)
            if time.perf_counter() >= next_log:
                self._emit(self._row(*self._poll()))
                next_log += c.log_every_s
        self._wall = time.perf_counter() - self._t0
        self._final = self._poll()
        self._final_at = (self._t0 + self._wall, time.process_time())
        self._machine1 = machine_busy_s()
        ray.get(
            self.learner.add_many.remote(
                [s for segs in ray.get([w.finish.remote() for w in self.workers]) for s in segs]
            )
        )

    # -- results ---------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        workers, server, learner = self._final
        row = self._row(workers, server, learner, at=self._final_at)
        wall = self._wall
        steps = self.env_steps(workers)
        episodes = self.ray.get(self.learner.episodes.remote())
        finished = [e for e in episodes if e["status"] == "finished"]
        tasks = sorted({e["task"] for e in episodes})
        per_task = {}
        for t in tasks:
            fin = [e for e in finished if e["task"] == t]
            half = len(fin) // 2
            per_task[t] = {
                "episodes": len(fin),
                "success_rate": sum(e["success"] for e in fin) / len(fin) if fin else None,
                "success_first_half": sum(e["success"] for e in fin[:half]) / half if half else None,
                "success_second_half": sum(e["success"] for e in fin[half:]) / (len(fin) - half)
                if len(fin) - half
                else None,
            }
        cpu = dict(row["cpu"])
        ours = sum(cpu[k] for k in ("env_s", "generation_s", "learner_s", "driver_s"))
        if self._machine0 is not None and self._machine1 is not None:
            # Everyone else's CPU over the run (Ray's own daemons count as others: a slight
            # overestimate): on a shared machine, the cores this run could not have had.
            cpu["others_s"] = max(0.0, self._machine1 - self._machine0 - ours)
        return {
            "mode": self.config.mode,
            "wall_s": wall,
            "env_steps": steps,
            "env_steps_per_s": steps / wall if wall > 0 else 0.0,
            "learner_samples": learner["trained_samples"],
            "learner_samples_per_s": learner["trained_samples"] / wall if wall > 0 else 0.0,
            "learner_updates": learner["updates"],
            "learner_updates_per_s": learner["updates"] / wall if wall > 0 else 0.0,
            "idle_fraction": row["idle_fraction"],
            "cpu": cpu,
            "generation": {
                "batches": server["batches"],
                "batch_size_mean": server["batch_size_mean"],
                "batch_sizes": server["batch_sizes"],
            },
            "staleness": {
                "max_allowed": self.config.learner.max_staleness,
                "mode": self.config.learner.staleness_mode,
                "mean": learner["staleness_mean"],
                "max_consumed": learner["staleness_max"],
                "dropped": learner["dropped_stale"],
                "corrected": learner["corrected_stale"],
            },
            "zero_advantage_chunks": learner["zero_advantage"],
            "episodes_finished": len(finished),
            "episodes_truncated": sum(e["status"] == "truncated" for e in episodes),
            "workers_replaced": self.replaced,
            "success_rate": sum(e["success"] for e in finished) / len(finished) if finished else None,
            "tasks": per_task,
            "success_curve": success_curve(episodes, steps),
        }

    def result(self) -> RLResult:
        ray = self.ray
        trajectories: dict[str, Any] = {}
        served: list[str] = []
        if self.config.record_trajectories:
            trajectories = ray.get(self.learner.trajectories.remote())
            served = ray.get(self.server.served_ids.remote())
        return RLResult(
            summary=self.summary(),
            metrics=list(self.rows),
            episodes=ray.get(self.learner.episodes.remote()),
            weights=ray.get(self.learner.weights.remote()),
            trajectories=trajectories,
            served=served,
            recorded=self.recorded,
        )

    def shutdown(self) -> None:
        for a in (*self.workers, self.server, self.learner):
            try:
                self.ray.kill(a)
            except Exception:  # already gone
                pass


def run_rl(
    config: RLConfig,
    policy_factory: PolicyFactory,
    env_factory: EnvFactory,
    *,
    metrics_path: str | Path | None = None,
    progress: Progress | None = None,
    on_tick: Callable[[Pipeline], None] | None = None,
    record_to: RolloutTarget | None = None,
) -> RLResult:
    """Run RL fine-tuning in `config.mode` on Ray and return its measurements and final weights;
    with `record_to`, every finished episode is also written into that lake."""
    pipe = Pipeline(
        config, policy_factory, env_factory, metrics_path=metrics_path, progress=progress, record_to=record_to
    )
    try:
        return pipe.run(on_tick)
    finally:
        pipe.shutdown()
