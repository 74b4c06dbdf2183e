"""`robolake inspect` of a `.rrd` file: every entity and component, what ingest does with each.

A Rerun recording names its entities but says nothing of their roles, so before a first ingest
a user needs to see what is there: per entity and component its archetype and component type,
row count, rate and span on the chosen timeline, shape (values per row, or image size), and
role (state, action, camera, split, task, record, or left out and why); the timelines with
their kind; the plan's timeline and rate, how many episodes; and a mapping that ingests exactly
what the default ingest does (`--suggest-map`). A file no plan fits (no numeric entity, every
clock backwards) is described all the same, with the reason in `ingest`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.registry import SourceOptions
from robolake.lake.sources.rerun.load import MISSING, Column, load_rrd
from robolake.lake.sources.rerun.values import IMAGE, NUMERIC, column_kind, numeric_rows

__all__ = ["describe"]


def _shape(col: Column, kind: str) -> str:
    if kind == NUMERIC:
        _, groups = numeric_rows(col)
        return "/".join(f"[{v.shape[1]}]" for _, v in groups) or "-"
    if kind == IMAGE:
        return "image"
    return "-"


def _entry(col: Column, timeline: str, kind: str, role: str) -> dict[str, Any]:
    t = col.times.get(timeline)
    t = t[t != MISSING] if t is not None else np.zeros(0, np.int64)
    scale = 1e9
    span = float(t.max() - t.min()) / scale if t.size else 0.0
    dt = np.diff(t).astype(np.float64)
    rate = float(scale / np.median(dt[dt > 0])) if (dt > 0).any() else 0.0
    return {
        "type": f"{col.archetype or '?'}/{col.component_type or '?'}",
        "count": len(col),
        "on_timeline": int(t.size),
        "rate_hz": round(rate, 3),
        "shape": _shape(col, kind),
        "span_s": round(span, 6),
        "role": role,
    }


def describe(
    path: str, options: SourceOptions, *, reader: Any = None, error: SourceError | None = None
) -> dict[str, Any]:
    """The inspect report of one `.rrd` file (see the module docstring).

    Args:
        reader: The `RerunReader` over it, or None when it cannot be opened (`error` says why).
    """
    out: dict[str, Any] = {"path": path, "format": "rerun"}
    try:
        contents = load_rrd(path, limits=options.limits, pixels=False)
    except SourceError as e:
        out["ingest"] = f"quarantined ({e.reason_code}): {e.message}"
        return out
    if reader is None and error is not None:
        out["ingest"] = f"quarantined ({error.reason_code}): {error.message}"
    out["application_id"] = contents.application_id
    out["timelines"] = {n: {"kind": t.kind} for n, t in sorted(contents.timelines.items())}
    roles: dict[str, str] = {}
    if reader is not None:
        plan = reader.plan
        roles.update({s.source: "state" for s in plan.state})
        roles.update({s.source: "action" for s in plan.action})
        roles.update({c.source: f"camera {c.name}" for c in plan.cameras})
        if plan.split.by == "topic" and plan.split.source:
            roles[plan.split.source] = "split"
        if plan.task_from:
            roles[plan.task_from] = "task"
        out["timeline"] = plan.timeline
        out["timeline_from"] = plan.timeline_from
        out["fps"] = reader.fps
        out["episodes"] = len(reader.discover())
        out["embodiment"] = reader.tag
        out["ingest"] = f"{len(reader.discover())} episode(s) at {reader.fps:g} Hz on timeline {plan.timeline}"
        out["suggested_mapping"] = plan.to_yaml(fps=reader.fps)
        timeline = plan.timeline
    else:
        timeline = "log_time" if "log_time" in contents.timelines else next(iter(sorted(contents.timelines)), "")
    entities: dict[str, dict[str, Any]] = {}
    for col in contents.columns.values():
        kind, why = column_kind(col)
        if kind == "part":
            continue
        role = roles.get(col.entity, "record" if kind != "other" else f"left out: {why}")
        if kind in ("image", "encoded_image") and col.entity not in roles:
            role = "left out: images not mapped as a camera"
        entities[f"{col.entity} {col.component}"] = _entry(col, timeline, kind, role)
    out["entities"] = entities
    if reader is not None and reader.notes:
        out["notes"] = list(reader.notes)
    return out
