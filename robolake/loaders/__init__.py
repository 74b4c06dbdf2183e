"""Loaders: PackedBatch and the streams that deliver it."""

from robolake.loaders.batch import PackedBatch, PaddedBatch, make_packed_batch
from robolake.loaders.collate import CollateConfig, collate_rows, decode_views
from robolake.loaders.lake_stream import LakeStream
from robolake.loaders.ray_stream import RayPackedStream, RaySplit
from robolake.loaders.shards import LoaderConfig, PackedLoader, PackedShardDataset, epoch_batches
from robolake.loaders.source import PackedShards, check_lineage, open_shards
from robolake.loaders.stream import stream

__all__ = [
    "CollateConfig",
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
    "open_shards",
    "stream",
]
