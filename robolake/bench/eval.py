"""`robolake bench eval`: closed-loop actions/s, parallel batched evaluation vs the naive loop.

Both arms run the same policy on the same episodes (tasks and seeds from the evaluation range)
with the same replanning horizon, so they execute the same kind of work:

- `parallel`: `robolake.sim.rollout` with N environments on Ray actors (`--workers` x
  `--envs-per-worker`) and one batched `get_action` per tick for all of them;
- `naive`: one environment in this process, stepped in a Python loop, one `get_action` per
  observation (batch size 1), episodes one after another.

The policy is a trained checkpoint (`--checkpoint`) or, by default, the tiny preset untrained:
an untrained policy never succeeds, so every episode runs to the step limit and both arms do a
fixed number of steps. Each arm starts its workers once (`EnvPool`, the way an evaluation runs
the policy and its baselines on one pool) and runs the episodes once untimed, which builds every
MuJoCo model; the workers' start-up is reported on its own, not folded into actions/s. Arms
alternate (A B A B ...); the table shows the median of the paired speedups and their min/max;
actions/s per arm is total actions over total time.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from robolake.bench._common import machine, print_table, write_json

__all__ = ["main", "run"]


def _policy(checkpoint: str | None) -> Any:
    from robolake.lake import NormStats, VectorStats
    from robolake.packers import PackSpec, TokenLengthConfig
    from robolake.sim import ACTION_DIM, EMBODIMENT, STATE_DIM
    from robolake.sim.learned import LearnedPolicy
    from robolake.training.config import ModelConfig
    from robolake.training.model import GrootModel
    from robolake.training.normalize import PolicyCard

    if checkpoint:
        return LearnedPolicy.from_checkpoint(checkpoint)
    rng = np.random.default_rng(0)
    stats = NormStats(
        state=VectorStats.of(rng.normal(0, 0.1, (256, STATE_DIM))),
        action=VectorStats.of(rng.uniform(-1, 1, (256, ACTION_DIM))),
    )
    cfg = ModelConfig.preset("tiny", max_state_dim=24, max_action_dim=8, num_embodiments=1)
    spec = PackSpec(
        horizon=cfg.action_horizon, tokens=TokenLengthConfig(tokens_per_view=cfg.tokens_per_view, state_tokens=0)
    )
    torch_seed = 0
    import torch

    torch.manual_seed(torch_seed)
    card = PolicyCard(
        embodiments=[EMBODIMENT],
        normalization="mean_std",
        stats={EMBODIMENT: stats.to_json()},
        pack_spec=spec.to_json(),
        state_dims={EMBODIMENT: STATE_DIM},
        action_dims={EMBODIMENT: ACTION_DIM},
    )
    return LearnedPolicy(GrootModel(cfg), card)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from robolake.ray_tasks import ensure_ray
    from robolake.sim.evaluate import eval_specs
    from robolake.sim.rollout import EnvPool, RolloutConfig, rollout

    ensure_ray()
    policy = _policy(args.checkpoint)
    tasks = args.tasks.split(",")
    specs = eval_specs(tasks, args.episodes, seed=0)
    par_cfg = RolloutConfig(
        replan=args.replan, num_workers=args.workers, envs_per_worker=args.envs_per_worker, max_steps=args.max_steps
    )
    naive_cfg = RolloutConfig(replan=args.replan, num_workers=0, envs_per_worker=1, max_steps=args.max_steps)
    arms: dict[str, list[tuple[int, float, int, float]]] = {"parallel": [], "naive": []}
    # Both arms keep their environments across repeats (an evaluation service does); the
    # one-off start-up of the actors and environments is timed separately, not in actions/s.
    pools = {"parallel": EnvPool(tasks, par_cfg), "naive": EnvPool(tasks, naive_cfg)}
    startup = {name: pool.warm_up() for name, pool in pools.items()}
    try:
        for name, cfg in (("parallel", par_cfg), ("naive", naive_cfg)):
            rollout(policy, specs, cfg, pool=pools[name])  # untimed: builds each slot's environments
        for _ in range(args.repeats):
            for name, cfg in (("parallel", par_cfg), ("naive", naive_cfg)):
                t0 = time.perf_counter()
                r = rollout(policy, specs, cfg, pool=pools[name])
                arms[name].append((r.env_steps, time.perf_counter() - t0, r.policy_calls, r.mean_batch))
    finally:
        for pool in pools.values():
            pool.close()
    out: dict[str, Any] = {"machine": machine(), "quick": args.quick}
    for name, runs in arms.items():
        steps, secs = sum(r[0] for r in runs), sum(r[1] for r in runs)
        out[name] = {
            "actions_per_s": steps / secs,
            "env_steps": steps,
            "seconds": secs,
            "runs_actions_per_s": [r[0] / r[1] for r in runs],
            "policy_calls_per_run": runs[0][2],
            "mean_batch": runs[0][3],
            "startup_s": startup[name],
        }
    ratios = [p[0] / p[1] / (n[0] / n[1]) for p, n in zip(arms["parallel"], arms["naive"], strict=True)]
    out["speedup"] = float(np.median(ratios))
    out["speedup_min"], out["speedup_max"] = float(min(ratios)), float(max(ratios))
    out["config"] = {
        "tasks": tasks,
        "episodes_per_task": args.episodes,
        "replan": args.replan,
        "workers": args.workers,
        "envs_per_worker": args.envs_per_worker,
        "max_steps": args.max_steps,
        "repeats": args.repeats,
        "policy": args.checkpoint or "tiny preset, untrained (every episode runs to max_steps)",
    }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="robolake bench eval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where to write the result JSON")
    p.add_argument("--quick", action="store_true", help="one task, fewer episodes and steps")
    p.add_argument("--checkpoint", default=None, help="a trained run to evaluate (default: the untrained tiny preset)")
    p.add_argument("--tasks", default=None, help="comma-separated tasks (default: the suite; quick: reach)")
    p.add_argument("--episodes", type=int, default=None, help="episodes per task (default 4; quick 4)")
    p.add_argument("--max-steps", type=int, default=None, help="step limit per episode (default 100; quick 40)")
    p.add_argument("--replan", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--envs-per-worker", type=int, default=4)
    p.add_argument("--repeats", type=int, default=None, help="paired repeats (default 3; quick 2)")
    args = p.parse_args(argv)
    args.tasks = args.tasks or ("reach" if args.quick else "reach,push,pick-place,drawer-open,button-press")
    args.episodes = args.episodes or 4
    args.max_steps = args.max_steps or (40 if args.quick else 100)
    args.repeats = args.repeats or (2 if args.quick else 3)
    res = run(args)
    print_table(
        "closed-loop evaluation: parallel batched vs naive loop",
        [
            ("parallel actions/s", res["parallel"]["actions_per_s"]),
            ("naive actions/s", res["naive"]["actions_per_s"]),
            ("speedup (median of pairs)", res["speedup"]),
            ("speedup min", res["speedup_min"]),
            ("speedup max", res["speedup_max"]),
            ("parallel mean batch", res["parallel"]["mean_batch"]),
            ("env steps per run", res["parallel"]["env_steps"] // args.repeats),
            ("parallel worker start-up s (once, not in actions/s)", res["parallel"]["startup_s"]),
        ],
    )
    write_json(args.json, res)
    return 0
