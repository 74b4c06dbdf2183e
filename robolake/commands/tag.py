"""`robolake tag LAKE NAME [--version N]`: name a lake version; `--list`, `--delete`."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tag", help="name a lake version (tags resolve everywhere a version does: --tag NAME)")
    p.add_argument("lake", help="the lake URI")
    p.add_argument(
        "name",
        nargs="?",
        default=None,
        help="the tag's name (letters, digits and . _ : + -; default: none, which lists the tags)",
    )
    p.add_argument("--version", type=int, default=None, help="the version to name (default: the newest)")
    p.add_argument("--reason", default="", help="why, kept with the tag (default: empty)")
    p.add_argument("--replace", action="store_true", help="move an existing tag (default: refuse)")
    p.add_argument("--delete", action="store_true", help="remove tag NAME (the version stays)")
    p.add_argument("--list", action="store_true", help="list the lake's tags (the default without NAME)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import Lake, create_tag, delete_tag, list_tags

    lake = Lake.open(args.lake)
    if args.list or args.name is None:
        tags = list_tags(lake.uri, lake.storage_options)
        if not tags:
            print(f"lake {lake.uri} has no tags")
        for t in tags:
            scope = "all episodes" if t.episodes is None else f"{len(t.episodes)} episodes"
            print(
                f"{t.name:<24} version {t.version:<5} {scope:<16} {t.operation:<7} {t.created_by} {t.reason}".rstrip()
            )
        return 0
    if args.delete:
        t = delete_tag(lake.uri, args.name, lake.storage_options)
        print(f"lake {lake.uri}: tag {t.name!r} removed (it named version {t.version})")
        return 0
    version = lake.version if args.version is None else args.version
    t = create_tag(
        lake.uri, args.name, version, reason=args.reason, replace=args.replace, storage_options=lake.storage_options
    )
    moved = f" (moved from version {t.replaced_version})" if t.replaced_version is not None else ""
    print(f"lake {lake.uri}: tag {t.name!r} names version {t.version}{moved}")
    return 0
