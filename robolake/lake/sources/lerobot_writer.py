"""Deprecated: moved to `robolake.writers.lerobot` (kept for one release)."""

import warnings

from robolake.writers.lerobot import *  # noqa: F401,F403
from robolake.writers.lerobot import __all__  # noqa: F401

warnings.warn(
    "robolake.lake.sources.lerobot_writer moved to robolake.writers.lerobot; update the import",
    DeprecationWarning,
    stacklevel=2,
)
