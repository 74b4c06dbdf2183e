"""`robolake resample LAKE --fps F [--rule STREAM=RULE ...] [--where EXPR]`: steps at another rate.

Resampling is `robolake align` with a rate: new steps derived from the record of every stream,
published as a new version. This module is only its spelling; `align` does the work.
"""

from __future__ import annotations

import argparse

from robolake.commands import align

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
    align.add_rendition_arguments(p, fps_required=True)
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    return align.run(args)
