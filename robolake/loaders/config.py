"""LoaderConfig: how any batch source turns packed sequences into batches.

One config for every source (`open_batches`): a source that cannot honour a field raises when
it is opened instead of ignoring it (see each source's `check_config`). `batch_layout` is the one
builder of the `BatchLayout` every source reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from robolake.loaders.blocks import READ_CACHE_BYTES
from robolake.loaders.collate import CollateConfig
from robolake.loaders.shards import PackedShards
from robolake.packers.spec import PackSpec
from robolake.schemas.batch import BatchLayout

__all__ = ["LoaderConfig", "batch_layout"]


def batch_layout(spec: PackSpec, embodiments: Sequence[str], collate: CollateConfig) -> BatchLayout:
    """The layout of batches collated with `collate` from sequences packed with `spec`.

    Args:
        spec: The packing (a pack output's `manifest.pack_spec`, or a lake stream's spec).
        embodiments: Embodiment tags in id order.
        collate: The padded widths and token model the batches are collated with.
    """
    return BatchLayout(
        tokens_per_view=collate.tokens_per_view,
        horizon=spec.horizon,
        max_state_dim=collate.max_state_dim,
        max_action_dim=collate.max_action_dim,
        num_embodiments=len(embodiments),
        max_seqlen=spec.max_tokens,
        embodiments=tuple(embodiments),
        history_streams=len(spec.history),
        history_width=collate.history_width,
    )


@dataclass(frozen=True, kw_only=True)
class LoaderConfig:
    """How packed shards are read into batches.

    Attributes:
        sequences_per_batch: Packed sequences (shard rows) per batch (B).
        image_size: Views are decoded to image_size x image_size RGB.
        seed: Seed of the per-epoch shuffle.
        shuffle: Shuffle the sequence order every epoch (from (seed, epoch)).
        drop_last: Give every rank only full batches, skipping the remainder of the epoch;
            False reads every sequence once per epoch (see the module notes).
        max_state_dim: Width state is padded to; None uses the widest state in the shards.
        max_action_dim: Width actions are padded to; None uses the widest action in the shards.
        num_workers: DataLoader worker processes (0 reads in the main process).
        prefetch_factor: Batches each worker prepares ahead (with num_workers > 0).
        pin_memory: Return batches in pinned memory (for fast host-to-GPU copies).
        worker_start_method: How workers start: "forkserver" (default: Lance is not fork-safe,
            and a fork server that preloads torch/pyarrow starts workers in well under a
            second), "spawn", or "fork" (only safe if nothing in this process used Lance yet).
        allow_stale: Read packed shards even when a later lake version deleted episodes they
            hold (default: refuse, naming the version and its reason).
        shuffle_block: 0 (default): the shuffle is uniform over the whole epoch, sample by
            sample. N > 0: a block shuffle for object storage (`loaders.blocks.block_order`,
            MosaicML's py1b): blocks of N consecutive shard rows (the shard loader) or lake
            samples (the lake stream) are permuted and shuffled together `shuffle_window` blocks
            at a time, so each block is read whole, once, with a few large GETs. Every stretch
            of the order then draws from N x shuffle_window samples instead of the whole epoch.
        shuffle_window: Blocks whose samples a block shuffle interleaves (default 16).
        read_cache_bytes: Memory per process (the lake stream: per lake table) for whole blocks
            of rows read and kept (default 256 MiB; `loaders.blocks.block_reads_for`): data that
            fits half of it is read block by block once, in the background, whatever the
            shuffle; larger data only with a block shuffle. 0 reads row by row.
    """

    sequences_per_batch: int = 1
    image_size: int = 224
    seed: int = 0
    shuffle: bool = True
    drop_last: bool = False
    max_state_dim: int | None = None
    max_action_dim: int | None = None
    num_workers: int = 2
    prefetch_factor: int = 2
    pin_memory: bool = False
    worker_start_method: str = "forkserver"
    allow_stale: bool = False
    shuffle_block: int = 0
    shuffle_window: int = 16
    read_cache_bytes: int = READ_CACHE_BYTES

    def __post_init__(self) -> None:
        if self.sequences_per_batch < 1:
            raise ValueError(f"sequences_per_batch must be >= 1, got {self.sequences_per_batch}")
        if self.image_size < 1:
            raise ValueError(f"image_size must be >= 1, got {self.image_size}")
        for name in ("max_state_dim", "max_action_dim"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"{name} must be >= 1 or None (widest in the shards), got {v}")
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {self.num_workers}")
        if self.prefetch_factor < 1:
            raise ValueError(f"prefetch_factor must be >= 1, got {self.prefetch_factor}")
        if self.shuffle_block < 0 or self.shuffle_window < 1:
            raise ValueError(
                f"shuffle_block must be >= 0 and shuffle_window >= 1, got {self.shuffle_block}, {self.shuffle_window}"
            )
        if self.read_cache_bytes < 0:
            raise ValueError(f"read_cache_bytes must be >= 0 (0 reads row by row), got {self.read_cache_bytes}")
        if self.worker_start_method not in ("forkserver", "spawn", "fork"):
            raise ValueError(
                f"worker_start_method must be 'forkserver', 'spawn' or 'fork', got {self.worker_start_method!r}"
            )

    def collate_config(self, shards: PackedShards) -> CollateConfig:
        """The collate settings for `shards` (padded widths default to the widest in the shards)."""
        return CollateConfig(
            tokens_per_view=shards.tokens_per_view,
            image_size=self.image_size,
            max_state_dim=self.max_state_dim or shards.max_state_dim,
            max_action_dim=self.max_action_dim or shards.max_action_dim,
            history_width=shards.manifest.pack_spec.history_width if shards.manifest.pack_spec.history else 0,
        )
