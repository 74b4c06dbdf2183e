"""The per-episode checks of `robolake doctor`: an episode's own quality numbers turned into findings.

Ingest measures each episode's quality (`lake.stats.quality`) and keeps it in the episode's
metadata; the rules here say which of those numbers are a problem and what to do about it. They
read one episode and nothing else, so their counts per embodiment can be kept as episodes are
written and removed (`lake.stats.episode_summary`) instead of being recounted over the lake on
every `robolake info`; a change to a rule here changes those counts, so it comes with a new
`lake.stats.episode_summary.SUMMARY_VERSION` (stored counts of the old rules are then recounted).
The checks that need the whole lake (near duplicates, length outliers, out-of-range) stay in
`lake.doctor`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CHECKS", "Finding", "IDLE_FRACTION", "JITTER", "episode_findings", "finding", "quality_of", "findings_of"]

CHECKS = (
    "frozen_state",
    "frozen_action",
    "identical_dims",
    "zero_rows",
    "idle_head",
    "idle_tail",
    "idle_fraction",
    "action_jump",
    "frozen_camera",
    "dark_camera",
    "timestamp_gap",
    "timestamp_jitter",
    "success_missing",
    "length_outlier",
    "out_of_range",
    "near_duplicate",
)
IDLE_FRACTION = 0.5
JITTER = 0.25


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One thing wrong with one episode.

    Attributes:
        check: The check's stable name (`CHECKS`), as `--fail-on` takes it.
        episode_id: The episode.
        stream: The stream it concerns (`state`, `action`, `timestamp`), when one.
        camera: The camera it concerns, when one.
        detail: What was found, and what to do about it.
        embodiment: The episode's embodiment.
        task: The episode's task.
        severity: How bad, for ordering the worst first (larger is worse; per check).
        where: A `--where` that selects the episodes with this finding.
        duplicate_of: For `near_duplicate`, the episode this one repeats (the shortest of its group).
    """

    check: str
    episode_id: str
    stream: str | None = None
    camera: str | None = None
    detail: str
    embodiment: str = ""
    task: str = ""
    severity: float = 1.0
    where: str = ""
    duplicate_of: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def finding(e: dict[str, Any], check: str, detail: str, where: str, **kw: Any) -> Finding:
    return Finding(
        check=check,
        episode_id=e["episode_id"],
        detail=detail,
        embodiment=e["embodiment"],
        task=e["task"] or "",
        where=where,
        **kw,
    )


def episode_findings(row: dict[str, Any]) -> list[Finding]:
    """The findings of one episode's own quality numbers (what `robolake view` shows on its page).

    Args:
        row: The episode's `episode_id`, `embodiment`, `task`, `num_steps`, `fps` and `metadata`
            (its JSON text or the parsed dict).

    Returns:
        The findings, none where the episode has no quality measured (or nothing is wrong).
    """
    q = quality_of(row.get("metadata"))
    return findings_of({**row, "quality": q}) if q is not None else []


def quality_of(metadata: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """The `quality` dict of an episode's metadata (JSON text or parsed), or None."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata) if metadata else {}
        except json.JSONDecodeError:
            return None
    q = metadata.get("quality") if isinstance(metadata, dict) else None
    return q if isinstance(q, dict) else None


def findings_of(e: dict[str, Any]) -> list[Finding]:
    """The findings of one episode's own quality numbers."""
    q, n, fps = e["quality"], int(e["num_steps"]), float(e["fps"] or 0) or 1.0
    out = []
    for name in ("state", "action"):
        if q.get(f"frozen_{name}"):
            dims = len(q.get(f"{name}_min", []))
            out.append(
                finding(
                    e,
                    f"frozen_{name}",
                    f"all {dims} {name} dims are constant over its {n} steps: the {name} was not being recorded "
                    "(check the source's joint reader); drop or re-record it",
                    f"quality.frozen_{name}",
                    stream=name,
                )
            )
    if q.get("identical_dims", 0) > 0:
        pairs = q.get("identical_pairs", [])
        shown = ", ".join(f"{s}[{i}]=={s}[{j}]" for s, i, j in pairs[:6])
        out.append(
            finding(
                e,
                "identical_dims",
                f"{q['identical_dims']} columns duplicate another at every step ({shown}): a column copied by the "
                "converter, or joints commanded together",
                "quality.identical_dims > 0",
                stream=pairs[0][0] if pairs else None,
                severity=float(q["identical_dims"]),
            )
        )
    if q.get("zero_rows", 0) > 0:
        out.append(
            finding(
                e,
                "zero_rows",
                f"{q['zero_rows']} all-zero rows at steps {q.get('zero_row_steps', [])[:8]}: placeholder rows "
                "a policy would learn as a command; trim them",
                "quality.zero_rows > 0",
                severity=float(q["zero_rows"]),
            )
        )
    for edge in ("head", "tail"):
        steps = int(q.get(f"idle_{edge}", 0))
        if n and steps >= max(0.2 * n, fps) and not q.get("frozen_state"):
            out.append(
                finding(
                    e,
                    f"idle_{edge}",
                    f"the {'first' if edge == 'head' else 'last'} {steps} of {n} steps are idle; trim them so the "
                    "policy does not learn to wait",
                    f"quality.idle_{edge} >= {steps}",
                    severity=steps / n,
                )
            )
    idle = float(q.get("idle_fraction", 0.0))
    if idle > IDLE_FRACTION and not q.get("frozen_state"):
        out.append(
            finding(
                e,
                "idle_fraction",
                f"{idle:.0%} of its steps are idle (nothing moves more than 0.5% of its range)",
                f"quality.idle_fraction > {IDLE_FRACTION}",
                severity=idle,
            )
        )
    if q.get("action_jumps", 0) > 0:
        out.append(
            finding(
                e,
                "action_jump",
                f"{q['action_jumps']} action steps jump far beyond the episode's own step size, first action"
                f"[{q.get('jump_dim')}] at step {q.get('first_jump')}: a dropped message or a teleop glitch",
                "quality.action_jump > 0",
                stream="action",
                severity=float(q["action_jumps"]),
            )
        )
    for cam, c in sorted((q.get("cameras") or {}).items()):
        run = int(c.get("frozen_run", 0))
        if run >= max(10, 0.5 * fps):
            out.append(
                finding(
                    e,
                    "frozen_camera",
                    f"camera {cam} repeats one frame for {run} steps from step {c.get('frozen_start')}: a stalled "
                    "camera (or a scene that did not change)",
                    f"quality.frozen_camera >= {run}",
                    camera=cam,
                    severity=float(run),
                )
            )
        dark = int(c.get("dark_frames", 0)) + int(c.get("bright_frames", 0))
        if dark:
            out.append(
                finding(
                    e,
                    "dark_camera",
                    f"camera {cam}: about {dark} black or overexposed frames",
                    "quality.dark_frames > 0",
                    camera=cam,
                    severity=float(dark),
                )
            )
    if q.get("timestamp_gaps", 0) > 0:
        out.append(
            finding(
                e,
                "timestamp_gap",
                f"{q['timestamp_gaps']} gaps in the timestamps, the longest {q.get('longest_gap_s', 0):.3g} s before "
                f"step {q.get('first_gap')}: dropped frames; the steps around it are not evenly spaced",
                "quality.timestamp_gap > 0",
                stream="timestamp",
                severity=float(q.get("longest_gap_s", 0.0)),
            )
        )
    jitter = float(q.get("timestamp_jitter", 0.0))
    if jitter > JITTER:
        out.append(
            finding(
                e,
                "timestamp_jitter",
                f"step intervals vary by {jitter:.0%} of the nominal 1/fps",
                f"quality.timestamp_jitter > {JITTER}",
                stream="timestamp",
                severity=jitter,
            )
        )
    return out
