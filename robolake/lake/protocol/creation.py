"""A lake being made before its first version: marked, so that a killed maker's half is cleared.

`Lake.create` writes empty tables and publishes version 1 in one put; a crash before it leaves
tables that the next create joins. `select --into` and `merge` are different: they clone a
source's tables (and write rows into them) before version 1, so a kill leaves tables that no
create can join and no reader can open, and the target's folder "exists and is not empty".

So such a maker first puts a marker, `_robolake/creating.json` (who, where, which verb, and the
liveness fields of a lease record), and removes it after version 1 is published. A target with
the marker and no published version is *half-created*: while its maker lives (this host: its
process; elsewhere: until the marker is an hour old) it is left alone; once the maker is dead,
the next maker of a lake there, `gc` on it, or `robolake check` (which says so) treat it as
debris, and `clear_half_created` removes the folder. A target with a published version is a lake,
marker or not: version 1 is whole or absent.
"""

from __future__ import annotations

import json
import time
from typing import Any

from robolake.lake.protocol.lease import identity, is_dead
from robolake.lake.protocol.versions import list_versions, meta_uri, who
from robolake.storage import DocumentError, exists, filesystem, put_if_absent, read_json

__all__ = ["MARKER_TTL_S", "clear_half_created", "half_created", "mark_creating", "unmark_creating"]

MARKER_TTL_S = 3600.0  # a maker on another host is taken for dead after this long


def _marker(uri: str) -> str:
    return meta_uri(uri, "creating.json")


def mark_creating(uri: str, operation: str, storage_options: dict[str, str] | None = None) -> None:
    """Mark `uri` as being made by this process (before anything else is written there).

    Raises:
        FileExistsError: another maker marked it first.
    """
    record = {**identity(), "operation": operation, "who": who(), "started_at": time.time()}
    record["expires_at"] = record["started_at"] + MARKER_TTL_S
    put_if_absent(_marker(uri), json.dumps(record, indent=1).encode(), storage_options)


def unmark_creating(uri: str, storage_options: dict[str, str] | None = None) -> None:
    """Drop the marker once version 1 is published (a leftover one is harmless: the lake exists)."""
    path = _marker(uri)
    if exists(path, storage_options):
        filesystem(uri, storage_options).rm_file(path)


def half_created(uri: str, storage_options: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The marker of a target that a maker started and never published, or None."""
    if not exists(_marker(uri), storage_options) or list_versions(uri, storage_options):
        return None
    try:
        record = read_json(_marker(uri), storage_options, what="creation marker")
    except DocumentError:
        record = {}
    return record if isinstance(record, dict) else {}


def clear_half_created(uri: str, storage_options: dict[str, str] | None = None) -> bool:
    """Remove a half-created target whose maker is dead; True if one was removed.

    Raises:
        FileExistsError: the target is being made right now by a live process.
    """
    record = half_created(uri, storage_options)
    if record is None:
        return False
    if not is_dead(record):
        raise FileExistsError(
            f"{uri} is being created by `{record.get('operation', 'a robolake verb')}` (pid {record.get('pid')} on "
            f"{record.get('host')}); wait for it, or choose another target"
        )
    filesystem(uri, storage_options).rm(uri, recursive=True)
    return True
