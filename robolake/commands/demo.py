"""`robolake demo [--out DIR] [--quick]`: the whole flow on synthetic data (see robolake.demo)."""

from __future__ import annotations

import argparse

from robolake.commands.common import quiet_ray, tqdm_progress, train_progress_bar

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("demo", help="the whole flow on synthetic data in a local lake with a local Ray")
    s.add_argument("--out", default="demo_out")
    s.add_argument("--quick", action="store_true")
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.demo import DemoConfig, run_demo

    quiet_ray()
    run_demo(DemoConfig(out=args.out, quick=args.quick), progress=tqdm_progress(), train_progress=train_progress_bar)
    return 0
