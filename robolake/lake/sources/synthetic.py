"""Deprecated: moved to `robolake.writers.synthetic` (kept for one release)."""

import warnings

from robolake.writers.synthetic import *  # noqa: F401,F403
from robolake.writers.synthetic import __all__  # noqa: F401

warnings.warn(
    "robolake.lake.sources.synthetic moved to robolake.writers.synthetic; update the import",
    DeprecationWarning,
    stacklevel=2,
)
