"""Packed shards -> PackedBatch through Ray Data, for Ray Train and Ray clusters.

The pipeline is `read_lance` over `shards.lance` (at the manifest's version) -> an optional
shuffle -> a `map_batches` stage that decodes every view's JPEG to raw pixels in Ray workers ->
`iter_torch_batches` whose collate (`collate_rows`) only assembles tensors. Decoding runs in the
cluster's CPUs, next to the data; the training process receives ready pixels.

`streaming_split(n)` gives one iterator per Ray Train worker, each over a disjoint part of the
same execution, so every sequence goes to exactly one worker per epoch (with `equal=True` Ray
may drop up to n-1 rows to keep the workers in step, as DDP needs).

Shuffling here is Ray's: `randomize_block_order` (fragments in a seeded order) plus a local
shuffle buffer, seeded from (seed, epoch). It costs no all-to-all exchange of the JPEG payload but
mixes less than the torch loader's global permutation; pack with a seed, which already shuffles
the samples across sequences, and this is enough for training.

`ray` is imported lazily; install the `ray` extra to use this module.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from robolake.distributed import DataParallelRank
from robolake.lake import Lake
from robolake.loaders.collate import CollateConfig, collate_rows, decode_views
from robolake.loaders.config import LoaderConfig, batch_layout
from robolake.loaders.order import EpochPlan, plan_epoch
from robolake.loaders.resume import ResumableSource
from robolake.loaders.shards import PackedShards, check_not_stale, open_shards
from robolake.schemas.batch import BatchLayout, LoaderState, PackedBatch

if TYPE_CHECKING:
    import ray.data

__all__ = ["RayPackedStream", "RaySplit"]


def _require_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:  # pragma: no cover - ray is a core dependency here
        raise ImportError("the Ray Data loader needs ray[data]: pip install 'robolake[ray]'") from e
    from robolake.ray_tasks import ensure_ray

    ensure_ray()
    return ray


class _DecodeStage:
    """Ray Data map: replace each row's `frames` (JPEG) with `pixels` (raw uint8 RGB views)."""

    def __init__(self, image_size: int) -> None:
        self.image_size = image_size

    def __call__(self, table: pa.Table) -> pa.Table:
        col = table.column("frames").combine_chunks()
        views = decode_views(col.flatten().to_pylist(), self.image_size)
        raw = [v.tobytes() for v in views]
        offsets = col.offsets
        pixels = pa.LargeListArray.from_arrays(offsets.cast(pa.int64()), pa.array(raw, type=pa.large_binary()))
        return table.drop_columns(["frames"]).append_column("pixels", pixels)


@functools.cache
def _collate_class() -> type:
    """An `ArrowBatchCollateFn` (what `iter_torch_batches` wants) defined on first use: no import-time ray."""
    from ray.data.collate_fn import ArrowBatchCollateFn

    class PackedArrowCollate(ArrowBatchCollateFn):
        """Arrow rows with decoded pixels -> PackedBatch."""

        def __init__(self, config: CollateConfig) -> None:
            self.config = config

        def __call__(self, batch: pa.Table) -> PackedBatch:  # type: ignore[override]  # Ray passes any object through
            return collate_rows(batch, self.config)

    return PackedArrowCollate


def _iter_packed(iterable: Any, config: LoaderConfig, collate: CollateConfig, epoch: int) -> Iterator[PackedBatch]:
    return iter(
        iterable.iter_torch_batches(
            batch_size=config.sequences_per_batch,
            collate_fn=_collate_class()(collate),
            prefetch_batches=max(1, config.prefetch_factor),
            drop_last=config.drop_last,
            local_shuffle_buffer_size=4 * config.sequences_per_batch if config.shuffle else None,
            local_shuffle_seed=_seed(config, epoch) if config.shuffle else None,
            pin_memory=config.pin_memory,
        )
    )


def _seed(config: LoaderConfig, epoch: int) -> int:
    return int(np.random.SeedSequence([config.seed, epoch]).generate_state(1)[0])


class RaySplit:
    """One Ray Train worker's share of a `RayPackedStream.split`; picklable, iterate per epoch."""

    def __init__(self, iterator: Any, config: LoaderConfig, collate: CollateConfig, epoch: int) -> None:
        self._it, self._config, self._collate, self._epoch = iterator, config, collate, epoch

    def __iter__(self) -> Iterator[PackedBatch]:
        return _iter_packed(self._it, self._config, self._collate, self._epoch)


def check_ray_config(config: LoaderConfig, world_size: int) -> None:
    """Raise for settings the Ray Data path cannot honour (instead of ignoring them)."""
    if world_size > 1:
        raise ValueError(
            f"the Ray Data stream does not shard across torchrun ranks (world size {world_size}); under "
            "torchrun use the torch shard loader (open_batches(..., backend='torch')), or give each Ray "
            "Train worker its share with RayPackedStream.split(n)"
        )
    defaults = LoaderConfig()
    for name in ("num_workers", "worker_start_method"):
        if getattr(config, name) != getattr(defaults, name):
            raise ValueError(
                f"the Ray Data stream decodes in Ray tasks, not DataLoader workers: {name}="
                f"{getattr(config, name)!r} has no effect; leave it at its default and size the decode stage "
                "with decode_concurrency"
            )


class RayPackedStream(ResumableSource):
    """Batches of packed shards via Ray Data (`read_lance` -> decode map -> `iter_torch_batches`).

    Example:
        >>> stream = RayPackedStream("packed/", LoaderConfig(sequences_per_batch=2))  # doctest: +SKIP
        >>> for batch in stream: ...                                                   # doctest: +SKIP
        >>> shards = stream.split(4)  # one per Ray Train worker                       # doctest: +SKIP
    """

    def __init__(
        self,
        shards: PackedShards | str,
        config: LoaderConfig | None = None,
        *,
        lake: Lake | str | None = None,
        storage_options: dict[str, str] | None = None,
        decode_concurrency: int | None = None,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        """Open and validate the shards (as `open_shards`); Ray starts on first use.

        Args:
            shards: A pack output directory / URI, or an opened `PackedShards`.
            config: Batch size, image size, shuffle and seed (workers settings are Ray's here).
            lake: If given, the shards must come from this lake at its version.
            storage_options: Object-store options, when `shards` is a URI.
            decode_concurrency: Ray tasks decoding frames at once (default: Ray decides).
            rank: Data-parallel rank (default 0); `open_batches` reads torchrun's once and passes it.
            world_size: Must be 1: this stream does not shard across torchrun ranks (see `split`).

        Raises:
            FileNotFoundError, ValueError, LineageError: as for `open_shards`; ValueError for a
                world size > 1, a rank outside [0, world_size), or loader settings this stream
                cannot honour.
        """
        self.config = config or LoaderConfig()
        where = DataParallelRank(rank=rank, world_size=world_size)  # validates them
        self.rank, self.world_size = where.rank, where.world_size
        check_ray_config(self.config, self.world_size)
        self.shards = (
            shards
            if isinstance(shards, PackedShards)
            else open_shards(shards, lake=lake, storage_options=storage_options)
        )
        check_not_stale(self.shards, self.config.allow_stale)
        self.collate = self.config.collate_config(self.shards)
        self.decode_concurrency = decode_concurrency
        self.epoch = 0
        self.start = 0
        self.batches_done = 0

    def _epoch_plan(self, epoch: int, start: int) -> EpochPlan:
        """Batch counts and positions only: Ray Data decides which rows a batch holds."""
        return plan_epoch(
            np.arange(self.shards.num_rows),
            start=start,
            rank=0,
            world_size=1,
            per_rank=self.config.sequences_per_batch,
            drop_last=self.config.drop_last,
            epoch=epoch,
        )

    @property
    def layout(self) -> BatchLayout:
        return batch_layout(self.shards.manifest.pack_spec, self.shards.manifest.embodiments, self.collate)

    def _identity(self) -> tuple[str, str, int, str]:
        return "ray", self.shards.root, self.shards.version, LoaderState.digest(self.shards.manifest.spec)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at an epoch boundary.

        Raises:
            ValueError: the state is mid-epoch (Ray Data's streaming order is not reproducible
                batch for batch, so skipping would repeat or lose samples), malformed, or from
                other shards or another plan (see `LoaderState.resume_from`).
        """
        epoch, position, _ = self._state().resume_from(state)
        done, total = state.get("batches_done", 0), state.get("num_batches", 0)
        if position or (done and done != total):
            raise ValueError(
                f"the Ray Data stream cannot resume mid-epoch (epoch {epoch}, {done} of {total} batches done): "
                "its streaming order is not reproducible batch for batch; resume with the torch shard loader "
                "(backend='torch'), or checkpoint at epoch boundaries"
            )
        self.epoch, self.start, self.batches_done = epoch, 0, 0

    def dataset(self, epoch: int | None = None) -> ray.data.Dataset:
        """The Ray Dataset of shard rows with decoded `pixels` (lazy; executes when iterated)."""
        ray = _require_ray()
        epoch = self.epoch if epoch is None else epoch
        ds = ray.data.read_lance(
            self.shards.uri, version=self.shards.version, storage_options=self.shards.storage_options
        )
        if self.config.shuffle:
            ds = ds.randomize_block_order(seed=_seed(self.config, epoch))
        return ds.map_batches(
            _DecodeStage(self.config.image_size),
            batch_format="pyarrow",
            batch_size=self.config.sequences_per_batch,
            concurrency=self.decode_concurrency,
        )

    def __iter__(self) -> Iterator[PackedBatch]:
        self._next_epoch_if_done()
        self.batches_done = 0  # an interrupted epoch starts over: Ray cannot skip to a batch
        for batch in _iter_packed(self.dataset(), self.config, self.collate, self.epoch):
            self.batches_done += 1
            yield batch

    def split(self, n: int, *, equal: bool = True, epoch: int | None = None) -> list[RaySplit]:
        """`n` disjoint streams over one execution (`streaming_split`), e.g. one per Ray Train worker.

        All n must be iterated concurrently (Ray starts the epoch when every one has asked for data).

        Raises:
            ValueError: n < 1.
        """
        if n < 1:
            raise ValueError(f"split needs n >= 1 streams, got {n}")
        epoch = self.epoch if epoch is None else epoch
        iterators = self.dataset(epoch).streaming_split(n, equal=equal)
        return [RaySplit(it, self.config, self.collate, epoch) for it in iterators]
