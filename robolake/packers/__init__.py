"""robolake.packers."""
