"""The lake: versioned Lance tables of robot episodes, their ingest and their frames."""

from robolake.lake.lake import Lake
from robolake.lake.media import FrameReader, decode_frame, encode_frame
from robolake.lake.query import EpisodeFilter
from robolake.lake.stats import NormStats, VectorStats
from robolake.lake.transaction import LakeTransaction
from robolake.lake.versions import CommitConflictError, LakeVersion

__all__ = [
    "Lake",
    "LakeTransaction",
    "LakeVersion",
    "CommitConflictError",
    "EpisodeFilter",
    "FrameReader",
    "NormStats",
    "VectorStats",
    "encode_frame",
    "decode_frame",
]
