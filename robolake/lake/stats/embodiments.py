"""The embodiments table: one row per embodiment tag, its spec and its normalisation statistics.

Every writer that changes which steps a lake version holds updates this table in the same
transaction, and each does it through this module, in one of three ways:

- **merge** (`merge_embodiment_stats`: ingest and rollouts add episodes; `refresh_embodiments`
  told what was `added`: `restore_episodes`). The workers that wrote the new steps accumulated
  their statistics (`partial_stats`; a restore reads the restored steps back); the stored
  accumulators absorb them, so the cost of a write grows with its own steps, not the lake's. A
  new tag gets its row from the writer's spec (a restored tag that had gone is recomputed).
- **subtract** (`refresh_embodiments` told what was `removed`: `delete` and `select`, which only
  remove episodes). The removed episodes' steps are read (by the `episode_id` index) and their
  accumulators taken away from the stored ones: sketch counts and counts subtract exactly, mean
  and M2 to rounding (`StatsAccumulator.subtract`). A min or max that a removed step reached
  cannot be subtracted, nor can more than half of a tag be removed without losing precision;
  those tags are recomputed as below. The cost follows the removed steps, not the lake's.
- **recompute** (`refresh_embodiments` alone: merges of lakes, trims, alignments, untrims). The
  touched tags are recomputed from every step the transaction holds; a tag with no episode left
  loses its row.

Next to the statistics, `stats_json["episodes"]` keeps the counts `robolake info` shows of the
episodes' metadata and media (`lake.stats.episode_summary`), maintained the same three ways.

A tag whose stored statistics predate the accumulators is recomputed once, the same way, the
next time a write merges into it. Rows of tags a write did not touch stay as they were. Rows are
dicts of the columns of `robolake.schemas.tables.EmbodimentRow`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.protocol.transaction import LakeTransaction
from robolake.lake.query import sql_in, sql_quote
from robolake.lake.stats.episode_summary import SUMMARY_COLUMNS, SUMMARY_KEY, combine, stored_summary, summarize
from robolake.lake.stats.norm import NormStatsAccumulator, accumulate_norm_stats
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.schemas.tables import schema_for_table

__all__ = [
    "add_embodiments",
    "merge_embodiment_stats",
    "new_embodiment_row",
    "partial_stats",
    "refresh_embodiments",
    "refresh_summaries",
]

log = logging.getLogger(__name__)

_ID_BATCH = 2000  # episode ids per Lance `IN` predicate


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


def _stats_json(acc: NormStatsAccumulator, summary: dict[str, Any] | None) -> str:
    """The row's `stats_json`: the statistics, their accumulators and (when known) the episodes' summary."""
    if summary is None:
        return acc.to_json()
    return json.dumps({**json.loads(acc.to_json()), SUMMARY_KEY: summary}, sort_keys=True)


def _summaries(tx: LakeTransaction, tags: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The summaries of `tags` counted from every episode `tx` holds (one read of their metadata)."""
    tags = sorted(set(tags))
    if not tags:
        return {}
    where = "embodiment IN (" + ", ".join(sql_quote(t) for t in tags) + ")"
    rows = tx.dataset("episodes").to_table(columns=SUMMARY_COLUMNS, filter=where).to_pylist()
    return summarize(rows, tx.dataset("media").to_table(columns=["episode_id", "encoding"]))


def _new_media(tx: LakeTransaction) -> pa.Table:
    """The media rows `tx` appended (those of fragments the version it started from lacks): what
    an ingest adds, read without the rows it did not touch."""
    ds = tx.dataset("media")
    base = tx.base.tables.get("media")
    old = set() if base is None else {f.fragment_id for f in ds.checkout_version(base).get_fragments()}
    new = [f for f in ds.get_fragments() if f.fragment_id not in old]
    if not new:
        return pa.table({"episode_id": pa.array([], pa.string()), "encoding": pa.array([], pa.string())})
    return ds.scanner(columns=["episode_id", "encoding"], fragments=new).to_table()


def _recompute(tx: LakeTransaction, tag: str) -> NormStatsAccumulator:
    """`tag`'s statistics from every step `tx` holds (there must be one)."""
    return accumulate_norm_stats(tx.dataset("steps").to_table(columns=["state", "action"], filter=_where(tag)))


def merge_embodiment_stats(
    tx: LakeTransaction,
    specs: Mapping[str, EmbodimentSpec],
    new_episodes: Mapping[str, int],
    partials: Iterable[Mapping[str, str]],
    episodes: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Merge the statistics of the steps `tx` adds into the embodiments table.

    Args:
        tx: The transaction that appended the new episodes and steps.
        specs: The spec of every tag that may be new to the lake (by tag).
        new_episodes: How many episodes of each tag `tx` adds.
        partials: `partial_stats` of the new steps, in a fixed order (chunk order), so the merge
            does not depend on which worker finished first.
        episodes: The new episodes' rows (at least `SUMMARY_COLUMNS`), whose summary is added to
            the stored one; without them the touched tags' summaries are dropped (readers count
            from the episodes until a curation verb or `doctor --update` stores them again).
    """
    current = _rows(tx)
    added = summarize(episodes, _new_media(tx)) if episodes is not None else {}
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
        summary = None
        if tag in added:
            before = stored_summary(row["stats_json"]) if row is not None else None
            if row is None:
                summary = added[tag]
            elif before is not None and before["episodes"] == int(row["num_episodes"]):
                summary = combine(before, added[tag])
            if summary is not None and summary["episodes"] != num_episodes:
                summary = None
        current[tag] = {
            "embodiment": tag,
            "spec_json": row["spec_json"] if row is not None else specs[tag].to_json(),
            "stats_json": _stats_json(acc, summary),
            "num_episodes": num_episodes,
            "num_steps": acc.state.count,
        }
    _write(tx, current)


def refresh_embodiments(
    tx: LakeTransaction,
    tags: Iterable[str],
    *,
    removed: Sequence[str] | None = None,
    added: Sequence[str] | None = None,
) -> None:
    """Recompute the statistics and counts of embodiments `tags` from the steps `tx` holds now.

    Args:
        tx: The transaction that changed their episodes.
        tags: The embodiments whose episodes it changed.
        removed: The ids of the episodes `tx` deleted, when deleting them is all it did: their rows
            and steps are read from the version `tx` started from and taken out of the stored
            statistics (what goes is read, not what stays; see the module essay).
        added: Or the ids of the episodes `tx` appended (with their steps and media), when adding
            them is all it did: theirs are read and merged in (a tag the version `tx` started
            from lacked is recomputed).

    Rows of other embodiments are kept as they are; an embodiment with no episode left is dropped.
    """
    tags = sorted(set(tags))
    if not tags:
        return
    if removed is not None:
        _subtract(tx, *_of_episodes(tx, removed, base=True))
        return
    if added is not None:
        _add(tx, *_of_episodes(tx, added, base=False))
        return
    current = _rows(tx)
    summaries = _summaries(tx, tags)
    for tag in tags:
        summary = summaries.get(tag)
        if summary is None:
            current.pop(tag, None)
            continue
        acc = _recompute(tx, tag)
        current[tag] = {
            **current[tag],
            "stats_json": _stats_json(acc, summary),
            "num_episodes": summary["episodes"],
            "num_steps": acc.state.count,
        }
    _write(tx, current)


def _of_episodes(
    tx: LakeTransaction, ids: Sequence[str], *, base: bool
) -> tuple[list[dict[str, Any]], pa.Table, dict[str, NormStatsAccumulator]]:
    """The rows of episodes `ids` (their summary's columns), their media rows (`episode_id`,
    `encoding`) and, per embodiment, the statistics of their steps, as the version `tx` started
    from held them (`base`) or as `tx` holds them now."""

    def table(name: str) -> Any:
        ds = tx.dataset(name)
        return ds.checkout_version(tx.base.tables[name]) if base else ds

    episodes, steps_ds, media_ds = table("episodes"), table("steps"), table("media")
    rows: list[dict[str, Any]] = []
    media: list[pa.Table] = []
    steps: dict[str, NormStatsAccumulator] = {}
    ids = sorted(ids)
    for i in range(0, len(ids), _ID_BATCH):
        where = sql_in("episode_id", ids[i : i + _ID_BATCH])
        rows += episodes.to_table(columns=SUMMARY_COLUMNS, filter=where).to_pylist()
        media.append(media_ds.to_table(columns=["episode_id", "encoding"], filter=where))
        t = steps_ds.to_table(columns=["embodiment", "state", "action"], filter=where)
        for tag in sorted(set(t.column("embodiment").to_pylist())):
            acc = accumulate_norm_stats(t.filter(pc.equal(t["embodiment"], tag)))
            steps[tag] = steps[tag].merge(acc) if tag in steps else acc
    return rows, pa.concat_tables(media), steps


def _add(
    tx: LakeTransaction,
    added: Sequence[Mapping[str, Any]],
    media: pa.Table,
    steps: Mapping[str, NormStatsAccumulator],
) -> None:
    """Merge appended episodes into the statistics and summaries of their embodiments (as an
    ingest does); a tag new since the version `tx` started from, or whose row cannot merge, is
    recomputed from what `tx` holds."""
    new = summarize(added, media)
    if not new:
        return
    before = {
        r["embodiment"]
        for r in tx.dataset("embodiments")
        .checkout_version(tx.base.tables["embodiments"])
        .to_table(columns=["embodiment"])
        .to_pylist()
    }
    current = _rows(tx)
    recompute: list[str] = []
    for tag in sorted(new):
        row = current.get(tag)
        try:
            stored = NormStatsAccumulator.from_json(row["stats_json"]) if row is not None else None
        except ValueError:
            stored = None
        summary = stored_summary(row["stats_json"]) if row is not None else None
        if tag not in before or stored is None or tag not in steps or summary is None:
            recompute.append(tag)
            continue
        total = combine(summary, new[tag])
        if total is None or summary["episodes"] != int(row["num_episodes"]):  # type: ignore[index]
            recompute.append(tag)
            continue
        acc = stored.merge(steps[tag])
        current[tag] = {
            **row,  # type: ignore[dict-item]
            "stats_json": _stats_json(acc, total),
            "num_episodes": total["episodes"],
            "num_steps": acc.state.count,
        }
    _write(tx, current)
    if recompute:
        refresh_embodiments(tx, recompute)


def _subtract(
    tx: LakeTransaction,
    removed: Sequence[Mapping[str, Any]],
    media: pa.Table,
    steps: Mapping[str, NormStatsAccumulator],
) -> None:
    """Take removed episodes out of the statistics and summaries of their embodiments.

    Args:
        tx: The transaction that deleted them (and changed nothing else of their embodiments).
        removed: The removed episodes' rows (at least `SUMMARY_COLUMNS`), read before the delete.
        media: Their media rows (`episode_id`, `encoding`).
        steps: Per embodiment, the accumulator of the removed episodes' steps.

    A tag whose statistics cannot be subtracted exactly (see the module essay), or whose stored
    row predates the accumulators or the summary, is recomputed from what `tx` holds.
    """
    gone = summarize(removed, media)
    if not gone:
        return
    current = _rows(tx)
    recount: list[str] = []
    for tag in sorted(gone):
        row = current.get(tag)
        left = (int(row["num_episodes"]) if row is not None else 0) - gone[tag]["episodes"]
        if row is None or left <= 0:
            current.pop(tag, None)
            continue
        try:
            stored = NormStatsAccumulator.from_json(row["stats_json"])
        except ValueError:
            stored = None
        before = stored_summary(row["stats_json"])
        acc = summary = None
        if stored is not None and tag in steps and steps[tag].state.count * 2 <= stored.state.count:
            acc = stored.subtract(steps[tag])
        if before is not None and before["episodes"] == int(row["num_episodes"]):
            summary = combine(before, gone[tag], -1)
        if acc is None:
            log.info("embodiment %s: recomputing its statistics from the steps left", tag)
            acc = _recompute(tx, tag)
        if summary is None:
            recount.append(tag)
        current[tag] = {
            **row,
            "stats_json": _stats_json(acc, summary),
            "num_episodes": left,
            "num_steps": acc.state.count,
        }
    _write(tx, current)
    if recount:
        refresh_summaries(tx, recount)


def refresh_summaries(tx: LakeTransaction, tags: Iterable[str] | None = None) -> list[str]:
    """Count the episodes' summaries of `tags` (default: every tag without a stored one) from the
    episodes `tx` holds and store them; returns the tags written (statistics untouched)."""
    current = _rows(tx)
    if tags is None:
        tags = [t for t, r in current.items() if stored_summary(r["stats_json"]) is None]
    tags = sorted(t for t in set(tags) if t in current)
    if not tags:
        return []
    summaries = _summaries(tx, tags)
    for tag in tags:
        d = json.loads(current[tag]["stats_json"] or "{}")
        summary = summaries.get(tag)
        d.pop(SUMMARY_KEY, None)
        if summary is not None and summary["episodes"] == int(current[tag]["num_episodes"]):
            d[SUMMARY_KEY] = summary  # (counts that disagree with the row are left to be counted on read)
        current[tag] = {**current[tag], "stats_json": json.dumps(d, sort_keys=True)}
    _write(tx, current)
    return tags


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
