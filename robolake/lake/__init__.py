"""robolake.lake."""
