"""`robolake resample LAKE --fps F [--rule STREAM=RULE ...] [--where EXPR]`: steps at another rate.

Resampling is `robolake align` with a rate: new steps derived from the record of every stream,
published as a new version. This module is only its spelling; `align` does the work.
"""

from __future__ import annotations

import argparse

from robolake.commands import align
from robolake.commands.select import WHERE_HELP

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "resample",
        help="rebuild the steps at another rate from the record (the same as `robolake align --fps F`)",
        description=(
            "`robolake resample LAKE --fps F` is `robolake align LAKE --fps F`: the steps of each episode are "
            "derived again from the record of every stream at the new tick rate, with the same rules "
            "(state linear, action hold, frames latest-at-or-before unless --rule says otherwise), and published "
            "as one new lake version (`robolake restore` goes back). See `robolake align --help`."
        ),
    )
    p.add_argument("lake", help="the lake URI")
    p.add_argument("--fps", type=float, required=True, help="the new tick rate in Hz")
    p.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="STREAM=RULE",
        help="the rule of one stream or topic, e.g. /joint_states=nearest:0.005 (repeatable)",
    )
    p.add_argument("--where", metavar="EXPR", help=WHERE_HELP + " (default: every episode)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line (default: sentences)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    return align.run(args)
