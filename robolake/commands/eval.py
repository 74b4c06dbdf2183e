"""`robolake eval --sim metaworld --tasks ... --checkpoint RUN --episodes N`: closed-loop success.

Says what it runs before the environments start (seconds), draws one progress bar per policy
(the trained one, the expert, each floor), and ends naming every file it wrote: eval.json,
success.png and the rollout GIFs in videos/ (under --out, `eval_out` by default).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run", "wrote_line"]


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "eval",
        help="run a trained checkpoint in simulation: success per task beside the scripted expert and a floor",
        description=(
            "Closed-loop evaluation: parallel Meta-World environments on Ray actors, one batched policy call "
            "per tick, action chunks executed with a replanning horizon, seeds disjoint from the demonstration "
            "seeds. Reports success per task with a Wilson 95% interval, episode length and actions/s, beside "
            "the scripted expert (ceiling) and random / mean-action policies (floor) on the same seeds. Needs the "
            "sim extra: pip install 'robolake[sim]'."
        ),
    )
    s.add_argument("--sim", default="metaworld", choices=["metaworld"], help="simulator suite")
    s.add_argument(
        "--tasks",
        default=None,
        help="comma-separated task names (default: reach,push,pick-place,drawer-open,button-press)",
    )
    s.add_argument(
        "--checkpoint",
        required=True,
        help="a training run directory, its checkpoints/ directory, or one step_N checkpoint (its model family, "
        "groot or pi0, is read from it)",
    )
    s.add_argument("--episodes", type=int, default=10, help="episodes per task (default 10)")
    s.add_argument(
        "--replan",
        type=int,
        default=4,
        help="actions of each 16-step chunk executed before asking the policy again (default 4)",
    )
    s.add_argument(
        "--noise-scale",
        type=float,
        default=0.0,
        help="scale of the flow's starting noise: 0 acts deterministically (default), "
        "1 samples the learned distribution",
    )
    s.add_argument("--workers", type=int, default=2, help="environment worker actors (0: in this process)")
    s.add_argument("--envs-per-worker", type=int, default=4, help="environments per worker")
    s.add_argument("--seed", type=int, default=0, help="evaluation seed (episodes come from the evaluation seed range)")
    s.add_argument("--videos", type=int, default=1, help="rollout GIFs kept per task, each saying whether it succeeded")
    s.add_argument("--no-baselines", action="store_true", help="skip the expert and floor runs")
    s.add_argument("--json", default=None, metavar="PATH", help="write the result JSON here (default: OUT/eval.json)")
    s.add_argument("--out", default="eval_out", metavar="DIR", help="directory for eval.json, success.png and videos/")
    s.add_argument("--device", default="cpu", help="device of the policy (cpu, cuda)")
    s.add_argument(
        "--record-to",
        default=None,
        metavar="LAKE",
        help="also write every episode of the policy into this lake (created if missing) as a rollout "
        "episode: frames, states, executed actions, the policy's chunks, rewards, success, seed, "
        "checkpoint; select them with --where \"source='rollout'\" (default: not recorded)",
    )
    s.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        metavar="N",
        help="torch threads of the policy (default: the cores left after --workers, or ROBOLAKE_TORCH_THREADS / "
        "OMP_NUM_THREADS when set)",
    )
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    import math

    from robolake.commands.common import tqdm_progress
    from robolake.sim.evaluate import EvalConfig, evaluate_checkpoint
    from robolake.sim.rollout import RolloutConfig
    from robolake.sim.tasks import DEFAULT_TASKS, resolve_tasks
    from robolake.training.threads import set_torch_threads

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
    # The environment actors keep their cores busy while the policy thinks: it gets the rest.
    threads = set_torch_threads(
        reserved=args.workers * math.ceil(config.rollout.num_cpus_per_worker), explicit=args.torch_threads
    )
    runs = "the policy" + ("" if args.no_baselines else ", the scripted expert and 2 floors")
    print(
        f"evaluating {args.checkpoint}: {len(tasks)} tasks x {args.episodes} episodes for {runs} on "
        f"{args.workers or 'no'} worker actors ({threads.describe()}); starting the environments...",
        flush=True,
    )
    result = evaluate_checkpoint(
        args.checkpoint,
        config,
        out_dir=args.out,
        json_path=args.json,
        device=args.device,
        progress=tqdm_progress(),
        record_to=args.record_to,
    )
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
        f"{result.get('family', 'groot')} policy: mean success {result['mean_success']:.2f} "
        f"(expert {result.get('expert_mean_success', float('nan')):.2f}, "
        f"floor {result.get('floor_mean_success', float('nan')):.2f}); {result['actions_per_s']:.0f} actions/s"
    )
    line = wrote_line(result, args.out)
    if line:
        print(line)
    if "recorded" in result:
        r = result["recorded"]
        print(
            f"recorded {r['written']} rollout episodes ({r['successes']} successful, {r['steps']} steps) "
            f"into {r['lake']} "
            f"version {r['lake_version']}" + (f"; {r['skipped']} were there already" if r["skipped"] else "")
        )
    return 0


def wrote_line(result: dict[str, Any], out: str) -> str:
    """'wrote eval.json, success.png (...), N rollout GIFs in OUT/videos/ (...)', or '' when nothing was."""
    import os

    wrote = [result["json"]] if "json" in result else []
    if result.get("plot"):
        wrote.append(f"{result['plot']} (success per task beside the expert and the floor)")
    videos = result.get("videos") or []
    if videos:
        wrote.append(
            f"{len(videos)} rollout GIF{'s' if len(videos) != 1 else ''} in {os.path.join(out, 'videos')}/ "
            "(each says success or failure on its frames)"
        )
    return "wrote " + ", ".join(wrote) if wrote else ""
