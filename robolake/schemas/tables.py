"""Typed row definitions of the lake tables, and the pyarrow schemas generated from them.

Each table is described once, here, by a frozen dataclass whose fields carry their Arrow type in
the field metadata. `schema_of(Row)` turns the dataclass into a `pa.Schema`; writers build
columnar tables against that schema, so a misspelt or mistyped column fails at write time rather
than surfacing as a silent schema drift between two Lance fragments.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

__all__ = [
    "EpisodeRow",
    "StepRow",
    "MediaRow",
    "QuarantineRow",
    "EmbodimentRow",
    "TABLES",
    "schema_of",
    "schema_for_table",
]


def _col(arrow_type: pa.DataType, doc: str, *, nullable: bool = False) -> Any:
    return field(metadata={"arrow": arrow_type, "doc": doc, "nullable": nullable})


@dataclass(frozen=True, kw_only=True)
class EpisodeRow:
    """One recorded episode."""

    episode_id: str = _col(pa.string(), "Stable id: '<source>/<episode index>-<content hash prefix>'.")
    source_uri: str = _col(pa.string(), "Root of the source dataset the episode came from.")
    source_format: str = _col(pa.string(), "Reader that produced it: lerobot-v2.0, lerobot-v2.1, lerobot-v3.0, synthetic.")
    source_episode_index: int = _col(pa.int64(), "Episode index inside the source dataset.")
    embodiment: str = _col(pa.string(), "Embodiment tag; its spec is in the embodiments table.")
    task: str = _col(pa.string(), "Language instruction (the episode's most frequent task).")
    num_steps: int = _col(pa.int64(), "Number of time steps (rows in the steps table).")
    fps: float = _col(pa.float64(), "Recording frame rate.")
    cameras: list[str] = _col(pa.list_(pa.string()), "Camera names with frames in the media table.")
    success: bool | None = _col(pa.bool_(), "Whether the episode succeeded, when the source says.", nullable=True)
    content_hash: str = _col(pa.string(), "sha256 of the episode's content; decides idempotent re-ingest.")
    ingested_at: int = _col(pa.int64(), "Ingest time, unix nanoseconds.")
    metadata: str = _col(pa.string(), "Free-form JSON (all tasks, source paths, reader details).")


@dataclass(frozen=True, kw_only=True)
class StepRow:
    """One time step of one episode."""

    episode_id: str = _col(pa.string(), "Episode this step belongs to.")
    embodiment: str = _col(pa.string(), "Denormalised from episodes so steps filter without a join.")
    step_index: int = _col(pa.int32(), "0-based position in the episode.")
    timestamp: float = _col(pa.float64(), "Seconds from the episode's first step (so it starts at 0).")
    state: list[float] = _col(pa.list_(pa.float32()), "Proprioceptive state; layout from the embodiment spec.")
    action: list[float] = _col(pa.list_(pa.float32()), "Commanded action; layout from the embodiment spec.")
    task_index: int = _col(pa.int32(), "Index into the episode's metadata 'tasks' list.")


@dataclass(frozen=True, kw_only=True)
class MediaRow:
    """One encoded camera frame: read alone, without decoding a video."""

    episode_id: str = _col(pa.string(), "Episode this frame belongs to.")
    camera: str = _col(pa.string(), "Camera name (modality.json video key).")
    step_index: int = _col(pa.int32(), "Step the frame belongs to.")
    timestamp: float = _col(pa.float64(), "Seconds from the episode's first step.")
    width: int = _col(pa.int32(), "Frame width in pixels.")
    height: int = _col(pa.int32(), "Frame height in pixels.")
    encoding: str = _col(pa.string(), "Image codec of `data` (jpeg).")
    data: bytes = _col(pa.large_binary(), "Encoded image bytes.")


@dataclass(frozen=True, kw_only=True)
class QuarantineRow:
    """An input that could not be ingested, with what to do about it."""

    source_uri: str = _col(pa.string(), "Root of the source dataset.")
    source_path: str = _col(pa.string(), "The file (or files) at fault.")
    source_format: str = _col(pa.string(), "Reader that rejected it.")
    source_episode_index: int = _col(pa.int64(), "Episode index in the source, -1 when unknown.")
    reason_code: str = _col(pa.string(), "Machine-readable class: corrupt_file, missing_video, frame_count, non_finite, ...")
    reason: str = _col(pa.string(), "What is wrong and what to do next.")
    quarantined_at: int = _col(pa.int64(), "Unix nanoseconds.")


@dataclass(frozen=True, kw_only=True)
class EmbodimentRow:
    """One embodiment: its spec (modality.json semantics) and normalisation statistics."""

    embodiment: str = _col(pa.string(), "Embodiment tag.")
    spec_json: str = _col(pa.string(), "EmbodimentSpec as JSON (GR00T modality.json plus cameras, fps, dims).")
    stats_json: str = _col(pa.string(), "Per-dimension state/action statistics as JSON: mean, std, min, max, q01, q99, count.")
    num_episodes: int = _col(pa.int64(), "Episodes of this embodiment in the lake.")
    num_steps: int = _col(pa.int64(), "Steps of this embodiment in the lake.")


TABLES: dict[str, type] = {
    "episodes": EpisodeRow,
    "steps": StepRow,
    "media": MediaRow,
    "quarantine": QuarantineRow,
    "embodiments": EmbodimentRow,
}


def schema_of(row_cls: type) -> pa.Schema:
    """Build the pyarrow schema of a row dataclass from its fields' metadata."""
    fields = []
    for f in dataclasses.fields(row_cls):
        meta = f.metadata
        fields.append(
            pa.field(f.name, meta["arrow"], nullable=meta["nullable"], metadata={"doc": meta["doc"]})
        )
    return pa.schema(fields)


def schema_for_table(name: str) -> pa.Schema:
    """The pyarrow schema of lake table `name`.

    Raises:
        KeyError: `name` is not a lake table.
    """
    try:
        return schema_of(TABLES[name])
    except KeyError:
        raise KeyError(f"unknown lake table {name!r}; the tables are {sorted(TABLES)}") from None
