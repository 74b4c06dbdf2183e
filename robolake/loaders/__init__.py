"""Loaders: PackedBatch and the streams that deliver it."""

from robolake.loaders.batch import PackedBatch, PaddedBatch, make_packed_batch

__all__ = ["PackedBatch", "PaddedBatch", "make_packed_batch"]
