"""`robolake inspect SRC [--json]`: what a source holds, per unit, so a mapping takes a minute to write.

For every unit discovery finds under SRC (a dataset directory, a bag, an HDF5 file, a TFDS
directory) it prints the format, the embodiment tag and defaults the reader would use, and one
row per topic / dataset / feature: type, shape, message count, rate and time span. Paths that
look like data but no format reads, and units that fail to open, are listed after.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register", "run", "format_report"]

_COLUMNS = ("type", "shape", "count", "rate_hz", "start_s", "end_s", "span_s")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="show what a source holds (topics/keys, types, counts, rates, shapes, time span)")
    p.add_argument("src", help="a dataset directory, a recording file, or a folder of them")
    p.add_argument("--format", default="auto", help="only this source format (default: detect)")
    p.add_argument("--map", default=None, metavar="FILE", help="a mapping to check against the source")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(fn=run)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list):
        return "[" + ",".join(_cell(x) for x in v) + "]" if len(v) <= 6 else f"[{len(v)} items]"
    return str(v)


def _table(rows: dict[str, dict[str, Any]], indent: str) -> list[str]:
    cols = [c for c in _COLUMNS if any(c in r for r in rows.values())]
    extra = sorted({k for r in rows.values() for k in r if k not in _COLUMNS and not isinstance(r[k], (dict, list))})
    cols += extra[:3]
    header = ["name", *cols]
    body = [[name, *(_cell(r.get(c)) for c in cols)] for name, r in rows.items()]
    widths = [min(max(len(x[i]) for x in [header, *body]), 48) for i in range(len(header))]
    return [indent + "  ".join(x[i][:48].ljust(widths[i]) for i in range(len(header))).rstrip() for x in [header, *body]]


def format_report(info: dict[str, Any], indent: str = "") -> list[str]:
    """Human-readable lines of one reader's `inspect()` dict."""
    lines = []
    head = [f"{k}={_cell(v)}" for k, v in info.items() if not isinstance(v, dict) and not (isinstance(v, list) and v and isinstance(v[0], dict)) and k != "path"]
    lines.append(f"{indent}{info.get('path', '')}")
    if head:
        lines.append(f"{indent}  " + "  ".join(head))
    for k, v in info.items():
        if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            lines.append(f"{indent}  {k}:")
            lines += _table(v, indent + "    ")
        elif isinstance(v, dict) and v:
            lines.append(f"{indent}  {k}: " + ", ".join(f"{a}={_cell(b)}" for a, b in list(v.items())[:12]))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                lines += format_report(item, indent + "  ")
    return lines


def _describe(format_name: str, path: str) -> dict[str, Any]:
    from robolake.lake.sources import get_format

    fmt = get_format(format_name)
    if fmt.inspect_unit is None:
        return {}
    try:
        return {"contents": fmt.inspect_unit(path)}
    except Exception as e:  # a unit too broken to describe
        return {"contents_error": str(e)}


def run(args: argparse.Namespace) -> int:
    from robolake.lake.sources import SourceOptions, discover_readers, get_format
    from robolake.lake.sources.mapping import load_mapping

    mapping = load_mapping(args.map) if args.map else None
    found = discover_readers(args.src, format=args.format, options=SourceOptions(mapping=mapping))
    reports = []
    for reader in found:
        try:
            reports.append(reader.inspect())
        except Exception as e:  # one unreadable unit should not hide the others
            reports.append({"format": reader.format_name, "path": reader.root, "error": f"{type(e).__name__}: {e}"})
    if args.json:
        print(json.dumps({
            "units": reports, "unrecognised": list(found.unrecognised),
            "failed": [{"path": f.path, "format": f.format, "reason": f.message, **_describe(f.format, f.path)} for f in found.failed],
        }, indent=2, default=str))
        return 0
    for info in reports:
        print("\n".join(format_report(info)))
        print()
    for f in found.failed:
        print(f"cannot open ({f.format}): {f.message if f.message.startswith(f.path) else f'{f.path}: {f.message}'}")
        fmt = get_format(f.format)
        if fmt.inspect_unit is not None:
            try:
                print("\n".join(format_report(fmt.inspect_unit(f.path), "  ")))
            except Exception as e:  # a unit too broken to describe
                print(f"  (cannot describe it: {e})")
        print()
    for u in found.unrecognised:
        print(f"not read: {u}")
    return 0
