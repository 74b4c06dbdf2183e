"""Lake: a handle on a versioned set of Lance tables holding robot episodes.

The handle is small on purpose: it knows the lake's URI, the lake version it reads and the
storage options, and hands out Lance datasets, Arrow tables and Ray Datasets pinned to that
version. Writing goes through `LakeTransaction` (see `transaction.py`), ingest through
`robolake.lake.intake.ingest`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import lance
import pyarrow as pa

from robolake.lake.media.codecs import fidelity
from robolake.lake.media.frames import FrameReader
from robolake.lake.media.kept import TRIM_KEY, KeptSteps, kept_of
from robolake.lake.protocol.creation import clear_half_created
from robolake.lake.protocol.lease import Writer
from robolake.lake.protocol.tags import Tag, read_tag
from robolake.lake.protocol.transaction import LakeTransaction, table_uri
from robolake.lake.protocol.upgrade import upgrade
from robolake.lake.protocol.versions import (
    CommitConflictError,
    LakeVersion,
    list_versions,
    read_format_marker,
    read_version,
    upgrade_note,
    write_format_marker,
    write_version,
)
from robolake.lake.query import EpisodeFilter, sql_in, sql_quote
from robolake.lake.stats.episode_summary import episode_summaries, media_of, renditions_of, streams_of
from robolake.lake.stats.norm import NormStats
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.schemas.tables import TABLES, schema_for_table
from robolake.schemas.version import LAKE_FORMAT_VERSION, TABLES_ADDED
from robolake.storage import ensure_within, filesystem, join_uri, normalize_uri

if TYPE_CHECKING:
    import ray.data

__all__ = ["Lake"]

FilterLike = EpisodeFilter | str | None


class Lake:
    """A robolake lake at one version. Use `Lake.create` or `Lake.open`, not the constructor."""

    def __init__(
        self,
        uri: str,
        info: LakeVersion,
        storage_options: dict[str, str] | None = None,
        *,
        tag: Tag | None = None,
        format_version: int = LAKE_FORMAT_VERSION,
    ):
        self._uri = uri
        self._info = info
        self._format = format_version
        self._opts = dict(storage_options) if storage_options else None
        self._datasets: dict[str, lance.LanceDataset] = {}
        self._tag = tag
        self._summaries: dict[str, dict[str, Any]] | None = None

    # --- open / create ---------------------------------------------------------------------

    @classmethod
    def create(cls, uri: str, *, storage_options: dict[str, str] | None = None, exist_ok: bool = False) -> Lake:
        """Create an empty lake at `uri` (a local path or an object-store URI).

        Any number of processes may race to create the same lake: each table is created with
        Lance's create-if-absent, a table another creator made first is joined (its first version
        is the same empty table), and lake version 1 is published with put-if-absent, so exactly
        one creator publishes it and the others open it (or, without `exist_ok`, are told it
        exists). Nothing is ever overwritten, so a slow creator cannot wipe a table a faster one
        has already written to.

        Raises:
            FileExistsError: a lake already exists there and `exist_ok` is False.
        """
        uri = normalize_uri(uri)
        if list_versions(uri, storage_options):
            if exist_ok:
                return cls.open(uri, storage_options=storage_options)
            raise FileExistsError(f"a lake already exists at {uri}; open it with Lake.open({uri!r})")
        clear_half_created(uri, storage_options)  # what a killed select/merge --into left there
        if "://" not in uri:
            filesystem(uri).makedirs(uri, exist_ok=True)
        write_format_marker(uri, storage_options)
        versions = {name: _create_table(uri, name, storage_options) for name in TABLES}
        info = LakeVersion(version=1, tables=versions, operation="create", created_at=time.time())
        try:
            write_version(uri, info, storage_options)
        except CommitConflictError:
            if not exist_ok:
                raise FileExistsError(
                    f"a lake was created at {uri} at the same time; open it with Lake.open({uri!r})"
                ) from None
            return cls.open(uri, storage_options=storage_options)  # a concurrent create won; its tables are these
        return cls(uri, info, storage_options)

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        version: int | None = None,
        tag: str | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> Lake:
        """Open the lake at `uri`, at its latest version, at `version`, or at tag `tag`.

        A tag that keeps some episodes (a split, a selection) scopes every read of episodes,
        steps and media through this handle to them.

        Raises:
            FileNotFoundError: there is no lake at `uri`.
            UnsupportedLakeVersionError: the lake was written in a format this robolake cannot read.
            ValueError: `version` does not exist, or both `version` and `tag` were given.
            KeyError: `tag` does not exist.
        """
        uri = normalize_uri(uri)
        marker = read_format_marker(uri, storage_options)
        known = list_versions(uri, storage_options)
        if not known:
            raise FileNotFoundError(f"lake {uri} has no committed version; it was never fully created")
        resolved: Tag | None = None
        if tag is not None:
            if version is not None:
                raise ValueError(f"give a version or a tag, not both (version {version}, tag {tag!r})")
            resolved = read_tag(uri, tag, storage_options)
            version = resolved.version
        info = read_version(uri, known[-1] if version is None else version, storage_options)
        found = int(marker.get("format_version", LAKE_FORMAT_VERSION))
        return cls(uri, info, storage_options, tag=resolved, format_version=found)

    @classmethod
    def open_or_create(cls, uri: str, *, storage_options: dict[str, str] | None = None) -> Lake:
        return cls.create(uri, storage_options=storage_options, exist_ok=True)

    # --- versions --------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def version(self) -> int:
        return self._info.version

    @property
    def version_info(self) -> LakeVersion:
        return self._info

    @property
    def storage_options(self) -> dict[str, str] | None:
        return self._opts

    @property
    def tag(self) -> Tag | None:
        """The tag this handle was opened at, if any."""
        return self._tag

    @property
    def scope(self) -> tuple[str, ...] | None:
        """The episode ids this handle reads (a tag's subset), or None for every episode of the version."""
        return None if self._tag is None else self._tag.episodes

    def versions(self) -> list[LakeVersion]:
        """Every committed lake version, oldest first."""
        return [read_version(self._uri, v, self._opts) for v in list_versions(self._uri, self._opts)]

    def checkout(self, version: int | None = None, *, tag: str | None = None) -> Lake:
        """The same lake at another version or tag."""
        return Lake.open(self._uri, version=version, tag=tag, storage_options=self._opts)

    def refresh(self) -> Lake:
        """The same lake at its newest version."""
        return Lake.open(self._uri, storage_options=self._opts)

    def begin(self, writer: Writer | None = None) -> LakeTransaction:
        """Start a write against this version (it conflicts if another version is published first).

        Args:
            writer: This process's `Writer` on the lake (one is made for the transaction if None).
        """
        if self._format < LAKE_FORMAT_VERSION:
            upgrade(self._uri, storage_options=self._opts)  # every write touches the record's tables
            self._format = LAKE_FORMAT_VERSION
        return LakeTransaction(self._uri, self._info, self._opts, writer=writer)

    # --- reading ---------------------------------------------------------------------------

    @property
    def format_version(self) -> int:
        """The lake's on-disk format (`robolake.schemas.version`)."""
        return self._format

    def has_table(self, table: str) -> bool:
        """Whether the lake's format has `table` (a format-2 lake has no record of other sensors)."""
        return table in TABLES and self._format >= TABLES_ADDED.get(table, 0)

    def dataset(self, table: str) -> lance.LanceDataset:
        """The Lance dataset of `table` at this lake version (unscoped: read through `to_arrow`,
        or filter with `predicate(table, ...)`, to respect a tag's episode subset).

        Raises:
            KeyError: not a table of this lake (a format-2 lake has no `signals` or `events`:
                check `has_table`, or upgrade it with `robolake optimize LAKE --upgrade`).
        """
        if table not in TABLES:
            raise KeyError(f"unknown lake table {table!r}; the tables are {sorted(TABLES)}")
        if not self.has_table(table):
            raise KeyError(
                f"lake {self._uri} has format {self._format}, which has no {table!r} table; "
                f"upgrade it in place with `robolake optimize {self._uri} --upgrade`"
            )
        if table not in self._datasets:
            turi = table_uri(self._uri, table)
            ensure_within(self._uri, join_uri(turi, "data"))  # a table folder linked out of the lake is refused
            self._datasets[table] = lance.dataset(turi, version=self._info.tables[table], storage_options=self._opts)
        return self._datasets[table]

    def table_uri(self, table: str) -> str:
        return table_uri(self._uri, table)

    def count(self, table: str) -> int:
        if not self.has_table(table):
            return 0
        if self.scope is not None and table in ("episodes", "steps", "media"):
            return self.dataset(table).count_rows(filter=self.predicate(table, None))
        return self.dataset(table).count_rows()

    def predicate(self, table: str, where: FilterLike) -> str | None:
        """The Lance filter for `where` on `table` (an EpisodeFilter on steps/media resolves episode ids).

        A scoped handle (opened at a tag with an episode subset) adds its scope on episodes,
        steps and media.
        """
        own = self._unscoped_predicate(table, where)
        scope = self.scope
        if scope is None or table not in ("episodes", "steps", "media"):
            return own
        inside = sql_in("episode_id", scope)
        return inside if own is None else f"({inside}) AND ({own})"

    def _unscoped_predicate(self, table: str, where: FilterLike) -> str | None:
        if where is None or isinstance(where, str):
            return where
        if table == "episodes" or where.is_empty:
            return where.to_sql()
        if table not in ("steps", "media"):
            raise ValueError(f"an EpisodeFilter applies to episodes, steps and media, not {table!r}")
        if where.only_episode_ids:
            return sql_in("episode_id", where.episode_ids or ())
        return sql_in("episode_id", self.episode_ids(where))

    def to_arrow(self, table: str, *, columns: list[str] | None = None, where: FilterLike = None) -> pa.Table:
        """Read `table` (optionally some columns, filtered) as an Arrow table (empty for a table the
        lake's format lacks)."""
        if not self.has_table(table):
            schema = schema_for_table(table)
            return (schema if columns is None else pa.schema([schema.field(c) for c in columns])).empty_table()
        return self.dataset(table).to_table(columns=columns, filter=self.predicate(table, where))

    def to_ray(self, table: str, *, columns: list[str] | None = None, where: FilterLike = None) -> ray.data.Dataset:
        """`table` at this version as a Ray Dataset (read lazily, in parallel)."""
        import ray.data

        predicate = self.predicate(table, where)
        return ray.data.read_lance(
            self.table_uri(table),
            version=self._info.tables[table],
            columns=columns,
            # Lance's own SQL push-down (Ray's `filter=` argument is deprecated for this path)
            scanner_options=None if predicate is None else {"filter": predicate},
            storage_options=self._opts,
        )

    def episodes(self, where: FilterLike = None, columns: list[str] | None = None) -> pa.Table:
        return self.to_arrow("episodes", columns=columns, where=where)

    def episode_ids(self, where: FilterLike = None) -> list[str]:
        return self.episodes(where, columns=["episode_id"])["episode_id"].to_pylist()

    def content_hashes(self) -> set[str]:
        return set(self.episodes(columns=["content_hash"])["content_hash"].to_pylist())

    def embodiments(self) -> dict[str, EmbodimentSpec]:
        rows = self.to_arrow("embodiments", columns=["embodiment", "spec_json"]).to_pylist()
        return {r["embodiment"]: EmbodimentSpec.from_json(r["spec_json"]) for r in rows}

    def norm_stats(self, embodiment: str) -> NormStats:
        """Normalisation statistics of `embodiment`.

        Raises:
            KeyError: the lake has no such embodiment.
        """
        rows = self.to_arrow(
            "embodiments", columns=["stats_json"], where=f"embodiment = {sql_quote(embodiment)}"
        ).to_pylist()
        if not rows:
            raise KeyError(f"lake {self._uri} has no embodiment {embodiment!r}; it has {sorted(self.embodiments())}")
        return NormStats.from_json(rows[0]["stats_json"])

    def episode_summaries(self) -> dict[str, dict[str, Any]]:
        """Per embodiment, the counts `robolake info` shows of its episodes' metadata (streams,
        renditions, quality checks; `lake.stats.episode_summary`), read once per handle."""
        if self._summaries is None:
            self._summaries = episode_summaries(self)
        return self._summaries

    def frames(self) -> FrameReader:
        """Random access to single camera frames at this version."""
        tables = self.version_info.tables
        return FrameReader(
            self.dataset("media"),
            self.dataset("streams") if "streams" in tables else None,
            self.dataset("access") if "access" in tables else None,
            self.dataset("episodes"),
        )

    def trimmed(self, episode_ids: Sequence[str] | None = None) -> dict[str, KeptSteps]:
        """Episode id -> the original steps it keeps, for the episodes `robolake trim` trimmed.

        Only trimmed episodes' metadata is read (Lance filters the rest out), so an untrimmed lake
        costs one scan of the metadata column in Lance and no JSON parsing.
        """
        flt = self.predicate("episodes", f"metadata LIKE '%\"{TRIM_KEY}\":%'")
        rows = self.dataset("episodes").to_table(columns=["episode_id", "metadata"], filter=flt)
        want = None if episode_ids is None else set(episode_ids)
        out: dict[str, KeptSteps] = {}
        for eid, meta in zip(rows["episode_id"].to_pylist(), rows["metadata"].to_pylist(), strict=True):
            kept = kept_of(meta) if want is None or eid in want else None
            if kept is not None:
                out[eid] = kept
        return out

    def summary(self) -> dict[str, Any]:
        """Tables, row counts, versions, embodiments and quarantine reasons (what `robolake info` prints)."""
        quarantine = self.to_arrow("quarantine", columns=["reason_code"])["reason_code"].to_pylist()
        reasons: dict[str, int] = {}
        for r in quarantine:
            reasons[r] = reasons.get(r, 0) + 1
        emb = self.to_arrow("embodiments", columns=["embodiment", "num_episodes", "num_steps", "spec_json"]).to_pylist()
        streams, renditions = _record_summary(self)
        return {
            "uri": self._uri,
            "version": self.version,
            "num_versions": len(list_versions(self._uri, self._opts)),
            "tables": {
                t: {"rows": self.count(t), "lance_version": self._info.tables[t]} for t in TABLES if self.has_table(t)
            },
            "embodiments": {
                e["embodiment"]: {
                    "episodes": e["num_episodes"],
                    "steps": e["num_steps"],
                    "cameras": list(EmbodimentSpec.from_json(e["spec_json"]).cameras),
                    "streams": streams.get(e["embodiment"], []),
                    "steps_rendition": renditions.get(e["embodiment"], []),
                }
                for e in emb
            },
            "quarantine": reasons,
            "media": _media_summary(self),
        }

    def __repr__(self) -> str:
        at = f", tag={self._tag.name!r}" if self._tag is not None else ""
        return f"Lake({self._uri!r}, version={self.version}{at})"


_CREATE_TRIES = 40  # ~ 10 s of waiting for another creator's first table commit to become visible


def _create_table(lake_uri: str, name: str, storage_options: dict[str, str] | None) -> int:
    """Create lake table `name` empty (or join the one a concurrent creator made); returns the
    Lance version lake version 1 names: 1, the table's empty first commit, whoever made it.

    Raises:
        ValueError: a table is there that is not robolake's (another schema) or is not empty at
            its first version (the directory holds something else: pick a new lake URI).
        OSError: the table could not be created or read after retries (the store's error).
    """
    uri = table_uri(lake_uri, name)
    schema = schema_for_table(name)
    last: Exception | None = None
    for attempt in range(_CREATE_TRIES):
        try:
            ds = lance.write_dataset(
                pa.Table.from_pylist([], schema=schema),
                uri,
                schema=schema,
                mode="create",
                storage_options=storage_options,
            )
            return int(ds.version)
        except (OSError, ValueError) as e:
            if not _is_retryable_conflict(e):
                raise
            last = e
        try:  # another creator got there first (or is mid-commit): join its first version
            first = lance.dataset(uri, version=1, storage_options=storage_options)
        except (OSError, ValueError) as e:  # not visible yet
            last = e
            time.sleep(min(0.5, 0.02 * 2**attempt))
            continue
        if first.schema.remove_metadata() != schema.remove_metadata() or first.count_rows() != 0:
            raise ValueError(
                f"{uri} holds a Lance table that is not an empty robolake {name!r} table; "
                "create the lake at a new URI (or remove what is there)"
            )
        return 1
    raise OSError(f"could not create lake table {uri} after {_CREATE_TRIES} tries: {last}")


def _is_retryable_conflict(e: Exception) -> bool:
    """A Lance error another writer caused, that trying again (or joining its result) resolves."""
    text = str(e)
    return "already exists" in text or "Retryable commit conflict" in text or "preempted by concurrent" in text


def _record_summary(lake: Lake) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Per embodiment: every stream and event source of its episodes' records (kind, messages,
    median rate over episodes, gaps), and the distinct steps renditions (rate, rules), from the
    summaries kept with the embodiments (`lake.stats.episode_summary`)."""
    summaries = lake.episode_summaries()
    return (
        {tag: streams_of(s) for tag, s in summaries.items()},
        {tag: renditions_of(s) for tag, s in summaries.items()},
    )


def _media_summary(lake: Lake) -> dict[str, Any]:
    """What `robolake info` says about frames: rows per encoding and per fidelity, access copies."""
    encodings = media_of(lake.episode_summaries().values())  # kept per embodiment: no scan of the media
    by_fidelity: dict[str, int] = {}
    for enc, n in encodings.items():
        by_fidelity[fidelity(enc)] = by_fidelity.get(fidelity(enc), 0) + n
    return {
        "encodings": dict(sorted(encodings.items())),
        "fidelity": dict(sorted(by_fidelity.items())),
        "access_copy_rows": lake.count("access"),
        "record_streams": lake.count("streams"),
        "note": upgrade_note(lake.uri, lake.storage_options),
    }
