"""New lakes from existing ones: `select_into` (a subset) and `merge` (several lakes in one).

Both start the new lake as a *shallow clone* of one source at one version: Lance writes new
table manifests that reference the source's data files where they are (no byte of steps or
frames is copied; the store must be the same one, else Lance copies). The new lake's first
version is then published through the usual `LakeTransaction` (its base is "no version yet",
so two processes making the same new lake cannot both publish it), carrying the deletions that
narrow a selection and the rows that a merge adds from its other sources.

A clone depends on its source's files, so the source records it
(`lake/dependents.py`) and `gc` keeps those table versions while the clone exists. Rows a merge adds from its second and
later sources are copied (a Lance table references one dataset's files).

A merge reconciles embodiments by tag: the same tag must mean the same layout (state and
action widths and slices, cameras) in every source, else it is refused before anything is
written, naming both lakes and what differs. Episodes whose content hash is already in the
merged lake land once; the others are recorded as duplicates in the version's summary.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import lance
import pyarrow as pa

from robolake.curate.edit import EPISODE_TABLES, CurationResult, id_batches
from robolake.lake import (
    Lake,
    LakeTransaction,
    LakeVersion,
    add_embodiments,
    clear_half_created,
    faults,
    list_versions,
    mark_creating,
    new_embodiment_row,
    parse_where,
    record_dependent,
    refresh_embodiments,
    select_episode_ids,
    sql_in,
    table_uri,
    unmark_creating,
    who,
    write_format_marker,
    write_table_fragments,
)
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.schemas.tables import TABLES, schema_for_table
from robolake.storage import filesystem, normalize_uri

__all__ = ["merge", "select_into"]

log = logging.getLogger(__name__)

_ROWS_PER_WRITE = 4096


def _check_new(into: str, storage_options: dict[str, str] | None) -> None:
    if list_versions(into, storage_options):
        raise FileExistsError(f"a lake already exists at {into}; choose a new --into")
    if clear_half_created(into, storage_options):  # a killed select/merge --into left it: start again
        log.warning("%s was left half-created by a killed run; cleared it", into)
    if "://" not in into and filesystem(into).exists(into) and filesystem(into).ls(into):
        raise FileExistsError(f"{into} exists and is not empty; choose a new --into")


def _clone(source: Lake, into: str, storage_options: dict[str, str] | None, operation: str) -> LakeTransaction:
    """Shallow-clone every table of `source` into `into`; returns a transaction for its version 1."""
    if "://" not in into:
        filesystem(into).makedirs(into, exist_ok=True)
    mark_creating(into, operation, storage_options)  # before anything else: a kill from here on is debris
    faults.hook("creating:marked")
    write_format_marker(into, storage_options)
    tables: dict[str, int] = {}
    for table in TABLES:
        if not source.has_table(table):  # a format-2 source: its episodes have no stream record
            empty = schema_for_table(table).empty_table()
            tables[table] = int(
                lance.write_dataset(
                    empty, table_uri(into, table), mode="create", storage_options=storage_options
                ).version
            )
            continue
        ds = source.dataset(table)
        try:
            clone = ds.shallow_clone(table_uri(into, table), ds.version, storage_options=storage_options)
        except (OSError, ValueError, RuntimeError) as e:  # another store: Lance cannot reference across
            log.info("shallow clone of %s failed (%s); copying it", table, e)
            clone = ds.deep_clone(table_uri(into, table), ds.version, storage_options=storage_options)
        tables[table] = int(clone.version)
    record_dependent(
        source.uri, into, dict(source.version_info.tables), created_by=who(), storage_options=source.storage_options
    )
    base = LakeVersion(version=0, tables=tables, operation="none", created_at=0.0)
    return LakeTransaction(into, base, storage_options)


def select_into(
    lake: Lake | str,
    where: str,
    into: str,
    *,
    reason: str = "",
    storage_options: dict[str, str] | None = None,
) -> CurationResult:
    """A new lake at `into` holding the episodes of `lake` that `where` keeps (files referenced).

    Raises:
        ValueError: the filter keeps nothing.
        FileExistsError: `into` is not new.
    """
    src = lake if isinstance(lake, Lake) else Lake.open(lake, storage_options=storage_options)
    into = normalize_uri(into)
    _check_new(into, storage_options)
    keep = select_episode_ids(src, parse_where(where))
    if not keep:
        raise ValueError(
            f"--where {where!r} keeps no episode of lake {src.uri} version {src.version}; nothing was written"
        )
    kept = set(keep)
    drop = sorted(
        e
        for e in src.dataset("episodes").to_table(columns=["episode_id"]).column("episode_id").to_pylist()
        if e not in kept
    )
    touched: set[str] = set()
    with _clone(src, into, storage_options, "select --into") as tx:
        if drop:
            for chunk in id_batches(drop):
                touched.update(
                    tx.dataset("episodes")
                    .to_table(columns=["embodiment"], filter=sql_in("episode_id", chunk))
                    .column("embodiment")
                    .to_pylist()
                )
            for table in EPISODE_TABLES:
                for chunk in id_batches(drop):
                    tx.delete(table, sql_in("episode_id", chunk))
            refresh_embodiments(tx, touched)
        summary = {
            "who": who(),
            "reason": reason,
            "where": where,
            "from": src.uri,
            "from_version": src.version,
            "from_tag": src.tag.name if src.tag else None,
            "episodes_kept": len(keep),
        }
        lv = tx.commit("select", summary)
    unmark_creating(into, storage_options)
    return CurationResult(lake=into, version=lv.version, episodes=tuple(sorted(keep)), summary=summary)


def _spec_difference(a: EmbodimentSpec, b: EmbodimentSpec) -> str | None:
    for what, x, y in (
        ("state width", a.state_dim, b.state_dim),
        ("action width", a.action_dim, b.action_dim),
        ("state slices", [(s.name, s.start, s.end) for s in a.state], [(s.name, s.start, s.end) for s in b.state]),
        ("action slices", [(s.name, s.start, s.end) for s in a.action], [(s.name, s.start, s.end) for s in b.action]),
        ("cameras", list(a.cameras), list(b.cameras)),
    ):
        if x != y:
            return f"{what} {x} vs {y}"
    return None


def merge(
    sources: Sequence[Lake | str],
    into: str,
    *,
    reason: str = "",
    storage_options: dict[str, str] | None = None,
) -> CurationResult:
    """One new lake at `into` from several: the first referenced, the rest copied, duplicates once.

    Raises:
        ValueError: fewer than two sources, or an embodiment tag whose layout differs between sources.
        FileExistsError: `into` is not new.
    """
    lakes = [s if isinstance(s, Lake) else Lake.open(s, storage_options=storage_options) for s in sources]
    if len(lakes) < 2:
        raise ValueError("merge needs at least two lakes: robolake merge A B [...] --into C")
    into = normalize_uri(into)
    _check_new(into, storage_options)
    specs: dict[str, tuple[str, EmbodimentSpec]] = {}
    for lk in lakes:
        for tag, spec in lk.embodiments().items():
            if tag in specs and (diff := _spec_difference(specs[tag][1], spec)) is not None:
                raise ValueError(
                    f"embodiment {tag!r} differs between {specs[tag][0]} and {lk.uri}: {diff}; "
                    "re-ingest one of them with another --embodiment tag, or select it out first"
                )
            specs.setdefault(tag, (lk.uri, spec))
    first, rest = lakes[0], lakes[1:]
    hashes = first.content_hashes()
    ids = set(first.episode_ids())
    added: list[str] = []
    duplicates: list[dict[str, str]] = []
    touched: set[str] = set()
    with _clone(first, into, storage_options, "merge") as tx:
        for lk in rest:
            rows = lk.episodes(columns=["episode_id", "content_hash", "embodiment"]).to_pylist()
            new = []
            for r in rows:
                if r["content_hash"] in hashes:
                    duplicates.append({"episode_id": r["episode_id"], "from": lk.uri})
                    continue
                if r["episode_id"] in ids:
                    raise ValueError(
                        f"episode id {r['episode_id']!r} is in two sources with different content; nothing was written"
                    )
                hashes.add(r["content_hash"])
                ids.add(r["episode_id"])
                new.append(r["episode_id"])
                touched.add(r["embodiment"])
            for table in EPISODE_TABLES:
                for chunk in id_batches(sorted(new)):
                    _copy_rows(tx, lk, table, sql_in("episode_id", chunk))
            _copy_quarantine(tx, lk)
            added.extend(new)
        add_embodiments(tx, [new_embodiment_row(t, specs[t][1]) for t in sorted(touched) if t in specs])
        refresh_embodiments(tx, touched)
        tx.index_episodes()
        summary = {
            "who": who(),
            "reason": reason,
            "sources": [{"uri": lk.uri, "version": lk.version} for lk in lakes],
            "episodes_added": len(added),
            "duplicates": duplicates,
        }
        lv = tx.commit("merge", summary)
    unmark_creating(into, storage_options)
    return CurationResult(lake=into, version=lv.version, episodes=tuple(sorted(added)), summary=summary)


def _copy_rows(tx: LakeTransaction, lake: Lake, table: str, predicate: str) -> None:
    """Stream `table`'s rows matching `predicate` from `lake` into the transaction's lake."""
    if not lake.has_table(table):
        return  # a format-2 lake: nothing of this table to copy
    frags: list[lance.FragmentMetadata] = []
    pending: list[pa.RecordBatch] = []
    rows = 0

    def flush() -> None:
        nonlocal pending, rows
        if pending:
            written = write_table_fragments(tx.lake_uri, table, pa.Table.from_batches(pending), tx.storage_options)
            tx.adopt(table, written)
            frags.extend(written)
        pending, rows = [], 0

    for batch in lake.dataset(table).to_batches(filter=lake.predicate(table, predicate), batch_size=512):
        pending.append(batch)
        rows += batch.num_rows
        if rows >= _ROWS_PER_WRITE:
            flush()
    flush()
    tx.append(table, frags)


def _copy_quarantine(tx: LakeTransaction, lake: Lake) -> None:
    have = {
        (q["source_path"], q["source_episode_index"], q["reason"])
        for q in tx.dataset("quarantine").to_table().to_pylist()
    }
    rows = [
        q
        for q in lake.to_arrow("quarantine").to_pylist()
        if (q["source_path"], q["source_episode_index"], q["reason"]) not in have
    ]
    if rows:
        tx.append_table("quarantine", pa.Table.from_pylist(rows, schema=schema_for_table("quarantine")))
