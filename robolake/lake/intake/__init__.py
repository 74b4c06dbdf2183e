"""Everything that writes new episodes into a lake: ingest of raw logs and rollouts, through the
one commit path (private to robolake.lake).
"""
