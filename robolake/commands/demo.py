"""`robolake demo [--out DIR] [--quick]`: the whole flow, end to end, on this machine (see robolake.demo)."""

from __future__ import annotations

import argparse

from robolake.commands.common import quiet_ray, tqdm_progress, train_progress_bar

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "demo",
        help="the whole flow in a local lake with a local Ray: record Meta-World demos, ingest, pack, train, evaluate",
        description=(
            "With the sim extra (pip install 'robolake[sim]'; scripts/setup.sh installs it): record scripted "
            "Meta-World demonstrations on Ray actors, ingest them into a Lance lake, pack them into cu_seqlens "
            "shards, train the tiny model, and evaluate it in closed loop beside the scripted expert and a floor. "
            "Without the extra, the same stages run on synthetic multi-embodiment data and stop at the held-out "
            "action MSE. Writes OUT/report.md (plots, success per task, a rollout GIF) and OUT/eval.json; an "
            "interrupted demo keeps its newest checkpoint, and running it again reuses what OUT holds."
        ),
    )
    s.add_argument(
        "--out", default="demo_out", help="directory for the demonstrations, lake, shards, checkpoints and report"
    )
    s.add_argument(
        "--quick",
        action="store_true",
        help="a first look in minutes: 3 demonstrations per task, 40 training steps, 2 evaluation episodes per task",
    )
    s.add_argument(
        "--family",
        default="groot",
        choices=["groot", "pi0"],
        help="the model family trained and evaluated (default groot; pi0: prefix-LM backbone with an action expert)",
    )
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.demo import DemoConfig, run_demo

    quiet_ray()
    run_demo(
        DemoConfig(out=args.out, quick=args.quick, family=args.family),
        progress=tqdm_progress(),
        train_progress=train_progress_bar,
    )
    return 0
