"""Loaders: the batch sources that deliver PackedBatches, `open_batches`, which picks one, and their
resumable state (`merge_states`: every rank's state into one a run of any world size continues from)."""

from robolake.loaders.collate import CollateConfig, collate_rows, decode_views
from robolake.loaders.config import LoaderConfig
from robolake.loaders.lake_stream import LakeStream
from robolake.loaders.open import open_batches
from robolake.loaders.ray_stream import RayPackedStream, RaySplit
from robolake.loaders.shards import PackedShards, check_lineage, open_shards
from robolake.loaders.state import merge_states, read_state, write_state
from robolake.loaders.stream import stream
from robolake.loaders.torch_loader import PackedLoader, PackedShardDataset, epoch_batches
from robolake.schemas.batch import (
    BatchLayout,
    BatchSource,
    LoaderState,
    PackedBatch,
    PaddedBatch,
    make_packed_batch,
)

__all__ = [
    "BatchLayout",
    "BatchSource",
    "open_batches",
    "CollateConfig",
    "LoaderState",
    "LakeStream",
    "LoaderConfig",
    "PackedBatch",
    "PackedLoader",
    "PackedShardDataset",
    "PackedShards",
    "PaddedBatch",
    "RayPackedStream",
    "RaySplit",
    "check_lineage",
    "collate_rows",
    "decode_views",
    "epoch_batches",
    "make_packed_batch",
    "merge_states",
    "open_shards",
    "read_state",
    "stream",
    "write_state",
]
