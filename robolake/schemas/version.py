"""The lake's on-disk format version."""

from __future__ import annotations

__all__ = ["LAKE_FORMAT_VERSION", "SUPPORTED_FORMAT_VERSIONS", "UnsupportedLakeVersionError"]

LAKE_FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = frozenset({1})


class UnsupportedLakeVersionError(RuntimeError):
    """The lake was written by a robolake whose format this one cannot read."""
