"""`robolake train (--shards DIR | --lake URI) --out DIR`: train the thin GR00T-style model.

Resumes from OUT/checkpoints unless `--fresh`; under torchrun only rank 0 reports.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

from robolake.commands.common import (
    add_tag_arguments,
    open_lake_at,
    quiet_ray,
    tag_of,
    train_progress_bar,
)

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("train", help="train the thin GR00T-style model on shards or a lake")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--shards", help="a `robolake pack` output")
    src.add_argument("--lake", help="a lake (packed on the fly)")
    s.add_argument("--out", required=True, help="metrics.jsonl and checkpoints go here")
    add_tag_arguments(s)
    s.add_argument("--allow-stale", action="store_true",
                   help="train on shards even if a later lake version deleted episodes they hold (default: refuse)")  # fmt: skip
    s.add_argument("--preset", default="tiny", choices=["tiny", "small", "n15"])
    s.add_argument("--steps", type=int, default=100)
    s.add_argument("--layout", default="packed", choices=["packed", "padded"])
    s.add_argument("--lr", type=float, default=3e-4)
    s.add_argument("--sequences-per-batch", type=int, default=1)
    s.add_argument("--max-tokens", type=int, default=2048, help="packed sequence capacity with --lake")
    s.add_argument("--fp8", default="none", choices=["none", "auto", "te", "torchao"])
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--checkpoint-every", type=int, default=0)
    s.add_argument("--device", default="auto")
    s.add_argument("--fresh", action="store_true", help="start over instead of resuming from --out/checkpoints")
    s.add_argument("--record-samples", action="store_true",
                   help="write OUT/samples/rank{R}.jsonl: the (episode, step) keys of every batch each rank trained on")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.training.run import RunConfig, train_on

    quiet_ray()
    source = args.shards or (open_lake_at(args.lake, args) if tag_of(args) else args.lake)
    if args.shards and tag_of(args):
        raise ValueError("--tag/--split select episodes of a lake: use them with --lake, or when packing (robolake pack --split)")
    config = RunConfig(
        out=args.out, preset=args.preset, steps=args.steps, layout=args.layout, lr=args.lr,
        sequences_per_batch=args.sequences_per_batch, max_tokens=args.max_tokens, fp8=args.fp8,
        num_workers=args.workers, seed=args.seed, checkpoint_every=args.checkpoint_every, device=args.device,
        resume=not args.fresh, record_samples=args.record_samples, allow_stale=args.allow_stale,
    )
    is_main = int(os.environ.get("RANK", "0")) == 0
    progress = train_progress_bar(args.steps) if is_main and not args.no_progress else None
    result = train_on(source, config, progress=progress)
    if not is_main:
        return 0
    records = []
    if result.metrics_path and result.metrics_path.exists():
        records = [json.loads(line) for line in result.metrics_path.read_text().splitlines() if line.strip()]
    first, last = (result.losses[0], result.losses[-1]) if result.losses else (float("nan"), float("nan"))
    print(
        f"trained steps {result.first_step + 1}..{result.step} ({args.layout}, preset {args.preset}, "
        f"fp8 {result.fp8_backend}); loss {first:.4f} -> {last:.4f}"
    )
    print(f"  samples/s   {result.samples_per_s:,.2f} (all samples of this run over its wall time)")
    mine = records[-len(result.losses):] if result.losses else []
    if mine:
        step_rates = [r["samples_per_s"] for r in mine if "samples_per_s" in r]
        waits = sum(r.get("data_wait_s", 0.0) for r in mine)
        steps_s = sum(r.get("step_time_s", 0.0) for r in mine)
        print(f"  per step    median {statistics.median(step_rates):,.2f} samples/s; "
              f"waiting for data {waits / max(steps_s, 1e-9):.1%} of step time")
        pads = [r.get("padding_fraction", 0.0) for r in mine]
        if any(pads):
            print(f"  padding     {statistics.median(pads):.1%} of the computed token grid (median)")
    print(f"  metrics: {result.metrics_path}  checkpoint: {result.checkpoint}")
    if args.record_samples:
        print(f"  samples: {os.path.join(args.out, 'samples')}/rank*.jsonl")
    return 0
