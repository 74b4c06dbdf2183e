"""`robolake bench flywheel`: do the policy's own successful rollouts, fed back as data, lift pick-place?

Pick-place is the weak task of the demo's policy. Starting from the demo's checkpoint (`--demo
DIR`, a `robolake demo` output; without it the demo runs first, `--quick` its quick version):

1. **before**: the checkpoint's closed-loop success on `--eval-episodes` evaluation seeds of
   pick-place (`EVAL_SEEDS`, as `robolake eval`; deterministic policy, replanning every 4).
2. **collect**: `--rollouts N` episodes of the policy on pick-place from training seeds no
   demonstration and no evaluation uses, each written into a copy of the demo's lake as a rollout
   episode (`lake/rollouts.py`); the successes are kept (`success and source='rollout'`).
3. **after**: the demo's recipe (preset, steps, learning rate, pack, seed) retrained from
   scratch on the demo's training episodes plus the successful rollouts, as a mixture by tag:
   `tag=flywheel-base:0.7,*:0.3` (shares of samples: 70% the demonstrations the checkpoint saw,
   30% the new episodes, repeated or subsampled to it; `--new-weight`), then evaluated on the
   same seeds.
4. **more_demos**: the sceptic's baseline: the same budget, N episodes, spent on more scripted
   demonstrations of pick-place instead (the noisy expert, kept when they succeed, as the demo
   records them), retrained with the same mixture and recipe, evaluated on the same seeds.

Each arm reports success with its Wilson 95% interval, and the data it added (episodes run and
kept, environment steps, the pack manifest's mixture record). The JSON is
`{"before": {...}, "after": {...}, "more_demos": {...}, ...}`. Retraining from scratch (rather
than fine-tuning) keeps the comparison about the data: the three policies differ only in what
they were trained on. When no rollout succeeds, "after" retrains on the demonstrations alone and
says so. `--quick` is a smoke run (tiny budgets; its figures mean nothing).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from robolake.bench._common import machine, print_table, write_json

__all__ = ["run", "main", "BASE_TAG"]

BASE_TAG = "flywheel-base"
TASK = "pick-place"
ROLLOUT_SEED_OFFSET = 500_000  # rollouts from TRAIN_SEEDS.start + this + k: far from demo seeds (< 10,000 here)
EXTRA_DEMO_SEED = 100_000  # record_demos seed of the extra demos: their episode seeds start at 300,000


def _arm(result: dict[str, Any], checkpoint: str) -> dict[str, Any]:
    t = result["tasks"][TASK]
    return {
        "checkpoint": checkpoint,
        "success_rate": t["success_rate"],
        "successes": t["successes"],
        "episodes": t["episodes"],
        "ci95": t["ci95"],
        "mean_length": t["mean_length"],
        "tasks": {k: {"success_rate": v["success_rate"], "ci95": v["ci95"]} for k, v in result["tasks"].items()},
    }


def _evaluate(checkpoint: str, args: argparse.Namespace, out: str) -> dict[str, Any]:
    from robolake.sim.evaluate import EvalConfig, evaluate_checkpoint

    tasks = tuple(t.strip() for t in args.eval_tasks.split(",") if t.strip())
    config = EvalConfig(
        tasks=tasks,
        episodes=args.eval_episodes,
        seed=args.eval_seed,
        videos=0,
        baselines=False,
        rollout=_rollout_config(args),
    )
    return evaluate_checkpoint(checkpoint, config, out_dir=out)


def _rollout_config(args: argparse.Namespace) -> Any:
    from robolake.sim.rollout import RolloutConfig

    return RolloutConfig(
        replan=4, num_workers=args.workers, envs_per_worker=args.envs_per_worker, max_steps=args.max_steps
    )


def _demo(args: argparse.Namespace, work: str) -> tuple[str, str, dict[str, Any]]:
    """(demo output dir, its checkpoint run dir, the recipe it trained with)."""
    from robolake.training.checkpoint import read_checkpoint

    demo = args.demo
    if demo is None:
        from robolake.demo import DemoConfig, run_demo

        demo = os.path.join(work, "demo")
        print(f"[flywheel] no --demo given: running the demo{' (quick)' if args.quick else ''} into {demo}", flush=True)
        run_demo(DemoConfig(out=demo, quick=args.quick, sim="on"))
    run = os.path.join(demo, "train_packed")
    steps = read_checkpoint(run).step
    # The demo's own recipe for the sim (robolake/demo.py): the tiny preset, lr 1e-3, one packed sequence a batch.
    return demo, run, {"steps": steps, "lr": 1e-3, "preset": "tiny", "sequences_per_batch": 1}


def _base_episodes(demo: str) -> tuple[str, int, list[str], Any]:
    """(lake URI, version, the episode ids the demo's checkpoint trained on, its pack spec)."""
    from robolake.lake import Lake
    from robolake.packers import read_manifest

    m = read_manifest(os.path.join(demo, "packed_train"))
    spec = m.pack_spec
    lake = Lake.open(m.lake_uri, version=m.lake_version)
    ids = (
        list(spec.where.episode_ids)
        if spec.where is not None and spec.where.episode_ids is not None
        else lake.episode_ids()
    )
    return m.lake_uri, m.lake_version, sorted(ids), spec


def _retrain(
    lake_dir: str,
    base: list[str],
    new: list[str],
    demo_spec: Any,
    recipe: dict[str, Any],
    args: argparse.Namespace,
    out: str,
) -> dict[str, Any]:
    """Pack base + new as the mixture (or base alone when `new` is empty), train the recipe, return the run's facts."""
    from robolake.lake import EpisodeFilter, Lake, create_tag
    from robolake.packers import pack
    from robolake.packers.mix import MixSpec
    from robolake.training.run import RunConfig, train_on

    lake = Lake.open(lake_dir)
    create_tag(
        lake.uri,
        BASE_TAG,
        lake.version,
        episodes=base,
        operation="tag",
        reason="bench flywheel: the demo's training episodes",
        replace=True,
    )
    mix = MixSpec(key="tag", weights=((BASE_TAG, 1.0 - args.new_weight), ("*", args.new_weight))) if new else None
    spec = dataclasses.replace(demo_spec, where=EpisodeFilter(episode_ids=sorted(base + new)), mix=mix)
    t0 = time.perf_counter()
    m = pack(lake, spec, os.path.join(out, "packed"), overwrite=True)
    pack_s = time.perf_counter() - t0
    steps = args.steps or recipe["steps"]
    run = RunConfig(
        out=os.path.join(out, "train"),
        preset=recipe["preset"],
        steps=steps,
        lr=recipe["lr"],
        sequences_per_batch=recipe["sequences_per_batch"],
        seed=args.seed,
        warmup_steps=min(50, steps // 10 + 1),
        resume=False,
    )
    t0 = time.perf_counter()
    train_on(os.path.join(out, "packed"), run)
    record = None if m.mixture is None else {k: v for k, v in m.mixture.items() if k != "row_strata"}
    return {
        "run": run.out,
        "mix": None if mix is None else mix.to_text(),
        "mixture": record,
        "num_samples": m.num_samples,
        "pack_s": pack_s,
        "train_s": time.perf_counter() - t0,
        "train_steps": steps,
    }


def _collect(checkpoint: str, lake_dir: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run the policy on N training seeds of pick-place and write every episode into the lake."""
    from robolake.lake import Lake, select_episode_ids
    from robolake.sim.learned import LearnedPolicy
    from robolake.sim.record_to_lake import record_rollouts, rollout_origin
    from robolake.sim.rollout import EpisodeSpec, rollout
    from robolake.sim.tasks import TRAIN_SEEDS

    cfg = _rollout_config(args)
    policy = LearnedPolicy.from_checkpoint(checkpoint, noise_scale=args.noise_scale, seed=args.seed)
    specs = [
        EpisodeSpec(TASK, TRAIN_SEEDS.start + ROLLOUT_SEED_OFFSET + k, record_steps=True) for k in range(args.rollouts)
    ]
    t0 = time.perf_counter()
    result = rollout(policy, specs, cfg)
    seconds = time.perf_counter() - t0
    origin = rollout_origin(
        checkpoint, producer="flywheel", run=lake_dir, policy={"replan": cfg.replan, "noise_scale": args.noise_scale}
    )
    wrote = record_rollouts(lake_dir, result, origin, cfg.env, info={"seed_range": "train"})
    kept = select_episode_ids(Lake.open(lake_dir), "success and source='rollout'")
    return {
        "episodes": len(result.episodes),
        "kept": len(kept),
        "kept_ids": sorted(kept),
        "env_steps": result.env_steps,
        "seconds": seconds,
        "lake_version": wrote.lake_version,
    }


def _more_demos(lake_dir: str, work: str, args: argparse.Namespace) -> dict[str, Any]:
    """Record N scripted demonstrations of pick-place (kept when they succeed) and ingest them."""
    from robolake.lake import Lake, ingest
    from robolake.sim.recorder import RecordConfig, record_demos

    before = set(Lake.open(lake_dir).episode_ids())
    t0 = time.perf_counter()
    r = record_demos(
        os.path.join(work, "extra_demos"),
        RecordConfig(
            tasks=(TASK,), episodes_per_task=args.rollouts, seed=EXTRA_DEMO_SEED, num_workers=max(args.workers, 0)
        ),
    )
    seconds = time.perf_counter() - t0
    ingest(os.path.join(work, "extra_demos"), lake_dir)
    new = sorted(set(Lake.open(lake_dir).episode_ids()) - before)
    # the noisy expert's failed attempts ran too: count their steps as the task's step limit
    limit = args.max_steps or 150
    return {
        "episodes": r.episodes + r.failed,
        "kept": len(new),
        "kept_ids": new,
        "env_steps": r.steps + r.failed * limit,
        "seconds": seconds,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}

    @contextmanager
    def lap(name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        timings[name] = time.perf_counter() - t0
        print(f"[flywheel] {name}: {timings[name]:.0f}s", flush=True)

    with lap("demo"):
        demo, checkpoint, recipe = _demo(args, work)
        lake_uri, lake_version, base, demo_spec = _base_episodes(demo)
    with lap("eval_before"):
        before = _arm(_evaluate(checkpoint, args, os.path.join(work, "eval_before")), checkpoint)

    after_lake, more_lake = os.path.join(work, "lake_after"), os.path.join(work, "lake_more_demos")
    for d in (after_lake, more_lake):
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(lake_uri, d)  # the demo's lake stays as it was
    with lap("collect"):
        collected = _collect(checkpoint, after_lake, args)
    with lap("record_more_demos"):
        extra = _more_demos(more_lake, work, args)
    arms = {}
    for name, lake, data in (("after", after_lake, collected), ("more_demos", more_lake, extra)):
        with lap(f"train_{name}"):
            trained = _retrain(lake, base, data["kept_ids"], demo_spec, recipe, args, os.path.join(work, name))
        with lap(f"eval_{name}"):
            arms[name] = _arm(_evaluate(trained["run"], args, os.path.join(work, f"eval_{name}")), trained["run"])
        arms[name].update(data={k: v for k, v in data.items() if k != "kept_ids"}, train=trained)
    after, more = arms["after"], arms["more_demos"]
    if not collected["kept"]:
        after["note"] = "no rollout succeeded: retrained on the demonstrations alone"
    timings["total"] = time.perf_counter() - t_start
    return {
        "machine": machine(),
        "quick": args.quick,
        "before": before,
        "after": after,
        "more_demos": more,
        "config": {
            "task": TASK,
            "rollouts": args.rollouts,
            "eval_episodes": args.eval_episodes,
            "eval_tasks": args.eval_tasks,
            "eval_seed": args.eval_seed,
            "mixture": f"tag={BASE_TAG}:{1 - args.new_weight:g},*:{args.new_weight:g}",
            "mixture_share": "samples",
            "demo": demo,
            "lake": lake_uri,
            "lake_version": lake_version,
            "base_episodes": len(base),
            "recipe": {**recipe, "steps": args.steps or recipe["steps"]},
            "noise_scale": args.noise_scale,
            "max_steps": args.max_steps,
        },
        "timings_s": timings,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="robolake bench flywheel", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: the quick demo, 4 rollouts, 20 training steps, 2 eval episodes",
    )
    p.add_argument(
        "--demo", default=None, metavar="DIR", help="a `robolake demo` output to start from (default: run the demo)"
    )
    p.add_argument(
        "--work", default="flywheel_out", metavar="DIR", help="working directory (lakes, shards, runs, evals)"
    )
    p.add_argument(
        "--rollouts",
        type=int,
        default=None,
        help="policy rollouts collected, and extra demos recorded (default 60; 4 quick)",
    )
    p.add_argument("--eval-episodes", type=int, default=None, help="evaluation episodes per task (default 50; 2 quick)")
    p.add_argument("--eval-tasks", default=TASK, help="tasks evaluated (default: pick-place)")
    p.add_argument("--eval-seed", type=int, default=0, help="evaluation seed (the same seeds for every arm)")
    p.add_argument("--new-weight", type=float, default=0.3, help="mixture share of the new episodes (default 0.3)")
    p.add_argument(
        "--steps", type=int, default=None, help="training steps of a retrain (default: the demo checkpoint's; 20 quick)"
    )
    p.add_argument(
        "--noise-scale", type=float, default=0.0, help="flow noise of the collecting policy (default 0, as eval)"
    )
    p.add_argument("--max-steps", type=int, default=None, help="cap on episode length (default: the task's; 60 quick)")
    p.add_argument("--workers", type=int, default=2, help="environment worker actors")
    p.add_argument("--envs-per-worker", type=int, default=4, help="environments per worker")
    p.add_argument("--seed", type=int, default=0, help="training and policy seed")
    args = p.parse_args(argv)
    if not 0 < args.new_weight < 1:
        p.error(f"--new-weight must be in (0, 1), got {args.new_weight}")
    args.rollouts = args.rollouts or (4 if args.quick else 60)
    args.eval_episodes = args.eval_episodes or (2 if args.quick else 50)
    if args.quick:
        args.steps = args.steps or 20
        args.max_steps = args.max_steps or 60
    res = run(args)
    rows: list[tuple[Any, ...]] = []
    for name in ("before", "after", "more_demos"):
        a = res[name]
        lo, hi = a["ci95"]
        rows.append(
            (
                f"{name}: {TASK} success [95% CI]",
                f"{a['success_rate']:.2f} [{lo:.2f}, {hi:.2f}] ({a['successes']}/{a['episodes']})",
            )
        )
    for name in ("after", "more_demos"):
        d = res[name]["data"]
        rows.append((f"{name}: episodes run / kept, env steps", f"{d['episodes']} / {d['kept']}, {d['env_steps']}"))
    rows.append(("mixture (shares of samples)", res["config"]["mixture"]))
    rows.append(("total seconds", res["timings_s"]["total"]))
    print_table(f"the data flywheel on {TASK} ({res['config']['rollouts']} episodes of budget)", rows)
    write_json(args.json, res)


if __name__ == "__main__":
    main()
