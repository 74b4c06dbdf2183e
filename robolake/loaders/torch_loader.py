"""Packed shards -> PackedBatch through a torch DataLoader: sharded, shuffled, resumable.

Work assignment is a pure function of (number of rows, seed, epoch, rank, world size, batch
size), so every process computes the same plan without talking to the others:

1. The epoch's order is `default_rng([seed, epoch]).permutation(num_rows)` (or 0..N-1 unshuffled);
   shards packed with a mixture are dealt stratified instead (`packers.mix.deal_order` over the
   row strata their manifest records), so every rank gets the same mixture.
2. Rank r of W takes the rows `order[r::W]`.
3. The rank's rows are cut into batches. DDP needs the same number of steps on every rank:
   - `drop_last=True`: every rank gets `N // (W * B)` batches of exactly B sequences; the at
     most `W * B - 1` rows left over are skipped this epoch (another set each shuffled epoch).
   - `drop_last=False`: every row is read exactly once across the ranks. Every rank gets
     `nb = min(ceil(N / (W * B)), N // W)` batches and splits its rows into them as evenly as
     possible, so a batch holds B or fewer sequences, except where the rows do not divide
     (B = 1 and N not a multiple of W, or tiny data): then some batches hold one sequence more.
4. DataLoader worker w of nw takes the batches b with `(b - start) % nw == w`. The DataLoader
   fetches from its workers round robin, so batches reach the training loop in index order.
   `PackedLoader`'s workers do not stop at the epoch's end: batch numbers run on into the next
   epoch's plan (epoch e + 1's batch b is number N + b), so their prefetch carries over the
   boundary and an epoch starts without waiting for its first batch to be read and decoded.

Resuming is skipping: `PackedLoader` counts the batches the training loop has taken in the
main process; `state_dict()` records (epoch, batches taken) in a `LoaderState`, and a new loader
that loads it starts the same epoch's plan at that batch. Nothing is read twice and nothing is
skipped: the shards, pack spec, batch size, seed, shuffle and drop_last must be the same, and so
must the world size and rank, except at an epoch boundary, where a new world size takes the next
epoch as step 2 splits it (`LoaderState.resume_from` checks all of it on load).

Images are decoded inside the workers (`collate_rows`), and the Lance dataset is opened once per
worker. Batches leave the workers as `wire.WireBatch` (small arrays inline, not one shared-memory
segment per tensor) and `PackedLoader` rebuilds them.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import multiprocessing.context
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from robolake.distributed import DataParallelRank
from robolake.fork_server import PRELOAD, start_fork_server
from robolake.lake import Lake
from robolake.loaders.collate import collate_rows
from robolake.loaders.config import LoaderConfig, batch_layout
from robolake.loaders.resume import ResumableSource
from robolake.loaders.shards import PackedShards, check_not_stale, open_shards
from robolake.loaders.wire import WireBatch, from_wire, to_wire
from robolake.schemas.batch import BatchLayout, LoaderState, PackedBatch

__all__ = ["PackedShardDataset", "PackedLoader", "epoch_batches"]


def epoch_batches(
    num_rows: int, *, epoch: int, rank: int, world_size: int, config: LoaderConfig, strata: np.ndarray | None = None
) -> list[np.ndarray]:
    """Row indices of each batch rank `rank` reads in `epoch`, in order (the plan above); with
    `strata` (one per row: a mixed pack's `row_strata`), the shuffled order is a stratified deal.

    Raises:
        ValueError: with drop_last=False, fewer rows than ranks (a rank would have no batch).
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    if config.shuffle and strata is not None and world_size > 1:
        from robolake.packers.mix import deal_order

        if len(strata) != num_rows:
            raise ValueError(
                f"the pack's row strata name {len(strata)} rows but the shards hold {num_rows}; re-run `robolake pack`"
            )
        order = deal_order(strata, world_size, seed=[config.seed, epoch])
    elif config.shuffle:
        order = np.random.default_rng([config.seed, epoch]).permutation(num_rows)
    else:
        order = np.arange(num_rows)
    mine = order[rank::world_size]
    b = config.sequences_per_batch
    if config.drop_last:
        nb = num_rows // (world_size * b)
        return [mine[i * b : (i + 1) * b] for i in range(nb)]
    if num_rows == 0:
        raise ValueError(
            "the shards hold no packed sequences (every sample was rejected, or the selection was empty); "
            "re-run `robolake pack` with a larger --max-tokens (manifest.json lists the rejected samples)"
        )
    if num_rows < world_size:
        raise ValueError(
            f"{num_rows} packed sequences cannot give each of {world_size} ranks a batch; re-run `robolake pack` "
            "with a smaller --max-tokens (more, shorter sequences), train on fewer ranks (torchrun "
            "--nproc-per-node), or pass LoaderConfig(drop_last=True)"
        )
    nb = min(math.ceil(num_rows / (world_size * b)), num_rows // world_size)
    return np.array_split(mine, nb)


_PREP_LOCK = threading.Lock()


def _popen_without_main(base: type, process_obj: Any) -> Any:
    """Start `process_obj` without re-running the parent's `__main__` in the child.

    forkserver and spawn children normally re-import the parent's main script (so that objects
    defined there unpickle), which re-runs an unguarded script's loader loop and kills the
    workers. The loader's workers need nothing from `__main__` (the dataset and the worker init
    are robolake objects), so the start-up data is handed over without the main module: a plain
    script works without an `if __name__ == "__main__":` guard.
    """
    from multiprocessing import spawn

    with _PREP_LOCK:
        original = spawn.get_preparation_data

        def prepare(name: str) -> dict[str, Any]:
            data = original(name)
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
            return data

        spawn.get_preparation_data = prepare  # type: ignore[assignment]
        try:
            return getattr(base, "_Popen")(process_obj)  # noqa: B009  # a private staticmethod of the stdlib
        finally:
            spawn.get_preparation_data = original  # type: ignore[assignment]


class _ForkServerProcess(multiprocessing.context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _popen_without_main(multiprocessing.context.ForkServerProcess, process_obj)


class _SpawnProcess(multiprocessing.context.SpawnProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _popen_without_main(multiprocessing.context.SpawnProcess, process_obj)


class _ForkServerContext(multiprocessing.context.ForkServerContext):
    Process = _ForkServerProcess  # type: ignore[assignment]


class _SpawnContext(multiprocessing.context.SpawnContext):
    Process = _SpawnProcess  # type: ignore[assignment]


def _worker_context(method: str) -> multiprocessing.context.BaseContext:
    """The start method's context; a fork server preloads the heavy imports (not Lance: it warns on fork).

    forkserver and spawn workers start without the parent's `__main__` (see `_popen_without_main`).
    """
    if method == "forkserver":
        ctx: multiprocessing.context.BaseContext = _ForkServerContext()
        ctx.set_forkserver_preload(PRELOAD)  # no effect once the server runs
        return ctx
    if method == "spawn":
        return _SpawnContext()
    return multiprocessing.get_context(method)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed process stays a zombie until reaped: count it as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _exit_with_main(main_pid: int, _worker_id: int) -> None:
    """worker_init_fn: end this worker when the training process dies (even by kill -9).

    Workers started by a fork server are its children, not the training process's, so torch's
    own parent watchdog never fires and they would outlive a killed job; poll the main process.
    """

    def watch() -> None:
        while _process_alive(main_pid):
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="robolake-main-watchdog", daemon=True).start()


class PackedShardDataset(IterableDataset):
    """One rank's batches of one epoch, split across DataLoader workers (yields PackedBatch).

    Set `epoch` and `start_batch` before iterating (PackedLoader does); each worker reads the
    batches `start_batch + w, start_batch + w + nw, ...` of the rank's plan. With `continuous`
    the stream does not stop at the epoch's end but goes on into the next epochs' plans, batch
    numbers counted across epochs, so the workers' prefetch runs over the boundary.
    """

    def __init__(self, shards: PackedShards, config: LoaderConfig, *, rank: int, world_size: int) -> None:
        super().__init__()
        self.shards = shards
        self.config = config
        self.collate = config.collate_config(shards)
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.start_batch = 0
        self.continuous = False
        # Persistent workers keep the copy of this object they started with; PackedLoader passes
        # each epoch's (epoch, start_batch) through this shared array instead.
        self.position: Any = None

    def batches(self, epoch: int | None = None) -> list[np.ndarray]:
        """This rank's batches (row indices) of `epoch` (default: the current one)."""
        from robolake.packers.mix import row_strata

        return epoch_batches(
            self.shards.num_rows,
            epoch=self.epoch if epoch is None else epoch,
            rank=self.rank,
            world_size=self.world_size,
            config=self.config,
            strata=row_strata(self.shards.manifest.mixture),
        )

    def __iter__(self) -> Iterator[PackedBatch | WireBatch]:
        info = get_worker_info()
        w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.position is not None:
            self.epoch, self.start_batch = int(self.position[0]), int(self.position[1])
        plan = self.batches()
        n, b = len(plan), self.start_batch + w
        epoch = self.epoch
        while b < n or (self.continuous and n):
            if b >= n:  # the next epoch's plan: batch numbers run on across epochs
                epoch, b = epoch + b // n, b % n
                plan = self.batches(epoch)
            batch = collate_rows(self.shards.read_rows(plan[b]), self.collate)
            yield batch if info is None else to_wire(batch)  # PackedLoader unwires
            b += nw


class PackedLoader(ResumableSource):
    """Batches of packed shards for one rank: a DataLoader plus epoch and resume bookkeeping.

    Iterating yields one epoch (the rank's batches from where it stopped). When an epoch is
    read to the end the next iteration starts the next epoch, so `for batch in loader` inside an
    epoch loop and a trainer that re-iterates both work; `set_epoch` sets it explicitly.

    Example:
        >>> loader = PackedLoader("packed/", LoaderConfig(sequences_per_batch=2))  # doctest: +SKIP
        >>> for batch in loader: ...                                                # doctest: +SKIP
    """

    def __init__(
        self,
        shards: PackedShards | str,
        config: LoaderConfig | None = None,
        *,
        lake: Lake | str | None = None,
        rank: int = 0,
        world_size: int = 1,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        """Open the shards (validating them) and plan this rank's reads.

        Args:
            shards: A pack output directory / URI, or shards already opened with `open_shards`.
            config: Loader settings (default `LoaderConfig()`).
            lake: If given, the shards must come from this lake at its version.
            rank: This process's data-parallel rank (default 0: one process). The loader never
                reads the environment; `open_batches` reads torchrun's once and passes it here.
            world_size: Number of data-parallel ranks (default 1).
            storage_options: Object-store options, when `shards` is a URI.

        Raises:
            FileNotFoundError, ValueError, LineageError: as for `open_shards`; ValueError for a
                rank outside [0, world_size).
        """
        where = DataParallelRank(rank=rank, world_size=world_size)  # validates them
        self.config = config or LoaderConfig()
        self.shards = (
            shards
            if isinstance(shards, PackedShards)
            else open_shards(shards, lake=lake, storage_options=storage_options)
        )
        check_not_stale(self.shards, self.config.allow_stale)
        self.rank, self.world_size = where.rank, where.world_size
        self.dataset = PackedShardDataset(self.shards, self.config, rank=self.rank, world_size=self.world_size)
        self.epoch = 0
        self.batches_done = 0
        self._num_batches = len(self.dataset.batches())
        self._loader: DataLoader | None = None
        self.dataset.continuous = True
        self._stream: Iterator[PackedBatch | WireBatch] | None = None  # the workers' stream, running on
        self._stream_at = (0, 0)  # (epoch, batch) the stream yields next
        if self.config.num_workers:
            self.dataset.position = _worker_context(self.config.worker_start_method).Array("q", 2, lock=False)
            if self.config.worker_start_method == "forkserver":
                start_fork_server()  # its imports run while the caller sets up, not at the first batch

    def __len__(self) -> int:
        """Batches per epoch on this rank (the same on every rank)."""
        return self._num_batches

    @property
    def num_batches(self) -> int:
        return self._num_batches

    @property
    def layout(self) -> BatchLayout:
        return batch_layout(self.shards.manifest.pack_spec, self.shards.manifest.embodiments, self.dataset.collate)

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its first batch at the next iteration."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.epoch, self.batches_done = int(epoch), 0

    def _dataloader(self) -> DataLoader:
        """One DataLoader for the loader's lifetime: its workers start once, not every epoch."""
        if self._loader is not None:
            return self._loader
        cfg = self.config
        workers = cfg.num_workers
        self._loader = DataLoader(
            self.dataset,
            batch_size=None,
            num_workers=workers,
            prefetch_factor=cfg.prefetch_factor if workers else None,
            pin_memory=cfg.pin_memory,
            multiprocessing_context=_worker_context(cfg.worker_start_method) if workers else None,
            worker_init_fn=functools.partial(_exit_with_main, os.getpid()) if workers else None,
            persistent_workers=bool(workers),
        )
        return self._loader

    def __iter__(self) -> Iterator[PackedBatch]:
        """The rest of this epoch. The workers' stream runs on across epochs (their prefetch
        fills the next epoch's first batches while this one ends) and is restarted only where
        the position was moved (`set_epoch`, `load_state_dict`)."""
        if self.batches_done >= self._num_batches:
            self.epoch, self.batches_done = self.epoch + 1, 0
        if self._stream is None or self._stream_at != (self.epoch, self.batches_done):
            self.dataset.epoch = self.epoch
            self.dataset.start_batch = self.batches_done
            if self.dataset.position is not None:
                self.dataset.position[0], self.dataset.position[1] = self.epoch, self.batches_done
            self._stream, self._stream_at = iter(self._dataloader()), (self.epoch, self.batches_done)
        while self.batches_done < self._num_batches:
            try:
                batch = next(self._stream)
            except BaseException:
                self._stream = None  # a worker failed: the next iteration starts afresh
                raise
            self.batches_done += 1
            self._stream_at = (
                (self.epoch, self.batches_done) if self.batches_done < self._num_batches else (self.epoch + 1, 0)
            )
            yield from_wire(batch)

    def _identity(self) -> tuple[str, str, int, str]:
        return "torch", self.shards.root, self.shards.version, LoaderState.digest(self.shards.manifest.spec)
