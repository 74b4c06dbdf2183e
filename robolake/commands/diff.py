"""`robolake diff LAKE N M`: episodes added and removed, counts and statistics per embodiment."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robolake.lake import Lake

__all__ = ["register", "run"]


def _at(lake: Lake, ref: str) -> Lake:
    return lake.checkout(int(ref)) if ref.isdigit() else lake.checkout(tag=ref)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="what changed between two lake versions or tags")
    p.add_argument("lake", help="the lake URI")
    p.add_argument("a", help="a version number or tag name")
    p.add_argument("b", help="a version number or tag name")
    p.add_argument("--json", action="store_true", help="print the difference as JSON (default: a summary)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    import json

    from robolake.curate import diff
    from robolake.lake import Lake

    lake = Lake.open(args.lake)
    d = diff(_at(lake, args.a), _at(lake, args.b))
    if args.json:
        print(json.dumps(d.to_json(), indent=2, sort_keys=True))
        return 0
    print(
        f"lake {lake.uri}: {d.a} -> {d.b}: {len(d.added)} episodes added, {len(d.removed)} removed, "
        f"{len(d.steps_changed)} with other steps, {d.quarantine_added} quarantine rows added"
    )
    for op in d.operations:
        why = f": {op['reason']}" if op.get("reason") else ""
        print(f"  version {op['version']}: {op['operation']}" + (f" by {op['who']}" if op.get("who") else "") + why)
    for tag, row in d.embodiments.items():
        (ea, eb), (sa, sb) = row["episodes"], row["steps"]
        moved = row.get("stats_moved")
        shift = "" if not moved else f"; statistics moved up to {max(moved.values()):.3f} std"
        print(f"  {tag}: {ea} -> {eb} episodes, {sa} -> {sb} steps{shift}")
    for e in d.removed[:20]:
        print(f"  - {e}")
    for e in d.added[:20]:
        print(f"  + {e}")
    changed = sorted(d.steps_changed.items())
    for e, (sa, sb) in changed[:20]:
        print(f"  ~ {e}: {sa} -> {sb} steps")
    if len(d.added) > 20 or len(d.removed) > 20 or len(changed) > 20:
        print("  (--json lists every episode)")
    return 0
