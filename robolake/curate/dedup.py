"""`dedup`: keep one episode of each near-duplicate group `robolake doctor` finds, remove the rest.

The doctor decides what a duplicate is (`robolake.lake.doctor`: episodes of one embodiment whose
action signatures agree within 1% of each dimension's range, or whose frame fingerprints are
near-identical, at lengths within 2%); this verb
only acts on its `near_duplicate` findings, so there is one definition of a duplicate. Each
finding names the episode it repeats (`Finding.duplicate_of`), which makes the groups.

Which episode a group keeps: the longest (a recording cut short is the worse copy), then the
earliest ingested (`ingested_at`: the one training runs already saw), then the smallest id, so the
choice is the same on every run. The rest are removed in one new lake version through the same
path as `delete` (their rows get a Lance deletion file, the reason and the groups go in the
manifest), so `robolake diff` lists them and `robolake restore LAKE --episodes ID...` brings any back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from robolake.curate.edit import CurationResult, _open, _remove, id_batches
from robolake.lake import Lake, doctor, sql_in

__all__ = ["DedupResult", "dedup"]

KEEP_RULE = "the longest episode of each group, then the earliest ingested, then the smallest id"


@dataclass(frozen=True, kw_only=True)
class DedupResult:
    """What `dedup` did (or, with `dry_run`, would do).

    Attributes:
        lake: The lake URI.
        version: The new lake version; the lake's current version when nothing was removed or on a dry run.
        groups: One per near-duplicate group: `{"kept": ID, "removed": [ID, ...]}`, sorted by kept id.
        removed: Every episode removed (or to remove), sorted.
        dry_run: Nothing was written.
        rule: Which episode of a group is kept.
        summary: The manifest summary published (empty when nothing was).
    """

    lake: str
    version: int
    groups: list[dict[str, Any]] = field(default_factory=list)
    removed: tuple[str, ...] = ()
    dry_run: bool = False
    rule: str = KEEP_RULE
    summary: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "version": self.version,
            "groups": self.groups,
            "removed": list(self.removed),
            "dry_run": self.dry_run,
            "rule": self.rule,
        }


def _groups(pairs: list[tuple[str, str]]) -> list[set[str]]:
    """Connected groups of episodes from (duplicate, original) pairs."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        parent[root(a)] = root(b)
    out: dict[str, set[str]] = {}
    for x in list(parent):
        out.setdefault(root(x), set()).add(x)
    return list(out.values())


def _order(lake: Lake, ids: list[str]) -> dict[str, tuple[int, int]]:
    """(num_steps, ingested_at) per episode id."""
    out: dict[str, tuple[int, int]] = {}
    for chunk in id_batches(ids):
        for r in lake.to_arrow(
            "episodes", columns=["episode_id", "num_steps", "ingested_at"], where=sql_in("episode_id", chunk)
        ).to_pylist():
            out[r["episode_id"]] = (int(r["num_steps"]), int(r["ingested_at"] or 0))
    return out


def dedup(
    lake: Lake | str,
    *,
    reason: str = "near-duplicate episodes (robolake doctor)",
    dry_run: bool = False,
    storage_options: dict[str, str] | None = None,
) -> DedupResult:
    """Remove all but one episode of each near-duplicate group, as one new lake version.

    Args:
        lake: The lake (its newest version is changed).
        reason: Why, kept in the version's manifest.
        dry_run: Report the groups and what would go; write nothing.
        storage_options: Object-store options for a URI.

    Returns:
        The groups, what was kept and removed, and the new version (unchanged when no group was found).

    Raises:
        ValueError: an empty reason, or a lake opened at a tag (curation changes the lake itself).
        CommitConflictError: another writer published first (re-run).
    """
    if not reason or not reason.strip():
        raise ValueError("say why the episodes go (--reason TEXT): it is kept with the new lake version")
    lake = _open(lake, storage_options)
    report = doctor(lake)
    pairs = [(f.episode_id, f.duplicate_of) for f in report.findings if f.check == "near_duplicate" and f.duplicate_of]
    members = _groups([(a, b) for a, b in pairs if b is not None])
    order = _order(lake, sorted({e for g in members for e in g}))
    groups: list[dict[str, Any]] = []
    for g in members:
        ranked = sorted(g, key=lambda e: (-order[e][0], order[e][1], e))
        groups.append({"kept": ranked[0], "removed": sorted(ranked[1:])})
    groups.sort(key=lambda g: str(g["kept"]))
    removed = tuple(sorted(e for g in groups for e in g["removed"]))
    if dry_run or not removed:
        return DedupResult(lake=lake.uri, version=lake.version, groups=groups, removed=removed, dry_run=dry_run)
    result: CurationResult = _remove(
        lake,
        list(removed),
        "dedup",
        {"reason": reason, "base_version": lake.version, "rule": KEEP_RULE, "groups": groups},
    )
    version = result.version if result.version is not None else lake.version
    return DedupResult(lake=result.lake, version=version, groups=groups, removed=removed, summary=result.summary)
