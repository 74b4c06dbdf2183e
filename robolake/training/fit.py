"""Deprecated: moved to `robolake.training.sizing` (kept for one release)."""

import warnings

from robolake.training.sizing import fit_model_config, size_model_config

__all__ = ["fit_model_config", "size_model_config"]

warnings.warn("robolake.training.fit moved to robolake.training.sizing", DeprecationWarning, stacklevel=2)
