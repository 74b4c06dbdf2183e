"""Typed definitions of everything robolake stores and hands on: lake tables, embodiments, format
versions, packed rows, and the batch contract (`robolake.schemas.batch`, torch + numpy only, imported
explicitly so `import robolake.schemas` does not pull in torch)."""

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
from robolake.schemas.varlen import cu_seqlens_from_lengths, position_ids_from_lengths
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
    "cu_seqlens_from_lengths",
    "position_ids_from_lengths",
]
