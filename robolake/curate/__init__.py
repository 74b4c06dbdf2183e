"""Curation verbs: change which episodes a lake version holds, name subsets, combine lakes.

Each verb that changes a lake publishes one new lake version through the write lease, with who,
what and why in its manifest; each verb that only names data writes a tag. Nothing a version can
reference is copied.
"""

from robolake.curate.clone import merge, select_into
from robolake.curate.dedup import DedupResult, dedup
from robolake.curate.diff import LakeDiff, diff
from robolake.curate.edit import CurationResult, delete, restore_episodes, select, tag_selection
from robolake.curate.split import SplitConfig, SplitResult, split, split_tag
from robolake.curate.trim import TrimResult, TrimSpec, trim
from robolake.lake import (
    OptimizeReport,
    WhereError,
    needs_compaction,
    optimize,
    parse_where,
    select_episode_ids,
)

__all__ = [
    "CurationResult",
    "DedupResult",
    "LakeDiff",
    "OptimizeReport",
    "SplitConfig",
    "SplitResult",
    "WhereError",
    "dedup",
    "delete",
    "diff",
    "merge",
    "needs_compaction",
    "optimize",
    "parse_where",
    "restore_episodes",
    "select",
    "select_episode_ids",
    "select_into",
    "split",
    "split_tag",
    "tag_selection",
    "trim",
    "TrimResult",
    "TrimSpec",
]
