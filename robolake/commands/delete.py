"""`robolake delete LAKE --episodes ID... | --where EXPR --reason TEXT`: remove episodes in a new version."""

from __future__ import annotations

import argparse

from robolake.commands.select import WHERE_HELP

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "delete",
        help="remove episodes (their steps and frames) from a new lake version, with the reason kept",
        description=(
            "Earlier versions still hold the episodes (`robolake restore LAKE --episodes ID...` brings them "
            "back); `robolake gc` frees their bytes once no retained version, tag or clone needs them."
        ),
    )
    p.add_argument("lake", help="the lake URI")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--episodes",
        nargs="+",
        metavar="ID",
        help="episode ids to remove, each of which must exist (one of --episodes and --where is required)",
    )
    which.add_argument("--where", metavar="EXPR", help=WHERE_HELP + " (one of --episodes and --where is required)")
    p.add_argument("--reason", required=True, help="why they go (kept in the version's manifest)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line (default: a sentence)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake import curate
    from robolake.commands.common import print_curation

    r = curate.delete(args.lake, episodes=args.episodes, where=args.where, reason=args.reason)
    print_curation(
        r, f"lake {r.lake}: version {r.version} removed {len(r.episodes)} episodes ({args.reason})", as_json=args.json
    )
    return 0
