"""Stream PackedBatches straight from a lake, packing on the fly (no materialised shards).

For notebooks and quick experiments, when writing shards first is not worth it. The stream runs
the same steps as `robolake pack`, lazily:

    sample index (metadata only) -> seeded shuffle (config.seed, epoch) -> WindowPacker
    (spec.seed, epoch) -> this rank's share of the sequences -> SequenceMaterializer.rows
    (Lance take of frames, states, actions) -> collate_rows

The first three steps are `window_sequences`, the window chain `pack` runs too. With a mixture
(`spec.mix`), its first step is the mixture's draw for the epoch (`packers/mix.py`): each epoch
continues every group's stream, so a subsampled group shows new samples every epoch.

The sample index and the packing plan are cheap (lengths only), so every rank computes the whole
epoch's packed sequences and takes its share with the same rule as the shard loader
(`order.plan_epoch`): the sequences in the order the packer gave them, each step's global batch
split over the ranks (with a mixture, dealt by the sequences' groups). Ranks never share a sample,
cover the epoch together, and take the same number of steps; the order depends on the lake
version, spec and seeds only, never on the world size.
Materialising a batch (random reads plus JPEG decodes) is the expensive part, so it runs in a
small thread pool, a few batches ahead, in order. Lance takes and PIL decodes release
the GIL, which is what makes threads pay off here; for full-speed training, pack once and use
the shard loader.

On an object store the takes are what cost (a round trip per few rows): the materializer's lake
tables are read through `blocks.BlockReads` (whole blocks of rows, kept in memory) where that
pays, and with `config.shuffle_block` the epoch's sample shuffle is a block shuffle
(`blocks.block_order` over the sample ids, episode-major) so the blocks a stretch of the epoch
needs stay few (see `loaders/blocks.py`).

Only the window packer runs here (`spec.algorithm` must be "window"); its batches differ from
those of packed shards of the same lake (reshuffled and repacked every epoch).

Resuming works as for the shard loader: `state_dict()` records the epoch and its position (packed
sequences consumed by all ranks) with the lake URI, version and spec digest, and a stream that
loads it, at any world size, replans the epoch and reads the rest of it from there.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import lance
import numpy as np

from robolake.distributed import DataParallelRank
from robolake.lake import Lake
from robolake.loaders.blocks import BlockReads, block_order, block_reads_for, order_identity
from robolake.loaders.collate import CollateConfig, collate_rows
from robolake.loaders.config import LoaderConfig, batch_layout
from robolake.loaders.order import EpochPlan, canonical_order, plan_epoch
from robolake.loaders.resume import ResumableSource
from robolake.packers.materialize import SequenceMaterializer, _Tables, materializer_for
from robolake.packers.mix import Mixture
from robolake.packers.plan import mixture_for, window_sequences
from robolake.packers.samples import SampleIndex, build_sample_index
from robolake.packers.spec import PackSpec
from robolake.schemas.batch import BatchLayout, LoaderState, PackedBatch

__all__ = ["LakeStream"]


def check_lake_stream_config(spec: PackSpec, config: LoaderConfig) -> None:
    """Raise for settings the lake stream cannot honour (instead of ignoring them)."""
    if spec.algorithm != "window":
        raise ValueError(
            f"streaming from a lake packs with the bounded window packer, but the spec asks for "
            f"algorithm={spec.algorithm!r}; pass PackSpec(algorithm='window', ...) or run `robolake pack "
            f"--algorithm {spec.algorithm}` and train on the shards"
        )
    if config.shuffle_block and spec.mix is not None:
        raise ValueError(
            f"the mixture {spec.mix.to_text()} draws its own order of samples, which a block shuffle "
            f"(shuffle_block={config.shuffle_block}) would not keep; pass shuffle_block=0 with a mixture"
        )
    if config.worker_start_method != LoaderConfig().worker_start_method:
        raise ValueError(
            "the lake stream materialises batches in threads, not worker processes: "
            f"worker_start_method={config.worker_start_method!r} has no effect; leave it at its default"
        )


class _BlockTables(_Tables):
    """The materializer's lake tables, each read through `BlockReads` where that pays (one budget
    of `max_bytes` per table)."""

    def __init__(self, max_bytes: int, block_local: bool) -> None:
        super().__init__()
        self.max_bytes, self.block_local = max_bytes, block_local
        self.reads: dict[tuple[object, ...], BlockReads | None] = {}
        self._reads_lock = threading.Lock()

    def share(self, uri: str, version: int, ds: lance.LanceDataset) -> None:
        """Use `ds` (the lake's own handle of that table version) instead of opening it again: on
        an object store an open is a HEAD and a GET."""
        with self._lock:
            self._items[(os.getpid(), uri, version)] = ds

    def get(self, uri: str, version: int, options: dict[str, str] | None) -> lance.LanceDataset:
        ds = super().get(uri, version, options)
        key = (os.getpid(), uri, version)
        with self._reads_lock:
            if key not in self.reads:
                self.reads[key] = block_reads_for(ds, max_bytes=self.max_bytes, block_local=self.block_local)
            reads = self.reads[key]
        return ds if reads is None else reads  # type: ignore[return-value]  # a dataset's take, served by blocks

    def __getstate__(self) -> dict[str, object]:
        return {"max_bytes": self.max_bytes, "block_local": self.block_local}  # handles are per process

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(**state)  # type: ignore[misc, arg-type]


class LakeStream(ResumableSource):
    """PackedBatches packed on the fly from a lake, for one data-parallel rank.

    Example:
        >>> stream = LakeStream(Lake.open("lake/"), PackSpec(max_tokens=2048, algorithm="window"))  # doctest: +SKIP
        >>> batch = next(iter(stream))                                                            # doctest: +SKIP
    """

    def __init__(
        self,
        lake: Lake | str,
        spec: PackSpec | None = None,
        config: LoaderConfig | None = None,
        *,
        rank: int = 0,
        world_size: int = 1,
        num_threads: int | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        """Index the lake's samples (metadata only).

        Args:
            lake: A Lake (read at its version) or its URI (newest version).
            spec: Token model, max_tokens, horizon, window, packing seed, which episodes
                (`spec.where`) and their mixture (`spec.mix`); default `PackSpec(algorithm="window")`.
            config: Batch size, image size, shuffle seed, drop_last; padded widths default to the
                widest embodiment of the lake's selected episodes.
            rank: This process's data-parallel rank (default 0: one process). The stream never
                reads the environment; `open_batches` reads torchrun's once and passes it here.
            world_size: Number of data-parallel ranks (default 1).
            num_threads: Batches materialised in parallel (default: `config.num_workers`, at least 1).
            storage_options: Object-store options, when `lake` is a URI.

        Raises:
            ValueError: no episodes to stream (see `build_sample_index`), a setting this stream
                cannot honour (see `check_lake_stream_config`), a mixture value that names no
                episode (`spec.mix`), or a rank outside [0, world_size).
        """
        self.lake = lake if isinstance(lake, Lake) else Lake.open(lake, storage_options=storage_options)
        self.spec = spec or PackSpec(algorithm="window")
        self.config = config or LoaderConfig()
        check_lake_stream_config(self.spec, self.config)
        where = DataParallelRank(rank=rank, world_size=world_size)  # validates them
        self.rank, self.world_size = where.rank, where.world_size
        self.num_threads = max(1, num_threads if num_threads is not None else self.config.num_workers)
        self.index: SampleIndex = build_sample_index(self.lake, self.spec)
        self.mixture: Mixture | None = mixture_for(self.lake, self.index, self.spec)
        self.materializer: SequenceMaterializer = materializer_for(self.lake, self.index, self.spec)
        if self.config.read_cache_bytes:  # whole blocks of rows instead of a take per batch (module notes)
            tables = _BlockTables(self.config.read_cache_bytes, block_local=bool(self.config.shuffle_block))
            for name in ("steps", "media", "access"):
                if self.lake.has_table(name):
                    tables.share(
                        self.lake.table_uri(name), self.lake.version_info.tables[name], self.lake.dataset(name)
                    )
            self.materializer.read_tables_through(tables)
        specs = self.lake.embodiments()
        tags = [t for t in self.index.embodiments if t in specs]
        self.collate = CollateConfig(
            tokens_per_view=self.spec.tokens.tokens_per_view,
            image_size=self.config.image_size,
            max_state_dim=self.config.max_state_dim or max((specs[t].state_dim for t in tags), default=1),
            max_action_dim=self.config.max_action_dim or max((specs[t].action_dim for t in tags), default=1),
            history_width=self.spec.history_width if self.spec.history else 0,
        )
        self.epoch = 0
        self.start = 0
        self.batches_done = 0
        self.rejected: list[int] = []
        self._sequences: dict[int, tuple[list[np.ndarray], np.ndarray, np.ndarray | None]] = {}
        self._last_plan: tuple[tuple[int, int], EpochPlan] | None = None  # the newest plan, by (epoch, start)
        self._epoch_plan(0, 0)  # raises now if the epoch cannot be split over this world

    @property
    def num_samples(self) -> int:
        return self.index.num_samples

    @property
    def layout(self) -> BatchLayout:
        return batch_layout(self.spec, self.index.embodiments, self.collate)

    def bins(self, epoch: int | None = None) -> list[np.ndarray]:
        """Sample ids of every packed sequence of `epoch` (all ranks'), in the packer's order."""
        return self._epoch_sequences_of(self.epoch if epoch is None else epoch)[0]

    def _epoch_sequences_of(self, epoch: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray | None]:
        """(packed sequences of `epoch`, their canonical order, their strata or None)."""
        if epoch not in self._sequences:
            seed = int(np.random.SeedSequence([self.spec.seed, epoch]).generate_state(1)[0])
            shuffle_seed = [self.config.seed, epoch] if self.config.shuffle else None
            samples = None
            if shuffle_seed is not None and self.config.shuffle_block:  # block-local: neighbours in the lake
                samples = block_order(
                    self.index.num_samples,
                    seed=shuffle_seed,
                    block=self.config.shuffle_block,
                    window=self.config.shuffle_window,
                )
                shuffle_seed = None
            bins, rejected = window_sequences(
                self.index,
                self.spec,
                samples=samples,
                shuffle_seed=shuffle_seed,
                packer_seed=seed,
                mixture=self.mixture,
                epoch=epoch,
            )
            self.rejected = rejected.tolist()
            strata = None
            if self.mixture is not None:  # every rank the same mixture, at any world size (`order.py`)
                strata = self.mixture.strata(self.index, bins, self.spec.max_tokens)
            # Unmixed, the packer's order (shuffled already); mixed, its groups interleaved evenly.
            order = canonical_order(
                len(bins), seed=None if strata is None else [self.config.seed, epoch, 0x4445], strata=strata
            )
            self._sequences = {k: v for k, v in self._sequences.items() if k == epoch - 1}  # two epochs at most
            self._sequences[epoch] = (bins, order, strata)
        return self._sequences[epoch]

    def _plan(self, epoch: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(all packed sequences of `epoch`, this rank's batches of it from its start as indices into them)."""
        return self.bins(epoch), self._epoch_plan(epoch, 0).batches

    def _epoch_plan(self, epoch: int, start: int) -> EpochPlan:
        if self._last_plan is not None and self._last_plan[0] == (epoch, start):
            return self._last_plan[1]
        bins, order, strata = self._epoch_sequences_of(epoch)
        plan = plan_epoch(
            order,
            start=start,
            rank=self.rank,
            world_size=self.world_size,
            per_rank=self.config.sequences_per_batch,
            drop_last=self.config.drop_last,
            strata=strata,
            epoch=epoch,
        )
        self._last_plan = ((epoch, start), plan)
        return plan

    def _batch(self, bins: list[np.ndarray], seq_ids: np.ndarray) -> PackedBatch:
        table = self.materializer.rows([bins[i] for i in seq_ids], [int(i) for i in seq_ids])
        batch = collate_rows(table, self.collate)
        return batch.pin_memory() if self.config.pin_memory else batch

    def __iter__(self) -> Iterator[PackedBatch]:
        self._next_epoch_if_done()
        bins, batches = self.bins(), self.plan.batches
        ahead = max(1, self.config.prefetch_factor) * self.num_threads
        with ThreadPoolExecutor(self.num_threads, thread_name_prefix="robolake-lake-stream") as pool:
            pending: deque[Future[PackedBatch]] = deque()
            todo = iter(batches[self.batches_done :])
            for seq_ids in todo:
                pending.append(pool.submit(self._batch, bins, seq_ids))
                if len(pending) >= ahead:
                    break
            while pending:
                batch = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(self._batch, bins, nxt))
                self.batches_done += 1
                yield batch

    def _identity(self) -> tuple[str, str, int, str]:
        # A block shuffle is another order of the epoch: a state of the other one must not load.
        spec = order_identity(self.spec.to_json(), self.config.shuffle_block, self.config.shuffle_window)
        return "lake", self.lake.uri, self.lake.version, LoaderState.digest(spec)
