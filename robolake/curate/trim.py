"""`trim`: drop steps from episodes as one new lake version, without rewriting a frame.

What goes: the idle run that opens or closes an episode (`--idle`, `--head`/`--tail` for one end;
quality's definition of idle, from the data's own scale), or the steps a `--where-steps`
expression is true on (`robolake.lake.where_steps`: `"t < 1.5"`, `"norm(action) < 0.01"`,
`"idle and steps_from_end < 30"`), in the episodes `--where` keeps (every episode by default).

How: the episode's `steps` rows are written again, the kept ones renumbered 0..k-1, and its
episodes row says which original steps remain (metadata `trim`, `robolake.lake.media.kept`).
Media, recorded streams and access copies are not touched: every frame reader maps a step to
the frame it shows through that map, so the version costs a few floats a kept step, and a
recorded video still decodes from its own keyframes. Timestamps keep their recorded values (the
record of every stream stays aligned). Statistics of the touched embodiments are recomputed
from the kept steps, and each trimmed episode's step quality (idle, jumps, gaps) is measured
again on what remains; its camera quality is what ingest measured.

An episode that would keep fewer than `min_steps` steps is left as it is and named: delete it
instead. `robolake restore LAKE N` brings the version before back, `robolake restore LAKE
--episodes ID` one episode's dropped steps (`robolake diff` shows the steps each episode lost);
pack, the loaders and export read only the kept steps.
"""

from __future__ import annotations

import dataclasses
import json
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.curate.edit import _open, id_batches
from robolake.lake import (
    TRIM_KEY,
    KeptSteps,
    Lake,
    StepWhere,
    episode_quality,
    idle_steps,
    parse_where,
    parse_where_steps,
    refresh_embodiments,
    select_episode_ids,
    sql_in,
    steps_matching,
    who,
)
from robolake.schemas.tables import schema_for_table

__all__ = ["TrimResult", "TrimSpec", "trim"]

_CAMERA_QUALITY = ("cameras", "frozen_camera", "dark_frames")


@dataclass(frozen=True, kw_only=True)
class TrimSpec:
    """Which steps go.

    Attributes:
        idle: Drop the idle run at the start and the end of each episode.
        head: With `idle`: only the start.
        tail: With `idle`: only the end.
        where_steps: Instead: drop the steps this `--where-steps` expression is true on.
        where: Trim only the episodes this `--where` keeps (None: every episode).
        min_steps: An episode left with fewer steps keeps them all, and is named.
        reason: Why, kept in the version's manifest.
    """

    idle: bool = False
    head: bool = False
    tail: bool = False
    where_steps: str | None = None
    where: str | None = None
    min_steps: int = 2
    reason: str = ""

    def __post_init__(self) -> None:
        if self.idle == bool(self.where_steps):
            raise ValueError("say which steps go: --idle [--head|--tail], or --where-steps EXPR (one of the two)")
        if (self.head or self.tail) and not self.idle:
            raise ValueError("--head and --tail choose an end of the idle run: use them with --idle")
        if self.min_steps < 1:
            raise ValueError(f"--min-steps must be at least 1, got {self.min_steps}")
        if self.where_steps:
            parse_where_steps(self.where_steps)  # a bad expression fails before the lake is read

    def describe(self) -> dict[str, Any]:
        if self.idle:
            ends = "head" if self.head and not self.tail else "tail" if self.tail and not self.head else "both"
            return {"idle": ends, "where": self.where, "min_steps": self.min_steps}
        return {"where_steps": self.where_steps, "where": self.where, "min_steps": self.min_steps}

    def drop(
        self, state: np.ndarray, action: np.ndarray, timestamps: np.ndarray, where: StepWhere | None = None
    ) -> np.ndarray:
        """bool [T]: the steps of one episode that go (`where`: `where_steps` parsed once by the caller)."""
        if self.where_steps:
            return steps_matching(where or parse_where_steps(self.where_steps), state, action, timestamps)
        idle = idle_steps(state, action)
        n = len(idle)
        out = np.zeros(n, dtype=bool)
        if idle.all():
            out[:] = True
            return out
        if self.head or not self.tail:
            out[: int(np.argmin(idle))] = True
        if self.tail or not self.head:
            out[n - int(np.argmin(idle[::-1])) :] = True
        return out


@dataclass(frozen=True, kw_only=True)
class TrimResult:
    """What `trim` did (or, with `dry_run`, would do).

    Attributes:
        lake: The lake URI.
        version: The new version; the current one when nothing changed or on a dry run.
        removed: Episode id -> steps it loses, for every trimmed episode.
        kept: Episode id -> why it was left as it is, for episodes the trim would have emptied.
        steps_before: Steps of the trimmed episodes before.
        steps_after: And after.
        dry_run: Nothing was written.
    """

    lake: str
    version: int
    removed: dict[str, int] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    steps_before: int = 0
    steps_after: int = 0
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "version": self.version,
            "removed": self.removed,
            "kept": self.kept,
            "steps_before": self.steps_before,
            "steps_after": self.steps_after,
            "dry_run": self.dry_run,
        }


def _episode_ids(lake: Lake, where: str | None) -> list[str]:
    if not where:
        return sorted(lake.episode_ids())
    ids = select_episode_ids(lake, parse_where(where))
    if not ids:
        raise ValueError(f"--where {where!r} keeps no episode of lake {lake.uri}; nothing was trimmed")
    return sorted(ids)


class _Rows:
    """A list<float> column as one flat array and its offsets: any run of rows (one episode, one
    width; embodiments of other widths share a chunk) reshapes without a copy."""

    def __init__(self, column: pa.ChunkedArray):
        arr = column.combine_chunks()
        self.offsets = np.asarray(arr.offsets, dtype=np.int64)
        self.values = np.asarray(arr.flatten(), dtype=np.float64)

    def rows(self, a: int, b: int) -> np.ndarray:
        return self.values[self.offsets[a] : self.offsets[b]].reshape(b - a, -1)


def _ranks(episode_ids: np.ndarray) -> np.ndarray:
    """int: each row's position within its episode's run of rows (rows are grouped by episode)."""
    n = len(episode_ids)
    if not n:
        return np.zeros(0, np.int64)
    first = np.flatnonzero(np.concatenate([[True], episode_ids[1:] != episode_ids[:-1]]))
    return np.arange(n) - np.repeat(first, np.diff(np.append(first, n)))


def _trimmed_row(row: dict[str, Any], kept: KeptSteps, steps: dict[str, np.ndarray]) -> dict[str, Any]:
    """The episodes row of a trimmed episode: its count, its map and its step quality anew."""
    meta = json.loads(row["metadata"] or "{}")
    meta[TRIM_KEY] = kept.to_json()
    if "quality" in meta:
        fresh = episode_quality(
            state=steps["state"],
            action=steps["action"],
            timestamps=steps["timestamp"],
            fps=float(row["fps"]),
            success=row["success"],
            cameras=[],
        )
        old = meta["quality"]
        meta["quality"] = {**fresh, **{k: old[k] for k in _CAMERA_QUALITY if k in old}}
    return {**row, "num_steps": kept.num_steps, "metadata": json.dumps(meta, sort_keys=True)}


def trim(
    lake: Lake | str, spec: TrimSpec, *, dry_run: bool = False, storage_options: dict[str, str] | None = None
) -> TrimResult:
    """Drop the steps `spec` names from the episodes it selects, as one new lake version.

    Raises:
        ValueError: the filter keeps no episode, or the lake is opened at a tag.
        WhereError: a bad `--where` or `--where-steps` expression.
        CommitConflictError: another writer published first (re-run).
    """
    lake = _open(lake, storage_options)
    ids = _episode_ids(lake, spec.where)
    maps = lake.trimmed(ids)
    removed: dict[str, int] = {}
    refused: dict[str, str] = {}
    before = after = 0
    touched: set[str] = set()
    where = parse_where_steps(spec.where_steps) if spec.where_steps else None
    with nullcontext() if dry_run else lake.begin() as tx:
        for chunk in id_batches(ids):
            rows = {r["episode_id"]: r for r in lake.episodes(where=sql_in("episode_id", chunk)).to_pylist()}
            steps = lake.to_arrow("steps", where=sql_in("episode_id", chunk)).sort_by(
                [("episode_id", "ascending"), ("step_index", "ascending")]
            )
            state, action = _Rows(steps["state"]), _Rows(steps["action"])
            timestamps = steps["timestamp"].to_numpy()
            eids, starts = np.unique(np.asarray(steps["episode_id"].to_pylist(), dtype=object), return_index=True)
            stops = np.append(starts[1:], steps.num_rows)
            take = np.zeros(steps.num_rows, dtype=bool)  # rows of the trimmed episodes that stay
            new_rows: list[dict[str, Any]] = []
            for eid, a, b in zip(eids.tolist(), starts.tolist(), stops.tolist(), strict=True):
                n = b - a
                ep_state, ep_action = state.rows(a, b), action.rows(a, b)
                keep = np.flatnonzero(~spec.drop(ep_state, ep_action, timestamps[a:b], where))
                if len(keep) == n:
                    continue
                if len(keep) < spec.min_steps:
                    refused[eid] = (
                        f"the trim would leave {len(keep)} of its {n} steps (fewer than {spec.min_steps}); "
                        "delete it instead (`robolake delete LAKE --episodes ID`)"
                    )
                    continue
                take[a + keep] = True
                kept = (maps.get(eid) or KeptSteps.untrimmed(n)).then(keep)
                removed[eid] = n - len(keep)
                before += n
                after += len(keep)
                touched.add(rows[eid]["embodiment"])
                fresh = {"state": ep_state[keep], "action": ep_action[keep], "timestamp": timestamps[a + keep]}
                new_rows.append(_trimmed_row(rows[eid], kept, fresh))
            if tx is not None and new_rows:
                done = [r["episode_id"] for r in new_rows]
                kept_rows = steps.filter(pa.array(take))
                col = kept_rows.schema.get_field_index("step_index")
                renumbered = _ranks(kept_rows["episode_id"].to_numpy(zero_copy_only=False))
                kept_rows = kept_rows.set_column(
                    col, kept_rows.schema.field(col), pa.array(renumbered, kept_rows.schema.field(col).type)
                )
                tx.delete("steps", sql_in("episode_id", done))
                tx.delete("episodes", sql_in("episode_id", done))
                tx.append_table("steps", kept_rows)
                tx.append_table("episodes", pa.Table.from_pylist(new_rows, schema=schema_for_table("episodes")))
        result = TrimResult(
            lake=lake.uri,
            version=lake.version,
            removed=removed,
            kept=refused,
            steps_before=before,
            steps_after=after,
            dry_run=dry_run,
        )
        if tx is None or not removed:
            return result
        refresh_embodiments(tx, touched)
        tx.index_episodes()
        lv = tx.commit(
            "trim",
            {
                "who": who(),
                "reason": spec.reason,
                "base_version": lake.version,
                "rule": spec.describe(),
                "episodes_trimmed": len(removed),
                "steps_before": before,
                "steps_after": after,
                "episodes_left": len(refused),
            },
        )
    return dataclasses.replace(result, version=lv.version)
