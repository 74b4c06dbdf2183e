"""`robolake optimize LAKE [--upgrade] [--access-copy h264|none]`: compact, rebuild indexes, keep
the access copy in step with the record, and upgrade an older lake format, each a new version."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "optimize",
        help="compact the lake's small fragments and rebuild its indexes (a new version; gc frees the old files)",
    )
    p.add_argument("lake", help="the lake URI")
    p.add_argument(
        "--upgrade",
        action="store_true",
        help="first upgrade a lake of an older format in place (adds empty tables, rewrites nothing)",
    )
    p.add_argument(
        "--access-copy",
        default=None,
        choices=["h264", "none"],
        help="h264: derive a key-referenced h264 access copy of every recorded video that has none (fast random "
        "reads; rebuilt from the record); none: drop it (gc frees its files) "
        "(default: leave access copies as they are)",
    )
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import optimize

    if args.upgrade:
        from robolake.lake import upgrade

        u = upgrade(args.lake)
        if u.from_format == u.to_format:
            print(f"lake {args.lake}: already format {u.to_format}")
        else:
            print(
                f"lake {args.lake}: upgraded from format {u.from_format} to {u.to_format} "
                f"(created {', '.join(u.created) or 'nothing'})"
            )
    if args.access_copy is not None:
        from robolake.lake import Lake, build_access_copy, drop_access_copy

        lake = Lake.open(args.lake)
        a = drop_access_copy(lake) if args.access_copy == "none" else build_access_copy(lake, args.access_copy)
        what = "dropped the access copy of" if args.access_copy == "none" else "built an h264 access copy of"
        if a.version is None:
            print(f"lake {args.lake}: access copy already {'absent' if args.access_copy == 'none' else 'complete'}")
        else:
            print(f"lake {args.lake}: version {a.version} {what} {a.streams} recorded streams ({a.frames} frames)")
    r = optimize(args.lake)
    frags = ", ".join(f"{t} {b} -> {a}" for t, (b, a) in r.fragments.items())
    if r.version is None:
        print(f"lake {args.lake}: already compact ({frags} fragments); nothing published")
    else:
        print(f"lake {args.lake}: version {r.version} published; fragments {frags}")
    return 0
