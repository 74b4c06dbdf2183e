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

Three schedulers run on every profile: "async" (workers, server and learner decoupled; each
worker's environments ask the server together, `RLConfig.group_requests`), "async_per_env" (every
environment asks on its own: no environment ever waits for a neighbour, at one Ray call per
environment and chunk) and "sync" (lockstep). Every run must train: a mode that finishes with
zero learner updates fails the benchmark, since without the learner's work the comparison is
environment || generation only and says nothing about the claim; and an asynchronous run trains
on every whole update still ready when its budget ends, inside its wall time, so that both modes
pay for the chunks their finished episodes gave. The table gives, per mode, env
steps/s, updates/s, the three idle fractions and the per-stage CPU budget (ms of CPU per env step
of the environments, the generation server, the learner and the driver). The machine's other
load is measured too (/proc/stat over the run, minus this run's own CPU), so the ceiling is
stated both for the cores Ray was given and for the cores the rest of the machine left free.

Without `--init` the Meta-World runs start from an untrained tiny model: every episode fails, so
the advantage is computed from the episode's return (Meta-World's shaped reward,
`LearnerConfig.reward="return"`) and `--quick` also caps episodes at 48 steps, so that a short run
has finished episodes in every task group and the learner works as hard as it would from a real
policy. Success then stays near zero; pass the behaviour-cloned run of `robolake demo` /
`robolake train` as `--init` (success reward, the tasks' own episode limits) for the
sample-efficiency comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
from typing import Any, Literal

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
    p.add_argument(
        "--no-heavy-tail",
        action="store_true",
        help="run the suite profile only (default: both; a learning run needs only the suite's weights)",
    )
    p.add_argument("--plot", default=None, help="PNG of success vs env steps and throughput (default: beside --json)")
    p.add_argument(
        "--reward",
        default=None,
        choices=["success", "return"],
        help="what advantages are computed from (default: success with --init, return without)",
    )
    p.add_argument(
        "--max-episode-steps",
        type=int,
        default=None,
        help="cap on episode length (default: 48 with --quick and no --init, else the tasks' limits)",
    )
    p.add_argument(
        "--eval-episodes",
        type=int,
        default=None,
        help="episodes scored before and after RL on the same seeds (default: 16 with --quick, 48 without; 0: none)",
    )
    p.add_argument(
        "--round-deadline-ms",
        type=float,
        default=None,
        help="async: the longest the server waits to merge the other workers' rounds into one batch "
        "(default: GenerationConfig.round_deadline_s, 500; 0 serves each worker's round alone)",
    )
    p.add_argument(
        "--modes",
        default="async,async_per_env,sync",
        help="comma-separated schedulers to compare (async, async_per_env, sync); sync is always run",
    )
    return p


MODES: dict[str, dict[str, Any]] = {
    "async": {"mode": "async", "group_requests": True},
    "async_per_env": {"mode": "async", "group_requests": False},
    "sync": {"mode": "sync"},
}


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


def _run(pipe: Any, config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run: its summary (with the CPU the rest of the machine used meanwhile) and its final weights."""
    pipe.restart(config)
    result = pipe.run()
    s: dict[str, Any] = result.summary
    s["others_cpu_s"] = s["cpu"].get("others_s")
    return s, result.weights


EVAL_SEED = 104_729  # the evaluation's RLConfig.seed: episode seeds apart from the runs' (seed 0)


def _evaluate(pipe: Any, base: Any, weights: dict[str, Any] | None, episodes: int) -> dict[str, Any]:
    """Lockstep rollouts without learning from `weights` (None: the initial ones), on the
    evaluation seeds: every episode's key, success and return. The same seeds, chunk noise and
    episode order every call, so two calls differ by their weights alone."""
    per_env = -(-episodes // base.num_envs)
    longest = base.max_episode_steps or 200  # the longest task limit of the suite (robolake.sim.tasks)
    config = dataclasses.replace(
        base, mode="sync", learn=False, seed=EVAL_SEED, env_steps=base.num_envs * per_env * longest
    )
    pipe.restart(config, weights)
    result = pipe.run()
    return {e["episode"]: (e["success"], e["return"]) for e in result.episodes if e["status"] == "finished"}


def _scored(runs: dict[str, tuple[bool, float]], keys: list[str]) -> dict[str, Any]:
    from robolake.sim.evaluate import wilson_interval

    k = sum(runs[key][0] for key in keys)
    n = len(keys)
    return {
        "episodes": n,
        "successes": k,
        "success_rate": k / n if n else None,
        "ci95": list(wilson_interval(k, n)) if n else None,
        "mean_return": statistics.mean(runs[key][1] for key in keys) if n else None,
    }


def _before_after(before: dict[str, Any], after: dict[str, dict[str, Any]], episodes: int) -> dict[str, Any]:
    """Success (Wilson 95%) and mean return on the episodes every evaluation finished (same seeds)."""
    keys = sorted(set(before).intersection(*after.values()))[: max(episodes, 1)]
    return {
        "episodes": len(keys),
        "seed": EVAL_SEED,
        "before": _scored(before, keys),
        "after": {m: _scored(a, keys) for m, a in after.items()},
    }


def _pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's runs of one profile: totals over totals, mean idle fractions, the first run's curve."""
    steps = sum(r["env_steps"] for r in runs)
    wall = sum(r["wall_s"] for r in runs)
    samples = sum(r["learner_samples"] for r in runs)
    others = [r["others_cpu_s"] for r in runs if r.get("others_cpu_s") is not None]
    finished = sum(r["episodes_finished"] for r in runs)
    succ = sum((r["success_rate"] or 0.0) * r["episodes_finished"] for r in runs)
    cpu = sum(r["cpu"]["env_s"] + r["cpu"]["generation_s"] + r["cpu"]["learner_s"] + r["cpu"]["driver_s"] for r in runs)
    return {
        "env_steps_per_s": steps / wall,
        "cores_used": cpu / wall,
        "cpu_ms_per_env_step": 1e3 * cpu / steps,
        "cpu_s": {k: sum(r["cpu"][f"{k}_s"] for r in runs) for k in ("env", "generation", "learner", "driver")},
        "cpu_ms_per_env_step_by_stage": {
            k: 1e3 * sum(r["cpu"][f"{k}_s"] for r in runs) / steps for k in ("env", "generation", "learner", "driver")
        },
        # Acting: every stage's CPU but the learner's updates (which scale with chunks trained):
        # what a scheduler costs per env step. Updates: CPU per chunk trained.
        "acting_cpu_ms_per_env_step": 1e3 * (cpu - sum(r["cpu"]["learner_update_s"] for r in runs)) / steps,
        "update_cpu_ms_per_sample": (
            1e3 * sum(r["cpu"]["learner_update_s"] for r in runs) / samples if samples else None
        ),
        "others_cores": sum(others) / wall if len(others) == len(runs) else None,
        "learner_samples_per_s": samples / wall,
        "learner_updates": sum(r["learner_updates"] for r in runs),
        "learner_updates_per_s": sum(r["learner_updates"] for r in runs) / wall,
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
            {
                k: r[k]
                for k in (
                    "env_steps",
                    "wall_s",
                    "env_steps_per_s",
                    "learner_samples_per_s",
                    "learner_updates",
                    "learner_updates_per_s",
                    "others_cpu_s",
                )
            }
            for r in runs
        ],
    }


def _cores() -> float:
    """CPUs this run may use: the Ray cluster's, else this process's affinity."""
    import ray

    if ray.is_initialized():
        return float(ray.cluster_resources().get("CPU", 0)) or float(len(os.sched_getaffinity(0)))
    return float(len(os.sched_getaffinity(0)))


def _profile(
    pipe: Any, base: Any, pairs: int, label: str, modes: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Every mode `pairs` times, the order rotating each round; ratios to sync within each round.
    Returns the profile's results and each mode's final weights of its first round.

    Raises:
        RuntimeError: a run finished without a single learner update.
    """
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    weights: dict[str, dict[str, Any]] = {}
    ratios: dict[str, list[float]] = {m: [] for m in modes if m != "sync"}
    for i in range(pairs):
        order = modes[i % len(modes) :] + modes[: i % len(modes)]
        got = {}
        for mode in order:
            s, w = _run(pipe, dataclasses.replace(base, **MODES[mode]))
            weights.setdefault(mode, w)
            got[mode] = s
            runs[mode].append(s)
            print(
                f"  {label} round {i + 1}/{pairs} {mode:<13}: {s['env_steps_per_s']:.1f} env steps/s, "
                f"{s['learner_updates']} updates, success {s['success_rate']}",
                flush=True,
            )
            if base.learn and s["learner_updates"] == 0:
                raise RuntimeError(
                    f"bench rl: the {mode} run of the {label} profile finished with zero learner updates "
                    f"({s['episodes_finished']} episodes finished, {s['zero_advantage_chunks']} chunks with zero "
                    "advantage), so it did not measure learning; give it more --steps, a shorter "
                    "--max-episode-steps, or --reward return"
                )
        for mode in ratios:
            ratios[mode].append(got[mode]["env_steps_per_s"] / got["sync"]["env_steps_per_s"])
    pooled = {m: _pooled(runs[m]) for m in modes}
    out: dict[str, Any] = dict(pooled)
    sync = pooled["sync"]
    cores = _cores()
    for mode, rs in ratios.items():
        a = pooled[mode]
        # The most any scheduler could reach here at this mode's own CPU cost per step: every
        # core Ray was given busy; and every core the machine's other load left free.
        free = min(cores, float(os.cpu_count() or cores) - a["others_cores"]) if a["others_cores"] is not None else None
        a["vs_sync"] = {
            "speedup": statistics.median(rs),
            "speedup_min": min(rs),
            "speedup_max": max(rs),
            "cpu_ceiling_speedup": (cores * 1e3 / a["cpu_ms_per_env_step"]) / sync["env_steps_per_s"],
            "fraction_of_ceiling": a["cores_used"] / cores,
            "free_cores": free,
            "fraction_of_free_cores": a["cores_used"] / free if free else None,
            "cpu_overhead_vs_sync": a["cpu_ms_per_env_step"] / sync["cpu_ms_per_env_step"] - 1.0,
            "acting_cpu_overhead_vs_sync": a["acting_cpu_ms_per_env_step"] / sync["acting_cpu_ms_per_env_step"] - 1.0,
            "learner_speedup": (
                a["learner_samples_per_s"] / sync["learner_samples_per_s"] if sync["learner_samples_per_s"] else None
            ),
            "sample_efficiency": _sample_efficiency(a, sync),
        }
    head = pooled["async"]["vs_sync"] if "async" in pooled else next(iter(pooled[m]["vs_sync"] for m in ratios))
    out.update({k: head[k] for k in ("speedup", "speedup_min", "speedup_max", "cpu_ceiling_speedup")})
    out["learner_speedup"] = head["learner_speedup"]
    if head["sample_efficiency"] is not None:
        out["sample_efficiency"] = head["sample_efficiency"]
    return out, weights


def _sample_efficiency(a: dict[str, Any], s: dict[str, Any]) -> dict[str, Any] | None:
    if a["success_rate"] is None or s["success_rate"] is None:
        return None
    n_a, n_s = a["episodes_finished"], s["episodes_finished"]
    pa, ps = a["success_rate"], s["success_rate"]
    se = ((pa * (1 - pa) / max(n_a, 1)) + (ps * (1 - ps) / max(n_s, 1))) ** 0.5
    return {"success_diff": pa - ps, "stderr": se, "within_2_stderr": abs(pa - ps) <= 2 * se + 1e-9}


def _modes(arg: str) -> tuple[str, ...]:
    """The schedulers to run, sync among them (every ratio is to sync).

    Raises:
        ValueError: an unknown mode.
    """
    modes = [m.strip() for m in arg.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"--modes: unknown {unknown}; choose from {list(MODES)}")
    if "sync" not in modes:
        modes.append("sync")
    if len(modes) < 2:
        raise ValueError("--modes: name at least one asynchronous mode (async, async_per_env)")
    return tuple(dict.fromkeys(modes))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from robolake.rl.config import GenerationConfig, LatencyProfile, LearnerConfig
    from robolake.rl.pipeline import Pipeline
    from robolake.rl.report import plot_comparison

    modes = _modes(args.modes)
    steps = args.steps or (1500 if args.quick else 8000)
    pairs = args.pairs or (1 if args.quick else 2)
    reward: Literal["success", "return"] = args.reward or ("success" if args.init else "return")
    cap = args.max_episode_steps or (48 if args.quick and not args.init else None)
    n_eval = args.eval_episodes if args.eval_episodes is not None else (16 if args.quick else 48)
    policy_factory, env_factory, tasks, label = _factories(args)
    round_deadline_s = (
        GenerationConfig().round_deadline_s if args.round_deadline_ms is None else args.round_deadline_ms / 1000
    )
    base = pipeline_config(
        args,
        tasks,
        learner=LearnerConfig(reward=reward),
        generation=GenerationConfig(round_deadline_s=round_deadline_s),
        env_steps=steps,
        log_every_s=5.0,
        max_episode_steps=cap,
    )
    tail = LatencyProfile(kind="lognormal", scale_s=args.tail_scale_ms / 1000, shape=args.tail_shape)
    print(f"building the pipeline ({args.workers} workers x {args.envs_per_worker} envs, {label}) ...", flush=True)
    pipe = Pipeline(base, policy_factory, env_factory)
    try:
        # Warm-up, not measured: the first frames of every environment thread create its EGL
        # context and the first batches warm the model; whichever mode ran first would pay it.
        # 2,000 steps (250 per environment at the default layout) are plenty: a long learning
        # run need not spend a fifth of its budget again on it.
        pipe.restart(dataclasses.replace(base, mode="async", env_steps=min(2000, max(200, steps // 5)), learn=False))
        pipe.run()
        suite, final = _profile(pipe, base, pairs, "suite", modes)
        heavy = (
            None
            if args.no_heavy_tail
            else _profile(pipe, dataclasses.replace(base, latency=tail), pairs, "heavy_tail", modes)[0]
        )
        evaluation = None
        if n_eval:
            print(f"scoring before and after on {n_eval} evaluation episodes (same seeds) ...", flush=True)
            before = _evaluate(pipe, base, None, n_eval)
            evaluation = _before_after(before, {m: _evaluate(pipe, base, w, n_eval) for m, w in final.items()}, n_eval)
    finally:
        pipe.shutdown()
    summary_keys = ("speedup", "speedup_min", "speedup_max", "learner_speedup", "cpu_ceiling_speedup")
    payload: dict[str, Any] = {
        **{m: suite[m] for m in modes},
        **{k: suite[k] for k in summary_keys},
        "cores": _cores(),
        "sample_efficiency": suite.get("sample_efficiency"),
        "evaluation": evaluation,
        "heavy_tail": {
            **{k: heavy[k] for k in summary_keys},
            "latency": dataclasses.asdict(tail),
            **{m: heavy[m] for m in modes},
            "sample_efficiency": heavy.get("sample_efficiency"),
        }
        if heavy is not None
        else None,
        "config": {
            "sim": label,
            "tasks": list(tasks),
            "modes": list(modes),
            "env_steps_per_run": steps,
            "pairs": pairs,
            "workers": args.workers,
            "envs_per_worker": args.envs_per_worker,
            "execute_steps": args.execute_steps,
            "round_deadline_ms": 1e3 * round_deadline_s,
            "reward": reward,
            "max_episode_steps": cap,
            "quick": args.quick,
        },
        "machine": machine(),
    }
    write_json(args.json, payload)
    plot = args.plot or str(args.json).rsplit(".", 1)[0] + ".png"
    plot_comparison(
        {
            **{m: suite[m] for m in modes},
            **({f"{m} (heavy tail)": heavy[m] for m in modes} if heavy is not None else {}),
        },
        plot,
    )
    print_table(
        f"RL schedulers ({label}, {steps} env steps per run, {pairs} round(s) per profile, reward {reward})",
        _rows(suite, heavy, modes) + _eval_rows(evaluation),
    )
    return 0


def _eval_rows(evaluation: dict[str, Any] | None) -> list[tuple[str, Any]]:
    if not evaluation:
        return []

    def line(r: dict[str, Any]) -> str:
        if r["success_rate"] is None:
            return "n/a"
        lo, hi = r["ci95"]
        return f"{r['success_rate']:.2f} [{lo:.2f}, {hi:.2f}], mean return {r['mean_return']:.2f}"

    n = evaluation["episodes"]
    rows = [(f"evaluation ({n} episodes, same seeds) before RL", line(evaluation["before"]))]
    rows += [(f"evaluation after {m} RL (suite, round 1)", line(r)) for m, r in evaluation["after"].items()]
    return rows


def _rows(suite: dict[str, Any], heavy: dict[str, Any] | None, modes: tuple[str, ...]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for name, prof in (("suite", suite), ("heavy_tail", heavy)):
        if prof is None:
            continue
        for mode in modes:
            m = prof[mode]
            stage = m["cpu_ms_per_env_step_by_stage"]
            rows += [
                (f"{name} {mode} env steps/s", m["env_steps_per_s"]),
                (
                    f"{name} {mode} learner updates/s (updates)",
                    f"{m['learner_updates_per_s']:.2f} ({m['learner_updates']})",
                ),
                (f"{name} {mode} learner samples/s", m["learner_samples_per_s"]),
                (
                    f"{name} {mode} idle env/gen/learner",
                    "/".join(f"{m['idle_fraction'][k]:.2f}" for k in ("env", "generation", "learner")),
                ),
                (f"{name} {mode} generation batch size (mean)", f"{m['generation_batch_size_mean']:.1f}"),
                (
                    f"{name} {mode} CPU ms/env step env+gen+learn+driver",
                    f"{stage['env']:.2f}+{stage['generation']:.2f}+{stage['learner']:.2f}+{stage['driver']:.2f}"
                    f" = {m['cpu_ms_per_env_step']:.2f}",
                ),
                (
                    f"{name} {mode} acting CPU ms/env step; update CPU ms/chunk",
                    f"{m['acting_cpu_ms_per_env_step']:.2f}; "
                    + (f"{m['update_cpu_ms_per_sample']:.1f}" if m["update_cpu_ms_per_sample"] else "n/a"),
                ),
                (
                    f"{name} {mode} cores busy (others' load)",
                    f"{m['cores_used']:.2f} ({m['others_cores']:.2f})"
                    if m["others_cores"] is not None
                    else f"{m['cores_used']:.2f}",
                ),
                (f"{name} {mode} success", m["success_rate"] if m["success_rate"] is not None else "n/a"),
            ]
            if "vs_sync" in m:
                v = m["vs_sync"]
                rows += [
                    (
                        f"{name} {mode}/sync env steps/s (median [min, max])",
                        f"{v['speedup']:.2f} [{v['speedup_min']:.2f}, {v['speedup_max']:.2f}]",
                    ),
                    (f"{name} {mode} CPU ceiling of any scheduler (x sync)", f"{v['cpu_ceiling_speedup']:.2f}"),
                    (
                        f"{name} {mode} share of the ceiling (of the free cores)",
                        f"{v['fraction_of_ceiling']:.2f}"
                        + (f" ({v['fraction_of_free_cores']:.2f})" if v["fraction_of_free_cores"] else ""),
                    ),
                    (
                        f"{name} {mode} CPU per env step vs sync: all, acting",
                        f"{100 * v['cpu_overhead_vs_sync']:+.0f}%, {100 * v['acting_cpu_overhead_vs_sync']:+.0f}%",
                    ),
                ]
    return rows
