"""LakeTransaction: the write protocol every change to a lake goes through.

Workers write Lance fragments (data files, not yet visible) and hand their metadata to the
driver; the driver takes the lake's write lease (`lease.py`), appends the fragments to each
table with one Lance commit per table, each fenced by the lease, then publishes one lake-version
manifest (see `versions.py`) and releases the lease. A process killed at any point before the
manifest leaves the lake readable at its previous version (the next lease holder rolls back its
table commits); one killed after it has committed everything. The phases are marked with
`faults.hook` so tests can kill or pause a writer at each one. A transaction that loses its race
publishes nothing; `retry.commit_with_retries` is the one loop that re-reads the lake and tries
the whole write again on top of it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any, Literal

import lance
import pyarrow as pa

from robolake.lake.protocol import faults
from robolake.lake.protocol.lease import Lease, LeaseLostError, Writer
from robolake.lake.protocol.versions import (
    CommitConflictError,
    DamagedManifestError,
    LakeVersion,
    list_versions,
    read_version,
    write_version,
)
from robolake.schemas.tables import schema_for_table
from robolake.storage import check_name, filesystem, join_uri

__all__ = [
    "EPISODE_TABLES",
    "LakeTransaction",
    "commit_fragments",
    "delete_fragment_files",
    "remove_orphan_files",
    "restore_version",
    "fragments_from_json",
    "fragments_to_json",
    "table_uri",
    "write_fragments",
    "write_table_fragments",
]

log = logging.getLogger(__name__)

INDEX_MAX_SEGMENTS = 8  # index segments of one column before they are merged (LakeTransaction.create_index)
# Tables whose rows belong to an episode (curation deletes, selects, merges and restores them
# together; each keeps an `episode_id` index). `streams` and `access` hold a recorded video's
# index and its access copy.
EPISODE_TABLES = ("episodes", "steps", "media", "streams", "access", "signals", "events")


def table_uri(lake_uri: str, table: str) -> str:
    """Where `table` of the lake lives; the table name is checked as a name (`storage.check_name`)."""
    return join_uri(lake_uri, f"{check_name(table, 'table')}.lance")


def write_table_fragments(
    lake_uri: str,
    table: str,
    data: pa.Table,
    storage_options: dict[str, str] | None = None,
) -> list[lance.FragmentMetadata]:
    """Write `data` as new, uncommitted fragments of lake table `table` (safe from any worker).

    Raises:
        ValueError: `data` does not match the table's schema.
    """
    return write_fragments(table_uri(lake_uri, table), data, schema_for_table(table), storage_options)


def write_fragments(
    uri: str,
    data: pa.Table,
    schema: pa.Schema,
    storage_options: dict[str, str] | None = None,
) -> list[lance.FragmentMetadata]:
    """Write `data` as new, uncommitted fragments of the Lance dataset at `uri` with `schema`
    (safe from any worker; `commit_fragments` makes them a version).

    Raises:
        ValueError: `data` does not match `schema`.
    """
    if data.schema.remove_metadata() != schema.remove_metadata():
        try:
            data = data.select(schema.names).cast(schema)
        except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
            raise ValueError(f"rows for {uri} do not match its schema: {e}. Expected {schema.names}") from e
    if data.num_rows == 0:
        return []
    return lance.fragment.write_fragments(data, uri, schema=schema, storage_options=storage_options)


def fragments_to_json(fragments: list[lance.FragmentMetadata]) -> list[str]:
    """Fragment metadata as JSON strings, to hand from a Ray task to the driver."""
    return [json.dumps(f.to_json()) for f in fragments]


def fragments_from_json(encoded: list[str]) -> list[lance.FragmentMetadata]:
    """The inverse of `fragments_to_json`."""
    return [lance.FragmentMetadata.from_json(f) for f in encoded]


def commit_fragments(
    uri: str,
    fragments: list[lance.FragmentMetadata],
    *,
    read_version: int,
    storage_options: dict[str, str] | None = None,
) -> int:
    """Append `fragments` to the Lance dataset at `uri` in one commit; returns the new version.

    The one place robolake turns written fragments into a table version (lake tables through
    `LakeTransaction.append`, packed shards through `pack`).
    """
    if not fragments:
        return read_version
    ds = lance.LanceDataset.commit(
        uri, lance.LanceOperation.Append(list(fragments)), read_version=read_version, storage_options=storage_options
    )
    return int(ds.version)


class LakeTransaction:
    """Appends and overwrites to lake tables, published as one lake version, under the write lease.

    The first write takes the lake's write lease (`lease.py`) for `writer` (a private one if
    None), checks that the published head is still `base`, and rolls back table commits that no
    manifest names (a gone writer's). Every commit is fenced; `commit` publishes and releases,
    `abort` (or leaving a `with` block on an exception) rolls back this transaction's own
    commits, deletes fragment files it was handed but did not commit, and releases.

    Args:
        lake_uri: The lake.
        base: The lake version the writer read; the write conflicts if another was published since.
        storage_options: Lance / fsspec options for object stores.
        writer: This process's `Writer` on the lake (its presence record and lease).
    """

    def __init__(
        self,
        lake_uri: str,
        base: LakeVersion,
        storage_options: dict[str, str] | None = None,
        *,
        writer: Writer | None = None,
    ):
        self._uri = lake_uri
        self._base = base
        self._opts = storage_options
        self._tables = dict(base.tables)
        self._touched: set[str] = set()
        self._writer = writer
        self._own_writer = writer is None
        self._lease: Lease | None = None
        self._pending: dict[str, list[lance.FragmentMetadata]] = {}
        self._done = False

    @property
    def base(self) -> LakeVersion:
        return self._base

    @property
    def lake_uri(self) -> str:
        return self._uri

    @property
    def storage_options(self) -> dict[str, str] | None:
        return self._opts

    @property
    def writer_id(self) -> str:
        """The id of this transaction's `Writer` ('' before the lease was first taken)."""
        return self._writer.id if self._writer is not None else ""

    def table_version(self, table: str) -> int:
        """The Lance version of `table` as this transaction has left it so far."""
        return self._tables[table]

    def dataset(self, table: str) -> lance.LanceDataset:
        return lance.dataset(table_uri(self._uri, table), version=self._tables[table], storage_options=self._opts)

    def has_table(self, table: str) -> bool:
        """Every table is there inside a transaction (`Lake.begin` upgrades an older lake first)."""
        return table in self._tables

    def __enter__(self) -> LakeTransaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._done:
            self.abort()

    # --- the lease ---------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the write lease now (the first write does it otherwise).

        Raises:
            CommitConflictError: another writer published since `base`, or held the lease
                for the whole wait.
        """
        if self._lease is not None:
            return
        if self._done:
            raise CommitConflictError("this transaction is already committed or aborted; begin a new one")
        if self._writer is None:
            self._writer = Writer(self._uri, self._opts)
        try:
            lease = self._writer.acquire(self._base.version)
        except LeaseLostError as e:
            raise CommitConflictError(f"lake {self._uri}: {e}; re-run the operation when it has finished") from None
        head = _published_head(self._uri, self._opts)
        lease.set_base(head)
        self._lease = lease
        if head != self._base.version:
            self.abort()
            raise CommitConflictError(
                f"lake {self._uri}: version {head} was published after this writer read version "
                f"{self._base.version}; re-run the operation"
            )
        self._roll_back_unpublished()
        self._sweep_dead_writers()

    def _fence(self) -> None:
        assert self._lease is not None  # acquire() ran
        try:
            self._lease.check(head=_published_head(self._uri, self._opts))
        except LeaseLostError as e:
            raise CommitConflictError(f"lake {self._uri}: {e}; nothing was published, re-run the operation") from None

    def _latest(self, table: str) -> int:
        return int(lance.dataset(table_uri(self._uri, table), storage_options=self._opts).version)

    def _roll_back_unpublished(self) -> None:
        """Restore every table to its published version if commits no manifest names follow it.

        Only the lease holder gets here, so whoever made those commits no longer holds the lease:
        it is dead, expired, or failed and released without publishing.
        """
        rolled = False
        for table, published in sorted(self._base.tables.items()):
            latest = self._latest(table)
            if latest == published:
                continue
            uri = table_uri(self._uri, table)
            log.warning(
                "table %s has unpublished commits (versions %d..%d) from a writer that is gone; restoring version %d",
                uri,
                published + 1,
                latest,
                published,
            )
            lance.dataset(uri, version=published, storage_options=self._opts).restore()
            self._tables[table] = self._latest(table)
            rolled = True
        if rolled:
            faults.hook("rolled_back")

    def _sweep_dead_writers(self) -> None:
        """Delete data files a dead writer left (only when no other writer is alive)."""
        assert self._writer is not None
        dead, others_alive = self._writer.dead_writers()
        if not dead:
            self._writer.forget([])
            return
        if others_alive:
            log.info(
                "lake %s: %d dead writers left files; another writer is alive, leaving them for later",
                self._uri,
                len(dead),
            )
            return
        cutoff = self._writer.started_at - (0.0 if "://" not in self._uri else self._writer.config.clock_skew_s)
        removed = remove_orphan_files(self._uri, self._opts, older_than=cutoff, tables=sorted(self._base.tables))
        if removed:
            log.warning("lake %s: removed %d data files left by %d dead writers", self._uri, removed, len(dead))
        self._writer.forget(dead)

    def _head_for_write(self, table: str) -> int:
        """Fence, then the table's latest Lance version (which must be the one this transaction left)."""
        self.acquire()
        self._fence()
        latest = self._latest(table)
        if latest != self._tables[table]:
            raise CommitConflictError(
                f"lake {self._uri}: table {table} moved to version {latest} under this writer (it left "
                f"{self._tables[table]}); nothing was published, re-run the operation"
            )
        return latest

    def _advanced(self, table: str, before: int, steps: int = 1) -> int:
        """The table's new version, checked to be `steps` past `before` (no commit slipped in)."""
        now = self._latest(table)
        if now != before + steps:
            raise CommitConflictError(
                f"lake {self._uri}: table {table} went from version {before} to {now} during one commit "
                "by this writer: another process wrote to it; nothing was published, re-run the operation"
            )
        self._tables[table] = now
        self._touched.add(table)
        return now

    # --- writes ------------------------------------------------------------------------------

    def adopt(self, table: str, fragments: list[lance.FragmentMetadata]) -> None:
        """Make this transaction responsible for uncommitted `fragments`: their files are deleted
        if it aborts before committing them (fragments passed to `append` stay the caller's)."""
        self._pending.setdefault(table, []).extend(fragments)

    def append(self, table: str, fragments: list[lance.FragmentMetadata]) -> None:
        """Commit `fragments` (from `write_table_fragments`) to `table`."""
        if not fragments:
            return
        read_version = self._head_for_write(table)
        faults.hook(f"before_commit:{table}")
        commit_fragments(table_uri(self._uri, table), fragments, read_version=read_version, storage_options=self._opts)
        pending = self._pending.get(table, [])
        self._pending[table] = [p for p in pending if all(p is not f for f in fragments)]
        self._advanced(table, read_version)
        faults.hook(f"after_commit:{table}")

    def append_table(self, table: str, data: pa.Table) -> None:
        """Write and commit `data` from the driver (for small tables)."""
        self.acquire()
        self.append(table, write_table_fragments(self._uri, table, data, self._opts))

    def overwrite(self, table: str, data: pa.Table) -> None:
        """Replace the whole content of a (small) table."""
        read_version = self._head_for_write(table)
        schema = schema_for_table(table)
        faults.hook(f"before_commit:{table}")
        lance.write_dataset(
            data.select(schema.names).cast(schema),
            table_uri(self._uri, table),
            schema=schema,
            mode="overwrite",
            storage_options=self._opts,
        )
        self._advanced(table, read_version)
        faults.hook(f"after_commit:{table}")

    def delete(self, table: str, predicate: str) -> int:
        """Mark the rows of `table` matching `predicate` deleted (Lance deletion files: no data
        file is rewritten, so earlier versions keep every row); returns how many were deleted."""
        read_version = self._head_for_write(table)
        ds = lance.dataset(table_uri(self._uri, table), version=read_version, storage_options=self._opts)
        n = ds.count_rows(filter=predicate)
        if n == 0:
            return 0
        faults.hook(f"before_commit:{table}")
        ds.delete(predicate, conflict_retries=0)
        self._advanced(table, read_version)
        faults.hook(f"after_commit:{table}")
        return n

    def compact(
        self, table: str, *, target_rows_per_fragment: int, max_bytes_per_file: int | None = None
    ) -> dict[str, int]:
        """Merge small fragments of `table` and drop deleted rows (Lance `compact_files`, with
        indexes remapped in the same step); returns Lance's counts of fragments and files."""
        read_version = self._head_for_write(table)
        ds = lance.dataset(table_uri(self._uri, table), version=read_version, storage_options=self._opts)
        faults.hook(f"before_commit:{table}")
        metrics = ds.optimize.compact_files(
            target_rows_per_fragment=target_rows_per_fragment,
            max_bytes_per_file=max_bytes_per_file,
            materialize_deletions=True,
            materialize_deletions_threshold=0.0,
        )
        now = self._latest(table)
        if now != read_version:
            self._advanced(table, read_version, steps=now - read_version)
        faults.hook(f"after_commit:{table}")
        return {
            "fragments_removed": int(metrics.fragments_removed),
            "fragments_added": int(metrics.fragments_added),
            "files_removed": int(metrics.files_removed),
            "files_added": int(metrics.files_added),
        }

    def restore_table(self, table: str, version: int) -> None:
        """Make `table`'s content that of its Lance `version` (a new commit)."""
        read_version = self._head_for_write(table)
        faults.hook(f"before_commit:{table}")
        lance.dataset(table_uri(self._uri, table), version=version, storage_options=self._opts).restore()
        self._advanced(table, read_version)
        faults.hook(f"after_commit:{table}")

    def create_index(
        self, table: str, column: str, index_type: Literal["BTREE", "BITMAP"] = "BTREE", *, merge_all: bool = False
    ) -> None:
        """Keep a scalar index on `table.column` covering every fragment, as part of this transaction.

        The first call builds the index. Later calls index only the fragments appended since, as
        a new index segment (Lance's `optimize_indices` with `num_indices_to_merge=0`), so an
        ingest's cost grows with its own rows, not the table's. Every `INDEX_MAX_SEGMENTS` segments
        they are merged into one (a merge of sorted index pages, no data scan), so lookups stay
        a bounded number of segment probes; `merge_all` merges them now (Lance compacts only
        fragments that the same index segment covers).
        """
        if self.dataset(table).count_rows() == 0:
            return
        self._head_for_write(table)
        uri = table_uri(self._uri, table)
        ds = lance.dataset(uri, storage_options=self._opts)
        existing = [d for d in ds.describe_indices() if list(d.field_names) == [column]]
        if not existing:
            ds.create_scalar_index(column, index_type)
        elif existing[0].num_rows_indexed < ds.count_rows() or (merge_all and len(existing[0].segments) > 1):
            segments = len(existing[0].segments)
            merge = segments if segments >= INDEX_MAX_SEGMENTS or merge_all else 0
            ds.optimize.optimize_indices(index_names=[existing[0].name], num_indices_to_merge=merge)
        else:
            return
        self._tables[table] = lance.dataset(uri, storage_options=self._opts).version
        self._touched.add(table)
        faults.hook(f"after_index:{table}")

    def index_episodes(self, tables: Sequence[str] = EPISODE_TABLES, *, merge_all: bool = False) -> None:
        """Keep the `episode_id` index of each of `tables` (every episode table by default) covering
        every fragment, as part of this transaction (`create_index`; what every writer does last)."""
        for table in tables:
            self.create_index(table, "episode_id", merge_all=merge_all)

    def commit(self, operation: str, summary: dict[str, Any] | None = None) -> LakeVersion:
        """Publish the new lake version and release the lease.

        Raises:
            CommitConflictError: another writer published since `base`, took the lease over, or
                wrote to a table under this one; nothing was published and this transaction's
                own table commits were rolled back.
        """
        try:
            self.acquire()
            faults.hook("before_publish")
            self._fence()
            for table in sorted(self._touched):
                if self._latest(table) != self._tables[table]:
                    raise CommitConflictError(
                        f"lake {self._uri}: table {table} was written by another process after this "
                        "writer's commit; nothing was published, re-run the operation"
                    )
            lv = LakeVersion(
                version=self._base.version + 1,
                tables=dict(self._tables),
                operation=operation,
                created_at=time.time(),
                summary=dict(summary or {}),
            )
            write_version(self._uri, lv, self._opts)
        except BaseException:
            self.abort()
            raise
        self._done = True
        faults.hook("manifest_written")
        self._release()
        return lv

    def abort(self) -> None:
        """Give up: roll back this transaction's own commits (if it still holds the lease),
        delete the fragment files it was handed but did not commit, release the lease."""
        if self._done:
            return
        self._done = True
        try:
            if self._lease is not None and self._touched:
                try:
                    self._lease.check()
                except LeaseLostError as e:
                    log.warning("lake %s: not rolling back: %s", self._uri, e)
                else:
                    for table in sorted(self._touched):
                        published = self._base.tables[table]
                        log.info("rolling back this writer's commits to %s (restoring version %d)", table, published)
                        lance.dataset(
                            table_uri(self._uri, table), version=published, storage_options=self._opts
                        ).restore()
            for table, frags in self._pending.items():
                delete_fragment_files(self._uri, table, frags, self._opts)
            self._pending.clear()
        finally:
            self._release()

    def _release(self) -> None:
        if self._lease is not None:
            self._lease.release()
        if self._own_writer and self._writer is not None:
            self._writer.close()
            self._writer = None


def _published_head(lake_uri: str, storage_options: dict[str, str] | None) -> int:
    known = list_versions(lake_uri, storage_options)
    return known[-1] if known else 0


def delete_fragment_files(
    lake_uri: str, table: str, fragments: list[lance.FragmentMetadata], storage_options: dict[str, str] | None = None
) -> int:
    """Delete the data files of uncommitted `fragments` of `table`; returns how many it deleted.

    A file that some table version references (the commit went through after all, e.g. an
    interrupt right after publishing) is never deleted: what a version names stays.
    """
    if not fragments:
        return 0
    base = table_uri(lake_uri, table)
    fs = filesystem(base, storage_options)
    tracked = set(
        lance.dataset(base, storage_options=storage_options).tracked_files().read_all().column("path").to_pylist()
    )
    n = 0
    for frag in fragments:
        for df in frag.files:
            if f"data/{df.path}" in tracked:
                continue
            path = join_uri(base, "data", df.path)
            try:
                fs.rm_file(path)
                n += 1
            except FileNotFoundError:
                pass
    return n


def remove_orphan_files(
    lake_uri: str,
    storage_options: dict[str, str] | None,
    *,
    older_than: float,
    tables: list[str],
    dry_run: bool = False,
) -> int:
    """Delete data files under each table's `data/` that no Lance version references and that
    were last modified before `older_than` (Unix seconds); returns how many (would be) removed.

    Only safe when no live writer may still commit such files (the caller decides).
    """
    n = 0
    for table in tables:
        uri = table_uri(lake_uri, table)
        ds = lance.dataset(uri, storage_options=storage_options)
        tracked = set(ds.tracked_files().read_all().column("path").to_pylist())
        present = ds.all_files().read_all()
        fs = None
        for path, modified in zip(
            present.column("path").to_pylist(), present.column("last_modified").to_pylist(), strict=True
        ):
            if not path.startswith("data/") or path in tracked or modified.timestamp() >= older_than:
                continue
            n += 1
            if not dry_run:
                fs = fs or filesystem(uri, storage_options)
                try:
                    fs.rm_file(join_uri(uri, path))
                except FileNotFoundError:
                    pass
    return n


def restore_version(lake_uri: str, version: int, storage_options: dict[str, str] | None = None) -> LakeVersion:
    """Publish a new lake version whose tables hold exactly what version `version` held.

    Works when the newest manifest is damaged: the damaged version stays in the history, the
    new one follows it.

    Raises:
        ValueError: `version` does not exist.
        DamagedManifestError: `version`'s own manifest is damaged.
        CommitConflictError: another writer held the lease for the whole wait.
    """
    target = read_version(lake_uri, version, storage_options)
    head = _published_head(lake_uri, storage_options)
    try:
        base = read_version(lake_uri, head, storage_options)
    except DamagedManifestError:
        # The head names nothing readable: take the target's table versions as the base, so the
        # lease holder's roll-back of "unpublished" commits puts every table back to them.
        base = LakeVersion(version=head, tables=dict(target.tables), operation="damaged", created_at=0.0)
    with LakeTransaction(lake_uri, base, storage_options) as tx:
        tx.acquire()
        for table, v in sorted(target.tables.items()):
            if tx.table_version(table) != v:
                tx.restore_table(table, v)
        return tx.commit("restore", {"restored": version, "previous_head": head})
