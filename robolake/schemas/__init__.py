"""Typed definitions of everything robolake stores and hands on: lake tables, embodiments, format
versions, packed rows, and the batch contract (`robolake.schemas.batch`, torch + numpy only, imported
explicitly so `import robolake.schemas` does not pull in torch).

The pyarrow schemas (`schemas/tables.py`, `schemas/packed.py`) are resolved on first use, so that
importing the batch contract, and with it the model, needs neither pyarrow nor the lake stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec
from robolake.schemas.varlen import cu_seqlens_from_lengths, position_ids_from_lengths
from robolake.schemas.version import (
    LAKE_FORMAT_VERSION,
    SUPPORTED_FORMAT_VERSIONS,
    UnsupportedLakeVersionError,
)

if TYPE_CHECKING:
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

_PYARROW_NAMES: dict[str, str] = {
    "PackedRow": "robolake.schemas.packed",
    "packed_schema": "robolake.schemas.packed",
    **dict.fromkeys(
        [
            "TABLES",
            "EmbodimentRow",
            "EpisodeRow",
            "MediaRow",
            "QuarantineRow",
            "StepRow",
            "schema_for_table",
            "schema_of",
        ],
        "robolake.schemas.tables",
    ),
}

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


def __getattr__(name: str) -> Any:
    module = _PYARROW_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'robolake.schemas' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
