"""`robolake gc LAKE --older-than 7d [--dry-run]`: remove files no retained lake version needs."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gc", help="remove files that no lake version published within --older-than needs")
    p.add_argument("lake", help="the lake URI")
    p.add_argument(
        "--older-than", default="7d", help="retention: versions newer than this (and the newest) stay (default 7d)"
    )
    p.add_argument("--dry-run", action="store_true", help="report what would be removed, remove nothing")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import gc, parse_age

    r = gc(args.lake, parse_age(args.older_than), dry_run=args.dry_run)
    verb = "would remove" if r.dry_run else "removed"
    if r.half_created:
        print(f"gc {args.lake}: a half-created lake (a killed select/merge --into): {verb} it whole")
        return 0
    n_lance = sum(len(v) for v in r.lance_versions.values())
    print(
        f"gc {args.lake}: keeping lake versions {r.retained}; {verb} {len(r.removed_versions)} older lake versions, "
        f"{n_lance} table versions ({r.bytes_removed} bytes) and {r.orphan_files} unreferenced data files"
    )
    if r.skipped_orphans:
        print(f"  left unreferenced files in place: {r.skipped_orphans}")
    return 0
