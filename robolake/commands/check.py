"""`robolake check LAKE [--version N]`: verify a lake version end to end (see robolake.lake.upkeep.check)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="verify a lake version end to end: files, row counts, statistics")
    p.add_argument("lake", help="the lake URI")
    p.add_argument("--version", type=int, default=None, help="the lake version to check (default: the newest)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="files exist at their recorded sizes, row totals agree, the record of 16 sampled episodes compared; "
        "no data file of steps or media is read (default: a full check)",
    )
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import check_lake

    report = check_lake(args.lake, args.version, quick=args.quick)
    for note in report.notes:
        print(f"  note: {note}")
    if report.ok:
        counts = ", ".join(f"{t} {n}" for t, n in report.counts.items())
        print(f"lake {report.lake_uri} version {report.version}: OK ({counts})")
        return 0
    where = f"version {report.version}" if report.version is not None else "lake"
    print(f"lake {report.lake_uri} {where}: {len(report.problems)} problem(s)", file=sys.stderr)
    for problem in report.problems:
        print(f"  {problem}", file=sys.stderr)
    return 1
