"""LakeTransaction: the write protocol every change to a lake goes through.

Workers write Lance fragments (data files, not yet visible) and hand their metadata to the
driver; the driver appends them to each table with one Lance commit per table against the table
version it read, then publishes one lake-version manifest (see `versions.py`). A process killed at
any point before the manifest leaves the lake readable at its previous version; one killed after
it has committed everything.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Literal

import lance
import pyarrow as pa

from robolake.lake.storage import join_uri
from robolake.lake.versions import CommitConflictError, LakeVersion, list_versions, write_version
from robolake.schemas.tables import schema_for_table

__all__ = [
    "LakeTransaction",
    "commit_fragments",
    "fragments_from_json",
    "fragments_to_json",
    "table_uri",
    "write_table_fragments",
]

log = logging.getLogger(__name__)

INDEX_MAX_SEGMENTS = 8  # index segments of one column before they are merged (LakeTransaction.create_index)


def table_uri(lake_uri: str, table: str) -> str:
    return join_uri(lake_uri, f"{table}.lance")


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
    schema = schema_for_table(table)
    if data.schema.remove_metadata() != schema.remove_metadata():
        try:
            data = data.select(schema.names).cast(schema)
        except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
            raise ValueError(
                f"rows for table {table!r} do not match its schema: {e}. Expected {schema.names}"
            ) from e
    if data.num_rows == 0:
        return []
    return lance.fragment.write_fragments(
        data, table_uri(lake_uri, table), schema=schema, storage_options=storage_options
    )


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
    """Appends and overwrites to lake tables, published as one lake version.

    Args:
        lake_uri: The lake.
        base: The lake version the writer read; commits conflict if another was published since.
        storage_options: Lance / fsspec options for object stores.
    """

    def __init__(self, lake_uri: str, base: LakeVersion, storage_options: dict[str, str] | None = None):
        self._uri = lake_uri
        self._base = base
        self._opts = storage_options
        self._tables = dict(base.tables)
        self._touched: set[str] = set()

    @property
    def base(self) -> LakeVersion:
        return self._base

    def table_version(self, table: str) -> int:
        """The Lance version of `table` as this transaction has left it so far."""
        return self._tables[table]

    def dataset(self, table: str) -> lance.LanceDataset:
        return lance.dataset(
            table_uri(self._uri, table), version=self._tables[table], storage_options=self._opts
        )

    def _check_not_superseded(self) -> None:
        published = list_versions(self._uri, self._opts)
        if published and published[-1] != self._base.version:
            raise CommitConflictError(
                f"lake {self._uri}: version {published[-1]} was published after this writer read "
                f"version {self._base.version}; re-run the operation"
            )

    def _head_for_write(self, table: str) -> int:
        """The table's latest Lance version, first rolling back commits no manifest names."""
        uri = table_uri(self._uri, table)
        expected = self._tables[table]
        latest = lance.dataset(uri, storage_options=self._opts)
        if latest.version == expected:
            return expected
        if table in self._touched:
            raise CommitConflictError(f"table {uri} changed under this transaction (now at {latest.version})")
        self._check_not_superseded()
        log.warning(
            "table %s has unpublished commits (versions %d..%d) from an interrupted writer; "
            "restoring version %d",
            uri, expected + 1, latest.version, expected,
        )
        lance.dataset(uri, version=expected, storage_options=self._opts).restore()
        return lance.dataset(uri, storage_options=self._opts).version

    def append(self, table: str, fragments: list[lance.FragmentMetadata]) -> None:
        """Commit `fragments` (from `write_table_fragments`) to `table`."""
        if not fragments:
            return
        read_version = self._head_for_write(table)
        self._tables[table] = commit_fragments(
            table_uri(self._uri, table), fragments, read_version=read_version, storage_options=self._opts
        )
        self._touched.add(table)

    def append_table(self, table: str, data: pa.Table) -> None:
        """Write and commit `data` from the driver (for small tables)."""
        self.append(table, write_table_fragments(self._uri, table, data, self._opts))

    def overwrite(self, table: str, data: pa.Table) -> None:
        """Replace the whole content of a (small) table."""
        self._head_for_write(table)
        schema = schema_for_table(table)
        ds = lance.write_dataset(
            data.select(schema.names).cast(schema),
            table_uri(self._uri, table),
            schema=schema,
            mode="overwrite",
            storage_options=self._opts,
        )
        self._tables[table] = ds.version
        self._touched.add(table)

    def create_index(self, table: str, column: str, index_type: Literal["BTREE", "BITMAP"] = "BTREE") -> None:
        """Keep a scalar index on `table.column` covering every fragment, as part of this transaction.

        The first call builds the index. Later calls index only the fragments appended since, as
        a new index segment (Lance's `optimize_indices` with `num_indices_to_merge=0`), so an
        ingest's cost grows with its own rows, not the table's. Every `INDEX_MAX_SEGMENTS` segments
        they are merged into one (a merge of sorted index pages, no data scan), so lookups stay
        a bounded number of segment probes.
        """
        if self.dataset(table).count_rows() == 0:
            return
        self._head_for_write(table)
        uri = table_uri(self._uri, table)
        ds = lance.dataset(uri, storage_options=self._opts)
        existing = [d for d in ds.describe_indices() if list(d.field_names) == [column]]
        if not existing:
            ds.create_scalar_index(column, index_type)
        elif existing[0].num_rows_indexed < ds.count_rows():
            segments = len(existing[0].segments)
            merge = segments if segments >= INDEX_MAX_SEGMENTS else 0
            ds.optimize.optimize_indices(index_names=[existing[0].name], num_indices_to_merge=merge)
        else:
            return
        self._tables[table] = lance.dataset(uri, storage_options=self._opts).version
        self._touched.add(table)

    def commit(self, operation: str, summary: dict[str, Any] | None = None) -> LakeVersion:
        """Publish the new lake version.

        Raises:
            CommitConflictError: another writer published a version since `base`.
        """
        self._check_not_superseded()
        lv = LakeVersion(
            version=self._base.version + 1,
            tables=dict(self._tables),
            operation=operation,
            created_at=time.time(),
            summary=dict(summary or {}),
        )
        write_version(self._uri, lv, self._opts)
        return lv
