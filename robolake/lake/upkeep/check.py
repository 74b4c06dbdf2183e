"""`robolake check`: verify one lake version end to end and say in plain words what is wrong.

A published version is a promise: its manifest names a Lance version of every table, every data
file those versions reference exists and reads, the tables agree with each other (every step
and frame belongs to an episode of that version, each episode has exactly `num_steps` steps and
`num_steps x cameras` frames, no episode twice), and each embodiment has its statistics. This
module checks each of those and, for every problem, says what to do: usually to restore the
newest version that is intact (`robolake restore LAKE N`) and re-run the ingests after it. A
version is called intact only when it passes the same checks itself: a damaged data file is
usually shared with the versions before the one that failed, so a manifest that reads and files
that exist are not enough.

Data files are read, not only listed: every fragment's key column is scanned (a truncated
file fails there), the small tables entirely. That costs one pass over the key columns of
steps and media, far less than a pack. `quick=True` reads no data file of steps or media: each
file exists with the size its manifest records, and the tables' row totals (from fragment
metadata) agree with the episodes; only when they do not are rows counted per episode, to name
the episodes. Its cost follows the episodes table, not the 20M rows of a DROID-sized lake.

The record of every other stream (`signals`, `events`) is checked against what each episode's
metadata says of it, stream by stream: message counts, chunks 0..n-1, stamps per chunk, bytes
per field, and the rate and gaps its stamps give (`_record_check`; `quick=True` compares a sample
of episodes, without their value bytes, and says so in a note: every episode's record is what
made the quick check follow the lake's size). A lake of a format before those tables has nothing
there to check.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.media.kept import TRIM_KEY, KeptSteps, kept_of
from robolake.lake.protocol.creation import half_created
from robolake.lake.protocol.lease import is_dead, lease_records, presence_records
from robolake.lake.protocol.transaction import table_uri
from robolake.lake.protocol.versions import (
    META_DIR,
    DamagedManifestError,
    LakeVersion,
    last_good_version,
    list_versions,
    read_format_marker,
    read_version,
)
from robolake.lake.query import sql_in
from robolake.lake.stats.episode_summary import SUMMARY_COLUMNS, stored_summary, summarize
from robolake.lake.upkeep._record_check import check_record, expected_streams, sample_episodes
from robolake.schemas.tables import TABLES
from robolake.schemas.version import LAKE_FORMAT_VERSION, TABLES_ADDED
from robolake.storage import OutsideRootError, ensure_within, filesystem, join_uri, normalize_uri

__all__ = ["CheckReport", "DataFileRef", "Problem", "check_lake", "data_files", "missing_files"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One thing wrong with a lake version.

    Attributes:
        what: What is wrong, naming the table, file or episode.
        fix: What to do about it.
    """

    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what}. {self.fix}"


@dataclass(kw_only=True)
class CheckReport:
    """What `check_lake` found.

    Attributes:
        lake_uri: The lake.
        version: The version checked (None if no version could be read).
        problems: Everything wrong; empty when the version is sound.
        notes: Things worth knowing that are not wrong (a dead writer's lease, leftovers).
        counts: Rows per table in the checked version.
    """

    lake_uri: str
    version: int | None
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


class DataFileRef(NamedTuple):
    """One data file a table version references: where it lives, the base path it belongs to (None
    for the table's own `data/`), and its size in bytes as the manifest records it (0: not recorded)."""

    path: str
    base: str | None
    size: int


def data_files(turi: str, ds: lance.LanceDataset) -> list[DataFileRef]:
    """Every data file of `ds`.

    A shallow clone's tables reference their source's files through a Lance *base path* (a data
    file's `base_id`): those live under the source table, not under the clone's `data/`.
    """
    bases: dict[int, Any] | None = None  # read once, and only for a table that has borrowed files
    out: list[DataFileRef] = []
    for frag in ds.get_fragments():
        for df in frag.metadata.files:
            size = int(getattr(df, "file_size_bytes", None) or 0)
            if df.base_id is None:
                out.append(DataFileRef(join_uri(turi, "data", df.path), None, size))
                continue
            bases = ds.base_paths() if bases is None else bases
            base = bases.get(df.base_id)
            if base is None:
                out.append(DataFileRef(join_uri(turi, "data", f"<unknown base {df.base_id}>", df.path), "?", size))
                continue
            root = normalize_uri(base.path)
            where = join_uri(root, "data", df.path) if base.is_dataset_root else join_uri(root, df.path)
            out.append(DataFileRef(where, root, size))
    return out


def _file_size(fs: Any, path: str) -> int | None:
    """The size of `path` in bytes, None when it does not exist."""
    try:
        return int(fs.info(path)["size"])
    except FileNotFoundError:
        return None


def missing_files(lake_uri: str, lv: LakeVersion, storage_options: dict[str, str] | None = None) -> list[str]:
    """Data files the tables of `lv` reference that do not exist (a cheap, listing-only check)."""
    out = []
    for table, version in sorted(lv.tables.items()):
        uri = table_uri(lake_uri, table)
        fs = filesystem(uri, storage_options)
        ds = lance.dataset(uri, version=version, storage_options=storage_options)
        out += [f.path for f in data_files(uri, ds) if not fs.exists(f.path)]
    return out


def _outside(lake_uri: str, turi: str, files: list[DataFileRef]) -> str | None:
    """Where the table folder or one of its own data files leads outside the lake (a symlink), or None."""
    for path in [turi, join_uri(turi, "data")] + [f.path for f in files if f.base is None]:
        try:
            ensure_within(lake_uri, path)
        except OutsideRootError as e:
            return str(e)
    return None


_META_FOLDERS = ("versions", "tags", "dependents", "lease", "writers")


def _meta_outside(lake_uri: str) -> str | None:
    """Where `_robolake/`, one of its folders, or a record in them (manifest, tag, dependents, lease or
    presence record) leads outside the lake (a symlink), or None. Object stores have no links
    (`ensure_within` passes them)."""
    meta = join_uri(lake_uri, META_DIR)
    paths = [meta] + [join_uri(meta, f) for f in _META_FOLDERS] + [join_uri(meta, "lake.json")]
    try:
        for path in paths:
            ensure_within(lake_uri, path)
        if "://" not in meta:
            for folder in _META_FOLDERS:
                d = join_uri(meta, folder)
                names = sorted(os.listdir(d)) if os.path.isdir(d) else []
                for name in names:
                    ensure_within(lake_uri, join_uri(d, name))
    except OutsideRootError as e:
        return str(e)
    return None


def _restore_advice(lake_uri: str, below: int, storage_options: dict[str, str] | None, quick: bool) -> str:
    """Which earlier version checks clean, by the same checks as this one, and how to go back to it.

    A version is recommended only if it passes `check` itself: its manifest reading and its
    files existing is not enough, since a damaged data file is usually shared with the versions
    before the one that first failed (an append keeps the older fragments).
    """
    for v in reversed([v for v in list_versions(lake_uri, storage_options) if v < below]):
        try:
            clean = _check(lake_uri, v, storage_options, quick=quick, advise=False).ok
        except Exception:  # an older version that cannot even be checked: look further back
            clean = False
        if clean:
            how = (
                ""
                if not quick
                else " (by the --quick checks; run `robolake check` without --quick to read its files too)"
            )
            return (
                f"the lake is intact at version {v}{how}: `robolake restore {lake_uri} {v}` publishes it as the "
                "newest version; then re-run the ingests made after it"
            )
    return "no earlier version is intact; re-create the lake from its sources"


def _scan(ds: lance.LanceDataset, table: str) -> None:
    """Read every fragment (the key column of the big tables, everything of the small ones)."""
    columns = ["episode_id"] if table in ("steps", "media") else None
    for frag in ds.get_fragments():
        frag.to_table(columns=columns)


def check_lake(
    uri: str,
    version: int | None = None,
    storage_options: dict[str, str] | None = None,
    *,
    quick: bool = False,
) -> CheckReport:
    """Check lake version `version` (the newest if None) of the lake at `uri`.

    Never raises for a damaged lake: every problem is in the report. Where it advises restoring
    an earlier version, that version passes these same checks.
    """
    return _check(normalize_uri(uri), version, storage_options, quick=quick, advise=True)


def _check(
    uri: str, version: int | None, storage_options: dict[str, str] | None, *, quick: bool, advise: bool
) -> CheckReport:
    """`check_lake`; with `advise=False` (checking a candidate to restore) no restore advice is
    searched for and no notes on writers are taken."""
    report = CheckReport(lake_uri=uri, version=version)
    cached: list[str] = []

    def advice() -> str:
        if not advise:
            return "(not searched)"
        if not cached:
            cached.append(_restore_advice(uri, target, storage_options, quick))
        return cached[0]

    linked = _meta_outside(uri)
    if linked is not None:
        report.problems.append(
            Problem(
                what=f"the lake's own records are linked outside it: {linked}",
                fix="nothing of another folder is read as this lake's; put the lake's own folder or file back "
                "(from a copy) in place of the link",
            )
        )
        return report
    making = half_created(uri, storage_options)
    if making is not None:
        op = making.get("operation") or "select --into / merge"
        report.problems.append(
            Problem(
                what=f"lake {uri} is half-created: `robolake {op}` was stopped before it published it",
                fix=f"run that command again (it clears the half-made target first), or `robolake gc {uri}` "
                "to remove it",
            )
        )
        return report
    try:
        lake_format = int(read_format_marker(uri, storage_options).get("format_version", LAKE_FORMAT_VERSION))
    except Exception as e:
        report.problems.append(Problem(what=str(e), fix="point robolake at the lake's root directory"))
        return report
    known = list_versions(uri, storage_options)
    if not known:
        report.problems.append(
            Problem(
                what=f"lake {uri} has no published version (its creation was interrupted)",
                fix=f"re-create it: `robolake ingest SRC {uri}` creates it again",
            )
        )
        return report
    target = known[-1] if version is None else version
    report.version = target
    try:
        lv = read_version(uri, target, storage_options)
    except DamagedManifestError as e:
        report.problems.append(Problem(what=f"version {target}'s manifest {e.path} is damaged", fix=advice()))
        return report
    except ValueError as e:
        report.problems.append(Problem(what=str(e), fix="pick one of the versions listed"))
        return report
    for v in known if advise else ():
        if v < target:
            try:
                read_version(uri, v, storage_options)
            except DamagedManifestError as e:
                report.notes.append(f"older version {v}'s manifest {e.path} is damaged (it cannot be restored)")

    datasets = _open_tables(uri, lv, storage_options, report, quick, advice, lake_format)
    if report.problems:
        return report
    try:
        _check_consistency(uri, datasets, report, quick)
        _check_record(uri, datasets, report, quick)
    except Exception as e:  # a key column that does not read: a damaged file the quick check did not open
        report.problems.append(
            Problem(
                what=f"version {lv.version}'s tables cannot be read ({type(e).__name__}: {str(e)[:200]})", fix=advice()
            )
        )
        return report
    if advise:
        _check_writers(uri, lv, storage_options, datasets, report)
    return report


def _open_tables(
    uri: str,
    lv: LakeVersion,
    opts: dict[str, str] | None,
    report: CheckReport,
    quick: bool,
    advice: Callable[[], str],
    lake_format: int,
) -> dict[str, lance.LanceDataset]:
    datasets = {}
    for table in TABLES:
        if TABLES_ADDED.get(table, 0) > lake_format:
            continue  # a table of a later format than this lake's (it reads as absent)
        if table not in lv.tables:
            report.problems.append(
                Problem(what=f"version {lv.version} names no version of table {table}", fix=advice())
            )
            continue
        turi = table_uri(uri, table)
        try:
            ds = lance.dataset(turi, version=lv.tables[table], storage_options=opts)
        except Exception as e:
            report.problems.append(
                Problem(
                    what=f"table {table} cannot be opened at Lance version {lv.tables[table]} "
                    f"({type(e).__name__}: {str(e)[:200]})",
                    fix=advice(),
                )
            )
            continue
        fs = filesystem(turi, opts)
        files = data_files(turi, ds)
        leak = _outside(uri, turi, files)
        if leak is not None:
            report.problems.append(
                Problem(
                    what=f"table {table} of version {lv.version} reads files outside the lake: {leak}",
                    fix="a lake holds its own files (or a clone's source's): remove the link and restore the "
                    "real files, or re-create the lake from its sources",
                )
            )
            continue
        sizes = [_file_size(fs, f.path) for f in files]
        missing = [f.path for f, size in zip(files, sizes, strict=True) if size is None]
        if missing:
            report.problems.append(
                Problem(
                    what=f"table {table} of version {lv.version} references {len(missing)} data file(s) that do not "
                    f"exist (first: {missing[0]})",
                    fix=advice(),
                )
            )
            continue
        # A file cut short (a copy or upload that stopped) is found by its size, which the manifest
        # records, without reading it: --quick reads no data file.
        short = [(f, size) for f, size in zip(files, sizes, strict=True) if f.size and size != f.size]
        if short:
            f, size = short[0]
            report.problems.append(
                Problem(
                    what=f"table {table} of version {lv.version} has {len(short)} data file(s) whose size is not the "
                    f"one its manifest records (first: {f.path}, {size} bytes, recorded {f.size})",
                    fix=advice(),
                )
            )
            continue
        borrowed = sorted({f.base for f in files if f.base is not None})
        if borrowed:
            report.notes.append(f"table {table} is a shallow clone: it reads data files of {', '.join(borrowed)}")
        if not quick:
            try:
                _scan(ds, table)
            except Exception as e:
                report.problems.append(
                    Problem(
                        what=f"table {table} of version {lv.version} has an unreadable data file "
                        f"({type(e).__name__}: {str(e)[:200]})",
                        fix=advice(),
                    )
                )
                continue
        datasets[table] = ds
        report.counts[table] = ds.count_rows()
    return datasets


def _kept(metadata: str | None) -> KeptSteps | str | None:
    try:
        return kept_of(metadata)
    except (ValueError, KeyError, TypeError) as e:
        return f"its metadata `trim` is unreadable ({e})"


def _counts(values: pa.ChunkedArray) -> dict[str, int]:
    """value -> how many times it occurs (Arrow's hash count: no Python object per row)."""
    vc = pc.value_counts(values).flatten()
    return dict(zip(vc[0].to_pylist(), vc[1].to_pylist(), strict=True))


def _repeated(values: pa.ChunkedArray) -> list[Any]:
    """The values that occur more than once (only those become Python objects: 100k ids did)."""
    vc = pc.value_counts(values).flatten()
    return pc.filter(vc[0], pc.greater(vc[1], 1)).to_pylist()


def _rows_per_episode(values: pa.ChunkedArray, ids: pa.Array) -> tuple[np.ndarray, list[str]]:
    """(rows per episode of `ids` [len(ids)], sorted ids of rows that belong to no episode of `ids`).

    Counted by Arrow over the key column, then matched to the episodes by position, so the cost is
    a pass over the column rather than a Python object per row (`check --quick` on 100k episodes)."""
    vc = pc.value_counts(values).flatten()
    keys, counts = vc[0], np.asarray(vc[1].to_numpy(zero_copy_only=False), dtype=np.int64)
    pos = pc.index_in(keys, value_set=ids)
    known = np.asarray(pos.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    have = np.zeros(len(ids), dtype=np.int64)
    have[np.asarray(pos.drop_null().to_numpy(zero_copy_only=False), dtype=np.int64)] = counts[known]
    foreign = sorted(str(k) for k, ok in zip(keys.to_pylist(), known.tolist(), strict=True) if not ok)
    return have, foreign


def _redo(uri: str) -> str:
    return f"restore the version before the ingest that wrote them (`robolake info {uri} --json` lists the versions)"


def _totals_agree(ds: dict[str, lance.LanceDataset], num_steps: np.ndarray, cameras: np.ndarray) -> bool:
    """Whether the steps and media tables hold as many rows as the episodes say, counted from the
    tables' fragment metadata (no key column read): `check --quick`'s test, so that its cost
    follows the episodes table and not the 20M rows of a DROID-sized lake. Totals that agree can
    hide an episode one row short beside another one long; the full check counts per episode. A
    lake with trimmed episodes (whose frames are not num_steps x cameras) disagrees here and is
    counted per episode."""
    return ds["steps"].count_rows() == int(num_steps.sum()) and ds["media"].count_rows() == int(
        (num_steps * cameras).sum()
    )


def _check_rows_per_episode(
    uri: str,
    ds: dict[str, lance.LanceDataset],
    eps: pa.Table,
    num_steps: np.ndarray,
    cameras: np.ndarray,
    report: CheckReport,
    quick: bool,
) -> None:
    """Each episode's steps and media rows, counted over the tables' key columns, against what it says."""
    redo = _redo(uri)
    ids = eps.column("episode_id").combine_chunks()
    id_list = ids.to_pylist()
    media_rows, media_foreign = _rows_per_episode(
        ds["media"].to_table(columns=["episode_id"]).column("episode_id"), ids
    )
    # A trimmed episode keeps its frames (the trim maps its steps onto them), so its media rows are
    # not num_steps x cameras. The full check reads every trimmed episode's map (a scan of the
    # metadata column); --quick reads only the maps of episodes whose media rows disagree.
    trim = f"metadata LIKE '%\"{TRIM_KEY}\":%'"
    if quick:
        odd = [id_list[i] for i in np.flatnonzero(media_rows != num_steps * cameras)]
        trim = f"{sql_in('episode_id', odd)} AND {trim}"
    trimmed = ds["episodes"].to_table(columns=["episode_id", "metadata"], filter=trim)
    frames = num_steps.copy()  # media rows per camera: the steps ingest wrote
    row_of = {e: i for i, e in enumerate(id_list)} if trimmed.num_rows else {}  # a duplicated id's last row
    for eid, meta in zip(trimmed["episode_id"].to_pylist(), trimmed["metadata"].to_pylist(), strict=True):
        kept = _kept(meta)
        if kept is None:
            continue
        n = int(num_steps[row_of[eid]])
        if isinstance(kept, str) or kept.num_steps != n:
            why = kept if isinstance(kept, str) else f"it maps {kept.num_steps} steps, the episode has {n}"
            report.problems.append(
                Problem(
                    what=f"episode {eid}'s trimmed steps do not add up: {why}",
                    fix=f"restore the version before the trim (`robolake info {uri} --json` lists the versions)",
                )
            )
            continue
        frames[row_of[eid]] = kept.frames
    steps_rows = _rows_per_episode(ds["steps"].to_table(columns=["episode_id"]).column("episode_id"), ids)
    for table, expected, (have, foreign) in (
        ("steps", num_steps, steps_rows),
        ("media", frames * cameras, (media_rows, media_foreign)),
    ):
        if foreign:
            report.problems.append(
                Problem(
                    what=f"table {table} holds rows of {len(foreign)} episodes the episodes table does not list "
                    f"(first: {foreign[0]})",
                    fix=redo,
                )
            )
        wrong = np.flatnonzero(have != expected)
        if wrong.size:
            i = int(wrong[0])
            report.problems.append(
                Problem(
                    what=f"{wrong.size} episodes have the wrong number of {table} rows "
                    f"(first: {id_list[i]} has {have[i]}, expected {expected[i]})",
                    fix=redo,
                )
            )


def _check_consistency(uri: str, ds: dict[str, lance.LanceDataset], report: CheckReport, quick: bool) -> None:
    eps = ds["episodes"].to_table(columns=["episode_id", "embodiment", "num_steps", "cameras", "content_hash"])
    redo = _redo(uri)
    dup = _repeated(eps.column("episode_id"))
    if dup:
        report.problems.append(
            Problem(what=f"{len(dup)} episode ids appear more than once in episodes (first: {dup[0]})", fix=redo)
        )
    dup_hash = _repeated(eps.column("content_hash"))
    if dup_hash:
        report.problems.append(Problem(what=f"{len(dup_hash)} episodes are stored twice (same content hash)", fix=redo))
    num_steps = np.asarray(eps.column("num_steps").to_numpy(), dtype=np.int64)
    cameras = np.asarray(pc.fill_null(pc.list_value_length(eps.column("cameras")), 0).to_numpy(), dtype=np.int64)
    if not (quick and _totals_agree(ds, num_steps, cameras)):
        _check_rows_per_episode(uri, ds, eps, num_steps, cameras, report, quick)
    emb = {r["embodiment"]: r for r in ds["embodiments"].to_table().to_pylist()}
    per_tag = _counts(eps.column("embodiment"))
    for tag, n in sorted(per_tag.items()):
        row = emb.get(tag)
        if row is None or not row.get("stats_json"):
            report.problems.append(
                Problem(
                    what=f"embodiment {tag} has episodes but no statistics",
                    fix=f"re-ingest one of its datasets into {uri} or restore an earlier version",
                )
            )
            continue
        if int(row["num_episodes"]) != n:
            report.problems.append(
                Problem(
                    what=f"embodiment {tag} records {row['num_episodes']} episodes but the episodes table has {n}",
                    fix=redo,
                )
            )
    if not quick:  # the counts `robolake info` reads, against a recount (every episode's metadata)
        _check_summaries(uri, ds, emb, report)


def _check_summaries(
    uri: str, ds: dict[str, lance.LanceDataset], emb: dict[str, dict[str, Any]], report: CheckReport
) -> None:
    """Each embodiment's stored summary (`lake.stats.episode_summary`) equals a recount from its
    episodes and media rows; an embodiment without one is fine (`info` counts it)."""
    stored = {t: s for t, r in emb.items() if (s := stored_summary(r.get("stats_json"))) is not None}
    if not stored:
        return
    rows = ds["episodes"].to_table(columns=SUMMARY_COLUMNS).to_pylist()
    recount = summarize(rows, ds["media"].to_table(columns=["episode_id", "encoding"]))
    for tag, s in sorted(stored.items()):
        if recount.get(tag) != s:
            report.problems.append(
                Problem(
                    what=f"embodiment {tag}'s kept counts (the streams, quality and media `robolake info` shows) "
                    "disagree with its episodes",
                    fix=f"`robolake doctor {uri} --update` counts them again from the episodes",
                )
            )


_RECORD_SHOWN = 10  # record problems listed one by one; the rest are counted


def _check_record(uri: str, ds: dict[str, lance.LanceDataset], report: CheckReport, quick: bool) -> None:
    """The record's rows against each episode's metadata, one problem per episode and stream."""
    if "signals" not in ds or "events" not in ds:
        return
    if quick:  # a sample: the full comparison reads every signal of every episode (module essay of _record_check)
        expected, total = sample_episodes(ds["episodes"])
        if len(expected) < total:
            report.notes.append(
                f"--quick compared the record (signals and events) of {len(expected)} of {total:,} episodes, spread "
                "over the lake; run `robolake check` without --quick to compare every episode's"
            )
    else:
        expected = expected_streams(ds["episodes"])
    found = check_record(ds["signals"], ds["events"], expected, read_data=not quick, sampled=quick)
    redo = (
        f"restore the version before the ingest that wrote it (`robolake info {uri} --json` lists the versions), "
        "or delete the episode and ingest its source again"
    )
    for table, ids in sorted(found.foreign.items()):
        report.problems.append(
            Problem(
                what=f"table {table} holds rows of {len(ids)} episodes the episodes table does not list "
                f"(first: {ids[0]})",
                fix=redo,
            )
        )
    for what in found.issues[:_RECORD_SHOWN]:
        report.problems.append(Problem(what=f"the record of {what}", fix=redo))
    if found.total > _RECORD_SHOWN:
        report.problems.append(
            Problem(
                what=f"and {found.total - _RECORD_SHOWN} more problems with the record (signals and events) of "
                "these or other episodes",
                fix=redo,
            )
        )


def _check_writers(
    uri: str, lv: LakeVersion, opts: dict[str, str] | None, ds: dict[str, lance.LanceDataset], report: CheckReport
) -> None:
    """Notes on writers: a lease or presence record of a dead one, unpublished table commits."""
    if lv.version != list_versions(uri, opts)[-1]:
        return
    records = lease_records(uri, opts)
    if records and records[-1].state == "held":
        rec = records[-1]
        state = "a writer that is gone" if is_dead(_as_dict(rec)) else "a live writer"
        report.notes.append(f"the write lease is held by {state}: {rec.describe()}")
    dead = [r for r in presence_records(uri, opts) if is_dead(r)]
    if dead:
        report.notes.append(
            f"{len(dead)} writer(s) died while writing; the next write (or `robolake gc`) removes their files"
        )
    for table, d in ds.items():
        latest = lance.dataset(table_uri(uri, table), storage_options=opts).version
        if latest != d.version:
            report.notes.append(
                f"table {table} has commits after version {lv.version} names (Lance {d.version}..{latest}): an "
                "unpublished write in progress or from a writer that died; readers never see them and the next "
                "writer rolls them back"
            )
    if last_good_version(uri, None, opts) != list_versions(uri, opts)[-1]:
        report.notes.append("the newest manifest is damaged")


def _as_dict(rec: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(rec)
