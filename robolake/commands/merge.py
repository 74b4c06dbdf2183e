"""`robolake merge A B [...] --into C`: one new lake from several, duplicates landing once."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge",
        help="merge lakes into a new one (the first referenced, the others copied; duplicates land once)",
        description=(
            "Episodes with the same content hash land once and are listed in the new version's summary. "
            "An embodiment tag must mean the same layout in every lake, else nothing is written."
        ),
    )
    p.add_argument("lakes", nargs="+", help="two or more lake URIs")
    p.add_argument("--into", required=True, help="the new lake to write")
    p.add_argument("--reason", default="", help="why, kept with the new version (default: empty)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line (default: a sentence)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake import curate
    from robolake.commands.common import print_curation

    r = curate.merge(args.lakes, args.into, reason=args.reason)
    dup = len(r.summary["duplicates"])
    print_curation(
        r,
        f"lake {r.lake}: version {r.version} merged {len(args.lakes)} lakes "
        f"({r.summary['episodes_added']} episodes added to the first's, {dup} duplicates landed once)",
        as_json=args.json,
    )
    return 0
