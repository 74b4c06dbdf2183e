"""`robolake gc`: remove the files no retained lake version needs.

A lake keeps every table version ever committed (Lance's own history, and the unpublished
commits that killed or losing writers left and that were rolled back) until something removes
them. `gc` keeps:

- the newest lake version, every lake version published within the retention window, and every
  version a tag names (`tags.py`);
- every Lance version of every table that one of those names (an old version of a table that
  no ingest touched since is still named by the newest lake version: it stays);
- the Lance versions that a lake cloned from this one references (`curate/clone.py`);
- the newest Lance version of every table, and any file a live writer may still commit.

and removes, as a writer holding the lease (so nothing commits meanwhile):

- Lance versions older than the window that no retained lake version names, with the data,
  deletion and index files only they reference (Lance's `cleanup_old_versions`, asked for those
  exact versions);
- the manifests of lake versions older than the window (they could no longer be opened);
- data files no table version references (fragments of killed writers), older than the
  window, only when no other writer is alive;
- presence records of dead writers and lease epochs before the current one.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field

import lance

from robolake.lake.protocol.creation import clear_half_created, half_created
from robolake.lake.protocol.dependents import dependents
from robolake.lake.protocol.lease import is_dead, presence_records
from robolake.lake.protocol.tags import list_tags
from robolake.lake.protocol.transaction import remove_orphan_files, table_uri
from robolake.lake.protocol.versions import (
    DamagedManifestError,
    LakeVersion,
    list_versions,
    manifest_uri,
    read_version,
)
from robolake.schemas.tables import TABLES
from robolake.storage import filesystem, normalize_uri

__all__ = ["GcReport", "gc", "parse_age"]

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class GcReport:
    """What `gc` removed (or, with dry_run, would remove).

    Attributes:
        retained: Lake versions kept.
        removed_versions: Lake versions whose manifests were removed.
        lance_versions: Table -> Lance versions removed.
        bytes_removed: Bytes Lance freed.
        orphan_files: Unreferenced data files removed.
        skipped_orphans: Why unreferenced files were left, if they were.
        dry_run: Nothing was deleted.
        half_created: The target was a half-created lake (a killed select/merge --into), removed whole
            (or, with dry_run, would be).
    """

    retained: list[int] = field(default_factory=list)
    removed_versions: list[int] = field(default_factory=list)
    lance_versions: dict[str, list[int]] = field(default_factory=dict)
    bytes_removed: int = 0
    orphan_files: int = 0
    skipped_orphans: str = ""
    dry_run: bool = False
    half_created: bool = False


def parse_age(text: str) -> dt.timedelta:
    """`7d`, `12h`, `30m`, `45s` or a number of seconds -> timedelta.

    Raises:
        ValueError: `text` is not such an age.
    """
    units = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
    t = text.strip().lower()
    try:
        seconds = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except ValueError:
        raise ValueError(f"--older-than {text!r}: give an age like 7d, 12h, 30m or 45s") from None
    if seconds < 0:
        raise ValueError(f"--older-than {text!r} is negative")
    return dt.timedelta(seconds=seconds)


def gc(
    uri: str,
    older_than: dt.timedelta,
    *,
    dry_run: bool = False,
    storage_options: dict[str, str] | None = None,
) -> GcReport:
    """Remove what no lake version published within `older_than` (nor the newest) needs.

    Raises:
        DamagedManifestError: the newest manifest is damaged (restore first).
        CommitConflictError: a live writer held the lease for the whole wait.
    """
    from robolake.lake.lake import Lake

    uri = normalize_uri(uri)
    if half_created(uri, storage_options) is not None:  # debris of a killed select/merge --into: all of it goes
        if not dry_run:
            clear_half_created(uri, storage_options)
        return GcReport(dry_run=dry_run, half_created=True)
    lake = Lake.open(uri, storage_options=storage_options)  # raises on a damaged head: restore first
    cutoff = time.time() - older_than.total_seconds()
    report = GcReport(dry_run=dry_run)
    known = list_versions(uri, storage_options)
    pinned = {t.version for t in list_tags(uri, storage_options)}  # a tag keeps its version, at any age
    retained = []
    for v in known:
        try:
            lv = read_version(uri, v, storage_options)
        except DamagedManifestError:
            continue  # an old damaged manifest names nothing usable; removed with the old ones
        if v == known[-1] or lv.created_at >= cutoff or v in pinned:
            retained.append(lv)
    report.retained = [lv.version for lv in retained]
    report.removed_versions = [v for v in known if v not in report.retained and v < known[-1]]

    if dry_run:  # a reader: no lease, nothing deleted
        _collect(uri, retained, cutoff, report, storage_options, own_writer="", delete=False)
        return report
    with lake.begin() as tx:
        tx.acquire()  # as a writer: nothing commits while versions go; dead writers' files go too
        _collect(uri, retained, cutoff, report, storage_options, own_writer=tx.writer_id, delete=True)
        fs = filesystem(manifest_uri(uri, 1), storage_options)
        for v in report.removed_versions:
            fs.rm_file(manifest_uri(uri, v))
        tx.abort()  # nothing to publish: releases the lease
    log.info("gc %s: %s", uri, report)
    return report


def _collect(
    uri: str,
    retained: list[LakeVersion],
    cutoff: float,
    report: GcReport,
    storage_options: dict[str, str] | None,
    *,
    own_writer: str,
    delete: bool,
) -> None:
    clones = dependents(uri, storage_options)
    for table in TABLES:
        ds = lance.dataset(table_uri(uri, table), storage_options=storage_options)
        needed = {lv.tables[table] for lv in retained if table in lv.tables} | {ds.version}
        needed |= {
            int(d["tables"][table]) for d in clones if table in d.get("tables", {})
        }  # lakes cloned from this one
        old = [
            int(v["version"]) for v in ds.versions() if int(v["version"]) not in needed and _ts(v["timestamp"]) < cutoff
        ]
        if not old:
            continue
        report.lance_versions[table] = old
        if delete:
            stats = ds.cleanup_old_versions(
                older_than=dt.timedelta(0), versions=old, error_if_tagged_old_versions=False
            )
            report.bytes_removed += int(stats.bytes_removed)
    others = [r for r in presence_records(uri, storage_options) if r.get("writer") != own_writer and not is_dead(r)]
    if others:
        report.skipped_orphans = f"{len(others)} other writer(s) are writing; their new files look like leftovers"
    else:
        report.orphan_files = remove_orphan_files(
            uri, storage_options, older_than=cutoff, tables=list(TABLES), dry_run=not delete
        )


def _ts(value: object) -> float:
    if isinstance(value, dt.datetime):
        return value.timestamp() if value.tzinfo is None else value.astimezone(dt.timezone.utc).timestamp()
    return float(value)  # type: ignore[arg-type]
