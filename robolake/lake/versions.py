"""Lake versions: one manifest per committed state of all tables together.

Each table is its own Lance dataset with its own version counter, and one ingest commits to
several of them. A reader must never see the steps of an ingest without its episodes, so the
lake keeps its own version log: `_robolake/versions/<N>.json` records, for lake version N, the
Lance version of every table. The manifest is written last, atomically, and only after every
table commit succeeded; a reader opens each table at the version the newest manifest names.

A writer killed between its table commits and its manifest leaves table versions that no
manifest names. They are invisible to readers, and the next writer restores each such table to
its manifested version (a Lance `restore`, itself a new commit) before appending, so the
orphaned data never reappears.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from robolake.lake.storage import filesystem, join_uri, read_json, write_json_atomic
from robolake.schemas.version import (
    LAKE_FORMAT_VERSION,
    SUPPORTED_FORMAT_VERSIONS,
    UnsupportedLakeVersionError,
)

__all__ = [
    "LakeVersion",
    "CommitConflictError",
    "META_DIR",
    "read_format_marker",
    "write_format_marker",
    "list_versions",
    "read_version",
    "write_version",
]

META_DIR = "_robolake"


class CommitConflictError(RuntimeError):
    """Another writer committed a lake version after this writer read its base version."""


@dataclass(frozen=True, kw_only=True)
class LakeVersion:
    """One committed state of the lake.

    Attributes:
        version: Lake version number, 1 for a fresh lake.
        tables: Table name -> Lance version of that table in this lake version.
        operation: What made it (`create`, `ingest`, `compact`, ...).
        created_at: Unix seconds.
        summary: Counts and notes of the operation.
    """

    version: int
    tables: dict[str, int]
    operation: str
    created_at: float
    summary: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "tables": dict(self.tables),
            "operation": self.operation,
            "created_at": self.created_at,
            "summary": self.summary,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LakeVersion:
        return cls(
            version=int(d["version"]),
            tables={k: int(v) for k, v in d["tables"].items()},
            operation=str(d.get("operation", "")),
            created_at=float(d.get("created_at", 0.0)),
            summary=dict(d.get("summary", {})),
        )


def _marker_uri(lake_uri: str) -> str:
    return join_uri(lake_uri, META_DIR, "lake.json")


def _versions_dir(lake_uri: str) -> str:
    return join_uri(lake_uri, META_DIR, "versions")


def write_format_marker(lake_uri: str, storage_options: dict[str, str] | None = None) -> None:
    write_json_atomic(
        _marker_uri(lake_uri),
        {"format": "robolake-lake", "format_version": LAKE_FORMAT_VERSION, "created_at": time.time()},
        storage_options,
    )


def read_format_marker(lake_uri: str, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
    """Read and check the lake's format marker.

    Raises:
        FileNotFoundError: `lake_uri` holds no robolake lake.
        UnsupportedLakeVersionError: the lake's format version is not one this robolake reads.
    """
    uri = _marker_uri(lake_uri)
    if not filesystem(uri, storage_options).exists(uri):
        raise FileNotFoundError(
            f"{lake_uri} is not a robolake lake (no {META_DIR}/lake.json); create one with "
            f"Lake.create({lake_uri!r}) or `robolake ingest SRC {lake_uri}`"
        )
    marker = read_json(uri, storage_options)
    found = marker.get("format_version")
    if found not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedLakeVersionError(
            f"lake {lake_uri} has format version {found!r}; this robolake reads "
            f"{sorted(SUPPORTED_FORMAT_VERSIONS)}. Upgrade robolake (pip install -U robolake) to open it."
        )
    return marker


def list_versions(lake_uri: str, storage_options: dict[str, str] | None = None) -> list[int]:
    """Committed lake version numbers, ascending."""
    d = _versions_dir(lake_uri)
    fs = filesystem(d, storage_options)
    if not fs.exists(d):
        return []
    out = []
    for path in fs.ls(d, detail=False):
        name = str(path).rstrip("/").rsplit("/", 1)[-1]
        if name.endswith(".json") and name[:-5].isdigit():
            out.append(int(name[:-5]))
    return sorted(out)


def read_version(lake_uri: str, version: int, storage_options: dict[str, str] | None = None) -> LakeVersion:
    uri = join_uri(_versions_dir(lake_uri), f"{version:08d}.json")
    if not filesystem(uri, storage_options).exists(uri):
        known = list_versions(lake_uri, storage_options)
        raise ValueError(f"lake {lake_uri} has no version {version}; its versions are {known}")
    return LakeVersion.from_json(read_json(uri, storage_options))


def write_version(lake_uri: str, lv: LakeVersion, storage_options: dict[str, str] | None = None) -> None:
    """Publish lake version `lv` (create-if-absent).

    Raises:
        CommitConflictError: version `lv.version` was already published by another writer.
    """
    uri = join_uri(_versions_dir(lake_uri), f"{lv.version:08d}.json")
    try:
        write_json_atomic(uri, lv.to_json(), storage_options, exclusive=True)
    except FileExistsError as e:
        raise CommitConflictError(
            f"lake {lake_uri}: version {lv.version} was committed by another writer; re-run the "
            "operation to apply it on top of the newer version"
        ) from e
