"""`robolake trim LAKE --idle [--head|--tail] | --where-steps EXPR [--where EXPR]`: drop steps in a new version."""

from __future__ import annotations

import argparse
import json

from robolake.commands.select import WHERE_HELP

__all__ = ["register", "run"]

STEPS_HELP = (
    "drop the steps this expression is true on, evaluated per step: names step, t (seconds), steps_from_end, "
    "t_from_end, idle, idle_head, idle_tail, motion, state[i], action[i]; reductions max/min/mean/norm/any/all "
    'over state or action; e.g. "t < 1.5", "norm(action) < 0.01 and steps_from_end < 30"'
    " (one of --idle and --where-steps is required)"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trim",
        help="drop steps (idle heads and tails, or any --where-steps) from episodes in a new lake version",
        description=(
            "The episodes' steps are written again, the kept ones renumbered; frames, videos and access copies "
            "are not touched (each step keeps showing its own frame). `robolake diff` lists the steps each "
            "episode lost and `robolake restore LAKE N` brings the version before back. Pack, the loaders and "
            "export read only the kept steps."
        ),
    )
    p.add_argument("lake", help="the lake URI")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--idle",
        action="store_true",
        help="drop the idle run that opens and closes each episode (nothing moves, by the data's own scale)",
    )
    which.add_argument("--where-steps", metavar="EXPR", help=STEPS_HELP)
    end = p.add_mutually_exclusive_group()
    end.add_argument("--head", action="store_true", help="with --idle: only the idle run at the start")
    end.add_argument("--tail", action="store_true", help="with --idle: only the idle run at the end")
    p.add_argument("--where", metavar="EXPR", help=WHERE_HELP + " (default: every episode)")
    p.add_argument(
        "--min-steps",
        type=int,
        default=2,
        help="an episode the trim would leave with fewer steps keeps them all and is named (default: 2)",
    )
    p.add_argument("--reason", default="", help="why (kept in the version's manifest; default: empty)")
    p.add_argument("--dry-run", action="store_true", help="say what would go; write nothing")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line (default: sentences)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.curate import TrimSpec, trim

    spec = TrimSpec(
        idle=args.idle,
        head=args.head,
        tail=args.tail,
        where_steps=args.where_steps,
        where=args.where,
        min_steps=args.min_steps,
        reason=args.reason,
    )
    r = trim(args.lake, spec, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(r.to_json(), sort_keys=True))
        return 0
    gone = r.steps_before - r.steps_after
    if not r.removed:
        print(f"lake {r.lake}: no step to drop; still version {r.version}")
    elif r.dry_run:
        print(f"lake {r.lake} version {r.version}: would drop {gone} steps from {len(r.removed)} episodes")
    else:
        print(
            f"lake {r.lake}: version {r.version} dropped {gone} of {r.steps_before} steps from "
            f"{len(r.removed)} episodes"
        )
    for eid, n in sorted(r.removed.items(), key=lambda kv: (-kv[1], kv[0]))[:10]:
        print(f"  {eid}: {n} steps")
    if len(r.removed) > 10:
        print(f"  ... and {len(r.removed) - 10} more episodes (--json lists them)")
    for eid, why in sorted(r.kept.items())[:10]:
        print(f"  left as it is: {eid}: {why}")
    if len(r.kept) > 10:
        print(f"  ... and {len(r.kept) - 10} more left as they are (--json lists them)")
    return 0
