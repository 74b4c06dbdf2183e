"""Typed definitions of everything robolake stores: lake tables, embodiments, format versions."""

from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec
from robolake.schemas.packed import PackedRow, packed_schema
from robolake.schemas.tables import (
    TABLES,
    EmbodimentRow,
    EpisodeRow,
    MediaRow,
    QuarantineRow,
    StepRow,
    schema_for_table,
    schema_of,
)
from robolake.schemas.varlen import (
    VarlenMetadata,
    cu_seqlens_from_lengths,
    position_ids_from_lengths,
)
from robolake.schemas.version import (
    LAKE_FORMAT_VERSION,
    SUPPORTED_FORMAT_VERSIONS,
    UnsupportedLakeVersionError,
)

__all__ = [
    "PackedRow",
    "packed_schema",
    "EmbodimentSpec",
    "SliceSpec",
    "TABLES",
    "EpisodeRow",
    "StepRow",
    "MediaRow",
    "QuarantineRow",
    "EmbodimentRow",
    "schema_of",
    "schema_for_table",
    "LAKE_FORMAT_VERSION",
    "SUPPORTED_FORMAT_VERSIONS",
    "UnsupportedLakeVersionError",
    "VarlenMetadata",
    "cu_seqlens_from_lengths",
    "position_ids_from_lengths",
]
