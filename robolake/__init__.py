"""robolake: a Lance lake of robot episodes, packed cu_seqlens batches, a thin varlen/FP8 trainer."""

__version__ = "0.1.0"

__all__ = ["__version__"]
