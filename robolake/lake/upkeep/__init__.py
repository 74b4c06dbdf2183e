"""What keeps a lake healthy: check, gc, optimize (compaction and access copies) and format upgrade
(private to robolake.lake).
"""
