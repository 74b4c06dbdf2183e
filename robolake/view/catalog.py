"""What the lake page and an episode's lineage need: versions, tags, embodiments, quarantine.

The viewer serves one lake handle (`Lake.open(uri, version=..., tag=...)`) for the life of a
server process, and everything it shows about the lake as a whole is read through that handle's
API and cached here, once per process:

- **Versions and what each changed.** A version's manifest says which operation made it, when,
  and (for curation verbs) who and why; what it added or removed is not stored, so it is
  computed by `robolake.curate.diff` between consecutive versions, the same comparison
  `robolake diff` prints, and kept for the life of the server (versions never change once
  published). The first version is compared against nothing: it added what it holds. Each
  change is a count, never the ids: the page links the added ones to the episodes table
  filtered by `ingest_version` (a 100,000-episode ingest is one number and one link).
- **Episode ids per table version.** "Which lake versions hold this episode" asks, for every
  lake version, whether its episodes table holds the id. Many lake versions share one Lance
  version of the episodes table (a quarantine-only ingest, a tag), so the ids are read once per
  Lance table version, as one Arrow string array (a few bytes per id, not a Python set
  per version), and membership is an Arrow kernel (`index`, `is_in`). Each episode's ingest
  version (the first lake version that holds it) reads less: only the fragments each version
  brought (`first_versions`).
- **Embodiments and statistics**, from the small embodiments table; **quarantine** counts by
  reason code, and its rows a page at a time (Lance `offset`/`limit`), so a lake with a large
  quarantine opens as fast as one with none.

The cost of the first request that needs the id arrays is one scan of the `episode_id` column
per distinct episodes-table version; every later request is served from memory. Nothing here
writes, and nothing takes a path from a request: ids are values compared against the tables.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.errors import one_line
from robolake.lake import Lake, LakeVersion, Tag, list_tags, list_versions, read_version, sql_quote
from robolake.schemas.embodiment import EmbodimentSpec

__all__ = ["LakeCatalog", "joint_groups", "joint_names"]

log = logging.getLogger(__name__)


def joint_names(spec: EmbodimentSpec, kind: str, width: int | None = None) -> list[str]:
    """A name per dimension of the state or action vector: `left_arm[0]`, ..., or `state[7]`
    for a dimension no modality.json slice names."""
    slices = spec.state if kind == "state" else spec.action
    n = width if width is not None else (spec.state_dim if kind == "state" else spec.action_dim)
    names = [f"{kind}[{i}]" for i in range(n)]
    for s in slices:
        for i in range(s.start, min(s.end, n)):
            names[i] = f"{s.name}[{i - s.start}]"
    return names


def joint_groups(spec: EmbodimentSpec, kind: str, width: int | None = None) -> list[dict[str, Any]]:
    """The plots of a vector: one per modality.json slice (dimensions no slice names are grouped
    eight at a time), each {"name", "dims"}."""
    slices = spec.state if kind == "state" else spec.action
    n = width if width is not None else (spec.state_dim if kind == "state" else spec.action_dim)
    groups = [{"name": s.name, "dims": list(range(s.start, min(s.end, n)))} for s in slices if s.start < n]
    covered = {d for g in groups for d in g["dims"]}
    rest = [d for d in range(n) if d not in covered]
    for i in range(0, len(rest), 8):
        chunk = rest[i : i + 8]
        groups.append({"name": f"{kind}[{chunk[0]}:{chunk[-1] + 1}]", "dims": chunk})
    return sorted(groups, key=lambda g: g["dims"][0] if g["dims"] else 0)


def _stats_json(text: str) -> dict[str, Any] | None:
    from robolake.lake import NormStats

    try:
        stats = NormStats.from_json(text)
    except (ValueError, KeyError, TypeError):
        return None
    return {k: getattr(stats, k).to_dict() for k in ("state", "action")}


def _tag_json(t: Tag) -> dict[str, Any]:
    return {
        "name": t.name,
        "version": t.version,
        "episodes": t.num_episodes,
        "operation": t.operation,
        "reason": t.reason,
        "created_by": t.created_by,
        "created_at": t.created_at,
    }


class LakeCatalog:
    """Lake-wide facts for the viewer, read through one `Lake` handle and cached per process."""

    def __init__(self, lake: Lake):
        self._lake = lake
        self._lock = threading.RLock()
        self._versions: list[LakeVersion] | None = None
        self._tags: list[Tag] | None = None
        self._damaged: list[str] = []  # versions and tags that did not read: shown, never fatal to the page
        self._handles: dict[int, Lake] = {}
        self._ids: dict[int, pa.Array] = {}  # Lance version of the episodes table -> sorted ids
        self._changes: list[dict[str, Any]] | None = None
        self._embodiments: list[dict[str, Any]] | None = None

    @property
    def lake(self) -> Lake:
        return self._lake

    # --- versions and tags -----------------------------------------------------------------

    def versions(self) -> list[LakeVersion]:
        """Every lake version whose manifest reads, oldest first (read once); a damaged older one is
        left out and named in `damaged` (the version shown does not depend on it)."""
        with self._lock:
            if self._versions is None:
                uri, opts = self._lake.uri, self._lake.storage_options
                self._versions = []
                for v in list_versions(uri, opts):
                    try:
                        self._versions.append(read_version(uri, v, opts))
                    except (ValueError, OSError) as e:
                        self._note(f"version {v}: {one_line(e)}")
            return self._versions

    def tags(self) -> list[Tag]:
        """Every tag of the lake, by name (read once); none, with a note in `damaged`, when a tag file
        does not read (the lake itself is still shown)."""
        with self._lock:
            if self._tags is None:
                try:
                    self._tags = list_tags(self._lake.uri, self._lake.storage_options)
                except (ValueError, OSError) as e:
                    self._tags = []
                    self._note(f"tags: {one_line(e)}")
            return self._tags

    def damaged(self) -> list[str]:
        """One line per version manifest or tag file that did not read."""
        return list(self._damaged)

    def _note(self, line: str) -> None:
        log.warning("%s: %s", self._lake.uri, line)
        self._damaged.append(line)

    def at(self, version: int) -> Lake:
        """An unscoped handle on lake version `version` (kept for reuse)."""
        with self._lock:
            if version not in self._handles:
                self._handles[version] = Lake.open(
                    self._lake.uri, version=version, storage_options=self._lake.storage_options
                )
            return self._handles[version]

    def ids_at(self, version: LakeVersion) -> pa.Array:
        """The episode ids of lake version `version` (read once per episodes-table version)."""
        tv = version.tables["episodes"]
        with self._lock:
            if tv not in self._ids:
                ids = self.at(version.version).dataset("episodes").to_table(columns=["episode_id"])["episode_id"]
                self._ids[tv] = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
            return self._ids[tv]

    def changes(self) -> list[dict[str, Any]]:
        """Per version, oldest first: operation, who/why, and the episodes it added and removed."""
        from robolake.curate.diff import diff

        with self._lock:
            if self._changes is not None:
                return self._changes
            out: list[dict[str, Any]] = []
            previous: LakeVersion | None = None
            for v in self.versions():
                entry: dict[str, Any] = {"version": v.version}
                try:
                    # Counts only: a 100,000-episode ingest is one number and one link to the
                    # episodes page filtered by `ingest_version`, never its ids inline.
                    if previous is None:
                        added, removed = self.at(v.version).dataset("episodes").count_rows(), 0
                    else:
                        d = diff(self.at(previous.version), self.at(v.version))
                        added, removed = len(d.added), len(d.removed)
                    entry.update(added=added, removed=removed)
                except Exception as e:  # a version whose tables were collected: say so, show the rest
                    entry["error"] = f"{type(e).__name__}: {e}"
                out.append(entry)
                previous = v
            self._changes = out
            return out

    def lineage(self, episode_id: str) -> list[dict[str, Any]]:
        """For every lake version, oldest first: {"version", "operation", "holds"} for `episode_id`."""
        out = []
        for v in self.versions():
            try:
                holds: bool | None = pc.index(self.ids_at(v), value=episode_id).as_py() >= 0
            except Exception:  # its tables were collected
                holds = None
            out.append({"version": v.version, "operation": v.operation, "holds": holds})
        return out

    def first_versions(self, episode_ids: pa.Array) -> np.ndarray:
        """int64 per id: the first lake version (up to this handle's) holding it, 0 if none does.

        Only the rows each version brought are read: a fragment of the episodes table is
        immutable (an update or compaction writes a new one; a delete only adds to its deletion
        file), so an id's first version is that of the first fragment holding it. A version's
        fragment list is its manifest; the `episode_id` column is scanned for the fragments no
        earlier version had, so a lake of many versions costs one pass over the rows it ever
        wrote, not one scan per version (50 of them in a 50-version lake). Each table version is
        opened from its manifest alone, once. On 10k episodes and 51 versions (49 one-episode
        deletes) this took 0.03-0.04 s, against 0.21-0.24 s reading every version's ids."""
        first = np.zeros(len(episode_ids), dtype=np.int64)
        seen: set[tuple[int, str]] = set()  # (fragment id, its first data file): ids restart on overwrite
        tables: set[int] = set()
        for v in self.versions():
            if v.version > self._lake.version:
                break
            if v.tables["episodes"] in tables:  # an unchanged episodes table brings nothing
                continue
            tables.add(v.tables["episodes"])
            try:
                added = self._added_rows(v, seen)
            except Exception:  # a collected version: later ones still answer
                continue
            if added is None:
                continue
            held = pc.is_in(episode_ids, value_set=added).to_numpy(zero_copy_only=False)
            first = np.where((first == 0) & held, v.version, first)
            if first.all():
                break  # every id has its version: a later one (a compaction's rewrite) changes none
        return first

    def _added_rows(self, version: LakeVersion, seen: set[tuple[int, str]]) -> pa.Array | None:
        """The ids in the episodes-table fragments of `version` that are not in `seen` (which it
        extends); None when there are none. Ids already read for this table version are reused."""
        import lance

        # The table at its version straight from its manifest: a lake handle per version lists
        # the lake's directories first, which cost more than the scan here.
        tv = version.tables["episodes"]
        ds = lance.dataset(self._lake.table_uri("episodes"), version=tv, storage_options=self._lake.storage_options)
        fresh = []
        for frag in ds.get_fragments():
            files = frag.data_files()
            key = (frag.fragment_id, files[0].path if files else "")
            if key not in seen:
                seen.add(key)
                fresh.append(frag)
        if not fresh:
            return None
        with self._lock:
            cached = self._ids.get(tv)
        if cached is not None:
            return cached
        ids = ds.scanner(columns=["episode_id"], fragments=fresh).to_table()["episode_id"]
        return ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids

    # --- the lake page ---------------------------------------------------------------------

    def embodiments(self) -> list[dict[str, Any]]:
        """Each embodiment: its layout (slices, joint names, widths, cameras), counts and statistics."""
        with self._lock:
            if self._embodiments is not None:
                return self._embodiments
            rows = self._lake.to_arrow(
                "embodiments", columns=["embodiment", "spec_json", "stats_json", "num_episodes", "num_steps"]
            ).to_pylist()
            out = []
            for r in sorted(rows, key=lambda r: r["embodiment"]):
                spec = EmbodimentSpec.from_json(r["spec_json"])
                out.append(
                    {
                        "embodiment": r["embodiment"],
                        "state_dim": spec.state_dim,
                        "action_dim": spec.action_dim,
                        "cameras": list(spec.cameras),
                        "fps": spec.fps,
                        "robot_type": spec.robot_type,
                        "state_slices": [{"name": s.name, "start": s.start, "end": s.end} for s in spec.state],
                        "action_slices": [{"name": s.name, "start": s.start, "end": s.end} for s in spec.action],
                        "state_names": joint_names(spec, "state"),
                        "action_names": joint_names(spec, "action"),
                        "episodes": int(r["num_episodes"]),
                        "steps": int(r["num_steps"]),
                        "stats": _stats_json(r["stats_json"]),
                    }
                )
            self._embodiments = out
            return out

    def spec(self, embodiment: str) -> EmbodimentSpec | None:
        rows = self._lake.to_arrow(
            "embodiments", columns=["spec_json"], where=f"embodiment = {sql_quote(embodiment)}"
        ).to_pylist()
        return EmbodimentSpec.from_json(rows[0]["spec_json"]) if rows else None

    def _count_at(self, version: int) -> int | None:
        """Episodes lake version `version` holds (None when it is gone).

        From the ids when they are already read, else Lance's row count (fragment metadata and
        deletion files): the lake page lists every tag, and reading each tag's ids here made its
        first byte grow with the lake."""
        for v in self.versions():
            if v.version == version:
                try:
                    with self._lock:
                        ids = self._ids.get(v.tables["episodes"])
                    return len(ids) if ids is not None else self.at(v.version).count("episodes")
                except Exception:  # its tables were collected
                    return None
        return None

    def quarantine_reasons(self) -> dict[str, int]:
        codes = self._lake.to_arrow("quarantine", columns=["reason_code"])["reason_code"]
        counts = pc.value_counts(codes).to_pylist() if len(codes) else []
        return {str(c["values"]): int(c["counts"]) for c in sorted(counts, key=lambda c: str(c["values"]))}

    def overview(self) -> dict[str, Any]:
        """Everything the lake page shows except the per-version changes (`changes`, fetched after)."""
        lake = self._lake
        tags = self.tags()
        return {
            "uri": lake.uri,
            "version": lake.version,
            "tag": None if lake.tag is None else _tag_json(lake.tag),
            "counts": {t: lake.count(t) for t in ("episodes", "steps", "media", "quarantine", "embodiments")},
            "versions": [
                {
                    "version": v.version,
                    "operation": v.operation,
                    "created_at": v.created_at,
                    "who": v.summary.get("who"),
                    "reason": v.summary.get("reason"),
                    "summary": {
                        k: x
                        for k, x in v.summary.items()
                        if isinstance(x, (int, float, str)) and k not in ("who", "reason")
                    },
                    "tags": [t.name for t in tags if t.version == v.version],
                }
                for v in self.versions()
            ],
            "tags": [{**_tag_json(t), "version_episodes": self._count_at(t.version)} for t in tags],
            "embodiments": self.embodiments(),
            "quarantine": self.quarantine_reasons(),
            "damaged": self.damaged(),
        }

    def quarantine_page(self, reason: str | None, offset: int, limit: int) -> dict[str, Any]:
        """Quarantine rows (all columns), `limit` from `offset`, optionally of one reason code."""
        where = None if not reason else f"reason_code = {sql_quote(reason)}"
        ds = self._lake.dataset("quarantine")
        total = ds.count_rows(filter=where) if where else ds.count_rows()
        rows = ds.to_table(filter=where, offset=offset, limit=limit).to_pylist() if total > offset else []
        return {"total": total, "offset": offset, "limit": limit, "rows": rows}
