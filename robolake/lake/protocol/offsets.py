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
"""

from __future__ import annotations

import lance
import numpy as np

__all__ = ["row_offsets"]


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
