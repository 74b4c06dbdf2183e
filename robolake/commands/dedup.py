"""`robolake dedup LAKE [--reason TEXT] [--json] [--dry-run]`: keep one episode of each near-duplicate group."""

from __future__ import annotations

import argparse
import json

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dedup",
        help="keep one episode of each near-duplicate group `robolake doctor` finds; remove the rest in a new version",
        description=(
            "A group is what `robolake doctor` reports as near_duplicate (same actions within 1% of each dim's "
            "range, or near-identical frame fingerprints; lengths within 2%). Each group keeps its longest "
            "episode, then the earliest ingested, then the "
            "smallest id; the rest are removed in one new lake version with the reason kept. `robolake diff` lists "
            "them and `robolake restore LAKE --episodes ID...` brings any back."
        ),
    )
    p.add_argument("lake", help="the lake URI")
    p.add_argument(
        "--reason",
        default="near-duplicate episodes (robolake doctor)",
        help="why they go (kept in the version's manifest)",
    )
    p.add_argument("--dry-run", action="store_true", help="list the groups and what would go; write nothing")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line (default: sentences)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake import curate

    r = curate.dedup(args.lake, reason=args.reason, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(r.to_json(), sort_keys=True))
        return 0
    if not r.groups:
        print(f"lake {r.lake}: no near-duplicate episodes; still version {r.version}")
        return 0
    if r.dry_run:
        print(f"lake {r.lake} version {r.version}: would remove {len(r.removed)} episodes of {len(r.groups)} groups")
    else:
        gone = f"removed {len(r.removed)} episodes of {len(r.groups)} groups"
        print(f"lake {r.lake}: version {r.version} {gone} ({args.reason})")
    print(f"  kept: {r.rule}")
    for g in r.groups[:20]:
        print(f"  kept {g['kept']}; {'would remove' if r.dry_run else 'removed'} {', '.join(g['removed'])}")
    if len(r.groups) > 20:
        print(f"  ... and {len(r.groups) - 20} more groups (--json lists them)")
    return 0
