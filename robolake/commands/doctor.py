"""`robolake doctor LAKE [--version N | --tag T] [--json] [--fail-on CHECK ...] [--update] [--html OUT]`:
the quality findings of a lake's episodes, per embodiment and task, with a `--where` for each."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

__all__ = ["register", "run"]

_WORST = 5  # findings shown per check and group


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="what is wrong with the episodes (frozen joints, idle, jumps, frozen cameras, gaps, duplicates)",
        description=(
            "Reads the quality ingest measured of each episode (no steps or media are read) and reports, per "
            "embodiment and task, the episodes each check finds, why, and a --where that selects them. Exits 0 "
            "with findings; --fail-on CHECK exits 1 when that check finds any. Lakes ingested before quality (or "
            "before frame fingerprints) get it with --update (a new lake version)."
        ),
    )
    p.add_argument("lake", help="the lake URI")
    p.add_argument("--version", type=int, default=None, help="examine this lake version (default: the newest)")
    p.add_argument(
        "--tag", default=None, metavar="NAME", help="examine the version this tag names (default: the newest version)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (key `findings`)")
    p.add_argument(
        "--fail-on",
        nargs="+",
        default=[],
        metavar="CHECK",
        help="exit 1 when any of these checks finds something (e.g. frozen_state near_duplicate; `all`: any)",
    )
    p.add_argument(
        "--update",
        action="store_true",
        help="first measure the episodes without quality, or with an older one (a new version)",
    )
    p.add_argument("--html", metavar="OUT", default=None, help="also write a static report page to OUT (default: none)")
    p.set_defaults(fn=run)


def _text(report: Any) -> str:
    lines = [f"lake {report.lake} v{report.version}: {report.episodes} episodes, {len(report.findings)} findings"]
    if report.updated:
        lines.append(f"measured the quality of {report.updated} episodes (this version)")
    by_group: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for f in report.findings:
        by_group[(f.embodiment, f.task)].append(f)
    for g in report.groups:
        found = by_group.get((g["embodiment"], g["task"]), [])
        lines.append(f"\n{g['embodiment']} / {g['task']!r}: {g['episodes']} episodes, {len(found)} findings")
        checks: dict[str, list[Any]] = defaultdict(list)
        for f in found:
            checks[f.check].append(f)
        for check, fs in checks.items():
            lines.append(f'  {check}: {len(fs)} episodes   --where "{fs[0].where}"')
            for f in fs[:_WORST]:
                where = f" ({f.camera or f.stream})" if (f.camera or f.stream) else ""
                lines.append(f"    {f.episode_id}{where}: {f.detail}")
            if len(fs) > _WORST:
                lines.append(f"    ... and {len(fs) - _WORST} more")
    if report.notes:
        lines.append("\nnotes:")
        lines += [f"  {n}" for n in report.notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import CHECKS, doctor, write_doctor_html

    unknown = [c for c in args.fail_on if c not in CHECKS and c != "all"]
    if unknown:
        raise ValueError(f"--fail-on {' '.join(unknown)}: unknown check; the checks are {', '.join(CHECKS)} (or all)")
    report = doctor(args.lake, version=args.version, tag=args.tag, update=args.update)
    if args.html:
        write_doctor_html(report, args.html)
    print(json.dumps(report.to_json()) if args.json else _text(report))
    failing = {f.check for f in report.findings if "all" in args.fail_on or f.check in args.fail_on}
    return 1 if failing else 0
