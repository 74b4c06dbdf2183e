"""`robolake select LAKE --where EXPR [--into OTHER | --tag NAME]`: keep the episodes a filter chooses."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]

WHERE_HELP = (
    'a filter over episodes, e.g. "task = \'pick\' and num_steps > 50", "max(abs(action)) > 3", '
    "\"success and source = 'rollout'\" (names: episode columns, length, duration, source, source_path, "
    "quarantine_free, ingest_version, meta.KEY; aggregates max/min/mean/sum/std/count/any/all over state, action, "
    "timestamp; the record: stream('/imu').rate_hz >= 150, any(event('/fault')), count(event('/button')) >= 2)"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "select",
        help="keep only the episodes a filter chooses: a new lake version, a new lake (--into) or a tag (--tag)",
        description=(
            "Without --into or --tag, the lake gets a new version holding only the chosen episodes (earlier "
            "versions keep every row; `robolake restore` brings them back). --into writes a new lake that "
            "references the same files; --tag names the chosen episodes at this version without changing the lake."
        ),
    )
    p.add_argument("lake", help="the lake URI")
    p.add_argument("--where", required=True, metavar="EXPR", help=WHERE_HELP)
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--into", default=None, metavar="OTHER", help="write the selection as a new lake here (default: change LAKE)"
    )
    out.add_argument(
        "--tag", default=None, metavar="NAME", help="name the selection with this tag instead (default: none)"
    )
    p.add_argument("--replace", action="store_true", help="with --tag: move an existing tag (default: refuse)")
    p.add_argument("--reason", default="", help="why, kept with the new version or tag (default: empty)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line (default: a sentence)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake import curate
    from robolake.commands.common import print_curation

    if args.into:
        r = curate.select_into(args.lake, args.where, args.into, reason=args.reason)
        text = f"lake {r.lake}: version {r.version} created with {len(r.episodes)} episodes selected from {args.lake}"
    elif args.tag:
        r = curate.tag_selection(args.lake, args.where, args.tag, reason=args.reason, replace=args.replace)
        text = f"lake {r.lake}: tag {args.tag!r} names {len(r.episodes)} episodes of version {r.summary['at_version']}"
    else:
        r = curate.select(args.lake, args.where, reason=args.reason)
        text = (
            f"lake {r.lake}: version {r.version} keeps {len(r.episodes)} episodes "
            f"(removed {r.summary['episodes_removed']})"
        )
    print_curation(r, text, as_json=args.json)
    return 0
