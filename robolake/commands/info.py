"""`robolake info LAKE [--version N] [--json] [--episodes]`: tables, row counts, versions, embodiments,
quarantine; with `--episodes`, every episode (id, embodiment, steps, task) of the version."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from robolake.commands.common import add_tag_arguments, open_lake_at, print_summary

if TYPE_CHECKING:
    from robolake.lake import Lake

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("info", help="tables, row counts, versions, embodiments, quarantine")
    s.add_argument("lake", help="the lake directory or object-store URI")
    s.add_argument("--version", type=int, default=None, help="show this lake version (default: the newest)")
    add_tag_arguments(s)
    s.add_argument("--json", action="store_true", help="print the summary and every version as JSON (default: a table)")
    s.add_argument(
        "--episodes",
        action="store_true",
        help="list the version's episodes (id, embodiment, steps, task) instead of the summary; with --json as JSON",
    )
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import missing_files, quality_counts

    lake = open_lake_at(args.lake, args, args.version)
    missing = missing_files(lake.uri, lake.version_info, lake.storage_options)
    if missing:  # a cheap listing: counts from the manifests would look normal without it
        print(
            f"robolake info: lake {lake.uri} version {lake.version} references {len(missing)} data file(s) that do "
            f"not exist (first: {missing[0]}); run `robolake check {lake.uri}` for what to do",
            file=sys.stderr,
        )
        return 1
    if args.episodes:
        rows = lake.episodes(columns=["episode_id", "embodiment", "num_steps", "task"]).to_pylist()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            for r in rows:
                print(f"{r['episode_id']}\t{r['embodiment']}\t{r['num_steps']}\t{r['task']}")
        return 0
    summary = lake.summary()
    # how many episodes each per-episode quality check flags (the doctor's rules; absent without quality)
    for emb, counts in quality_counts(lake).items():
        if emb in summary["embodiments"]:
            summary["embodiments"][emb]["quality"] = counts
    if args.json:
        summary["versions"] = _versions_json(lake)
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary)
    return 0


def _versions_json(lake: Lake) -> list[dict[str, Any]]:
    """Every version's manifest; one that does not read is listed as damaged, with the reason in one
    line, instead of failing the summary of a version that is intact (`robolake check` says what to do)."""
    from robolake.errors import one_line
    from robolake.lake import list_versions, read_version

    out: list[dict[str, Any]] = []
    for v in list_versions(lake.uri, lake.storage_options):
        try:
            out.append(dict(read_version(lake.uri, v, lake.storage_options).to_json()))
        except (ValueError, OSError) as e:  # damaged, hostile (a name refused) or linked out of the lake
            out.append({"version": v, "damaged": one_line(e)})
    return out
