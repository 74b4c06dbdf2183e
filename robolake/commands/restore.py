"""`robolake restore LAKE N`: publish a new lake version equal to version N;
`robolake restore LAKE --episodes ID...`: bring deleted episodes back."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "restore", help="publish a new lake version holding exactly what version N held, or bring deleted episodes back"
    )
    p.add_argument("lake", help="the lake URI")
    p.add_argument(
        "version",
        type=int,
        nargs="?",
        default=None,
        help="the lake version to bring back (see `robolake info LAKE --json`; no default: give it or --episodes)",
    )
    p.add_argument(
        "--episodes",
        nargs="+",
        metavar="ID",
        default=None,
        help=(
            "instead: bring these deleted episodes back from the newest version that held them, or these "
            "trimmed episodes' dropped steps (default: none)"
        ),
    )
    p.add_argument("--reason", default="", help="with --episodes: why, kept with the new version (default: empty)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.storage import normalize_uri

    if (args.version is None) == (args.episodes is None):
        raise ValueError("give a version (robolake restore LAKE N) or --episodes ID..., one of the two")
    if args.episodes is not None:
        from robolake.curate import restore_episodes

        r = restore_episodes(args.lake, args.episodes, reason=args.reason)
        print(f"lake {r.lake}: version {r.version} published with {len(r.episodes)} episodes restored")
        return 0
    from robolake.lake import restore_version

    lv = restore_version(normalize_uri(args.lake), args.version)
    print(f"lake {normalize_uri(args.lake)}: version {lv.version} published, equal to version {args.version}")
    return 0
