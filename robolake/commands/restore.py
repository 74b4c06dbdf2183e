"""`robolake restore LAKE N`: publish a new lake version equal to version N."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("restore", help="publish a new lake version holding exactly what version N held")
    p.add_argument("lake", help="the lake URI")
    p.add_argument("version", type=int, help="the lake version to bring back (see `robolake info LAKE --json`)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake.storage import normalize_uri
    from robolake.lake.transaction import restore_version

    lv = restore_version(normalize_uri(args.lake), args.version)
    print(f"lake {normalize_uri(args.lake)}: version {lv.version} published, equal to version {args.version}")
    return 0
