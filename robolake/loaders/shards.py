"""Open packed shards and check them before any batch is read.

A pack output is `shards.lance` (one row per packed sequence) plus `manifest.json` (lineage and
spec). `open_shards` reads the manifest, opens the shards at the Lance version the manifest
names, and checks the three things that otherwise fail late and obscurely inside a DataLoader
worker: every fragment's data file is present, the schema is the packed-row schema, and (when a
lake is given) the shards were packed from that lake at that version, which must still exist.

`PackedShards` is small and picklable: workers reopen the Lance dataset lazily in their own
process, and `read_rows` turns a missing or unreadable data file into an error that names the
shard and says to re-run `robolake pack`. Where it pays, `read_rows` reads whole blocks of rows
and keeps them (`blocks.BlockReads`: shards that fit `read_cache_bytes`, or a block-shuffled
order): on an object store a shuffled batch then costs no request of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake import Lake, list_versions, read_version, take_offsets
from robolake.loaders.blocks import READ_CACHE_BYTES, BlockReads, block_reads_for
from robolake.packers.manifest import SHARDS_NAME, LineageError, PackManifest, read_manifest
from robolake.schemas.packed import HISTORY_COLUMNS, packed_schema
from robolake.storage import ensure_within, exists, join_uri, normalize_uri

__all__ = ["PackedShards", "open_shards", "check_lineage", "check_not_stale", "stale_deletions"]

log = logging.getLogger(__name__)

_REPACK = "re-run `robolake pack` to rebuild them"


@dataclass(frozen=True, kw_only=True)
class PackedShards:
    """A validated pack output at one shards version.

    Attributes:
        root: The pack output directory (or object-store prefix).
        manifest: Its manifest (lineage, spec, counts).
        num_rows: Packed sequences in the shards.
        max_state_dim: Widest state vector in the shards.
        max_action_dim: Widest action vector in the shards.
        storage_options: Lance / fsspec storage options for object stores.
        read_cache_bytes: Memory (per process) for whole blocks of rows read and kept (see
            `blocks.block_reads_for`); 0 reads row by row.
        block_rows: Rows per block when the reader's order is a block shuffle of blocks of this
            many rows (`LoaderConfig.shuffle_block`): reads then follow those blocks; 0: the
            order is not block-local.
    """

    root: str
    manifest: PackManifest
    num_rows: int
    max_state_dim: int
    max_action_dim: int
    storage_options: dict[str, str] | None = None
    read_cache_bytes: int = READ_CACHE_BYTES
    block_rows: int = 0
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def uri(self) -> str:
        """URI of the `shards.lance` dataset."""
        return join_uri(self.root, SHARDS_NAME)

    @property
    def version(self) -> int:
        """Lance version of the shards the manifest names."""
        return self.manifest.shards_version

    @property
    def tokens_per_view(self) -> int:
        return self.manifest.pack_spec.tokens.tokens_per_view

    @property
    def horizon(self) -> int:
        return self.manifest.pack_spec.horizon

    def dataset(self) -> lance.LanceDataset:
        """The shards dataset at the manifest's version, opened once per process."""
        ds = self._cache.get("ds")
        if ds is None:
            ds = _open_lance(self.uri, self.version, self.storage_options)
            self._cache["ds"] = ds
        return ds

    def with_reads(self, *, read_cache_bytes: int, block_rows: int = 0) -> PackedShards:
        """These shards read with another block-read budget or block size (`LoaderConfig`'s
        `read_cache_bytes` and `shuffle_block`); nothing is reopened until the first read."""
        return replace(self, read_cache_bytes=read_cache_bytes, block_rows=block_rows, _cache={})

    def block_reads(self) -> BlockReads | None:
        """The shards' block reads in this process, or None where rows are read one take a batch."""
        if "reads" not in self._cache:
            self._cache["reads"] = block_reads_for(
                self.dataset(),
                max_bytes=self.read_cache_bytes,
                block_local=self.block_rows > 0,
                block_rows=self.block_rows or None,
            )
        reads: BlockReads | None = self._cache["reads"]
        return reads

    def read_rows(self, indices: Sequence[int] | np.ndarray, columns: list[str] | None = None) -> pa.Table:
        """Rows at `indices` (row positions, any order) in that order.

        Raises:
            FileNotFoundError: a data file of the shards is missing or unreadable.
        """
        idx = np.asarray(indices, dtype=np.int64)
        uniq, inverse = np.unique(idx, return_inverse=True)
        reads = self.block_reads()
        try:
            table = take_offsets(reads or self.dataset(), uniq, columns)
        except OSError as e:
            raise FileNotFoundError(
                f"packed shards {self.uri} cannot be read ({e}); a data file is missing or damaged: {_REPACK}"
            ) from e
        return table.take(pa.array(inverse))

    def __getstate__(self) -> dict[str, Any]:
        state = {k: getattr(self, k) for k in self.__dataclass_fields__}
        state["_cache"] = {}  # Lance handles do not cross processes; workers reopen
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)


def _open_lance(uri: str, version: int, storage_options: dict[str, str] | None) -> lance.LanceDataset:
    try:
        return lance.dataset(uri, version=version, storage_options=storage_options)
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"packed shards {uri} (version {version}) cannot be opened ({e}): {_REPACK}") from e


def _check_fragments(ds: lance.LanceDataset, uri: str, storage_options: dict[str, str] | None) -> None:
    for frag in ds.get_fragments():
        for data_file in frag.data_files():
            path = join_uri(uri, "data", data_file.path)
            if not exists(path, storage_options):
                raise FileNotFoundError(
                    f"packed shards {uri}: fragment {frag.fragment_id} is missing its data file {path}; {_REPACK}"
                )


def _check_schema(ds: lance.LanceDataset, uri: str) -> None:
    want = packed_schema()
    got = ds.schema
    diffs = []
    for f in want:
        idx = got.get_field_index(f.name)
        if idx < 0 and f.name in HISTORY_COLUMNS:
            continue  # packed before stream history existed: it has none
        if idx < 0:
            diffs.append(f"missing column {f.name!r} ({f.type})")
        elif not got.field(idx).type.equals(f.type):
            diffs.append(f"column {f.name!r} is {got.field(idx).type}, expected {f.type}")
    if diffs:
        raise ValueError(
            f"{uri} does not have the packed-shard schema: {'; '.join(diffs)}. It was written by another "
            f"tool or an incompatible robolake version: {_REPACK}"
        )


def check_lineage(
    manifest: PackManifest, lake: Lake | str, root: str = "", storage_options: dict[str, str] | None = None
) -> None:
    """Check that shards were packed from `lake` at the version it is opened at.

    Args:
        manifest: The shards' manifest.
        lake: A Lake (its URI and version must match) or a lake URI (its URI must match and the
            packed version must still exist).
        root: The pack output, for the message.
        storage_options: Options to list the lake's versions with, when `lake` is a URI.

    Raises:
        LineageError: another lake, another version, or the packed version no longer exists.
    """
    where = f"packed shards {root}" if root else "packed shards"
    uri = lake.uri if isinstance(lake, Lake) else normalize_uri(lake)
    opts = lake.storage_options if isinstance(lake, Lake) else storage_options
    if uri != manifest.lake_uri:
        raise LineageError(
            f"{where} were packed from lake {manifest.lake_uri}, not {uri}; pass that lake, or re-run "
            "`robolake pack` on this one"
        )
    if isinstance(lake, Lake) and lake.version != manifest.lake_version:
        raise LineageError(
            f"{where} were packed from lake version {manifest.lake_version}, but the lake given is at version "
            f"{lake.version}; open Lake.open({uri!r}, version={manifest.lake_version}) or re-run `robolake pack`"
        )
    if manifest.lake_version not in list_versions(uri, opts):
        raise LineageError(
            f"{where} were packed from lake {uri} version {manifest.lake_version}, which no longer exists; "
            "re-run `robolake pack` on a current version"
        )


def stale_deletions(shards: PackedShards) -> list[tuple[int, str, int]]:
    """Later lake versions that removed episodes these shards hold: [(version, reason, count)].

    Empty when nothing was deleted since (or when the lake cannot be reached: then nothing can
    be said, and a warning is logged).
    """
    m = shards.manifest
    opts = shards.storage_options
    try:
        versions = [v for v in list_versions(m.lake_uri, opts) if v > m.lake_version]
    except (OSError, ValueError) as e:
        log.warning(
            "packed shards %s: cannot reach lake %s to check for deleted episodes (%s)", shards.root, m.lake_uri, e
        )
        return []
    if not versions:
        return []
    held: set[str] | None = None
    out = []
    for v in versions:
        info = read_version(m.lake_uri, v, opts)
        removed = info.summary.get("removed") or []
        if not removed:
            continue
        if held is None:
            ids = _open_lance(join_uri(shards.root, SHARDS_NAME), m.shards_version, opts).to_table(
                columns=["episode_id"]
            )
            held = set(pc.list_flatten(ids["episode_id"]).unique().to_pylist())
        hit = held.intersection(removed)
        if hit:
            out.append((v, str(info.summary.get("reason") or info.operation), len(hit)))
    return out


def check_not_stale(shards: PackedShards, allow_stale: bool) -> None:
    """Refuse shards holding episodes a later lake version deleted, unless `allow_stale`.

    Raises:
        LineageError: naming the version(s), their reasons and how many episodes each removed.
    """
    stale = stale_deletions(shards)
    if not stale:
        return
    what = "; ".join(f"version {v} removed {n} of their episodes ({why})" for v, why, n in stale)
    if allow_stale:
        log.warning("packed shards %s are stale: %s (reading them anyway: allow_stale)", shards.root, what)
        return
    raise LineageError(
        f"packed shards {shards.root} hold episodes that lake {shards.manifest.lake_uri} has since deleted: {what}; "
        "re-run `robolake pack` on the current version, or pass --allow-stale to train on them anyway"
    )


def open_shards(
    root: str, *, lake: Lake | str | None = None, storage_options: dict[str, str] | None = None
) -> PackedShards:
    """Open and validate the pack output at `root`.

    Args:
        root: A directory or object-store prefix written by `robolake pack`.
        lake: If given, the lake the shards must come from (see `check_lineage`).
        storage_options: Lance / fsspec options for object stores.

    Raises:
        FileNotFoundError: no manifest (not a finished pack), or a missing shard data file.
        ValueError: the shards do not have the packed-row schema.
        LineageError: the shards do not belong to `lake` at its version.
    """
    root = normalize_uri(root)
    manifest = read_manifest(root, storage_options)
    if lake is not None:
        check_lineage(manifest, lake, root, storage_options)
    uri = join_uri(root, SHARDS_NAME)
    ensure_within(root, join_uri(uri, "data"))  # shards.lance (or its data) linked out of the pack: refused
    ds = _open_lance(uri, manifest.shards_version, storage_options)
    _check_schema(ds, uri)
    _check_fragments(ds, uri, storage_options)
    dims = ds.to_table(columns=["state_dims", "action_dims"])
    widest = [pc.max(pc.list_flatten(dims[c])).as_py() or 0 for c in ("state_dims", "action_dims")]
    return PackedShards(
        root=root,
        manifest=manifest,
        num_rows=ds.count_rows(),
        max_state_dim=int(widest[0]),
        max_action_dim=int(widest[1]),
        storage_options=dict(storage_options) if storage_options else None,
    )
