"""The embodiments table: one row per embodiment tag, its spec and its normalisation statistics.

Every writer that changes which steps a lake version holds updates this table in the same
transaction, and each does it through this module, in one of two ways:

- **merge** (`merge_embodiment_stats`: ingest and rollouts add episodes). The workers that
  wrote the new steps accumulated their statistics (`partial_stats`); the stored accumulators
  absorb them, so the cost of a write grows with its own steps, not the lake's. A new tag gets
  its row from the writer's spec.
- **recompute** (`refresh_embodiments`: curation deletes, selects, merges and restores). Quantile
  sketches cannot subtract what was removed, so the touched tags are recomputed from every step
  the transaction holds; a tag with no episode left loses its row.

A tag whose stored statistics predate the accumulators is recomputed once, the same way, the
next time a write merges into it. Rows of tags a write did not touch stay as they were. Rows are dicts of the columns of
`robolake.schemas.tables.EmbodimentRow`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.protocol.transaction import LakeTransaction
from robolake.lake.query import sql_quote
from robolake.lake.stats.norm import NormStatsAccumulator, accumulate_norm_stats
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.schemas.tables import schema_for_table

__all__ = [
    "add_embodiments",
    "merge_embodiment_stats",
    "new_embodiment_row",
    "partial_stats",
    "refresh_embodiments",
]

log = logging.getLogger(__name__)


def new_embodiment_row(tag: str, spec: EmbodimentSpec) -> dict[str, Any]:
    """The row of a tag with no statistics yet (`refresh_embodiments` fills them in)."""
    return {
        "embodiment": tag,
        "spec_json": spec.to_json(),
        "stats_json": json.dumps({}),
        "num_episodes": 0,
        "num_steps": 0,
    }


def partial_stats(steps: pa.Table) -> dict[str, str]:
    """Mergeable statistics of `steps` (rows of the steps table) per embodiment, as JSON: what a
    worker hands the driver for `merge_embodiment_stats`."""
    if steps.num_rows == 0:
        return {}
    return {
        tag: json.dumps(accumulate_norm_stats(steps.filter(pc.equal(steps["embodiment"], tag))).state_action_dict())
        for tag in sorted(set(steps["embodiment"].to_pylist()))
    }


def _rows(tx: LakeTransaction) -> dict[str, dict[str, Any]]:
    return {r["embodiment"]: r for r in tx.dataset("embodiments").to_table().to_pylist()}


def _write(tx: LakeTransaction, rows: dict[str, dict[str, Any]]) -> None:
    tx.overwrite(
        "embodiments",
        pa.Table.from_pylist([rows[k] for k in sorted(rows)], schema=schema_for_table("embodiments")),
    )


def _where(tag: str) -> str:
    return f"embodiment = {sql_quote(tag)}"


def _recompute(tx: LakeTransaction, tag: str) -> NormStatsAccumulator:
    """`tag`'s statistics from every step `tx` holds (there must be one)."""
    return accumulate_norm_stats(tx.dataset("steps").to_table(columns=["state", "action"], filter=_where(tag)))


def merge_embodiment_stats(
    tx: LakeTransaction,
    specs: Mapping[str, EmbodimentSpec],
    new_episodes: Mapping[str, int],
    partials: Iterable[Mapping[str, str]],
) -> None:
    """Merge the statistics of the steps `tx` adds into the embodiments table.

    Args:
        tx: The transaction that appended the new episodes and steps.
        specs: The spec of every tag that may be new to the lake (by tag).
        new_episodes: How many episodes of each tag `tx` adds.
        partials: `partial_stats` of the new steps, in a fixed order (chunk order), so the merge
            does not depend on which worker finished first.
    """
    current = _rows(tx)
    merged: dict[str, NormStatsAccumulator] = {}
    for part in partials:
        for tag, text in part.items():
            acc = NormStatsAccumulator.from_state_action_dict(json.loads(text))
            merged[tag] = merged[tag].merge(acc) if tag in merged else acc
    for tag in sorted(new_episodes):
        row = current.get(tag)
        stored = None
        if row is not None:
            try:
                stored = NormStatsAccumulator.from_json(row["stats_json"])
            except ValueError as e:
                log.warning("embodiment %s: %s", tag, e)
        if row is not None and stored is None:
            # Statistics from before the accumulators: rebuild them from every step once
            # (this version's steps table already holds the new steps, so nothing is merged).
            log.info("embodiment %s: computing mergeable statistics from all its steps (once)", tag)
            acc = _recompute(tx, tag)
            num_episodes = tx.dataset("episodes").count_rows(filter=_where(tag))
        else:
            acc = merged[tag] if stored is None else stored.merge(merged[tag])
            num_episodes = (0 if row is None else int(row["num_episodes"])) + new_episodes[tag]
        current[tag] = {
            "embodiment": tag,
            "spec_json": row["spec_json"] if row is not None else specs[tag].to_json(),
            "stats_json": acc.to_json(),
            "num_episodes": num_episodes,
            "num_steps": acc.state.count,
        }
    _write(tx, current)


def refresh_embodiments(tx: LakeTransaction, tags: Iterable[str]) -> None:
    """Recompute the statistics and counts of embodiments `tags` from the steps `tx` holds now.

    Rows of other embodiments are kept as they are; an embodiment with no episodes left is dropped.
    """
    tags = sorted(set(tags))
    if not tags:
        return
    current = _rows(tx)
    for tag in tags:
        num_episodes = tx.dataset("episodes").count_rows(filter=_where(tag))
        if num_episodes == 0:
            current.pop(tag, None)
            continue
        acc = _recompute(tx, tag)
        current[tag] = {
            **current[tag],
            "stats_json": acc.to_json(),
            "num_episodes": num_episodes,
            "num_steps": acc.state.count,
        }
    _write(tx, current)


def add_embodiments(tx: LakeTransaction, rows: Iterable[dict[str, Any]]) -> None:
    """Add the rows of `rows` whose tag the table lacks (other rows stay as they are); writes
    nothing when none is missing."""
    current = _rows(tx)
    missing = [r for r in rows if r["embodiment"] not in current]
    if not missing:
        return
    for r in missing:
        current[r["embodiment"]] = r
    _write(tx, current)
