"""Block shuffle and block reads: a global shuffle that object storage serves with few large GETs.

Why. A per-sample uniform shuffle makes every batch a random `take` over the whole dataset, and
Lance turns a take into ranged GETs (a few per column page touched). On local disk that is a
page-cache hit; on an object store each GET is a round trip (milliseconds, and on a shared
endpoint, the endpoint's CPU), so a shuffled epoch pays a request per few rows. The peers fix it
the same way: MosaicML Streaming downloads whole shards on first touch into a local cache and its
py1b/py1e shuffles permute *shards* globally and samples only within a window of them; WebDataset
reads shards sequentially into a shuffle buffer. Both keep the order a function of the seed and
epoch, and both trade some shuffle quality (a stretch of the order draws from a window of blocks,
not from the whole dataset) for reads that are one large sequential GET each.

What. Two independent pieces:

- `block_order(num, seed, block, window)`: the epoch's canonical order as a block shuffle. The
  ids are cut into blocks of `block` consecutive ids; the blocks are permuted; each group of
  `window` consecutive blocks of that permutation has its ids shuffled together. It is a function
  of (num, seed, block, window) only, so it serves `order.plan_epoch` like any canonical order
  (ranks take slices of each global batch; a state resumes at any world size). `block=0` is the
  uniform permutation. `shuffle_quality` says what is traded: every stretch of `block * window`
  ids of the order draws from `block * window` of the `num` ids (their `window_fraction`), where
  a uniform shuffle draws from all of them.
- `BlockReads`: a Lance dataset whose `take` is served from whole blocks of rows held in memory
  (least recently used out first, bounded by bytes). A block is read with one contiguous take
  (Lance coalesces it into a few large ranged reads) in a small thread pool, so several blocks
  are fetched concurrently and a batch's rows cost no request of their own once their block is
  in. `block_reads_for` decides when that pays: when the whole dataset fits half the memory
  budget (then every byte is fetched once per process, whatever the order: MosaicML's default download
  of every shard touched, kept in memory) and the blocks are prefetched in the background, or when
  the reader's order is block-local (a block shuffle: the window's blocks stay in). A uniform
  shuffle over a dataset larger than the budget would evict each block before it is used again,
  so there it reads row by row as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import lance
import numpy as np
import pyarrow as pa

__all__ = [
    "BLOCK_BYTES",
    "READ_CACHE_BYTES",
    "BlockReads",
    "block_order",
    "block_reads_for",
    "dataset_bytes",
    "epoch_order",
    "order_identity",
    "shuffle_quality",
]

BLOCK_BYTES = 4 << 20  # a block read: a few MB, MosaicML's shard size range
READ_CACHE_BYTES = 256 << 20
FETCH_THREADS = 4


def block_order(num: int, *, seed: Sequence[int], block: int, window: int) -> np.ndarray:
    """int64 [num]: a block shuffle of 0..num-1 (see the module notes); `block=0` is uniform.

    Raises:
        ValueError: a negative block or a window below 1.
    """
    if block < 0 or window < 1:
        raise ValueError(f"a block shuffle needs block >= 0 and window >= 1, got block={block}, window={window}")
    rng = np.random.default_rng([*seed, 0xB10C])
    if block == 0 or block >= num:
        return rng.permutation(num).astype(np.int64)
    blocks = rng.permutation(-(-num // block))
    out = []
    for g in range(0, len(blocks), window):
        ids = np.concatenate([np.arange(b * block, min((b + 1) * block, num)) for b in blocks[g : g + window].tolist()])
        out.append(ids[rng.permutation(len(ids))])
    return np.concatenate(out).astype(np.int64)


def epoch_order(
    num: int, *, seed: Sequence[int] | None, strata: np.ndarray | None, shuffle_block: int, shuffle_window: int
) -> np.ndarray:
    """The epoch's canonical order for a loader: `order.canonical_order`, or with `shuffle_block`
    (and a seed) the block shuffle.

    Raises:
        ValueError: a block shuffle of a mixed pack (its strata interleave the groups evenly,
            which a block shuffle would not keep).
    """
    from robolake.loaders.order import canonical_order

    if seed is None or not shuffle_block:
        return canonical_order(num, seed=seed, strata=strata)
    if strata is not None:
        raise ValueError(
            f"a block shuffle (shuffle_block={shuffle_block}) cannot keep a mixed pack's groups interleaved evenly; "
            "pass shuffle_block=0 for mixed shards"
        )
    return block_order(num, seed=seed, block=shuffle_block, window=shuffle_window)


def order_identity(spec_json: dict[str, Any], shuffle_block: int, shuffle_window: int) -> dict[str, Any]:
    """The spec description a loader state records (`LoaderState.digest`): with a block shuffle,
    its settings too, so a state of one order is refused by a loader of the other."""
    if not shuffle_block:
        return spec_json
    return {**spec_json, "shuffle_block": [shuffle_block, shuffle_window]}


def shuffle_quality(num: int, block: int, window: int) -> dict[str, Any]:
    """What a block shuffle of `num` ids trades against a uniform one (for reports and benches)."""
    if block <= 0 or block >= num:
        return {"kind": "uniform", "window_ids": num, "window_fraction": 1.0}
    span = min(num, block * window)
    return {
        "kind": "block",
        "block": block,
        "window": window,
        "blocks": -(-num // block),
        "window_ids": span,
        # Every stretch of the order draws from this share of the epoch (1.0: uniform).
        "window_fraction": span / num,
    }


def dataset_bytes(ds: lance.LanceDataset) -> int:
    """Bytes of the dataset's data files (from its manifest: no request)."""
    return sum(int(f.file_size_bytes or 0) for frag in ds.get_fragments() for f in frag.data_files())


def _block_rows(ds: lance.LanceDataset, block_bytes: int) -> int:
    rows = ds.count_rows()
    per_row = dataset_bytes(ds) / max(1, rows)
    return max(1, int(block_bytes // max(1.0, per_row)))


class BlockReads:
    """A Lance dataset whose `take` reads whole blocks of `block_rows` rows and keeps them.

    Anything else (`schema`, `count_rows`, `to_table`, ...) goes to the dataset itself. Safe to
    share between threads; not picklable (hold it in a per-process cache).

    Args:
        ds: The dataset.
        block_rows: Rows per block (block b holds rows [b * block_rows, (b + 1) * block_rows)).
        max_bytes: Memory the kept blocks may hold (least recently used out first).
        all_columns: Read every block with all columns (a whole-dataset cache); otherwise with the
            union of the columns asked for so far (a block asked for with a new column is read
            again).
        prefetch_all: Start reading every block in the background at the first take (the
            dataset fits `max_bytes`).
    """

    def __init__(
        self,
        ds: lance.LanceDataset,
        *,
        block_rows: int,
        max_bytes: int = READ_CACHE_BYTES,
        all_columns: bool = False,
        prefetch_all: bool = False,
        threads: int = FETCH_THREADS,
    ) -> None:
        if block_rows < 1:
            raise ValueError(f"block_rows must be >= 1, got {block_rows}")
        self._ds = ds
        self.block_rows = int(block_rows)
        self.max_bytes = int(max_bytes)
        self.num_rows = ds.count_rows()
        self._all = list(ds.schema.names) if all_columns else None
        self._wanted: list[str] = []
        self._prefetch_all = prefetch_all
        self._lock = threading.Lock()
        self._blocks: OrderedDict[int, Future[pa.Table]] = OrderedDict()
        self._bytes: dict[int, int] = {}
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="robolake-block-reads")
        self.fetches = 0  # blocks read (a block read again after eviction counts again)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ds, name)

    def _fetch(self, b: int, columns: list[str]) -> pa.Table:
        lo, hi = b * self.block_rows, min((b + 1) * self.block_rows, self.num_rows)
        table = self._ds.take(list(range(lo, hi)), columns=columns)  # a range: Lance's own take is quick
        with self._lock:
            self.fetches += 1
            self._bytes[b] = table.nbytes
            self._evict()
        return table

    def _evict(self) -> None:
        """Drop the least recently used blocks over the budget (called with the lock held)."""
        total = sum(self._bytes.values())
        while total > self.max_bytes and len(self._blocks) > 1:
            b, fut = next(iter(self._blocks.items()))
            if not fut.done():
                break
            del self._blocks[b]
            total -= self._bytes.pop(b, 0)

    def _block(self, b: int, columns: list[str]) -> Future[pa.Table]:
        """The block's future (read now if it is not in, or lacks a column); called with the lock held."""
        fut = self._blocks.get(b)
        if fut is not None and fut.done() and not fut.exception():
            names = fut.result().schema.names
            if any(c not in names for c in columns):
                fut = None
        elif fut is not None and fut.done():
            fut = None  # a failed read is tried again, and raises then if it still fails
        if fut is None:
            fut = self._pool.submit(self._fetch, b, columns)
            self._blocks[b] = fut
            self._bytes.setdefault(b, 0)
        self._blocks.move_to_end(b)
        return fut

    def _columns(self, columns: Sequence[str] | None) -> tuple[list[str], list[str]]:
        """(columns to return, columns to read blocks with)."""
        want = list(self._ds.schema.names) if columns is None else list(columns)
        if self._all is not None:
            return want, self._all
        with self._lock:
            for c in want:
                if c not in self._wanted:
                    self._wanted.append(c)
            return want, list(self._wanted)

    def prefetch(self, indices: Sequence[int] | np.ndarray, columns: Sequence[str] | None = None) -> None:
        """Start reading the blocks that hold `indices`, without waiting."""
        _, read = self._columns(columns)
        blocks = np.unique(np.asarray(indices, dtype=np.int64) // self.block_rows).tolist()
        with self._lock:
            for b in blocks:
                self._block(b, read)

    def take(self, indices: Sequence[int] | np.ndarray | pa.Array, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows at `indices` (any order, repeats allowed), in that order, like `LanceDataset.take`.

        Raises:
            IndexError: an index outside the dataset.
            OSError: a block could not be read (as the dataset's own take would).
        """
        idx = np.asarray(indices.to_pylist() if isinstance(indices, pa.Array) else indices, dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= self.num_rows):
            raise IndexError(f"row index out of range for a dataset of {self.num_rows} rows")
        want, read = self._columns(columns)
        blocks = idx // self.block_rows
        uniq = np.unique(blocks).tolist()
        with self._lock:
            futures = {b: self._block(b, read) for b in uniq}
            if self._prefetch_all:
                self._prefetch_all = False
                for b in range(-(-self.num_rows // self.block_rows)):
                    self._block(b, read)
                for b in uniq:  # the ones this take needs stay the most recent
                    self._blocks.move_to_end(b)
        if not len(idx):
            return self._ds.take([], columns=want)
        parts, where = [], np.empty(len(idx), dtype=np.int64)
        done = 0
        for b in uniq:
            mine = np.flatnonzero(blocks == b)
            table = futures[b].result().select(want)
            parts.append(table.take(pa.array(idx[mine] - b * self.block_rows)))
            where[mine] = np.arange(done, done + len(mine))
            done += len(mine)
        out = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        # Sorted indices (what the loaders pass) come out in order already: no second copy.
        return out if np.array_equal(where, np.arange(len(idx))) else out.take(pa.array(where))

    def close(self) -> None:
        """Stop the fetch threads (blocks being read are finished first)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def block_reads_for(
    ds: lance.LanceDataset,
    *,
    max_bytes: int = READ_CACHE_BYTES,
    block_local: bool = False,
    block_rows: int | None = None,
    block_bytes: int = BLOCK_BYTES,
) -> BlockReads | None:
    """Block reads of `ds` where they pay (see the module notes), else None (read row by row).

    Args:
        ds: The dataset.
        max_bytes: Memory budget of the kept blocks; 0 turns block reads off.
        block_local: The reader's order is block-local (a block shuffle).
        block_rows: Rows per block; default: about `block_bytes` of the dataset's rows.
        block_bytes: Target size of a block when `block_rows` is not given.
    """
    if max_bytes <= 0:
        return None
    # At least 16 blocks fit the budget, so a block shuffle's window of blocks stays in.
    rows = block_rows or _block_rows(ds, min(block_bytes, max(1, max_bytes // 16)))
    # Half the budget: rows decoded into Arrow take more memory than their (compressed) files.
    if dataset_bytes(ds) <= max_bytes // 2:
        return BlockReads(ds, block_rows=rows, max_bytes=max_bytes, all_columns=True, prefetch_all=True)
    if block_local:
        return BlockReads(ds, block_rows=rows, max_bytes=max_bytes)
    return None
