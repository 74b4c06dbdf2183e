"""`robolake train (--shards DIR | --lake URI) --out DIR [--family groot|pi0]`: train a thin policy model.

`--family` picks the model the same packed data trains: the GR00T-style model (default) or the
pi0-style one (`robolake.training.pi0`); the checkpoint records it, so `robolake eval` and the
policies that load it build the same family without being told.

Resumes from OUT/checkpoints unless `--fresh`; a run that already reached `--steps` says so and
does nothing (exit 0), so the README's command can be run again. The data paths are checked
before anything is drawn; under torchrun only rank 0 reports.
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
    s = sub.add_parser("train", help="train the thin GR00T- or pi0-style model on shards or a lake")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--shards", help="a `robolake pack` output directory (one of --shards and --lake is required)")
    src.add_argument(
        "--lake", help="a lake, packed on the fly with --max-tokens (one of --shards and --lake is required)"
    )
    s.add_argument(
        "--out",
        required=True,
        help="metrics.jsonl and checkpoints go here; re-running continues from its newest checkpoint",
    )
    add_tag_arguments(s)
    s.add_argument(
        "--allow-stale",
        action="store_true",
        help="train on shards even if a later lake version deleted episodes they hold (default: refuse)",
    )
    s.add_argument(
        "--preset",
        default="tiny",
        choices=["tiny", "small", "n15"],
        help="model preset, sized to the data's widths (tiny trains on a laptop CPU; small and n15 want a GPU)",
    )
    s.add_argument(
        "--family",
        default="groot",
        choices=["groot", "pi0"],
        help="groot: backbone + DiT action head that cross-attends to it (default); pi0: a prefix of views, text, "
        "state and history attending bidirectionally, with an action expert that attends to its sample's prefix "
        "and causally among its own tokens",
    )
    s.add_argument(
        "--steps", type=int, default=100, help="optimizer steps of the whole run (a resumed run continues up to it)"
    )
    s.add_argument(
        "--layout",
        default="packed",
        choices=["packed", "padded"],
        help="packed: varlen attention over cu_seqlens; padded: the baseline, dense attention with a mask",
    )
    s.add_argument("--lr", type=float, default=3e-4, help="peak learning rate (linear warmup, cosine decay)")
    s.add_argument("--sequences-per-batch", type=int, default=1, help="packed sequences per batch")
    s.add_argument(
        "--max-tokens",
        type=int,
        default=2048,
        help="with --lake: capacity of a packed sequence (shards keep the one they were packed with)",
    )
    s.add_argument(
        "--fp8",
        default="none",
        choices=["none", "auto", "te", "torchao"],
        help="FP8 training backend (auto: the best this hardware runs, said at WARNING when none)",
    )
    s.add_argument("--workers", type=int, default=2, help="loader worker processes (0: load in this process)")
    s.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        metavar="N",
        help="torch intra-op threads (default: the cores left after --workers, or ROBOLAKE_TORCH_THREADS / "
        "OMP_NUM_THREADS when set)",
    )
    s.add_argument("--seed", type=int, default=0, help="seed of the model, the loader's shuffle and the flow noise")
    s.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="also save a checkpoint every N steps, so an interrupted run resumes near where it stopped "
        "(default: 0, only at the last step)",
    )
    s.add_argument("--device", default="auto", help="auto (CUDA when available, else CPU), cpu, cuda or cuda:N")
    s.add_argument("--fresh", action="store_true", help="start over instead of resuming from --out/checkpoints")
    s.add_argument(
        "--record-samples",
        action="store_true",
        help="write OUT/samples/rank{R}.jsonl: the (episode, step) keys of every batch each rank trained on",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(fn=run)


def _check_sources(args: argparse.Namespace) -> None:
    """Refuse a wrong --shards/--lake path here, in one line that names the command to run."""
    from robolake.loaders.open import is_pack_output

    if args.shards and tag_of(args):
        raise ValueError(
            "--tag/--split select episodes of a lake: use them with --lake, or when packing (robolake pack --split)"
        )
    if args.shards and not is_pack_output(args.shards):
        raise FileNotFoundError(
            f"{args.shards} is not a `robolake pack` output (it has no manifest.json): pack a lake into it first "
            f"(robolake pack LAKE {args.shards}), or train on the lake itself with --lake LAKE"
        )
    if args.lake and is_pack_output(args.lake):
        raise ValueError(f"{args.lake} is a `robolake pack` output, not a lake: pass it as --shards {args.lake}")


def _finished(args: argparse.Namespace) -> tuple[int, str] | None:
    """(step, path) of the newest checkpoint under --out when it already reached --steps (without --fresh)."""
    from robolake.training.checkpoint import latest_checkpoint

    ckpt = None if args.fresh else latest_checkpoint(os.path.join(args.out, "checkpoints"))
    step = int(ckpt.stem.split("_")[-1]) if ckpt is not None else 0  # checkpoints are named step_{step:08d}.pt
    return (step, str(ckpt)) if ckpt is not None and step >= args.steps else None


def run(args: argparse.Namespace) -> int:
    if args.workers > 0:  # before the imports below: the workers' fork server imports beside them
        from robolake.fork_server import start_fork_server

        start_fork_server()
    from robolake.training.run import RunConfig, train_on

    _check_sources(args)
    config = RunConfig(
        out=args.out,
        preset=args.preset if args.family == "groot" else f"{args.family}:{args.preset}",
        steps=args.steps,
        layout=args.layout,
        lr=args.lr,
        sequences_per_batch=args.sequences_per_batch,
        max_tokens=args.max_tokens,
        fp8=args.fp8,
        num_workers=args.workers,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every,
        device=args.device,
        resume=not args.fresh,
        record_samples=args.record_samples,
        allow_stale=args.allow_stale,
        torch_threads=args.torch_threads,
    )
    is_main = int(os.environ.get("RANK", "0")) == 0
    done = _finished(args)
    if done is not None:
        if is_main:
            print(
                f"{args.out} already finished: trained to step {done[0]} (checkpoint {done[1]}); nothing to do. "
                f"Pass --steps N with N > {done[0]} to train on from it, or --fresh to start over."
            )
        return 0
    quiet_ray()
    source = args.shards or (open_lake_at(args.lake, args) if tag_of(args) else args.lake)
    progress = train_progress_bar(args.steps) if is_main and not args.no_progress else None
    result = train_on(source, config, progress=progress)
    if not is_main:
        return 0
    records = []
    if result.metrics_path and result.metrics_path.exists():
        records = [json.loads(line) for line in result.metrics_path.read_text().splitlines() if line.strip()]
    first, last = (result.losses[0], result.losses[-1]) if result.losses else (float("nan"), float("nan"))
    print(
        f"trained steps {result.first_step + 1}..{result.step} ({args.layout}, {args.family} family, "
        f"preset {args.preset}, fp8 {result.fp8_backend}); loss {first:.4f} -> {last:.4f}"
    )
    print(f"  samples/s   {result.samples_per_s:,.2f} (all samples of this run over its wall time)")
    if result.threads is not None:
        print(f"  threads     {result.threads.describe()}")
    mine = records[-len(result.losses) :] if result.losses else []
    if mine:
        step_rates = [r["samples_per_s"] for r in mine if "samples_per_s" in r]
        waits = sum(r.get("data_wait_s", 0.0) for r in mine)
        steps_s = sum(r.get("step_time_s", 0.0) for r in mine)
        print(
            f"  per step    median {statistics.median(step_rates):,.2f} samples/s; "
            f"waiting for data {waits / max(steps_s, 1e-9):.1%} of step time"
        )
        pads = [r.get("padding_fraction", 0.0) for r in mine]
        if any(pads):
            print(f"  padding     {statistics.median(pads):.1%} of the computed token grid (median)")
    print(f"  metrics: {result.metrics_path}  checkpoint: {result.checkpoint}")
    if args.record_samples:
        print(f"  samples: {os.path.join(args.out, 'samples')}/rank*.jsonl")
    return 0
