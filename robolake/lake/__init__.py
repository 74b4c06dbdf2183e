"""The lake: versioned Lance tables of robot episodes, their ingest, frames, upkeep and export.

This module is the lake's one public face: other packages import from `robolake.lake` only (the
layers contract in `pyproject.toml` fails the test command otherwise). Behind it, rooms that
each do one job and are private to the lake:

- `lake.py`, `query.py`, `where.py` — the `Lake` handle (open/create, tables, versions), episode
  filters, and the safe `--where` language every curation verb and mixture uses.
- `align.py` — a new steps rendition derived from the record of every stream (`robolake align`).
- `where_steps.py` — `--where-steps`: which steps of an episode an expression picks (`robolake trim`).
- `doctor.py` — findings from each episode's quality (measured at ingest) and across the lake.
- `protocol/` — how a version is written: manifests, transactions with one commit retry loop,
  the write lease, fault hooks, tags and tag sets, dependents, the creation marker, row offsets.
- `media/` — camera frames: the record (recorded bitstreams), codecs, `FrameReader`, and which
  frames a trimmed episode's steps show (`kept.py`).
- `intake/` — everything that writes new episodes in: `ingest` of raw logs, rollouts.
- `sources/` — one reader per log format (a sub-package per family) behind one protocol.
- `stats/` — normalisation statistics, quantile sketches, per-episode quality and the
  embodiments table they feed.
- `upkeep/` — what keeps a lake healthy: `check`, `gc`, `optimize` (compaction and access
  copies); the format upgrade lives with the write protocol.
- `lerobot_layout.py` — task numbering, camera keys and timestamps of a lake read as LeRobot data
  (export and the LeRobot adapter agree through it).
- `export.py` — a lake version out to LeRobot v3.0 (or LeRobot's Lance layout), optionally
  rendered from the record at another rate.
"""

from robolake.lake.align import AlignResult, AlignSpec, align_lake
from robolake.lake.doctor import (
    CHECKS,
    DoctorReport,
    Finding,
    doctor,
    episode_findings,
    quality_counts,
    write_doctor_html,
)
from robolake.lake.export import ExportConfig, export_lerobot
from robolake.lake.intake.ingest import IngestConfig, IngestResult, ingest
from robolake.lake.intake.rollouts import (
    RolloutEpisode,
    RolloutOrigin,
    RolloutTarget,
    RolloutWriteResult,
    write_rollouts,
)
from robolake.lake.lake import Lake
from robolake.lake.lerobot_layout import episode_tasks, lerobot_cameras, lerobot_timestamps, task_order, video_key
from robolake.lake.media.codecs import render_rgb
from robolake.lake.media.frames import (
    MEDIA_ROW_COLUMNS,
    FrameReader,
    KeyframeEncoder,
    decode_frame,
    decode_row,
    encode_frame,
    frame_size,
    load_streams,
    record_images,
    standalone_images,
)
from robolake.lake.media.kept import TRIM_KEY, KeptSteps, kept_of
from robolake.lake.media.record import StreamIndex
from robolake.lake.protocol import faults
from robolake.lake.protocol.creation import clear_half_created, half_created, mark_creating, unmark_creating
from robolake.lake.protocol.dependents import record_dependent
from robolake.lake.protocol.offsets import row_offsets, take_offsets
from robolake.lake.protocol.tags import (
    Tag,
    TagExistsError,
    create_tag,
    create_tag_set,
    delete_tag,
    list_tags,
    read_tag,
)
from robolake.lake.protocol.transaction import (
    LakeTransaction,
    commit_fragments,
    fragments_from_json,
    fragments_to_json,
    restore_version,
    table_uri,
    write_fragments,
    write_table_fragments,
)
from robolake.lake.protocol.upgrade import upgrade
from robolake.lake.protocol.versions import (
    CommitConflictError,
    LakeVersion,
    list_versions,
    read_version,
    upgrade_note,
    who,
    write_format_marker,
)
from robolake.lake.query import EpisodeFilter, sql_in, sql_quote
from robolake.lake.sources import (
    FailedUnit,
    LeRobotReader,
    SourceError,
    SourceOptions,
    SourceReader,
    discover_readers,
    find_units,
    format_choices,
    format_names,
    formats,
    open_unit,
)
from robolake.lake.sources.limits import DEFAULT_MAX_READ_BYTES
from robolake.lake.sources.mapping import load_mapping, mapping_from_dict
from robolake.lake.sources.record import EventStream, Record, SignalPart, read_record, steps_seconds, stream_summary
from robolake.lake.sources.rlds.tfrecord import encode_example, write_records
from robolake.lake.sources.video import iter_video_frames, seek_frame
from robolake.lake.stats.embodiments import add_embodiments, new_embodiment_row, refresh_embodiments
from robolake.lake.stats.norm import NormStats, VectorStats, accumulate_norm_stats
from robolake.lake.stats.quality import episode_quality, idle_steps
from robolake.lake.upkeep.access import build_access_copy, drop_access_copy
from robolake.lake.upkeep.check import check_lake, missing_files
from robolake.lake.upkeep.compact import EPISODE_TABLES, OptimizeReport, needs_compaction, optimize
from robolake.lake.upkeep.gc import gc, parse_age
from robolake.lake.where import Where, WhereError, parse_where, select_episode_ids, source_path_of
from robolake.lake.where_steps import STEP_NAMES, StepWhere, parse_where_steps, steps_matching

__all__ = [
    "episode_tasks",
    "lerobot_cameras",
    "lerobot_timestamps",
    "task_order",
    "video_key",
    "KeptSteps",
    "STEP_NAMES",
    "StepWhere",
    "TRIM_KEY",
    "episode_quality",
    "idle_steps",
    "kept_of",
    "parse_where_steps",
    "steps_matching",
    "AlignResult",
    "AlignSpec",
    "align_lake",
    "CHECKS",
    "DoctorReport",
    "Finding",
    "doctor",
    "episode_findings",
    "quality_counts",
    "write_doctor_html",
    "EventStream",
    "Record",
    "SignalPart",
    "read_record",
    "stream_summary",
    "steps_seconds",
    "upgrade_note",
    "clear_half_created",
    "faults",
    "half_created",
    "mark_creating",
    "unmark_creating",
    "CommitConflictError",
    "DEFAULT_MAX_READ_BYTES",
    "EPISODE_TABLES",
    "EpisodeFilter",
    "ExportConfig",
    "FailedUnit",
    "FrameReader",
    "IngestConfig",
    "IngestResult",
    "KeyframeEncoder",
    "Lake",
    "LakeTransaction",
    "LakeVersion",
    "LeRobotReader",
    "MEDIA_ROW_COLUMNS",
    "NormStats",
    "OptimizeReport",
    "RolloutEpisode",
    "RolloutOrigin",
    "RolloutTarget",
    "RolloutWriteResult",
    "SourceError",
    "SourceOptions",
    "SourceReader",
    "StreamIndex",
    "Tag",
    "TagExistsError",
    "VectorStats",
    "accumulate_norm_stats",
    "add_embodiments",
    "build_access_copy",
    "check_lake",
    "commit_fragments",
    "create_tag",
    "create_tag_set",
    "decode_frame",
    "decode_row",
    "delete_tag",
    "discover_readers",
    "drop_access_copy",
    "encode_example",
    "encode_frame",
    "export_lerobot",
    "find_units",
    "format_choices",
    "format_names",
    "formats",
    "fragments_from_json",
    "fragments_to_json",
    "frame_size",
    "gc",
    "ingest",
    "iter_video_frames",
    "list_tags",
    "list_versions",
    "load_mapping",
    "mapping_from_dict",
    "load_streams",
    "missing_files",
    "needs_compaction",
    "new_embodiment_row",
    "open_unit",
    "optimize",
    "parse_age",
    "read_tag",
    "read_version",
    "record_dependent",
    "record_images",
    "refresh_embodiments",
    "render_rgb",
    "restore_version",
    "row_offsets",
    "take_offsets",
    "seek_frame",
    "sql_in",
    "sql_quote",
    "standalone_images",
    "table_uri",
    "upgrade",
    "who",
    "write_fragments",
    "write_format_marker",
    "write_records",
    "write_rollouts",
    "write_table_fragments",
    "Where",
    "WhereError",
    "parse_where",
    "select_episode_ids",
    "source_path_of",
]
