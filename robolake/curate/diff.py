"""`diff`: what changed between two lake versions (or tags).

Episodes added and removed (by id), episodes whose steps changed (`robolake trim`, `align`: the
steps at each side), per-embodiment episode and step counts at each side, how far
each embodiment's normalisation statistics moved (the largest change of any state/action
dimension's mean and std, in units of the old std, so a policy trained on one side can be judged
against the other), quarantine rows added, and the operations (with who and why) that lie
between them. Reads episode ids and the small embodiments table only: metadata-sized.

What it reads of the episodes follows what changed, not the lake (`_differing_rows`): a Lance
fragment's data files never change once written, so a row at the same address of a fragment
with the same data files is the same stored row in both versions and can be neither added,
removed nor changed. Only the fragments one side lacks are read, and of the fragments both hold,
the rows one side's deletion file drops (their addresses, then those rows alone). On 100k
episodes a 10-episode `select` read 200k rows of ids before (6.8x the time of the same diff at
1k, issue 37); now it reads the 10.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake import Lake, NormStats

__all__ = ["LakeDiff", "diff"]


@dataclass(frozen=True, kw_only=True)
class LakeDiff:
    """The difference between two lake versions (`a` -> `b`)."""

    a: str
    b: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    embodiments: dict[str, dict[str, Any]] = field(default_factory=dict)
    quarantine_added: int = 0
    operations: list[dict[str, Any]] = field(default_factory=list)
    steps_changed: dict[str, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "added": list(self.added),
            "removed": list(self.removed),
            "embodiments": self.embodiments,
            "quarantine_added": self.quarantine_added,
            "operations": self.operations,
            "steps_changed": {k: list(v) for k, v in self.steps_changed.items()},
        }


def _label(lake: Lake) -> str:
    return f"version {lake.version}" + (f" (tag {lake.tag.name})" if lake.tag else "")


def _stats(lake: Lake) -> dict[str, tuple[int, int, NormStats | None]]:
    out: dict[str, tuple[int, int, NormStats | None]] = {}
    for r in lake.to_arrow(
        "embodiments", columns=["embodiment", "stats_json", "num_episodes", "num_steps"]
    ).to_pylist():
        try:
            stats: NormStats | None = NormStats.from_json(r["stats_json"])
        except (ValueError, KeyError, TypeError):
            stats = None
        out[r["embodiment"]] = (int(r["num_episodes"]), int(r["num_steps"]), stats)
    return out


def _moved(a: NormStats | None, b: NormStats | None) -> dict[str, float] | None:
    if a is None or b is None:
        return None
    out: dict[str, float] = {}
    for kind in ("state", "action"):
        va, vb = getattr(a, kind), getattr(b, kind)
        if va.mean.shape != vb.mean.shape:
            return None
        scale = np.where(va.std > 1e-8, va.std, 1.0)
        out[f"{kind}_mean"] = float(np.max(np.abs(vb.mean - va.mean) / scale)) if va.mean.size else 0.0
        out[f"{kind}_std"] = float(np.max(np.abs(vb.std - va.std) / scale)) if va.std.size else 0.0
    return out


def diff(a: Lake, b: Lake) -> LakeDiff:
    """What changed from `a` to `b` (two handles on the same lake, at versions or tags)."""
    if a.uri != b.uri:
        raise ValueError(f"diff compares two versions of one lake, not {a.uri} and {b.uri}")
    ta, tb = _differing_rows(a, b)
    # Counts come from the episodes themselves when a side is a tag's subset.
    emb: dict[str, dict[str, Any]] = {}
    sa, sb = _stats(a), _stats(b)
    counts_a = _counts(a) if a.scope is not None else {k: (v[0], v[1]) for k, v in sa.items()}
    counts_b = _counts(b) if b.scope is not None else {k: (v[0], v[1]) for k, v in sb.items()}
    for tag in sorted(set(counts_a) | set(counts_b)):
        ea, eb = counts_a.get(tag, (0, 0)), counts_b.get(tag, (0, 0))
        row: dict[str, Any] = {"episodes": [ea[0], eb[0]], "steps": [ea[1], eb[1]]}
        if a.scope is None and b.scope is None:
            row["stats_moved"] = _moved(sa.get(tag, (0, 0, None))[2], sb.get(tag, (0, 0, None))[2])
        emb[tag] = row
    lo, hi = sorted((a.version, b.version))
    ops = [
        {"version": v.version, "operation": v.operation, "who": v.summary.get("who"), "reason": v.summary.get("reason")}
        for v in a.versions()
        if lo < v.version <= hi
    ]
    # Set differences and the join in Arrow: only what differs becomes Python objects.
    both = ta.join(tb, "episode_id", join_type="inner", left_suffix="_a", right_suffix="_b")
    changed = both.filter(pc.not_equal(both["num_steps_a"], both["num_steps_b"]))
    return LakeDiff(
        a=_label(a),
        b=_label(b),
        added=_only_in(tb, ta),
        removed=_only_in(ta, tb),
        embodiments=emb,
        quarantine_added=b.count("quarantine") - a.count("quarantine"),
        operations=ops,
        steps_changed={
            e: (int(x), int(y))
            for e, x, y in sorted(
                zip(*(changed[c].to_pylist() for c in ("episode_id", "num_steps_a", "num_steps_b")), strict=True)
            )
        },
    )


_COLUMNS = ["episode_id", "num_steps"]
# Rows named by address in one filter (`_rowaddr IN (...)`); a fragment with more differing rows
# than this is read whole and matched in Arrow.
_BY_ADDRESS = 1024


def _differing_rows(a: Lake, b: Lake) -> tuple[pa.Table, pa.Table]:
    """(episode_id, num_steps) of the rows of `a` that `b` does not hold as the same stored row, and
    of those of `b` that `a` does not (see the module essay). A side opened at a tag's subset is
    read whole (its scope is a filter, not a stored difference)."""
    if a.scope is not None or b.scope is not None:
        return a.episodes(columns=_COLUMNS), b.episodes(columns=_COLUMNS)
    da, db = a.dataset("episodes"), b.dataset("episodes")
    if da.version == db.version:
        return _empty(da), _empty(db)
    fa, fb = ({f.fragment_id: f for f in d.get_fragments()} for d in (da, db))

    def files(f: Any) -> tuple[str, ...]:
        return tuple(df.path for df in f.data_files())

    shared = sorted(i for i in fa if i in fb and files(fa[i]) == files(fb[i]))
    out_a = [_read(da, [fa[i] for i in sorted(set(fa) - set(shared))])]
    out_b = [_read(db, [fb[i] for i in sorted(set(fb) - set(shared))])]
    for i in shared:
        if _deletions(fa[i]) == _deletions(fb[i]):
            continue  # the same rows, live or deleted, on both sides
        live_a, live_b = _addresses(da, fa[i]), _addresses(db, fb[i])
        out_a.append(_rows_at(da, fa[i], np.setdiff1d(live_a, live_b, assume_unique=True)))
        out_b.append(_rows_at(db, fb[i], np.setdiff1d(live_b, live_a, assume_unique=True)))
    return pa.concat_tables(out_a), pa.concat_tables(out_b)


def _empty(ds: Any) -> pa.Table:
    return ds.schema.empty_table().select(_COLUMNS)


def _deletions(fragment: Any) -> tuple[Any, ...] | None:
    d = fragment.metadata.deletion_file
    return None if d is None else (d.file_type, d.id, d.read_version, d.num_deleted_rows)


def _read(ds: Any, fragments: list[Any]) -> pa.Table:
    if not fragments:
        return _empty(ds)
    return ds.scanner(columns=_COLUMNS, fragments=fragments).to_table()


def _addresses(ds: Any, fragment: Any) -> np.ndarray:
    """The live row addresses of `fragment` (its deletion file applied; no column read)."""
    t = ds.scanner(columns=[], fragments=[fragment], with_row_address=True).to_table()
    return np.asarray(t["_rowaddr"].to_numpy(), dtype=np.uint64)


def _rows_at(ds: Any, fragment: Any, addresses: np.ndarray) -> pa.Table:
    if not len(addresses):
        return _empty(ds)
    if len(addresses) <= _BY_ADDRESS:
        flt = f"_rowaddr IN ({', '.join(str(int(x)) for x in addresses)})"
        return ds.scanner(columns=_COLUMNS, fragments=[fragment], filter=flt).to_table()
    t = ds.scanner(columns=_COLUMNS, fragments=[fragment], with_row_address=True).to_table()
    return t.filter(pc.is_in(t["_rowaddr"], value_set=pa.array(addresses, pa.uint64()))).select(_COLUMNS)


def _only_in(x: pa.Table, y: pa.Table) -> tuple[str, ...]:
    """The episode ids of `x` that `y` lacks, sorted."""
    ids = x["episode_id"].combine_chunks()
    return tuple(sorted(ids.filter(pc.invert(pc.is_in(ids, value_set=y["episode_id"].combine_chunks()))).to_pylist()))


def _counts(lake: Lake) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for r in lake.episodes(columns=["embodiment", "num_steps"]).to_pylist():
        n, s = out.get(r["embodiment"], (0, 0))
        out[r["embodiment"]] = (n + 1, s + int(r["num_steps"]))
    return out
