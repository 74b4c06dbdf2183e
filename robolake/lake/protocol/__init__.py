"""How a lake version is written and found: manifests, transactions and their one retry loop, the
lease, fault hooks, tags and tag sets, dependents, the creation marker, row offsets (private to
robolake.lake).
"""
