"""Deprecated: moved to `robolake.loaders.shards` (kept for one release)."""

import warnings

from robolake.loaders.shards import PackedShards, check_lineage, open_shards

__all__ = ["PackedShards", "check_lineage", "open_shards"]

warnings.warn("robolake.loaders.source moved to robolake.loaders.shards", DeprecationWarning, stacklevel=2)
