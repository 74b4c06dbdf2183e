"""Bringing a lake of an older format to this one, in place (`robolake optimize LAKE --upgrade`).

Each format added tables (`schemas.version.TABLES_ADDED`: format 2 `streams` for recorded
videos and `access` for access copies, format 3 `signals` and `events`, the record of every
other sensor). Upgrading creates the missing ones empty and then rewrites the format marker;
no data file is read or rewritten, so it takes a second whatever the lake's size.
Every lake version published before the upgrade names no version of the new tables and reads
them at their first Lance version, which is empty (`schemas.version.with_added_tables`): those
versions held no stream and no access copy, which is exactly what they were.

It runs under the write lease, so no writer of this robolake commits meanwhile; the tables are
created (create-if-absent) just before the lease is taken, because taking it checks every
table a version names. A killed upgrade leaves either the old marker (run it again; the tables
it made are joined) or the new one. Media rows written by format 1 did not record whether a
bare `jpeg` frame was the source's or a re-encode (format 1 re-encoded video frames as JPEG
q80 by default); the marker records the version the upgrade happened at, and `robolake info`
says so. A format-2 lake is read as it is; `Lake.begin` upgrades it before its first write
(every write touches the episode tables, the record's among them).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import lance
import pyarrow as pa

from robolake.lake.protocol.transaction import LakeTransaction, table_uri
from robolake.lake.protocol.versions import META_DIR, list_versions, read_version, who
from robolake.schemas.tables import schema_for_table
from robolake.schemas.version import (
    LAKE_FORMAT_VERSION,
    TABLES_ADDED,
    UPGRADABLE_FORMAT_VERSIONS,
    UnsupportedLakeVersionError,
)
from robolake.storage import join_uri, normalize_uri, read_json, write_json_atomic

__all__ = ["UpgradeReport", "upgrade"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class UpgradeReport:
    """What `upgrade` did: the format it found, and the tables it created."""

    from_format: int
    to_format: int
    created: tuple[str, ...] = ()


def _marker(uri: str) -> str:
    return join_uri(uri, META_DIR, "lake.json")


def _create_empty(uri: str, table: str, storage_options: dict[str, str] | None) -> bool:
    """Create `table` empty at Lance version 1 unless it is there (then check version 1 is empty)."""
    turi = table_uri(uri, table)
    try:
        ds = lance.dataset(turi, version=1, storage_options=storage_options)
    except (ValueError, OSError, RuntimeError):
        schema = schema_for_table(table)
        lance.write_dataset(
            pa.Table.from_pylist([], schema=schema), turi, schema=schema, mode="create", storage_options=storage_options
        )
        return True
    if ds.count_rows():
        raise ValueError(
            f"{turi} exists and its first version is not empty; it is not robolake's: move it away and upgrade again"
        )
    return False


def upgrade(uri: str, *, storage_options: dict[str, str] | None = None) -> UpgradeReport:
    """Upgrade the lake at `uri` to this robolake's format (nothing to do when it already is).

    Raises:
        FileNotFoundError: no lake at `uri`.
        UnsupportedLakeVersionError: a format this robolake cannot upgrade (a newer one).
        CommitConflictError: another writer held the lease for the whole wait.
    """
    uri = normalize_uri(uri)
    marker = read_json(_marker(uri), storage_options) if list_versions(uri, storage_options) else None
    if marker is None:
        raise FileNotFoundError(f"{uri} holds no robolake lake with a published version; nothing to upgrade")
    found = marker.get("format_version")
    if found == LAKE_FORMAT_VERSION:
        return UpgradeReport(from_format=int(found), to_format=LAKE_FORMAT_VERSION)
    if found not in UPGRADABLE_FORMAT_VERSIONS:
        raise UnsupportedLakeVersionError(
            f"lake {uri} has format version {found!r}, which this robolake cannot upgrade; "
            "upgrade robolake (pip install -U robolake)"
        )
    head = read_version(uri, list_versions(uri, storage_options)[-1], storage_options)
    created = tuple(
        t for t, added in TABLES_ADDED.items() if added > int(found) and _create_empty(uri, t, storage_options)
    )
    with LakeTransaction(uri, head, storage_options) as tx:
        tx.acquire()
        write_json_atomic(
            _marker(uri),
            {
                **marker,
                "format_version": LAKE_FORMAT_VERSION,
                "upgraded_from": found,
                "upgraded_at_version": head.version,
                "upgraded_at": time.time(),
                "upgraded_by": who(),
            },
            storage_options,
        )
        tx.abort()  # nothing to publish: releases the lease
    log.info("lake %s: upgraded from format %s to %d (created %s)", uri, found, LAKE_FORMAT_VERSION, list(created))
    return UpgradeReport(from_format=int(found), to_format=LAKE_FORMAT_VERSION, created=created)
