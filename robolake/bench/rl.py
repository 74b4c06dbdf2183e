"""Asynchronous vs synchronous RL on the same actors, tasks, seeds and environment-step budget.

One Ray pipeline is built once (environment workers, generation server, learner) and restarted
between runs with the initial weights, an empty ledger and the same episode seeds, so the only
difference between an "async" and a "sync" run is scheduling. Runs are paired and alternate
(async sync, sync async, ...) so that drifting machine load hits both modes alike; the speedup
is the median of the paired ratios of env steps/s, with its min and max. Throughput is total
over total (steps / wall seconds of the run, actor start-up excluded).

Two latency profiles: "suite", the simulator as it is, and "heavy_tail", where every
environment step also sleeps a delay drawn from a lognormal (median `--tail-scale-ms`, log-std
`--tail-shape`), the long tail of resets, contacts and rendering in real simulators. The sync
mode waits for the slowest environment at every tick; the async mode does not.

Every run also reports the CPU seconds of each component's process (all threads), so the table
shows how many cores each mode kept busy and its CPU cost per env step. Where the machine has
fewer cores than the pipeline has busy components (here: 2 cores for 8 rendering environments, a
sampler and a learner), overlap can only fill the cores the lockstep run leaves idle:
`cpu_ceiling_speedup` is the async throughput that would use every core at async's own measured
CPU cost per step, over the sync throughput, i.e. the most any scheduler could gain here.

Without `--init` the Meta-World runs start from an untrained tiny model: throughput is measured
honestly (the model and the pipeline are the same size), but success stays near zero, so the
sample-efficiency comparison then only says that both modes fail alike. Pass the behaviour-cloned
run of `robolake demo` / `robolake train` as `--init` for the full comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
from typing import Any

from robolake.bench._common import machine, print_table, write_json
from robolake.rl.options import add_pipeline_arguments, pipeline_config

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robolake bench rl", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--quick", action="store_true", help="small budget, one pair per profile")
    p.add_argument("--sim", default=None, choices=["metaworld", "point"], help="default: metaworld when installed")
    p.add_argument("--init", default=None, help="behaviour-cloned run to start from (metaworld)")
    p.add_argument("--tasks", default=None, help="comma-separated tasks (default: reach,drawer-open,button-press)")
    p.add_argument("--steps", type=int, default=None, help="env-step budget per run")
    p.add_argument("--pairs", type=int, default=None, help="paired runs per profile")
    add_pipeline_arguments(p)
    p.add_argument(
        "--tail-scale-ms", type=float, default=2.0, help="heavy-tail profile: lognormal median delay per step"
    )
    p.add_argument("--tail-shape", type=float, default=1.5, help="heavy-tail profile: lognormal log-std")
    p.add_argument("--plot", default=None, help="PNG of success vs env steps and throughput (default: beside --json)")
    return p


def _factories(args: argparse.Namespace) -> tuple[Any, Any, tuple[str, ...], str]:
    from robolake.rl.setup import make_factories

    sim = args.sim
    if sim is None:
        try:
            from robolake.sim import require_sim

            require_sim()
            sim = "metaworld"
        except ImportError:
            sim = "point"
    if sim == "metaworld" and args.init is None:
        from robolake.rl.policy import ModelPolicyFactory
        from robolake.sim import ACTION_DIM, STATE_DIM, MetaWorldFactory, require_sim, resolve_tasks
        from robolake.training.config import ModelConfig
        from robolake.training.model import GrootModel

        require_sim()
        tasks = tuple(t.name for t in resolve_tasks(args.tasks or "reach,drawer-open,button-press"))
        model = GrootModel(
            ModelConfig.preset("tiny", max_state_dim=STATE_DIM, max_action_dim=ACTION_DIM, num_embodiments=1)
        )
        return (
            ModelPolicyFactory.from_model(model, action_dim=ACTION_DIM),
            MetaWorldFactory(),
            tasks,
            "metaworld (untrained init)",
        )
    tasks_arg = args.tasks or ("reach,drawer-open,button-press" if sim == "metaworld" else None)
    policy_factory, env_factory, tasks = make_factories(sim, tasks_arg, args.init)
    return policy_factory, env_factory, tasks, f"{sim} ({args.init or 'untrained init'})"


def _pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's runs of one profile: totals over totals, mean idle fractions, the first run's curve."""
    steps = sum(r["env_steps"] for r in runs)
    wall = sum(r["wall_s"] for r in runs)
    samples = sum(r["learner_samples"] for r in runs)
    finished = sum(r["episodes_finished"] for r in runs)
    succ = sum((r["success_rate"] or 0.0) * r["episodes_finished"] for r in runs)
    cpu = sum(r["cpu"]["env_s"] + r["cpu"]["generation_s"] + r["cpu"]["learner_s"] + r["cpu"]["driver_s"] for r in runs)
    return {
        "env_steps_per_s": steps / wall,
        "cores_used": cpu / wall,
        "cpu_ms_per_env_step": 1e3 * cpu / steps,
        "cpu_s": {k: sum(r["cpu"][f"{k}_s"] for r in runs) for k in ("env", "generation", "learner", "driver")},
        "learner_samples_per_s": samples / wall,
        "learner_updates": sum(r["learner_updates"] for r in runs),
        "idle_fraction": {k: statistics.mean(r["idle_fraction"][k] for r in runs) for k in runs[0]["idle_fraction"]},
        "generation_batch_size_mean": statistics.mean(r["generation"]["batch_size_mean"] for r in runs),
        "staleness_mean": statistics.mean(r["staleness"]["mean"] for r in runs),
        "staleness_max_consumed": max(r["staleness"]["max_consumed"] for r in runs),
        "stale_dropped": sum(r["staleness"]["dropped"] for r in runs),
        "success_rate": succ / finished if finished else None,
        "episodes_finished": finished,
        "success_curve": runs[0]["success_curve"],
        "success_curves": [r["success_curve"] for r in runs],
        "tasks": runs[0]["tasks"],
        "runs": [
            {k: r[k] for k in ("env_steps", "wall_s", "env_steps_per_s", "learner_samples_per_s", "learner_updates")}
            for r in runs
        ],
    }


def _cores() -> float:
    """CPUs this run may use: the Ray cluster's, else this process's affinity."""
    import ray

    if ray.is_initialized():
        return float(ray.cluster_resources().get("CPU", 0)) or float(len(os.sched_getaffinity(0)))
    return float(len(os.sched_getaffinity(0)))


def _profile(pipe: Any, base: Any, pairs: int, label: str) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"async": [], "sync": []}
    ratios = []
    for i in range(pairs):
        order = ("async", "sync") if i % 2 == 0 else ("sync", "async")
        got = {}
        for mode in order:
            pipe.restart(dataclasses.replace(base, mode=mode))
            s = pipe.run().summary
            got[mode] = s
            runs[mode].append(s)
            print(
                f"  {label} pair {i + 1}/{pairs} {mode:<5}: {s['env_steps_per_s']:.1f} env steps/s, "
                f"{s['learner_updates']} updates, success {s['success_rate']}",
                flush=True,
            )
        ratios.append(got["async"]["env_steps_per_s"] / got["sync"]["env_steps_per_s"])
    a, s = _pooled(runs["async"]), _pooled(runs["sync"])
    out: dict[str, Any] = {"async": a, "sync": s}
    out["speedup"] = statistics.median(ratios)
    out["speedup_min"], out["speedup_max"] = min(ratios), max(ratios)
    out["cpu_ceiling_speedup"] = (_cores() * 1e3 / a["cpu_ms_per_env_step"]) / s["env_steps_per_s"]
    out["learner_speedup"] = (
        a["learner_samples_per_s"] / s["learner_samples_per_s"] if s["learner_samples_per_s"] else None
    )
    if a["success_rate"] is not None and s["success_rate"] is not None:
        n_a, n_s = a["episodes_finished"], s["episodes_finished"]
        pa, ps = a["success_rate"], s["success_rate"]
        se = ((pa * (1 - pa) / max(n_a, 1)) + (ps * (1 - ps) / max(n_s, 1))) ** 0.5
        out["sample_efficiency"] = {
            "success_diff": pa - ps,
            "stderr": se,
            "within_2_stderr": abs(pa - ps) <= 2 * se + 1e-9,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from robolake.rl.config import LatencyProfile
    from robolake.rl.pipeline import Pipeline
    from robolake.rl.report import plot_comparison

    steps = args.steps or (1500 if args.quick else 8000)
    pairs = args.pairs or (1 if args.quick else 2)
    policy_factory, env_factory, tasks, label = _factories(args)
    base = pipeline_config(args, tasks, env_steps=steps, log_every_s=5.0)
    tail = LatencyProfile(kind="lognormal", scale_s=args.tail_scale_ms / 1000, shape=args.tail_shape)
    print(f"building the pipeline ({args.workers} workers x {args.envs_per_worker} envs, {label}) ...", flush=True)
    pipe = Pipeline(base, policy_factory, env_factory)
    try:
        # Warm-up, not measured: the first frames of every environment thread create its EGL
        # context and the first batches warm the model; whichever mode ran first would pay it.
        pipe.restart(dataclasses.replace(base, mode="async", env_steps=max(200, steps // 5), learn=False))
        pipe.run()
        suite = _profile(pipe, base, pairs, "suite")
        heavy = _profile(pipe, dataclasses.replace(base, latency=tail), pairs, "heavy_tail")
    finally:
        pipe.shutdown()
    payload: dict[str, Any] = {
        "async": suite["async"],
        "sync": suite["sync"],
        "speedup": suite["speedup"],
        "speedup_min": suite["speedup_min"],
        "speedup_max": suite["speedup_max"],
        "learner_speedup": suite["learner_speedup"],
        "cpu_ceiling_speedup": suite["cpu_ceiling_speedup"],
        "cores": _cores(),
        "sample_efficiency": suite.get("sample_efficiency"),
        "heavy_tail": {
            "speedup": heavy["speedup"],
            "speedup_min": heavy["speedup_min"],
            "speedup_max": heavy["speedup_max"],
            "learner_speedup": heavy["learner_speedup"],
            "cpu_ceiling_speedup": heavy["cpu_ceiling_speedup"],
            "latency": dataclasses.asdict(tail),
            "async": heavy["async"],
            "sync": heavy["sync"],
            "sample_efficiency": heavy.get("sample_efficiency"),
        },
        "config": {
            "sim": label,
            "tasks": list(tasks),
            "env_steps_per_run": steps,
            "pairs": pairs,
            "workers": args.workers,
            "envs_per_worker": args.envs_per_worker,
            "execute_steps": args.execute_steps,
            "quick": args.quick,
        },
        "machine": machine(),
    }
    write_json(args.json, payload)
    plot = args.plot or str(args.json).rsplit(".", 1)[0] + ".png"
    plot_comparison(
        {
            "async": suite["async"],
            "sync": suite["sync"],
            "async (heavy tail)": heavy["async"],
            "sync (heavy tail)": heavy["sync"],
        },
        plot,
    )
    rows: list[tuple[str, Any]] = []
    for name, prof in (("suite", suite), ("heavy_tail", heavy)):
        for mode in ("async", "sync"):
            m = prof[mode]
            rows += [
                (f"{name} {mode} env steps/s", m["env_steps_per_s"]),
                (f"{name} {mode} learner samples/s", m["learner_samples_per_s"]),
                (
                    f"{name} {mode} idle env/gen/learner",
                    "/".join(f"{m['idle_fraction'][k]:.2f}" for k in ("env", "generation", "learner")),
                ),
                (
                    f"{name} {mode} cores busy, CPU ms per env step",
                    f"{m['cores_used']:.2f}, {m['cpu_ms_per_env_step']:.2f}",
                ),
                (f"{name} {mode} success", m["success_rate"] if m["success_rate"] is not None else "n/a"),
            ]
        rows.append(
            (
                f"{name} speedup async/sync (median [min, max])",
                f"{prof['speedup']:.2f} [{prof['speedup_min']:.2f}, {prof['speedup_max']:.2f}]",
            )
        )
        rows.append((f"{name} CPU ceiling of any scheduler here", f"{prof['cpu_ceiling_speedup']:.2f}"))
    print_table(f"RL async vs sync ({label}, {steps} env steps per run, {pairs} pair(s) per profile)", rows)
    return 0
