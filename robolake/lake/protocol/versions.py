"""Lake versions: one manifest per committed state of all tables together.

Each table is its own Lance dataset with its own version counter, and one ingest commits to
several of them. A reader must never see the steps of an ingest without its episodes, so the
lake keeps its own version log: `_robolake/versions/<N>.json` records, for lake version N, the
Lance version of every table. The manifest is written last, atomically, and only after every
table commit succeeded; a reader opens each table at the version the newest manifest names.

A manifest is created with put-if-absent (a hard link locally, a conditional PUT on object
stores), so two writers can never both publish version N; writers serialise through the write
lease (`lease.py`) before they get here. A writer killed between its table commits and its
manifest leaves table versions that no manifest names. They are invisible to readers, and the
next lease holder restores each such table to its manifested version (a Lance `restore`, itself
a new commit) before appending, so the orphaned data never reappears.

A manifest that cannot be parsed (a truncated file, a bad copy) is reported as damaged, with
the newest readable version before it, so a user can `robolake restore` that one.
"""

from __future__ import annotations

import getpass
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

from robolake.schemas.tables import TABLES
from robolake.schemas.version import (
    LAKE_FORMAT_VERSION,
    SUPPORTED_FORMAT_VERSIONS,
    UPGRADABLE_FORMAT_VERSIONS,
    UnsupportedLakeVersionError,
    with_added_tables,
)
from robolake.storage import (
    check_name,
    filesystem,
    list_names,
    normalize_uri,
    put_if_absent,
    read_json,
    under_root,
    write_json_atomic,
)

__all__ = [
    "FormatMarker",
    "LakeVersion",
    "LakeVersionJSON",
    "CommitConflictError",
    "DamagedManifestError",
    "last_good_version",
    "manifest_uri",
    "META_DIR",
    "meta_uri",
    "read_format_marker",
    "write_format_marker",
    "format_version",
    "upgrade_note",
    "list_versions",
    "read_version",
    "write_version",
]

META_DIR = "_robolake"


class CommitConflictError(RuntimeError):
    """Another writer committed a lake version after this writer read its base version."""


class DamagedManifestError(ValueError):
    """A lake version's manifest exists but cannot be read (truncated or not robolake's)."""

    def __init__(self, message: str, *, version: int, path: str, last_good: int | None):
        super().__init__(message)
        self.version, self.path, self.last_good = version, path, last_good


class LakeVersionJSON(TypedDict):
    """A lake-version manifest as written to `_robolake/versions/<N>.json` (`LakeVersion.to_json`)."""

    version: int
    tables: dict[str, int]
    operation: str
    created_at: float
    summary: dict[str, Any]


class FormatMarker(TypedDict):
    """The lake's format marker, `_robolake/lake.json`: what makes a directory a robolake lake."""

    format: str  # always "robolake-lake"
    format_version: int
    created_at: float


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

    def to_json(self) -> LakeVersionJSON:
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
            tables=with_added_tables({_table_name(k): int(v) for k, v in d["tables"].items()}),
            operation=str(d.get("operation", "")),
            created_at=float(d.get("created_at", 0.0)),
            summary=dict(d.get("summary", {})),
        )


def _table_name(name: object) -> str:
    """A table name from a manifest: one of the lake's tables, never a path (`../x`, another dataset)."""
    if check_name(name, "table") not in TABLES:
        raise ValueError(f"names a table {name!r} that a lake does not have (it has {', '.join(TABLES)})")
    return str(name)


def who() -> str:
    """user@host of this process, for the record of who changed a lake."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def meta_uri(lake_uri: str, *names: str) -> str:
    """`lake_uri/_robolake/names...`: each name checked, and (locally) the path, links followed, inside the lake.

    Every record robolake keeps beside the tables (marker, manifests, tags, lease, dependents) is
    reached through here, so a `_robolake/` folder or record linked elsewhere is refused, never read
    or written.
    """
    return under_root(lake_uri, META_DIR, *names, what="lake record")


def _marker_uri(lake_uri: str) -> str:
    return meta_uri(lake_uri, "lake.json")


def _versions_dir(lake_uri: str) -> str:
    return meta_uri(lake_uri, "versions")


def write_format_marker(lake_uri: str, storage_options: dict[str, str] | None = None) -> None:
    marker: FormatMarker = {"format": "robolake-lake", "format_version": LAKE_FORMAT_VERSION, "created_at": time.time()}
    write_json_atomic(_marker_uri(lake_uri), marker, storage_options)


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
    marker = read_json(uri, storage_options, what="lake format marker")
    if not isinstance(marker, dict) or marker.get("format", "robolake-lake") != "robolake-lake":
        raise ValueError(
            f'{uri} is not a robolake lake\'s format marker (its "format" is not "robolake-lake"); point '
            "robolake at a lake's root directory"
        )
    found = marker.get("format_version")
    if found in UPGRADABLE_FORMAT_VERSIONS and found not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedLakeVersionError(
            f"lake {lake_uri} has format version {found}, from an older robolake; upgrade it in place with "
            f"`robolake optimize {lake_uri} --upgrade` (adds two empty tables, rewrites nothing) to open it"
        )
    if found not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedLakeVersionError(
            f"lake {lake_uri} has format version {found!r}; this robolake reads "
            f"{sorted(SUPPORTED_FORMAT_VERSIONS)}. Upgrade robolake (pip install -U robolake) to open it."
        )
    return marker


def list_versions(lake_uri: str, storage_options: dict[str, str] | None = None) -> list[int]:
    """Committed lake version numbers, ascending."""
    names = list_names(_versions_dir(lake_uri), storage_options)
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())


def manifest_uri(lake_uri: str, version: int) -> str:
    """Where lake version `version`'s manifest lives."""
    return meta_uri(lake_uri, "versions", f"{version:08d}.json")


def _parse(lake_uri: str, version: int, storage_options: dict[str, str] | None) -> LakeVersion:
    uri = manifest_uri(lake_uri, version)
    try:
        lv = LakeVersion.from_json(read_json(uri, storage_options))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise DamagedManifestError(f"{uri}: {type(e).__name__}: {e}", version=version, path=uri, last_good=None) from e
    if lv.version != version:
        raise DamagedManifestError(f"{uri} says it is version {lv.version}", version=version, path=uri, last_good=None)
    return lv


def last_good_version(
    lake_uri: str, below: int | None = None, storage_options: dict[str, str] | None = None
) -> int | None:
    """The newest version (below `below`, if given) whose manifest reads, or None."""
    for v in reversed(list_versions(lake_uri, storage_options)):
        if below is not None and v >= below:
            continue
        try:
            _parse(lake_uri, v, storage_options)
        except DamagedManifestError:
            continue
        return v
    return None


def read_version(lake_uri: str, version: int, storage_options: dict[str, str] | None = None) -> LakeVersion:
    """Lake version `version`'s manifest.

    Raises:
        ValueError: no such version.
        DamagedManifestError: its manifest cannot be read; the message names the file and the
            newest readable version before it.
    """
    uri = manifest_uri(lake_uri, version)
    if not filesystem(uri, storage_options).exists(uri):
        known = list_versions(lake_uri, storage_options)
        raise ValueError(f"lake {lake_uri} has no version {version}; its versions are {known}")
    try:
        return _parse(lake_uri, version, storage_options)
    except DamagedManifestError as e:
        good = last_good_version(lake_uri, version, storage_options)
        if good is None:
            advice = "no earlier version is readable either; the lake must be re-created"
        else:
            advice = (
                f"the newest readable manifest is version {good} (the lake is intact at version {good} if "
                f"`robolake check {lake_uri} --version {good}` passes): run `robolake restore {lake_uri} {good}` "
                "to publish it as the newest version"
            )
        raise DamagedManifestError(
            f"lake {lake_uri}: version {version}'s manifest {uri} is damaged ({e}); {advice}",
            version=version,
            path=uri,
            last_good=good,
        ) from None


def write_version(lake_uri: str, lv: LakeVersion, storage_options: dict[str, str] | None = None) -> None:
    """Publish lake version `lv` (create-if-absent).

    Raises:
        CommitConflictError: version `lv.version` was already published by another writer.
    """
    uri = manifest_uri(lake_uri, lv.version)
    try:
        put_if_absent(uri, json.dumps(lv.to_json(), indent=2, sort_keys=True).encode(), storage_options)
    except FileExistsError as e:
        raise CommitConflictError(
            f"lake {lake_uri}: version {lv.version} was committed by another writer; re-run the "
            "operation to apply it on top of the newer version"
        ) from e


def upgrade_note(uri: str, storage_options: dict[str, str] | None = None) -> str | None:
    """What `robolake info` says about what an older or upgraded lake lacks, or None."""
    marker = read_json(_marker_uri(normalize_uri(uri)), storage_options)
    found = marker.get("format_version")
    if found == 2:
        return (
            "format 2: no record of the non-camera streams (their steps are their record); episodes ingested "
            "from now on keep every stream (the first write, or `robolake optimize --upgrade`, adds the tables)"
        )
    if "upgraded_from" not in marker:
        return None
    since = marker["upgraded_at_version"]
    if marker["upgraded_from"] == 2:
        return f"upgraded from format 2 after version {since}: episodes ingested before it have no stream record"
    return (
        f"upgraded from format {marker['upgraded_from']} after version {since}: bare jpeg "
        "frames written before it may be JPEG q80 re-encodes of video frames (that format did not record it)"
    )


def format_version(uri: str, storage_options: dict[str, str] | None = None) -> int:
    """The format version in the lake's marker."""
    return int(read_format_marker(uri, storage_options).get("format_version", LAKE_FORMAT_VERSION))
