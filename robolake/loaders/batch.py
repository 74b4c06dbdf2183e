"""Deprecated: PackedBatch moved to `robolake.schemas.batch` (kept for one release)."""

import warnings

from robolake.schemas.batch import PackedBatch, PaddedBatch, make_packed_batch

__all__ = ["PackedBatch", "PaddedBatch", "make_packed_batch"]

warnings.warn("robolake.loaders.batch moved to robolake.schemas.batch; update the import", DeprecationWarning, stacklevel=2)
