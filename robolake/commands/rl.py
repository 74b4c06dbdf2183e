"""`robolake rl`: RL fine-tuning of a behaviour-cloned policy in simulation, asynchronous or in lockstep."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from robolake.rl.options import add_pipeline_arguments, pipeline_config

if TYPE_CHECKING:
    from robolake.rl.config import RLConfig

__all__ = ["config_from_args", "register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "rl",
        help="fine-tune a behaviour-cloned policy with RL in simulation (async or sync pipeline on Ray)",
        description=(
            "Run RL fine-tuning on Ray: environment workers, a generation server that batches observations "
            "dynamically, and a learner that streams micro-batches and publishes weights by version "
            "(--mode async), or the same actors in lockstep (--mode sync). Writes OUT/metrics.jsonl (one row "
            "per --log-every seconds), OUT/summary.json, OUT/episodes.jsonl, OUT/rl.png and the fine-tuned "
            "checkpoint OUT/checkpoints/step_N.pt (robolake eval --checkpoint OUT reads it)."
        ),
    )
    s.add_argument("--sim", default="metaworld", choices=["metaworld", "point"], help="simulator suite")
    s.add_argument("--tasks", default=None, help="comma-separated task names (default: the suite's default tasks)")
    s.add_argument(
        "--init",
        default=None,
        metavar="RUN",
        help="behaviour-cloned run directory or checkpoint to start from "
        "(default: none; --sim metaworld needs one, --sim point starts from a fresh tiny model)",
    )
    s.add_argument("--mode", default="async", choices=["async", "sync"], help="asynchronous pipeline or lockstep")
    s.add_argument("--steps", type=int, default=20_000, help="environment-step budget")
    s.add_argument("--out", required=True, help="output directory")
    add_pipeline_arguments(s)
    s.add_argument("--micro-batch", type=int, default=16, help="action chunks per micro-batch")
    s.add_argument(
        "--max-staleness", type=int, default=2, help="K: chunks more than K versions old are dropped/corrected"
    )
    s.add_argument("--staleness-mode", default="drop", choices=["drop", "correct"], help="what to do with stale chunks")
    s.add_argument("--max-batch", type=int, default=16, help="generation batch closes when this full")
    s.add_argument("--deadline-ms", type=float, default=5.0, help="...or this long after its first observation")
    s.add_argument(
        "--round-deadline-ms",
        type=float,
        default=500.0,
        help="a batch that starts with a worker's round waits for every worker's round (one forward as large as "
        "sync's), at most this long; 0 serves each round alone (default: 500)",
    )
    s.add_argument("--latency", default="none", choices=["none", "lognormal", "pareto"], help="injected per-step delay")
    s.add_argument("--latency-scale-ms", type=float, default=2.0, help="delay scale (lognormal median, pareto minimum)")
    s.add_argument("--latency-shape", type=float, default=1.0, help="lognormal sigma or pareto tail index")
    s.add_argument("--image-size", type=int, default=64, help="rendered frame size (the demonstrations' resolution)")
    s.add_argument("--worker-cpus", type=float, default=0.25, help="CPUs per environment worker actor")
    s.add_argument("--generation-cpus", type=float, default=0.5, help="CPUs of the generation server")
    s.add_argument("--generation-gpus", type=float, default=0.0, help="GPUs of the generation server")
    s.add_argument("--learner-cpus", type=float, default=0.5, help="CPUs of the learner")
    s.add_argument("--learner-gpus", type=float, default=0.0, help="GPUs of the learner")
    s.add_argument("--address", default=None, help="Ray cluster address (default: a local Ray)")
    s.add_argument("--seed", type=int, default=0, help="seed of resets and sampling noise")
    s.add_argument("--log-every", type=float, default=2.0, help="seconds between metric rows")
    s.add_argument("--no-learn", action="store_true", help="roll out only (no updates)")
    s.add_argument(
        "--record-to",
        default=None,
        metavar="LAKE",
        help="also write every finished episode into this lake (created if missing) as a rollout episode: "
        "frames, states, executed actions, the chunks with their weight versions, rewards, success, seed, "
        "the starting checkpoint; costs a render per step (default: not recorded)",
    )
    s.set_defaults(fn=run)


def config_from_args(args: argparse.Namespace, tasks: tuple[str, ...]) -> RLConfig:
    """The RLConfig of a `robolake rl` command line."""
    from robolake.rl.config import GenerationConfig, LatencyProfile, LearnerConfig, Resources

    return pipeline_config(
        args,
        tasks,
        mode=args.mode,
        env_steps=args.steps,
        seed=args.seed,
        generation=GenerationConfig(
            max_batch=args.max_batch,
            deadline_s=args.deadline_ms / 1000,
            round_deadline_s=args.round_deadline_ms / 1000,
            resources=Resources(num_cpus=args.generation_cpus, num_gpus=args.generation_gpus),
        ),
        learner=LearnerConfig(
            micro_batch=args.micro_batch,
            max_staleness=args.max_staleness,
            staleness_mode=args.staleness_mode,
            resources=Resources(num_cpus=args.learner_cpus, num_gpus=args.learner_gpus),
        ),
        worker_resources=Resources(num_cpus=args.worker_cpus),
        latency=LatencyProfile(kind=args.latency, scale_s=args.latency_scale_ms / 1000, shape=args.latency_shape),
        learn=not args.no_learn,
        log_every_s=args.log_every,
        ray_address=args.address,
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from robolake.rl.pipeline import run_rl
    from robolake.rl.report import plot_run, save_policy_checkpoint
    from robolake.rl.setup import make_factories

    policy_factory, env_factory, tasks = make_factories(args.sim, args.tasks, args.init, image_size=args.image_size)
    config = config_from_args(args, tasks)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    metrics = out / "metrics.jsonl"
    metrics.unlink(missing_ok=True)

    def progress(row: dict) -> None:
        print(
            f"[{row['mode']}] t={row['t']:.0f}s env_steps={row['env_steps']} ({row['env_steps_per_s']:.0f}/s) "
            f"episodes={row['episodes_finished']} gen_batch={row['gen_batch_size_mean']:.1f} "
            f"updates={row['learner_updates']} staleness={row['staleness_mean']:.2f} dropped={row['dropped_stale']} "
            f"idle env/gen/learn={row['idle_fraction']['env']:.2f}/{row['idle_fraction']['generation']:.2f}/"
            f"{row['idle_fraction']['learner']:.2f}",
            flush=True,
        )

    target = None
    if args.record_to:
        from robolake.rl.record import record_target

        acted = {
            "mode": args.mode,
            "sigma": args.sigma,
            "start_noise": args.start_noise,
            "execute_steps": args.execute_steps,
            "learn": not args.no_learn,
            "seed": args.seed,
        }
        target = record_target(
            args.sim, args.record_to, init=args.init, policy_factory=policy_factory, run=str(out.resolve()), acted=acted
        )
    result = run_rl(config, policy_factory, env_factory, metrics_path=metrics, progress=progress, record_to=target)
    s = result.summary
    (out / "summary.json").write_text(json.dumps(s, indent=2))
    with (out / "episodes.jsonl").open("w") as f:
        for e in result.episodes:
            f.write(json.dumps(e) + "\n")
    plot_run(result.metrics, s, out / "rl.png")
    ckpt = save_policy_checkpoint(args.init, result.weights, out / "checkpoints", s["learner_updates"])
    print(
        f"{s['mode']}: {s['env_steps']} env steps in {s['wall_s']:.1f}s ({s['env_steps_per_s']:.1f}/s), "
        f"{s['learner_updates']} updates ({s['learner_samples_per_s']:.1f} samples/s), "
        f"success {s['success_rate'] if s['success_rate'] is not None else float('nan'):.2f} "
        f"over {s['episodes_finished']} episodes, "
        f"stale chunks dropped {s['staleness']['dropped']}"
    )
    for task, t in s["tasks"].items():
        first, second = t["success_first_half"], t["success_second_half"]
        print(
            f"  {task:<14} episodes {t['episodes']:>4}  "
            f"success first half {first if first is not None else float('nan'):.2f}  "
            f"second half {second if second is not None else float('nan'):.2f}"
        )
    print(f"wrote {metrics}, {out / 'summary.json'}, {out / 'rl.png'}, {ckpt}")
    if result.recorded is not None:
        r = result.recorded
        print(
            f"recorded {r['written']} episodes ({r['successes']} successful, {r['steps']} steps) into {r['lake']}"
            + (f" version {r['lake_version']}" if r["lake_version"] is not None else "")
            + (f"; {r['skipped']} were there already" if r["skipped"] else "")
        )
    return 0
