"""`robolake inspect SRC`: what a source holds, per unit, so a mapping takes a minute to write.

For every unit under SRC (a dataset directory, a bag, an MCAP or HDF5 file, a TFDS directory)
it prints what a default ingest would do with it (or why it would be quarantined), then one row
per topic / dataset / feature: type, count, rate (as measured), shape, time span (seconds from
the start; absolute times as ISO 8601) and its role (state, action, camera, task, or ignored and
why). A unit that ingest cannot open is described all the same, from its files, so the command
is useful exactly where a mapping is needed. `--suggest-map` prints a mapping to start from
(`robolake inspect bag.mcap --suggest-map > arm.yaml`), `--map FILE` checks one, `--state-only`
shows what ingest would do without cameras, `--session MODE` which files of a folder it would read
as one recording (the sessions: files, time span, topics per file; and what cannot be formed, such
as split parts with one missing). The exit code is 0 whenever some unit was found,
whatever ingest would make of it; 2 when nothing under SRC is readable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

__all__ = ["register", "run", "format_report", "inspect_units"]

_COLUMNS = (
    "type",
    "encoding",
    "count",
    "rate_hz",
    "header_rate_hz",
    "shape",
    "start_s",
    "end_s",
    "shared_stamps",
    "distinct_stamps_hz",
    "groups",
    "camera",
    "role",
)
_NOT_HEAD = {"path", "ingest", "suggested_mapping", "notes", "error", "contents", "session"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect", help="show what a source holds (topics/keys, types, counts, rates, shapes, time span, roles)"
    )
    p.add_argument("src", help="a dataset directory, a recording file, or a folder of them")
    p.add_argument("--format", default="auto", help="only this source format (default: detect)")
    p.add_argument("--map", default=None, metavar="FILE", help="a mapping to check against the source (default: none)")
    p.add_argument("--state-only", action="store_true", help="describe what ingest --state-only would do (no cameras)")
    p.add_argument(
        "--session",
        default=None,
        choices=["folder", "overlap", "split"],
        help="report the sessions ingest --session would form: topic-log files of one folder read as one recording "
        "(overlap: recorded side by side; split: numbered parts name_0.bag, name_1.bag, ...; folder: all of them; "
        "default: none, each file alone)",
    )
    p.add_argument(
        "--suggest-map", action="store_true", help="print a mapping YAML to start from (> arm.yaml), nothing else"
    )
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(fn=run)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) >= 1e5 else f"{v:.6g}"  # an absolute stamp in full, never 1.7575e+09
    if isinstance(v, list):
        return "[" + ",".join(_cell(x) for x in v) + "]" if len(v) <= 6 else f"[{len(v)} items]"
    return str(v)


def _table(rows: dict[str, dict[str, Any]], indent: str) -> list[str]:
    cols = [c for c in _COLUMNS if any(c in r for r in rows.values())]
    header = ["name", *cols]
    body = [[name, *(_cell(r.get(c)) for c in cols)] for name, r in rows.items()]
    # names are never cut (two long keys differing at the end must stay apart); the role is last
    widths = [max(len(x[i]) for x in [header, *body]) for i in range(len(header))]
    out = [indent + "  ".join(x[i].ljust(widths[i]) for i in range(len(header))).rstrip() for x in [header, *body]]
    for name, r in rows.items():
        if r.get("frames"):
            frames = ", ".join(f"{child} (in {v['parent']}, {v['count']})" for child, v in r["frames"].items())
            out.append(f"{indent}  {name} frames: {frames}")
        if r.get("joints"):
            out.append(f"{indent}  {name} joints: {', '.join(r['joints'])}")
        if r.get("error") or r.get("note"):
            out.append(f"{indent}  {name}: {r.get('error') or r.get('note')}")
    return out


def format_session(session: dict[str, Any], indent: str = "") -> list[str]:
    """Human-readable lines of a session (`Session.describe()`): its files, their spans and topics (why it
    cannot be ingested, when it cannot, is the unit's `ingest` line)."""
    files = session.get("files", [])
    lines = [
        f"{indent}session ({session.get('mode')}): {len(files)} files, {_cell(session.get('duration_s'))} s "
        f"from {session.get('start') or '-'}"
    ]
    names = [f["path"].rsplit("/", 1)[-1] for f in files]
    spans = [f"{_cell(f.get('start_s'))}-{_cell(f.get('end_s'))} s" for f in files]
    wn, ws = max(map(len, names), default=0), max(map(len, spans), default=0)
    for f, name, span in zip(files, names, spans, strict=True):
        left = f" (left out: {', '.join(f['left_out'])})" if f.get("left_out") else ""
        lines.append(f"{indent}  {name.ljust(wn)}  {span.ljust(ws)}  {', '.join(f.get('streams', [])) or '-'}{left}")
    lines += [f"{indent}  note: {n}" for n in session.get("notes", ())]
    return lines


def format_report(info: dict[str, Any], indent: str = "") -> list[str]:
    """Human-readable lines of one unit's `inspect()` dict."""
    lines = [f"{indent}{info.get('path', '')}"]
    if info.get("session"):
        lines += format_session(info["session"], indent + "  ")
    if info.get("ingest"):
        lines.append(f"{indent}  ingest: {info['ingest']}")
    if info.get("error"):
        lines.append(f"{indent}  error: {info['error']}")
    head = [
        f"{k}={_cell(v)}"
        for k, v in info.items()
        if k not in _NOT_HEAD and not isinstance(v, dict) and not (isinstance(v, list) and v and isinstance(v[0], dict))
    ]
    if head:
        lines.append(f"{indent}  " + "  ".join(head))
    for k, v in info.items():
        if k in _NOT_HEAD:
            continue
        if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            lines.append(f"{indent}  {k}:")
            lines += _table(v, indent + "    ")
        elif isinstance(v, dict) and v:
            lines.append(f"{indent}  {k}: " + ", ".join(f"{a}={_cell(b)}" for a, b in list(v.items())[:12]))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                lines += format_report(item, indent + "  ")
    for note in info.get("notes", ()):
        lines.append(f"{indent}  note: {note}")
    return lines


def inspect_units(src: str, *, format: str = "auto", options: Any = None) -> tuple[list[dict[str, Any]], Any]:
    """One report per unit under `src` (a unit ingest cannot open described from its files), and the scan.

    With a session mode in `options`, a session of files is one unit: its report says which files
    it reads (`session`: files, time span, topics per file) and describes them as one recording.

    Raises:
        ValueError: `src` missing or an unknown format.
    """
    from robolake.lake import SourceOptions, find_units

    options = options or SourceOptions()
    scan = find_units(src, format=format, options=options)
    units: list[tuple[str, Any, Any]] = [(path, path, fmt) for path, fmt in scan.units]
    units += [(session.root, session, fmt) for session, fmt in scan.sessions]
    reports = [_report(unit, fmt, options) for _, unit, fmt in sorted(units, key=lambda u: u[0])]
    return reports, scan


def _report(unit: Any, fmt: Any, options: Any) -> dict[str, Any]:
    """One unit's report: a path's, or a session's (`UnitScan.sessions`) with what it reads."""
    from robolake.lake import FailedUnit, open_unit

    alone = isinstance(unit, str)
    path = unit if alone else unit.root
    extra = {} if alone else {"session": unit.describe()}
    opened = open_unit(unit, fmt, options)
    if not isinstance(opened, FailedUnit):
        try:
            return {"opens": True, **opened.inspect(), **extra}
        except Exception as e:  # one unreadable unit should not hide the others
            return {
                "format": opened.format_name,
                "path": opened.root,
                "opens": True,
                "error": f"{type(e).__name__}: {e}",
                **extra,
            }
    report: dict[str, Any] = {
        "format": fmt.name,
        "path": path,
        "opens": False,
        "ingest": f"quarantined ({opened.reason_code}): {opened.message}",
        **extra,
    }
    try:
        if not alone:
            described = fmt.sessions.inspect(unit, options)
        elif fmt.inspect_unit is not None:
            described = fmt.inspect_unit(path, options)
        else:
            described = {}
        report.update({k: v for k, v in described.items() if k not in ("path", "ingest", "format")})
    except Exception as e:  # a unit too broken to describe
        report["error"] = f"cannot describe it ({type(e).__name__}: {e})"
    return report


def run(args: argparse.Namespace) -> int:
    from robolake.lake import SourceOptions, load_mapping

    mapping = load_mapping(args.map) if args.map else None
    options = SourceOptions(
        mapping=mapping, state_only=bool(getattr(args, "state_only", False)), session=getattr(args, "session", None)
    )
    reports, scan = inspect_units(args.src, format=args.format, options=options)
    if not reports:
        print(f"robolake inspect: {scan.nothing_readable()}", file=sys.stderr)
        return 2
    if getattr(args, "suggest_map", False):
        with_map = [r for r in reports if r.get("suggested_mapping")]
        if not with_map:
            for r in reports:
                print(f"# {r['path']}: a {r.get('format')} unit reads without a mapping")
            return 0
        print(with_map[0]["suggested_mapping"], end="")
        for r in with_map[1:]:
            print(
                f"# also under {args.src}: {r['path']} ({r.get('format')}); "
                f"`robolake inspect {r['path']} --suggest-map` for its own"
            )
        return 0
    if args.json:
        print(
            json.dumps(
                {
                    "units": reports,
                    "sessions": [r["session"] for r in reports if r.get("session")],
                    "unrecognised": list(scan.unrecognised),
                    "failed": [
                        {"path": r["path"], "format": r.get("format"), "reason": r["ingest"]}
                        for r in reports
                        if not r.get("opens")
                    ],
                },
                indent=2,
                default=str,
            )
        )
        return 0
    for info in reports:
        print("\n".join(format_report(info)))
        if info.get("suggested_mapping"):
            where = info["path"]
            if info.get("session"):
                where = f"{os.path.dirname(where)} --session {info['session']['mode']}"
            print(f"  mapping to start from: robolake inspect {where} --suggest-map > map.yaml")
        print()
    for u in scan.unrecognised:
        print(f"not read: {u}")
    if options.session_mode is not None:
        print(_sessions_line(reports, options.session_mode))
    return 0


def _sessions_line(reports: list[dict[str, Any]], mode: str) -> str:
    """One line on the sessions formed: how many, of how many files, and how many cannot be formed."""
    formed = [r["session"] for r in reports if r.get("session")]
    failed = [s for s in formed if s.get("problem")]
    if not formed:
        return f"sessions ({mode}): none formed; each file is read alone"
    files = sum(len(s.get("files", [])) for s in formed)
    return (
        f"sessions ({mode}): {len(formed)} formed of {files} files"
        + (f", {len(failed)} of them cannot be ingested (see above)" if failed else "")
        + f"; {sum(1 for r in reports if not r.get('session'))} unit(s) read alone"
    )
