"""`robolake optimize LAKE`: compact small fragments and rebuild indexes, as a new lake version."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "optimize",
        help="compact the lake's small fragments and rebuild its indexes (a new version; gc frees the old files)",
    )
    p.add_argument("lake", help="the lake URI")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake.compact import optimize

    r = optimize(args.lake)
    frags = ", ".join(f"{t} {b} -> {a}" for t, (b, a) in r.fragments.items())
    if r.version is None:
        print(f"lake {args.lake}: already compact ({frags} fragments); nothing published")
    else:
        print(f"lake {args.lake}: version {r.version} published; fragments {frags}")
    return 0
