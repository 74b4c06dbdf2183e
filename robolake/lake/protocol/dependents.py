"""Lakes that reference this lake's files: shallow clones made by `select --into` and `merge`.

A shallow clone's tables point at the source lake's data files instead of copying them, so the
source must not free those files while the clone exists. The source keeps one small record per
clone (`_robolake/dependents/<id>.json`: the clone's URI and the Lance version of each table it
references); `gc` keeps every table version a live clone references. A record whose clone no
longer exists (deleted by its owner) pins nothing.
"""

from __future__ import annotations

import time
import uuid
from typing import TypedDict

from robolake.lake.protocol.versions import list_versions, meta_uri
from robolake.storage import list_names, read_json, write_json_atomic

__all__ = ["DependentRecord", "dependents", "record_dependent"]


class DependentRecord(TypedDict):
    """A clone's record in its source lake, `_robolake/dependents/<id>.json`."""

    uri: str  # the clone
    tables: dict[str, int]  # table -> the Lance version of this lake's table it references
    created_at: float
    created_by: str  # user@host


def _dir(lake_uri: str) -> str:
    return meta_uri(lake_uri, "dependents")


def record_dependent(
    lake_uri: str,
    clone_uri: str,
    tables: dict[str, int],
    *,
    created_by: str,
    storage_options: dict[str, str] | None = None,
) -> None:
    """Note that `clone_uri` references `tables` (table -> Lance version) of this lake."""
    record: DependentRecord = {
        "uri": clone_uri,
        "tables": dict(tables),
        "created_at": time.time(),
        "created_by": created_by,
    }
    write_json_atomic(meta_uri(lake_uri, "dependents", f"{uuid.uuid4().hex}.json"), record, storage_options)


def dependents(lake_uri: str, storage_options: dict[str, str] | None = None) -> list[DependentRecord]:
    """Records of lakes cloned from this one that still exist: [{"uri", "tables": {table: version}}]."""
    out = []
    for name in list_names(_dir(lake_uri), storage_options):
        if not name.endswith(".json"):
            continue
        rec = read_json(meta_uri(lake_uri, "dependents", name), storage_options)
        if list_versions(str(rec.get("uri", "")), storage_options):
            out.append(rec)
    return out
