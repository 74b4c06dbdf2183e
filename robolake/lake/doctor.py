"""`robolake doctor`: what a data lead should know about a lake before training on it.

Ingest measures each episode's quality in the pass that reads it (`lake.stats.quality`, kept in
the episode metadata), so the doctor reads the episodes table and nothing else: no steps, no
media. It turns those numbers into findings, one per episode and check (a `Finding` names the
check, the episode, the camera or stream where one applies, a reason a person can act on and a
`--where` that selects the episodes it concerns), and adds what only the whole lake can tell:

- `near_duplicate`: episodes of one embodiment whose action signatures (the actions at a few
  evenly spaced steps) agree within `DUPLICATE_TOLERANCE` of each dimension's typical range, or
  whose camera fingerprints (8x8 luma thumbnails of a few frames) agree within `MATCH_LUMA` at
  aligned steps, at lengths within 2% (`lake.stats.duplicates`, which finds every such pair
  without comparing all of them; identical content never lands twice: ingest keys it by content hash);
- `length_outlier`: an episode whose length is beyond `LENGTH_Z` robust z (median, MAD, at least
  `LENGTH_FLOOR` of the median) of its embodiment and task (five episodes or more) and a quarter
  of the median away from it;
- `out_of_range`: an episode whose state or action leaves its embodiment's observed range: beyond
  the median of the episodes' extremes by `RANGE_Z` robust sigmas and half a typical range;
- constant dims of a whole embodiment (a humanoid's fixed legs): a note, not a finding.

Thresholds that turn a per-episode number into a finding are in `lake.stats.findings` (they read
one episode, so their counts are kept per embodiment for `robolake info`): an idle head or tail
counts from a fifth of the episode and one second, idle fraction above a half, a frozen camera from
ten steps and half a second. `success_missing` is a finding only where some episodes of the same
embodiment and task record success and others do not; a dataset that records none gets a note
instead.

An older lake (ingested before quality, or with it off, or by a robolake whose quality had no
frame fingerprints) gets it with `doctor(update=True)` (`lake.doctor_update`: batched reads,
worker processes, one new version).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robolake.lake.doctor_update import update_quality
from robolake.lake.lake import Lake
from robolake.lake.query import sql_quote
from robolake.lake.stats.duplicates import ACTION_TOLERANCE, action_pairs, actions_match, frame_pairs, frames_match
from robolake.lake.stats.episode_summary import quality_counts_of
from robolake.lake.stats.findings import CHECKS, Finding, episode_findings
from robolake.lake.stats.findings import finding as _finding
from robolake.lake.stats.findings import findings_of as _episode_findings
from robolake.lake.stats.findings import quality_of as _quality
from robolake.lake.stats.fingerprint import MATCH_LUMA, parse_fingerprint
from robolake.lake.stats.quality import QUALITY_VERSION

__all__ = ["CHECKS", "DoctorReport", "Finding", "doctor", "episode_findings", "quality_counts", "write_doctor_html"]

log = logging.getLogger(__name__)

DUPLICATE_TOLERANCE = ACTION_TOLERANCE
LENGTH_Z = 4.0
LENGTH_FLOOR = 0.05  # the least robust sigma of a task's lengths, as a fraction of its median
RANGE_Z = 6.0


@dataclass(frozen=True, kw_only=True)
class DoctorReport:
    """What `doctor` found.

    Attributes:
        lake: The lake's URI.
        version: The lake version examined (the new one after `update`).
        episodes: Episodes examined.
        findings: Every finding, worst first within each check.
        notes: What concerns a whole embodiment or dataset, not one episode.
        groups: Per embodiment and task: episodes and findings per check.
        without_quality: Episodes with no quality measured (`update=True` adds it).
        updated: Episodes whose quality `update` added.
        lengths: num_steps per episode; idle_fraction: per episode with quality (for plots).
    """

    lake: str
    version: int
    episodes: int
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    without_quality: int = 0
    updated: int = 0
    lengths: list[int] = field(default_factory=list)
    idle_fraction: list[float] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Findings per check (checks without findings left out)."""
        return dict(Counter(f.check for f in self.findings))

    def to_json(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "version": self.version,
            "episodes": self.episodes,
            "counts": self.counts(),
            "findings": [f.to_json() for f in self.findings],
            "notes": self.notes,
            "groups": self.groups,
            "without_quality": self.without_quality,
            "updated": self.updated,
        }


def doctor(
    lake: Lake | str,
    *,
    version: int | None = None,
    tag: str | None = None,
    update: bool = False,
    workers: int | None = None,
    storage_options: dict[str, str] | None = None,
) -> DoctorReport:
    """Examine a lake's episodes (`version` or `tag`, else the latest) and report their findings.

    Args:
        lake: The lake or its URI.
        version: Examine this version.
        tag: Examine this tag.
        update: First compute the quality of episodes that lack it and publish them as a new version.
        workers: Processes `update` measures in (default: one per CPU from 4 batches of 256
            episodes on, else this process).
        storage_options: Object-store options for a URI.

    Raises:
        ValueError: `update` with a version or tag (it writes the latest); `workers` below 1.
    """
    lake = lake if isinstance(lake, Lake) else Lake.open(lake, storage_options=storage_options)
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if update and (version is not None or tag is not None):
        raise ValueError("doctor --update writes a new version on top of the latest; leave out --version and --tag")
    if version is not None or tag is not None:
        lake = lake.checkout(version, tag=tag)
    updated = update_quality(lake, workers) if update else 0
    if update:  # (a version that only stores summaries is newer too)
        lake = lake.refresh()
    rows = lake.episodes(columns=["episode_id", "embodiment", "task", "num_steps", "fps", "success", "metadata"])
    eps = rows.to_pylist()
    for e in eps:
        e["quality"] = _quality(e["metadata"])
    with_q = [e for e in eps if e["quality"] is not None]
    findings: list[Finding] = []
    notes: list[str] = []
    for e in with_q:
        findings += _episode_findings(e)
    findings += _success_missing(with_q, notes)
    findings += _length_outliers(eps)
    by_emb: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in with_q:
        by_emb[e["embodiment"]].append(e)
    for emb, group in sorted(by_emb.items()):
        notes += _constant_dims(emb, group)
        findings += _out_of_range(group)
        findings += _near_duplicates(group)
    missing = len(eps) - len(with_q)
    if missing:
        notes.append(
            f"{missing} of {len(eps)} episodes have no quality measured (ingested before it, or with it off); "
            "`robolake doctor LAKE --update` measures it as a new version"
        )
    older = sum(1 for e in with_q if int(e["quality"].get("v", 0) or 0) < QUALITY_VERSION)
    if older:
        notes.append(
            f"{older} of {len(eps)} episodes have quality from an older robolake (no frame fingerprints: their "
            "near-duplicates are found by actions only); `robolake doctor LAKE --update` re-measures them"
        )
    order = {c: i for i, c in enumerate(CHECKS)}
    findings.sort(key=lambda f: (order.get(f.check, len(order)), -f.severity, f.episode_id))
    return DoctorReport(
        lake=lake.uri,
        version=lake.version,
        episodes=len(eps),
        findings=findings,
        notes=notes,
        groups=_groups(eps, findings),
        without_quality=missing,
        updated=updated,
        lengths=[int(e["num_steps"]) for e in eps],
        idle_fraction=[float(e["quality"]["idle_fraction"]) for e in with_q],
    )


def quality_counts(lake: Lake) -> dict[str, dict[str, int]]:
    """Per embodiment, how many episodes each per-episode check flags (what `robolake info` prints).

    Read from the counts kept with each embodiment (`lake.stats.episode_summary`; counted from the
    episodes table where a lake has none). Embodiments whose episodes have no quality measured are
    left out, so a lake ingested without quality gives `{}`; an embodiment with quality and nothing
    flagged maps to `{}`.
    """
    out = {}
    for emb, s in sorted(lake.episode_summaries().items()):
        counts = quality_counts_of(s)
        if counts is not None:
            out[emb] = counts
    return out


def _success_missing(eps: list[dict[str, Any]], notes: list[str]) -> list[Finding]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in eps:
        groups[(e["embodiment"], e["task"] or "")].append(e)
    none_at_all = {e["embodiment"] for e in eps} - {e["embodiment"] for e in eps if e["success"] is not None}
    for emb in sorted(none_at_all):
        notes.append(f"{emb}: no episode records success; a filter on success keeps none")
    out = []
    for (emb, task), group in sorted(groups.items()):
        lacking = [e for e in group if e["success"] is None]
        if not lacking or emb in none_at_all:
            continue
        if len(lacking) == len(group):
            notes.append(f"{emb} / {task!r}: no episode records success ({len(group)} episodes)")
            continue
        for e in lacking:
            out.append(
                _finding(
                    e,
                    "success_missing",
                    f"no success recorded, while {len(group) - len(lacking)} episodes of its task record one",
                    "success is null",
                )
            )
    return out


def _length_outliers(eps: list[dict[str, Any]]) -> list[Finding]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in eps:
        groups[(e["embodiment"], e["task"] or "")].append(e)
    out = []
    for (_, task), group in sorted(groups.items()):
        if len(group) < 5:
            continue
        n = np.array([float(e["num_steps"]) for e in group])
        med = float(np.median(n))
        # a task whose episodes all have one length (a fixed-horizon recorder) has no spread: the
        # floor keeps a run three times as long from hiding behind a MAD of zero
        sigma = max(1.4826 * float(np.median(np.abs(n - med))), LENGTH_FLOOR * med)
        z = (n - med) / sigma if sigma > 0 else np.zeros_like(n)
        for e, zi, ni in zip(group, z, n, strict=True):
            if abs(zi) > LENGTH_Z and abs(ni - med) > 0.25 * med:
                op = ">" if ni > med else "<"
                out.append(
                    _finding(
                        e,
                        "length_outlier",
                        f"{int(ni)} steps where its task's episodes have a median of {med:.0f} (robust z {zi:+.1f}): "
                        "a recording that ran on or was cut short",
                        f"task = {sql_quote(task)} and num_steps {op} {int(med)}",
                        severity=abs(float(zi)),
                    )
                )
    return out


def _constant_dims(emb: str, group: list[dict[str, Any]]) -> list[str]:
    notes = []
    for name in ("state", "action"):
        sets = [set(e["quality"].get(f"constant_{name}", [])) for e in group]
        common = set.intersection(*sets) if sets else set()
        const = sorted(
            d
            for d in common
            if len({float(e["quality"][f"{name}_min"][d]) for e in group if len(e["quality"][f"{name}_min"]) > d}) == 1
        )
        if const and len(group) > 1:
            notes.append(
                f"{emb}: {name} dims {_ranges(const)} never change in any of its {len(group)} episodes "
                "(fixed joints?); they carry nothing a policy can learn"
            )
    return notes


def _ranges(dims: list[int]) -> str:
    out, start = [], dims[0]
    for a, b in zip(dims, [*dims[1:], None], strict=True):
        if b != a + 1:
            out.append(str(start) if start == a else f"{start}-{a}")
            if b is not None:
                start = b
    return ", ".join(out)


def _out_of_range(group: list[dict[str, Any]]) -> list[Finding]:
    if len(group) < 5:
        return []
    out = []
    for name in ("state", "action"):
        try:
            lo = np.array([e["quality"][f"{name}_min"] for e in group], dtype=np.float64)
            hi = np.array([e["quality"][f"{name}_max"] for e in group], dtype=np.float64)
        except (KeyError, ValueError):
            continue
        if lo.ndim != 2 or lo.shape[1] == 0:
            continue
        width = np.median(hi - lo, axis=0)
        bounds = []
        for ext, sign in ((hi, 1.0), (lo, -1.0)):
            med = np.median(ext, axis=0)
            mad = 1.4826 * np.median(np.abs(ext - med), axis=0)
            bounds.append(med + sign * (RANGE_Z * mad + 0.5 * width))
        ub, lb = bounds
        bad = ((hi > ub) | (lo < lb)) & (width > 0)
        for i in np.flatnonzero(bad.any(axis=1)):
            d = int(np.flatnonzero(bad[i])[0])
            above = hi[i, d] > ub[d]
            value, bound = (hi[i, d], ub[d]) if above else (lo[i, d], lb[d])
            out.append(
                _finding(
                    group[i],
                    "out_of_range",
                    f"{name}[{d}] reaches {value:.4g}, outside what its embodiment's episodes reach (bound "
                    f"{bound:.4g}): a unit or calibration error, or a joint limit crossed",
                    f"{'max' if above else 'min'}({name}[{d}]) {'>' if above else '<'} {bound:.4g}",
                    stream=name,
                    severity=float(abs(value - bound) / max(width[d], 1e-12)),
                )
            )
    return out


def _near_duplicates(group: list[dict[str, Any]]) -> list[Finding]:
    """One embodiment's near-duplicates (`lake.stats.duplicates`): by actions or by frames, grouped
    (a pair of pairs sharing an episode is one group), each group's shortest episode (then the
    first in table order) the one the others repeat."""
    if len(group) < 2:
        return []
    lengths = np.array([int(e["num_steps"]) for e in group], dtype=np.int64)
    sigs: list[np.ndarray | None] = []
    for e in group:
        s = np.asarray(e["quality"].get("signature") or [], dtype=np.float64)
        sigs.append(s if s.ndim == 2 and s.size else None)
    dims = next((s.shape[1] for s in sigs if s is not None), 0)
    spans = [
        np.asarray(e["quality"].get("action_max", []), dtype=np.float64)
        - np.asarray(e["quality"].get("action_min", []), dtype=np.float64)
        for e in group
    ]
    spans = [x for x in spans if x.shape == (dims,)]
    scale = np.median(np.stack(spans), axis=0) if spans and dims else np.zeros(0)
    fps = [_fingerprints(e) for e in group]
    how: dict[tuple[int, int], dict[str, Any]] = defaultdict(dict)
    for a, b in action_pairs(sigs, scale, lengths):
        how[(a, b)]["actions"] = True
    for a, b, cam in frame_pairs(fps, lengths):
        how[(a, b)]["frames"] = cam

    def matched(a: int, b: int) -> dict[str, Any]:
        """What two episodes share, tested directly: the pairs above connect each group but leave
        out those among copies of one episode (`lake.stats.duplicates`)."""
        why: dict[str, Any] = {}
        if actions_match(sigs[a], sigs[b], scale, int(lengths[a]), int(lengths[b])):
            why["actions"] = True
        cam = frames_match(fps[a], fps[b], int(lengths[a]), int(lengths[b]))
        if cam is not None:
            why["frames"] = cam
        return why

    if not how:
        return []
    parent = list(range(len(group)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    rank = {i: (int(lengths[i]), i) for i in range(len(group))}
    for a, b in how:
        ra, rb = root(a), root(b)
        if ra != rb:
            lo, hi = sorted((ra, rb), key=rank.__getitem__)
            parent[hi] = lo
    partner: dict[int, tuple[int, dict[str, Any]]] = {}
    for (a, b), why in sorted(how.items()):
        for me, other in ((a, b), (b, a)):
            partner.setdefault(me, (other, why))
    out = []
    for i in sorted(partner, key=rank.__getitem__):
        rep = root(i)
        if rep == i:
            continue
        direct = matched(i, rep)  # name the episode it repeats where it matched it directly
        other, why = (rep, direct) if direct else (partner[i][0], matched(i, partner[i][0]) or partner[i][1])
        what = " and ".join(
            w
            for w in (
                "actions" if why.get("actions") else "",
                f"frames (camera {why['frames']})" if why.get("frames") else "",
            )
            if w
        )
        near = group[other]["episode_id"]
        tol = f"{DUPLICATE_TOLERANCE:.0%} of each action dim's range" if why.get("actions") else ""
        tol = tol or f"every 8x8 luma cell within {MATCH_LUMA}/255 at aligned steps"
        via = "" if other == rep else f"; its group is led by {group[rep]['episode_id']}"
        out.append(
            _finding(
                group[i],
                "near_duplicate",
                f"same {what} as {near} (within {tol}, {lengths[i]} vs {lengths[other]} steps){via}: a recording "
                "ingested twice; keep one (`robolake dedup`)",
                f"episode_id in ({sql_quote(group[rep]['episode_id'])}, {sql_quote(group[i]['episode_id'])})",
                duplicate_of=group[rep]["episode_id"],
                severity=2.0 if len(why) == 2 else 1.0,
            )
        )
    return out


def _fingerprints(e: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for cam, c in sorted((e["quality"].get("cameras") or {}).items()):
        fp = parse_fingerprint(c.get("fingerprint")) if isinstance(c, dict) else None
        if fp is not None:
            out[cam] = fp
    return out


def _groups(eps: list[dict[str, Any]], findings: list[Finding]) -> list[dict[str, Any]]:
    count: Counter[tuple[str, str]] = Counter((e["embodiment"], e["task"] or "") for e in eps)
    checks: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for f in findings:
        checks[(f.embodiment, f.task)][f.check] += 1
    return [
        {"embodiment": emb, "task": task, "episodes": n, "findings": dict(checks[(emb, task)])}
        for (emb, task), n in sorted(count.items())
    ]


# --- update: quality for episodes that lack it ----------------------------------------------------


def write_doctor_html(report: DoctorReport, path: str) -> str:
    """A static page of `report`: findings per check, the idle-fraction and length distributions, the
    notes, and the worst episodes of each check with their `--where`. Returns `path`."""
    import base64
    import html
    import io

    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    def png(fig: Any) -> str:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        return "<img src='data:image/png;base64," + base64.b64encode(buf.getvalue()).decode() + "'>"

    fig, axes = plt.subplots(1, 3, figsize=(15, 3.5))
    counts = report.counts()
    axes[0].barh(list(counts) or ["(none)"], list(counts.values()) or [0])
    axes[0].set_title("findings per check")
    axes[1].hist(report.idle_fraction or [0.0], bins=20, range=(0, 1))
    axes[1].set_title("idle fraction per episode")
    axes[2].hist(report.lengths or [0], bins=30)
    axes[2].set_title("episode length (steps)")
    plots = png(fig)
    per_check = []
    for check in CHECKS:
        worst = [f for f in report.findings if f.check == check][:10]
        if not worst:
            continue
        sev = [f.severity for f in report.findings if f.check == check]
        fig, ax = plt.subplots(figsize=(4, 2.2))
        ax.hist(sev, bins=20)
        ax.set_title(f"{check}: severity")
        rows = "".join(
            f"<tr><td>{html.escape(f.episode_id)}</td><td>{html.escape(f.camera or f.stream or '')}</td>"
            f"<td>{html.escape(f.detail)}</td><td><code>{html.escape(f.where)}</code></td></tr>"
            for f in worst
        )
        per_check.append(
            f"<h2>{check} ({counts[check]})</h2>{png(fig)}<table><tr><th>episode</th><th>camera/stream</th>"
            f"<th>why</th><th>--where</th></tr>{rows}</table>"
        )
    groups = "".join(
        f"<tr><td>{html.escape(g['embodiment'])}</td><td>{html.escape(g['task'])}</td><td>{g['episodes']}</td>"
        f"<td>{html.escape(', '.join(f'{k}: {v}' for k, v in sorted(g['findings'].items())))}</td></tr>"
        for g in report.groups
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in report.notes)
    page = (
        "<!doctype html><meta charset='utf-8'><title>robolake doctor</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:3px 6px;"
        "font-size:13px}table{border-collapse:collapse}</style>"
        f"<h1>robolake doctor: {html.escape(report.lake)} v{report.version}</h1>"
        f"<p>{report.episodes} episodes, {len(report.findings)} findings</p>{plots}"
        f"<h2>notes</h2><ul>{notes}</ul><h2>per embodiment and task</h2><table><tr><th>embodiment</th>"
        f"<th>task</th><th>episodes</th><th>findings</th></tr>{groups}</table>{''.join(per_check)}"
    )
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
