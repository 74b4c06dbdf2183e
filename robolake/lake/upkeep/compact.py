"""Compaction: merge a lake's small fragments and rebuild its indexes (`robolake optimize`).

Every ingest appends its own fragments, and every deletion leaves a deletion file, so a lake fed
by many small ingests ends up as thousands of small files: each random read or scan then opens
more files than it needs. `optimize` rewrites each table's adjacent small fragments into files
of a target size (Lance `compact_files`, deleted rows dropped, scalar indexes remapped in the
same commit) and merges the `episode_id` index segments, all in one `LakeTransaction`, so
readers see the old layout or the new one and every earlier version still opens until `gc`.

The target size is per table: metadata tables target a million rows a file; the media table
targets about 256 MiB of frames a file (estimated from its current rows), so a file stays a
sensible unit for object stores. Ingest compacts on its own, inside its own transaction, when a
table holds more than `DEFAULT_MAX_FRAGMENTS` fragments (`needs_compaction`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import lance

from robolake.lake.protocol.transaction import EPISODE_TABLES, LakeTransaction
from robolake.lake.protocol.versions import who

if TYPE_CHECKING:
    from robolake.lake.lake import Lake

__all__ = ["OptimizeReport", "compact_in", "needs_compaction", "optimize", "DEFAULT_MAX_FRAGMENTS"]

log = logging.getLogger(__name__)

DEFAULT_MAX_FRAGMENTS = 64
_MEDIA_FILE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class OptimizeReport:
    """What `optimize` did: the new version and, per table, fragments before and after."""

    version: int | None
    fragments: dict[str, tuple[int, int]] = field(default_factory=dict)


class _Tables(Protocol):
    """A lake at a version, or a transaction's view of one: both hand out table datasets."""

    def dataset(self, table: str) -> lance.LanceDataset: ...

    def has_table(self, table: str) -> bool: ...


def _fragments(lake: _Tables) -> dict[str, int]:
    return {t: len(lake.dataset(t).get_fragments()) for t in (*EPISODE_TABLES, "quarantine") if lake.has_table(t)}


def needs_compaction(lake: _Tables, max_fragments: int = DEFAULT_MAX_FRAGMENTS) -> bool:
    """Whether a table of `lake` (a Lake or a LakeTransaction) holds more than `max_fragments` fragments."""
    return any(n > max_fragments for n in _fragments(lake).values())


def _media_rows_per_file(lake: _Tables, table: str = "media") -> int:
    ds = lake.dataset(table)
    rows = ds.count_rows()
    if rows == 0:
        return 1 << 20
    stored = sum(df.file_size_bytes or 0 for f in ds.get_fragments() for df in f.data_files()) or 1
    per_row = max(1, stored // rows)
    return max(1024, _MEDIA_FILE_BYTES // per_row)


def compact_in(tx: LakeTransaction) -> dict[str, dict[str, int]]:
    """Compact every table with more than one fragment, as part of `tx` (what it holds so far);
    returns Lance's counts per table compacted."""
    before = _fragments(tx)
    targets = {
        "episodes": 1 << 20,
        "steps": 1 << 20,
        "quarantine": 1 << 20,
        "media": _media_rows_per_file(tx),
        "streams": 1 << 16,
        "access": _media_rows_per_file(tx, "access"),
        "signals": _media_rows_per_file(tx, "signals"),  # rows are chunks of up to 64k messages: size by bytes
        "events": 1 << 20,
    }
    tx.index_episodes(merge_all=True)  # Lance compacts only fragments one index segment covers
    done = {}
    for table, n in sorted(before.items()):
        if n > 1:
            done[table] = tx.compact(table, target_rows_per_fragment=targets[table])
    tx.index_episodes()
    return done


def optimize(lake: Lake | str, *, storage_options: dict[str, str] | None = None) -> OptimizeReport:
    """Compact every table of the lake's newest version and rebuild its indexes (one new version).

    Returns a report with version None when every table is already one fragment (nothing to do).
    """
    from robolake.lake.lake import Lake

    lake = (lake if isinstance(lake, Lake) else Lake.open(lake, storage_options=storage_options)).refresh()
    before = _fragments(lake)
    if all(n <= 1 for n in before.values()):
        return OptimizeReport(version=None, fragments={t: (n, n) for t, n in before.items()})
    with lake.begin() as tx:
        done: Any = compact_in(tx)
        lv = tx.commit("optimize", {"who": who(), "compacted": done, "fragments_before": before})
    after = _fragments(lake.checkout(lv.version))
    log.info("lake %s: optimize published version %d (%s)", lake.uri, lv.version, after)
    return OptimizeReport(version=lv.version, fragments={t: (before[t], after[t]) for t in before})
