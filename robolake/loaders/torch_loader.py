"""Packed shards -> PackedBatch through a torch DataLoader: sharded, shuffled, resumable on any world size.

Work assignment is a pure function of (number of rows, seed, epoch, where the epoch stands, rank,
world size, batch size), so every process computes the same plan without talking to the others:

1. The epoch's canonical order of rows (`order.canonical_order`): `default_rng([seed, epoch])`'s
   permutation (or 0..N-1 unshuffled); shards packed with a mixture interleave the groups of the
   row strata their manifest records evenly, and deal each step over the ranks by stratum
   (`deal.py`), so every rank reads the mixture.
2. Each step consumes the next `W * B` rows of that order (its global batch), and rank r takes a
   disjoint slice of it (`order.plan_epoch`): DDP needs the same number of steps on every rank.
   - `drop_last=True`: every step is a full `W * B`; the at most `W * B - 1` rows left over are
     skipped this epoch (another set each shuffled epoch).
   - `drop_last=False`: every row is read exactly once across the ranks; the last step is
     smaller, and where it would leave a rank without a sequence it is folded into the one
     before (some ranks then read one sequence more).
3. DataLoader worker w of nw takes the batches b with `(b - start) % nw == w`. The DataLoader
   fetches from its workers round robin, so batches reach the training loop in index order.
   `PackedLoader`'s workers do not stop at the epoch's end: batch numbers run on into the next
   epochs' plans, so their prefetch carries over the boundary and an epoch starts without waiting
   for its first batch to be read and decoded.

Resuming is planning the rest. `PackedLoader` counts the batches the training loop has taken in
the main process; `state_dict()` records the epoch and its *position* (rows of the canonical order
the whole world has consumed), and a new loader that loads it plans the rest of that epoch from
there for its own rank, world size, workers and batch size (`resume.ResumableSource`). Nothing is
read twice and nothing is skipped: the shards, pack spec, seed, shuffle and drop_last must be the
same (`LoaderState.resume_from` checks it on load).

Images are decoded inside the workers (`collate_rows`), and the Lance dataset is opened once per
worker. Batches leave the workers as `wire.WireBatch` (small arrays inline, not one shared-memory
segment per tensor) and `PackedLoader` rebuilds them.
"""

from __future__ import annotations

import functools
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
from robolake.loaders.blocks import epoch_order, order_identity
from robolake.loaders.collate import collate_rows
from robolake.loaders.config import LoaderConfig, batch_layout
from robolake.loaders.order import EpochPlan, plan_epoch
from robolake.loaders.resume import ResumableSource
from robolake.loaders.shards import PackedShards, check_not_stale, open_shards
from robolake.loaders.wire import WireBatch, from_wire, to_wire
from robolake.schemas.batch import BatchLayout, LoaderState, PackedBatch

__all__ = ["PackedShardDataset", "PackedLoader", "epoch_batches", "epoch_plan"]


def epoch_plan(
    num_rows: int,
    *,
    epoch: int,
    rank: int,
    world_size: int,
    config: LoaderConfig,
    strata: np.ndarray | None = None,
    start: int = 0,
) -> EpochPlan:
    """Rank `rank`'s plan of `epoch` from position `start` (the plan above); with `strata` (one
    per row: a mixed pack's `row_strata`) and a shuffle, the order is stratified.

    Raises:
        ValueError: strata for another number of rows; with drop_last=False, fewer rows left than
            ranks (a rank would have no batch).
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    strata = strata if config.shuffle else None
    order = epoch_order(  # canonical_order, or the block shuffle of config.shuffle_block (`blocks.py`)
        num_rows,
        seed=[config.seed, epoch] if config.shuffle else None,
        strata=strata,
        shuffle_block=config.shuffle_block,
        shuffle_window=config.shuffle_window,
    )
    return plan_epoch(
        order,
        start=start,
        rank=rank,
        world_size=world_size,
        per_rank=config.sequences_per_batch,
        drop_last=config.drop_last,
        strata=strata,
        epoch=epoch,
    )


def epoch_batches(
    num_rows: int,
    *,
    epoch: int,
    rank: int,
    world_size: int,
    config: LoaderConfig,
    strata: np.ndarray | None = None,
    start: int = 0,
) -> list[np.ndarray]:
    """Row indices of each batch rank `rank` reads in `epoch` from position `start`, in order
    (`epoch_plan(...).batches`).

    Raises:
        ValueError: as `epoch_plan`.
    """
    return epoch_plan(
        num_rows, epoch=epoch, rank=rank, world_size=world_size, config=config, strata=strata, start=start
    ).batches


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

    Set `epoch`, `start` (the epoch's position the plan starts from) and `start_batch` before
    iterating (PackedLoader does); each worker reads the batches `start_batch + w, start_batch + w
    + nw, ...` of the rank's plan. With `continuous` the stream does not stop at the epoch's end
    but goes on into the next epochs' plans (each from its start), batch numbers counted across
    epochs, so the workers' prefetch runs over the boundary.
    """

    def __init__(self, shards: PackedShards, config: LoaderConfig, *, rank: int, world_size: int) -> None:
        super().__init__()
        self.shards = shards
        self.config = config
        self.collate = config.collate_config(shards)
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.start = 0
        self.start_batch = 0
        self.continuous = False
        # Persistent workers keep the copy of this object they started with; PackedLoader passes
        # each epoch's (epoch, start, start_batch) through this shared array instead.
        self.position: Any = None
        self._plans: dict[tuple[int, int], EpochPlan] = {}

    def plan(self, epoch: int, start: int = 0) -> EpochPlan:
        """This rank's plan of `epoch` from position `start` (the two newest are kept)."""
        from robolake.packers.mix import row_strata

        key = (epoch, start)
        if key not in self._plans:
            plan = epoch_plan(
                self.shards.num_rows,
                epoch=epoch,
                rank=self.rank,
                world_size=self.world_size,
                config=self.config,
                strata=row_strata(self.shards.manifest.mixture),
                start=start,
            )
            self._plans = {k: v for k, v in self._plans.items() if k[0] == epoch - 1 or k[0] == epoch}
            self._plans[key] = plan
        return self._plans[key]

    def batches(self, epoch: int | None = None) -> list[np.ndarray]:
        """This rank's batches (row indices) of `epoch` from its start (default: the current epoch
        from where it started)."""
        return self.plan(self.epoch, self.start).batches if epoch is None else self.plan(epoch).batches

    def __iter__(self) -> Iterator[PackedBatch | WireBatch]:
        info = get_worker_info()
        w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.position is not None:
            self.epoch, self.start, self.start_batch = (int(x) for x in self.position[:3])
        epoch, plan, b, k = self.epoch, self.plan(self.epoch, self.start), self.start_batch, 0
        while True:
            if b >= len(plan):  # the next epoch's plan, from its start: batch numbers run on
                if not self.continuous:
                    return
                epoch, b = epoch + 1, 0
                plan = self.plan(epoch)
                if not len(plan):  # an epoch with no full batch (drop_last): nothing will come
                    return
                continue
            if k % nw == w:
                batch = collate_rows(self.shards.read_rows(plan.batches[b]), self.collate)
                yield batch if info is None else to_wire(batch)  # PackedLoader unwires
            b, k = b + 1, k + 1


class PackedLoader(ResumableSource):
    """Batches of packed shards for one rank: a DataLoader plus epoch and resume bookkeeping.

    Iterating yields one epoch (the rank's batches from where it stopped). When an epoch is
    read to the end the next iteration starts the next epoch, so `for batch in loader` inside an
    epoch loop and a trainer that re-iterates both work; `set_epoch` sets it explicitly. A state
    saved at any world size resumes here (`load_state_dict`).

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
                rank outside [0, world_size), or fewer rows than ranks (drop_last=False).
        """
        where = DataParallelRank(rank=rank, world_size=world_size)  # validates them
        self.config = config or LoaderConfig()
        self.shards = (
            shards
            if isinstance(shards, PackedShards)
            else open_shards(shards, lake=lake, storage_options=storage_options)
        )
        check_not_stale(self.shards, self.config.allow_stale)
        # Reads follow the config: its block-read budget, and the blocks of a block shuffle.
        self.shards = self.shards.with_reads(
            read_cache_bytes=self.config.read_cache_bytes, block_rows=self.config.shuffle_block
        )
        self.rank, self.world_size = where.rank, where.world_size
        self.dataset = PackedShardDataset(self.shards, self.config, rank=self.rank, world_size=self.world_size)
        self.epoch = 0
        self.start = 0
        self.batches_done = 0
        self.dataset.plan(0)  # raises now if the epoch cannot be split over this world
        self._loader: DataLoader | None = None
        self.dataset.continuous = True
        self._stream: Iterator[PackedBatch | WireBatch] | None = None  # the workers' stream, running on
        self._stream_at = (0, 0, 0)  # (epoch, start, batch) the stream yields next
        if self.config.num_workers:
            self.dataset.position = _worker_context(self.config.worker_start_method).Array("q", 3, lock=False)
            if self.config.worker_start_method == "forkserver":
                start_fork_server()  # its imports run while the caller sets up, not at the first batch

    def __len__(self) -> int:
        """Batches of the current epoch on this rank (the same on every rank; after a mid-epoch
        resume, those left when it resumed)."""
        return self.num_batches

    def _epoch_plan(self, epoch: int, start: int) -> EpochPlan:
        return self.dataset.plan(epoch, start)

    @property
    def layout(self) -> BatchLayout:
        return batch_layout(self.shards.manifest.pack_spec, self.shards.manifest.embodiments, self.dataset.collate)

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
        self._next_epoch_if_done()
        here = (self.epoch, self.start, self.batches_done)
        if self._stream is None or self._stream_at != here:
            self.dataset.epoch, self.dataset.start, self.dataset.start_batch = here
            if self.dataset.position is not None:
                self.dataset.position[0], self.dataset.position[1], self.dataset.position[2] = here
            self._stream, self._stream_at = iter(self._dataloader()), here
        n = self.num_batches
        while self.batches_done < n:
            try:
                batch = next(self._stream)
            except BaseException:
                self._stream = None  # a worker failed: the next iteration starts afresh
                raise
            self.batches_done += 1
            self._stream_at = (
                (self.epoch, self.start, self.batches_done) if self.batches_done < n else (self.epoch + 1, 0, 0)
            )
            yield from_wire(batch)

    def _identity(self) -> tuple[str, str, int, str]:
        spec = order_identity(self.shards.manifest.spec, self.config.shuffle_block, self.config.shuffle_window)
        return "torch", self.shards.root, self.shards.version, LoaderState.digest(spec)
