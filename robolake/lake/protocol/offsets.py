"""Row addresses -> row offsets, correct when rows were deleted.

Lance names a row two ways. Its *address* (`_rowid` / `_rowaddr` of a scan: fragment id << 32 |
position in the fragment's file) never changes; its *offset* (what `LanceDataset.take` accepts)
counts only the rows that are still there, across fragments in order. Before any deletion the
offset is the fragment's first offset plus the position; after `robolake delete` (a deletion
file per touched fragment) every row after a deleted one in the same fragment moves down, so
that arithmetic would hand back another episode's frames.

`row_offsets` maps addresses to offsets for any version: fragments with no deletion file by
arithmetic, fragments with one by the rank of the position among the positions still present
(one scan of that fragment's row addresses, no data columns, cached per fragment and deletion
file). Readers that compute offsets (the frame reader, the pack sample index) go through it.

Rows are then read by `take_offsets`, not `LanceDataset.take`: the
dataset's take maps every call's offsets through the deletion files anew, and on the 100k-episode
lake (49 fragments of 400k media rows, two with a deletion file) 64 scattered rows cost 110 ms
where they fell in a fragment with deletions and 5-20 ms elsewhere. Split by fragment (the
fragments' first offsets kept per table version) and read with each fragment's own take, the
same rows cost about 1 ms a fragment.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Protocol

import lance
import numpy as np
import pyarrow as pa

__all__ = ["row_offsets", "take_offsets"]


_CACHE: dict[tuple[str, int, str], np.ndarray] = {}
_CACHE_MAX = 256


def _present(frag: lance.LanceFragment, uri: str, deletion: str) -> np.ndarray:
    """Sorted positions still present in a fragment with deletions (cached by its deletion file)."""
    key = (uri, frag.fragment_id, deletion)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        addr = frag.to_table(columns=[], with_row_address=True).column("_rowaddr").to_numpy()
        _CACHE[key] = np.sort((addr & 0xFFFFFFFF).astype(np.int64))
    return _CACHE[key]


def row_offsets(ds: lance.LanceDataset, row_addresses: np.ndarray) -> np.ndarray:
    """Offsets (for `ds.take`) of rows named by their addresses (`with_row_id=True` scans)."""
    addr = np.asarray(row_addresses, dtype=np.uint64)
    frag_of = (addr >> np.uint64(32)).astype(np.int64)
    pos = (addr & np.uint64(0xFFFFFFFF)).astype(np.int64)
    out = np.empty(len(addr), dtype=np.int64)
    total = 0
    seen = np.zeros(len(addr), dtype=bool)
    for f in ds.get_fragments():
        mine = frag_of == f.fragment_id
        deletion = f.metadata.deletion_file
        if mine.any():
            if deletion is None:
                out[mine] = total + pos[mine]
            else:
                present = _present(f, ds.uri, str(deletion))
                rank = np.searchsorted(present, pos[mine])
                if np.any(rank >= len(present)) or np.any(present[np.minimum(rank, len(present) - 1)] != pos[mine]):
                    raise KeyError(f"{ds.uri}: a row address names a deleted row of fragment {f.fragment_id}")
                out[mine] = total + rank
            seen |= mine
        total += f.count_rows()
    if not seen.all():
        raise KeyError(f"{ds.uri}: row addresses name fragments this version does not hold")
    return out


# Per dataset object (a handle is one manifest for its life): a (uri, version) key would outlive
# a table written again from scratch at the same path, whose version numbers start over.
_FRAGMENTS: weakref.WeakKeyDictionary[lance.LanceDataset, tuple[list[lance.LanceFragment], np.ndarray]] = (
    weakref.WeakKeyDictionary()
)
_FRAGMENTS_LOCK = threading.Lock()


def _fragments(ds: lance.LanceDataset) -> tuple[list[lance.LanceFragment], np.ndarray]:
    """(the fragments of `ds` in order, the offset of each one's first row and the total)."""
    with _FRAGMENTS_LOCK:
        got = _FRAGMENTS.get(ds)
    if got is None:
        frags = ds.get_fragments()
        got = (frags, np.cumsum([0] + [f.count_rows() for f in frags], dtype=np.int64))
        with _FRAGMENTS_LOCK:
            _FRAGMENTS[ds] = got
    return got


class RowTaker(Protocol):
    """Anything that takes rows by offset as a Lance dataset does (`loaders.blocks.BlockReads`)."""

    def take(self, indices: Sequence[int], columns: Sequence[str] | None = None) -> pa.Table: ...


def take_offsets(
    ds: lance.LanceDataset | RowTaker, offsets: Sequence[int] | np.ndarray, columns: list[str] | None = None
) -> pa.Table:
    """`ds.take(offsets, columns)`: the rows at these global offsets, in the order given (repeats
    allowed), read fragment by fragment (see the module essay). Anything else with a `take` (a
    block reader holding the table's rows in memory) is asked through its own.

    Raises:
        IndexError: an offset outside the table.
    """
    off = np.asarray(offsets, dtype=np.int64)
    if not isinstance(ds, lance.LanceDataset):  # a reader of its own (`loaders.blocks.BlockReads`): its take
        return ds.take(off.tolist(), columns=columns)
    if not len(off):
        return ds.take([], columns=columns)
    frags, starts = _fragments(ds)
    if off.min() < 0 or off.max() >= starts[-1]:
        bad = int(off.min()) if off.min() < 0 else int(off.max())
        raise IndexError(f"{ds.uri}: row offset {bad} is outside the table's {int(starts[-1])} rows")
    uniq, inv = np.unique(off, return_inverse=True)  # sorted: each fragment's rows come together
    which = np.searchsorted(starts, uniq, side="right") - 1
    parts = [frags[f].take((uniq[which == f] - starts[f]).tolist(), columns=columns) for f in np.unique(which)]
    t = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    return t if len(uniq) == len(off) and bool((np.diff(off) > 0).all()) else t.take(pa.array(inv.ravel()))
