"""`robolake align LAKE [--fps F] [--rule STREAM=RULE ...] [--where EXPR]`: new steps from the record."""

from __future__ import annotations

import argparse
import json

from robolake.commands.select import WHERE_HELP

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "align",
        help="rebuild the steps from the record of every stream (another rate or rule) as a new lake version",
        description=(
            "Ingest keeps every message of every stream (the record) and writes steps at one rate with default "
            "rules: state linear, action hold, frames latest-at-or-before. `align` derives new steps from the record, "
            "without the source files, and publishes them as one version (`robolake restore` goes back). "
            "Rules: linear, hold, latest, nearest, nearest:SECONDS (within a tolerance), mean (over each tick)."
        ),
    )
    add_rendition_arguments(p, fps_required=False)
    p.set_defaults(fn=run)


def add_rendition_arguments(p: argparse.ArgumentParser, *, fps_required: bool) -> None:
    """LAKE, --fps, --rule, --where and --json: the options of a steps rendition (`align`, `resample`)."""
    p.add_argument("lake", help="the lake URI")
    if fps_required:
        p.add_argument("--fps", type=float, required=True, help="the new tick rate in Hz")
    else:
        p.add_argument("--fps", type=float, default=None, help="tick rate in Hz (default: each episode's own)")
    p.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="STREAM=RULE",
        help="the rule of one stream or topic, e.g. /joint_states=nearest:0.005 (repeatable)",
    )
    p.add_argument("--where", metavar="EXPR", help=WHERE_HELP + " (default: every episode)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line (default: sentences)")


def _rules(given: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for text in given:
        stream, sep, rule = text.rpartition("=")
        if not sep or not stream or not rule:
            raise ValueError(f"--rule {text!r}: write STREAM=RULE, e.g. /imu=mean or /joint_states=nearest:0.005")
        out.append((stream, rule))
    return tuple(out)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import AlignSpec, align_lake

    r = align_lake(args.lake, AlignSpec(fps=args.fps, rules=_rules(args.rule), where=args.where))
    if args.json:
        print(
            json.dumps(
                {
                    "lake": r.lake,
                    "version": r.version,
                    "realigned": list(r.realigned),
                    "kept": r.kept,
                    "steps_before": r.steps_before,
                    "steps_after": r.steps_after,
                    "frames_missing": r.frames_missing,
                },
                sort_keys=True,
            )
        )
        return 0
    if r.realigned:
        print(
            f"lake {r.lake}: version {r.version} realigned {len(r.realigned)} episodes "
            f"({r.steps_before} -> {r.steps_after} steps)"
        )
    else:
        print(f"lake {r.lake}: nothing realigned; still version {r.version}")
    if r.frames_missing:
        print(
            f"  {r.frames_missing} steps show an earlier frame than the latest captured: the record did not keep "
            "frames no old step showed"
        )
    for eid, why in sorted(r.kept.items())[:20]:
        print(f"  kept {eid}: {why}")
    if len(r.kept) > 20:
        print(f"  ... and {len(r.kept) - 20} more episodes kept as they are (--json lists them)")
    return 0
