"""robolake.training."""
