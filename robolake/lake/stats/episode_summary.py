"""Per-embodiment counts over the episodes' metadata, kept as episodes are written and removed.

`robolake info` says, per embodiment, which streams and events its episodes recorded (messages,
median rate, gaps), which steps renditions they hold, and how many episodes each of the doctor's
per-episode checks flags. All of it comes from each episode's metadata JSON, and parsing that for
every episode on every `info` made `info` grow with the lake (1.5 s a question at 10,000
episodes). So the answer is kept instead: each writer adds the summary of the episodes it writes
and subtracts that of the episodes it removes, and the result is stored with the embodiment
(`stats_json["episodes"]`, written by `lake.stats.embodiments` in the same transaction as the
episodes), so `info` reads one row per embodiment.

Why this shape. Everything is a count a removal can subtract exactly:

- per stream: messages, episodes, gaps, and the *multiset* of per-episode rates (rate -> episodes)
  and of per-episode longest gaps, so the median rate and the longest gap are exact after any
  removal (a running median or a max could not drop an episode). Rates are kept to 1 mHz and gaps
  to 0.1 ms, which bounds the multisets by the distinct values at that resolution, not by the
  episodes; the figures `info` prints are of those rounded values, whichever path computed them;
- per rendition (rules and rate): episodes;
- per check: episodes flagged, and how many episodes have quality at all (an embodiment with
  none is left out of the quality counts, as before);
- media rows per encoding (the `info` figure that read the whole media table: 20M rows at DROID
  size), counted from the media rows of the episodes a writer adds or removes.

A summary is exact when every writer keeps it: a writer that does not know how (an older robolake,
a benchmark writing rows itself) leaves no summary, and readers then count from the episodes as
before (once per lake handle, with a log line saying so); the next curation verb on that
embodiment, or `robolake doctor --update`, stores it again. `SUMMARY_VERSION` changes when what
is counted changes (the doctor's per-episode rules in `lake.stats.findings`, say): a stored summary
of another version is not used. A full `robolake check` compares every stored summary with a
recount, so a writer that forgets to keep it is caught (`doctor --update` repairs it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from robolake.lake.query import sql_quote
from robolake.lake.stats.findings import CHECKS, findings_of


class _Episodes(Protocol):
    """What `episode_summaries` reads of a lake handle (`robolake.lake.Lake`; not imported: the
    handle imports this module)."""

    @property
    def uri(self) -> str: ...

    @property
    def scope(self) -> tuple[str, ...] | None: ...

    def count(self, table: str) -> int: ...

    def to_arrow(self, table: str, *, columns: list[str] | None = None, where: Any = None) -> Any: ...

    def episodes(self, where: Any = None, columns: list[str] | None = None) -> Any: ...


__all__ = [
    "SUMMARY_KEY",
    "SUMMARY_VERSION",
    "SUMMARY_COLUMNS",
    "combine",
    "episode_summaries",
    "media_of",
    "quality_counts_of",
    "renditions_of",
    "streams_of",
    "stored_summary",
    "summarize",
]

log = logging.getLogger(__name__)

SUMMARY_VERSION = 2
SUMMARY_KEY = "episodes"  # where in an embodiment's stats_json the summary lives
# The episodes-table columns a summary reads.
SUMMARY_COLUMNS = ["episode_id", "embodiment", "task", "num_steps", "fps", "metadata"]


def _empty() -> dict[str, Any]:
    return {
        "v": SUMMARY_VERSION,
        "episodes": 0,
        "streams": {},
        "renditions": {},
        "quality": {"episodes": 0, "checks": {}},
        "media": {},
    }


def _bump(d: dict[str, int], key: str, n: int = 1) -> None:
    d[key] = d.get(key, 0) + n


def _add_episode(s: dict[str, Any], row: Mapping[str, Any]) -> None:
    """Add one episode (a row of `SUMMARY_COLUMNS`) to summary `s`."""
    try:
        meta = json.loads(row["metadata"] or "{}")
    except json.JSONDecodeError:
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    s["episodes"] += 1
    for name, st in ((meta.get("record") or {}).get("streams") or {}).items():
        a = s["streams"].setdefault(name, {"kind": st.get("kind", ""), "count": 0, "episodes": 0, "rates": {}})
        a["count"] += int(st.get("count", 0))
        a["episodes"] += 1
        if st.get("rate_hz"):
            _bump(a["rates"], repr(round(float(st["rate_hz"]), 3)))
        g = st.get("gaps")
        if g:
            a["gaps"] = a.get("gaps", 0) + int(g["count"])
            _bump(a.setdefault("longest", {}), repr(round(float(g["longest_s"]), 4)))
    al = meta.get("alignment") or {"fps": row["fps"], "rules": meta.get("rules") or {}}
    fps = float(al.get("fps") or row["fps"])
    rules = al.get("rules", {})
    key = json.dumps(rules, sort_keys=True) + f"@{fps:g}"
    r = s["renditions"].setdefault(key, {"fps": fps, "rules": rules, "episodes": 0})
    r["episodes"] += 1
    q = meta.get("quality")
    if isinstance(q, dict):
        s["quality"]["episodes"] += 1
        for check in {f.check for f in findings_of({**row, "quality": q})}:
            _bump(s["quality"]["checks"], check)


def summarize(rows: Iterable[Mapping[str, Any]], media: pa.Table | None = None) -> dict[str, dict[str, Any]]:
    """The summary of each embodiment of `rows` (episode rows holding `SUMMARY_COLUMNS`).

    Args:
        rows: The episodes.
        media: Their media rows (`episode_id`, `encoding`; rows of other episodes are ignored).
    """
    out: dict[str, dict[str, Any]] = {}
    tag_of: dict[str, str] = {}
    for row in rows:
        _add_episode(out.setdefault(row["embodiment"], _empty()), row)
        tag_of[row["episode_id"]] = row["embodiment"]
    if media is not None and media.num_rows:
        per = media.group_by(["episode_id", "encoding"]).aggregate([([], "count_all")])
        for e, enc, n in zip(*(per[c].to_pylist() for c in ("episode_id", "encoding", "count_all")), strict=True):
            if e in tag_of:
                _bump(out[tag_of[e]]["media"], enc, n)
    return out


def _combine_counts(a: dict[str, int], b: dict[str, int], sign: int) -> dict[str, int] | None:
    out = dict(a)
    for k, n in b.items():
        out[k] = out.get(k, 0) + sign * n
        if out[k] < 0:
            return None
        if out[k] == 0:
            del out[k]
    return out


def combine(a: Mapping[str, Any], b: Mapping[str, Any], sign: int = 1) -> dict[str, Any] | None:
    """Summary `a` with `b` added (`sign` 1) or taken away (`sign` -1); None where taking `b` away
    would leave a negative count (`b` is not part of `a`: recount from the episodes)."""
    if a.get("v") != SUMMARY_VERSION or b.get("v") != SUMMARY_VERSION:
        return None
    out = _empty()
    out["episodes"] = a["episodes"] + sign * b["episodes"]
    if out["episodes"] < 0:
        return None
    for name in sorted(set(a["streams"]) | set(b["streams"])):
        x, y = a["streams"].get(name), b["streams"].get(name)
        if y is None:
            out["streams"][name] = x
            continue
        x = x or {"kind": y["kind"], "count": 0, "episodes": 0, "rates": {}}
        episodes = x["episodes"] + sign * y["episodes"]
        rates = _combine_counts(x["rates"], y["rates"], sign)
        longest = _combine_counts(x.get("longest", {}), y.get("longest", {}), sign)
        count, gaps = x["count"] + sign * y["count"], x.get("gaps", 0) + sign * y.get("gaps", 0)
        if episodes < 0 or count < 0 or gaps < 0 or rates is None or longest is None:
            return None
        if episodes == 0:
            continue
        entry: dict[str, Any] = {"kind": x["kind"], "count": count, "episodes": episodes, "rates": rates}
        if longest:  # some episode left has gaps
            entry["gaps"], entry["longest"] = gaps, longest
        out["streams"][name] = entry
    for key in sorted(set(a["renditions"]) | set(b["renditions"])):
        x, y = a["renditions"].get(key), b["renditions"].get(key)
        n = (x["episodes"] if x else 0) + sign * (y["episodes"] if y else 0)
        if n < 0:
            return None
        if n:
            out["renditions"][key] = {**(x or y), "episodes": n}  # type: ignore[dict-item]
    out["quality"]["episodes"] = a["quality"]["episodes"] + sign * b["quality"]["episodes"]
    checks = _combine_counts(a["quality"]["checks"], b["quality"]["checks"], sign)
    if checks is None or out["quality"]["episodes"] < 0:
        return None
    out["quality"]["checks"] = checks
    media = _combine_counts(a["media"], b["media"], sign)
    if media is None:
        return None
    out["media"] = media
    return out


def streams_of(s: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What `robolake info` lists per stream: name, kind, messages, episodes, median rate, gaps."""
    out = []
    for name in sorted(s["streams"]):
        a = s["streams"][name]
        entry: dict[str, Any] = {"name": name, "kind": a["kind"], "count": a["count"], "episodes": a["episodes"]}
        if a.get("longest"):
            entry["gaps"] = a["gaps"]
            entry["longest_gap_s"] = max(float(k) for k in a["longest"])
        entry["rate_hz"] = round(_median(a["rates"]), 3) if a["rates"] else 0.0
        out.append(entry)
    return out


def _median(counts: Mapping[str, int]) -> float:
    """The median of a multiset given as value -> how many (as `np.median` of its values)."""
    values = sorted((float(k), n) for k, n in counts.items())
    total = sum(n for _, n in values)
    ranks = ((total - 1) // 2, total // 2)
    picked: list[float] = []
    seen = 0
    for v, n in values:
        while len(picked) < 2 and ranks[len(picked)] < seen + n:
            picked.append(v)
        seen += n
    return float(np.mean(picked))


def renditions_of(s: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The distinct steps renditions (rate, rules) and how many episodes hold each."""
    return [dict(s["renditions"][k]) for k in sorted(s["renditions"])]


def quality_counts_of(s: Mapping[str, Any]) -> dict[str, int] | None:
    """Episodes each per-episode check flags, in `CHECKS` order; None where no episode has quality."""
    if not s["quality"]["episodes"]:
        return None
    order = {c: i for i, c in enumerate(CHECKS)}
    return dict(sorted(s["quality"]["checks"].items(), key=lambda kv: order.get(kv[0], len(order))))


def media_of(summaries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Media rows per encoding over `summaries` (sorted by encoding)."""
    out: dict[str, int] = {}
    for s in summaries:
        for enc, n in s["media"].items():
            _bump(out, enc, n)
    return dict(sorted(out.items()))


def stored_summary(stats_json: str | None) -> dict[str, Any] | None:
    """The summary stored in an embodiment's `stats_json`, or None (none stored, or another version)."""
    try:
        s = json.loads(stats_json or "{}").get(SUMMARY_KEY)
    except (json.JSONDecodeError, AttributeError):
        return None
    return s if isinstance(s, dict) and s.get("v") == SUMMARY_VERSION else None


def episode_summaries(lake: _Episodes) -> dict[str, dict[str, Any]]:
    """Every embodiment's summary at `lake`'s version: the stored ones, and, for embodiments without
    one (or a handle scoped to a tag's subset), counted from the episodes."""
    stored: dict[str, dict[str, Any]] = {}
    if lake.scope is None:
        for r in lake.to_arrow("embodiments", columns=["embodiment", "num_episodes", "stats_json"]).to_pylist():
            s = stored_summary(r["stats_json"])
            if s is not None and s["episodes"] == r["num_episodes"]:
                stored[r["embodiment"]] = s
    known = sorted(stored)
    where = None if not known else "embodiment NOT IN (" + ", ".join(sql_quote(t) for t in known) + ")"
    missing = lake.count("episodes") - sum(s["episodes"] for s in stored.values())
    if missing > 0 or lake.scope is not None:
        if missing > 1000:
            log.info(
                "lake %s: counting streams, renditions, quality and media from %d episodes' rows (no stored summary); "
                "`robolake doctor LAKE --update` stores it",
                lake.uri,
                missing,
            )
        rows = lake.episodes(where, columns=SUMMARY_COLUMNS).to_pylist()
        stored.update(summarize(rows, lake.to_arrow("media", columns=["episode_id", "encoding"])))
    return stored
