"""`robolake eval --sim metaworld --tasks ... --checkpoint RUN --episodes N`: closed-loop success."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "eval",
        help="run a trained checkpoint in simulation: success per task beside the scripted expert and a floor",
        description=(
            "Closed-loop evaluation: parallel Meta-World environments on Ray actors, one batched policy call "
            "per tick, action chunks executed with a replanning horizon, seeds disjoint from the demonstration "
            "seeds. Reports success per task with a Wilson 95%% interval, episode length and actions/s, beside "
            "the scripted expert (ceiling) and random / mean-action policies (floor) on the same seeds. Needs the "
            "sim extra: pip install 'robolake[sim]'."
        ),
    )
    s.add_argument("--sim", default="metaworld", choices=["metaworld"], help="simulator suite")
    s.add_argument("--tasks", default=None, help="comma-separated task names (default: reach,push,pick-place,drawer-open,button-press)")
    s.add_argument("--checkpoint", required=True, help="a training run directory, its checkpoints/ directory, or a step_*.pt file")
    s.add_argument("--episodes", type=int, default=10, help="episodes per task (default 10)")
    s.add_argument("--replan", type=int, default=4, help="actions of each 16-step chunk executed before asking the policy again (default 4)")
    s.add_argument("--noise-scale", type=float, default=0.0,
                   help="scale of the flow's starting noise: 0 acts deterministically (default), 1 samples the learned distribution")
    s.add_argument("--workers", type=int, default=2, help="environment worker actors (0: in this process)")
    s.add_argument("--envs-per-worker", type=int, default=4, help="environments per worker")
    s.add_argument("--seed", type=int, default=0, help="evaluation seed (episodes come from the evaluation seed range)")
    s.add_argument("--videos", type=int, default=1, help="rollout GIFs kept per task")
    s.add_argument("--no-baselines", action="store_true", help="skip the expert and floor runs")
    s.add_argument("--json", default=None, metavar="PATH", help="write the result JSON here (default OUT/eval.json)")
    s.add_argument("--out", default=None, metavar="DIR", help="directory for eval.json, success.png and videos/")
    s.add_argument("--device", default="cpu", help="device of the policy (cpu, cuda)")
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.sim.evaluate import EvalConfig, evaluate_checkpoint
    from robolake.sim.rollout import RolloutConfig
    from robolake.sim.tasks import DEFAULT_TASKS, resolve_tasks

    tasks = tuple(t.name for t in resolve_tasks(args.tasks)) if args.tasks else DEFAULT_TASKS
    config = EvalConfig(
        tasks=tasks,
        episodes=args.episodes,
        seed=args.seed,
        videos=args.videos,
        baselines=not args.no_baselines,
        noise_scale=args.noise_scale,
        rollout=RolloutConfig(replan=args.replan, num_workers=args.workers, envs_per_worker=args.envs_per_worker),
    )
    result = evaluate_checkpoint(args.checkpoint, config, out_dir=args.out, json_path=args.json, device=args.device)
    base = result.get("baselines", {})
    floor = result.get("floor", {})
    print(f"{'task':<14} {'policy':>8} {'95% CI':>13} {'expert':>7} {'floor':>6} {'length':>7}")
    for name, t in result["tasks"].items():
        expert = base.get("expert", {}).get("tasks", {}).get(name, {}).get("success_rate")
        lo, hi = t["ci95"]
        print(
            f"{name:<14} {t['success_rate']:>8.2f} {f'[{lo:.2f}, {hi:.2f}]':>13} "
            f"{'' if expert is None else f'{expert:.2f}':>7} {'' if name not in floor else f'{floor[name]:.2f}':>6} "
            f"{t['mean_length']:>7.1f}"
        )
    print(
        f"mean success {result['mean_success']:.2f} (expert {result.get('expert_mean_success', float('nan')):.2f}, "
        f"floor {result.get('floor_mean_success', float('nan')):.2f}); {result['actions_per_s']:.0f} actions/s"
    )
    if "json" in result:
        print(f"wrote {result['json']}")
    return 0
