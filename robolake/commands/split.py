"""`robolake split LAKE --val 0.1 [--test 0.05] --stratify task,embodiment --seed S`: splits as tags."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "split",
        help="deterministic train/val/test splits stored as tags (split:train, split:val, split:test)",
        description=(
            "Read a part with --split val in pack, train, export and view, or Lake.open(uri, tag='split:val'). "
            "The same lake version, options and seed always give the same split; no episode is in two parts."
        ),
    )
    p.add_argument("lake", help="the lake URI")
    p.add_argument("--val", type=float, default=0.1, help="share of each stratum for validation (default 0.1)")
    p.add_argument("--test", type=float, default=0.0, help="share of each stratum for test (default 0: no test part)")
    p.add_argument(
        "--by",
        choices=["episode", "source"],
        default="episode",
        help="split episodes one by one, or every source file's episodes together (default episode)",
    )
    p.add_argument(
        "--stratify",
        default="",
        metavar="COLS",
        help="comma-separated episode columns each of whose values gets its share, "
        "e.g. task,embodiment (default: none)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the assignment (default 0)")
    p.add_argument("--version", type=int, default=None, help="split this lake version (default: the newest)")
    p.add_argument("--replace", action="store_true", help="re-split a lake that has split tags (default: refuse)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake import curate
    from robolake.lake import Lake

    cfg = curate.SplitConfig(
        val=args.val,
        test=args.test,
        by=args.by,
        seed=args.seed,
        stratify=tuple(c.strip() for c in args.stratify.split(",") if c.strip()),
    )
    lake = Lake.open(args.lake, version=args.version)
    r = curate.split(lake, cfg, replace=args.replace)
    sizes = ", ".join(f"{p} {len(ids)}" for p, ids in r.parts.items())
    print(
        f"lake {lake.uri}: version {r.version} split into {sizes} episodes (tags {', '.join(t.name for t in r.tags)})"
    )
    return 0
