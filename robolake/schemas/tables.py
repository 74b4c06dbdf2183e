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
    "StreamRow",
    "QuarantineRow",
    "EmbodimentRow",
    "SignalRow",
    "EventRow",
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
    source_format: str = _col(
        pa.string(), "Reader that produced it: lerobot-v2.0, lerobot-v2.1, lerobot-v3.0, synthetic."
    )
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
    """One camera frame of one step (the `media` table: the record; the `access` table: a copy).

    `encoding` says what `data` is and how faithful it is (`robolake.lake.media.frames.fidelity`):
    `video;codec=h264` is the source video's own packet that carries this step's frame (its
    stream's `streams` row decodes it), `jpeg` / `png` / `webp` an image as the source recorded
    it, `ffv1;size=WxH` raw pixels compressed losslessly, and `jpeg;q=80` / `h264;gop=16;crf=22`
    lossy re-encodes (opt-in in the media table; what the access table holds).
    """

    episode_id: str = _col(pa.string(), "Episode this frame belongs to.")
    camera: str = _col(pa.string(), "Camera name (modality.json video key).")
    step_index: int = _col(pa.int32(), "Step the frame belongs to.")
    timestamp: float = _col(pa.float64(), "Seconds from the episode's first step.")
    width: int = _col(pa.int32(), "Frame width in pixels.")
    height: int = _col(pa.int32(), "Frame height in pixels.")
    encoding: str = _col(pa.string(), "Codec of `data` and its parameters (see the class docstring).")
    data: bytes = _col(pa.large_binary(), "The encoded frame (an image, or one packet of a video stream).")


@dataclass(frozen=True, kw_only=True)
class StreamRow:
    """One camera's source video of one episode, kept as recorded: what decoding its packets needs.

    The packets themselves are the `data` of the episode's `video;codec=...` media rows (one per
    step, the packet that carries that step's frame). The lists here run over the stream's
    packets in decode order; a packet that carries no frame of this episode (it belongs to the
    episode before, in a file that holds many, and this episode's first frames reference it)
    has step -1 and its bytes in `extra_packets`. See `robolake.lake.media.record`.
    """

    episode_id: str = _col(pa.string(), "Episode the stream belongs to.")
    camera: str = _col(pa.string(), "Camera name.")
    codec: str = _col(pa.string(), "Codec name (h264, hevc, av1, ...).")
    decoder: str = _col(pa.string(), "The FFmpeg decoder the source decode uses (h264, libdav1d, ...).")
    extradata: bytes = _col(pa.binary(), "Codec parameters from the container (avcC, hvcC, av1C); may be empty.")
    width: int = _col(pa.int32(), "Coded width.")
    height: int = _col(pa.int32(), "Coded height.")
    time_base_num: int = _col(pa.int64(), "Numerator of the time base of packet_pts / packet_dts.")
    time_base_den: int = _col(pa.int64(), "Denominator of that time base.")
    params: str = _col(
        pa.string(),
        "JSON: container-level decoder settings (colour range, space, primaries, transfer) and the pixel format.",
    )
    packet_step: list[int] = _col(
        pa.list_(pa.int32()), "Per packet in decode order: the step whose frame it carries, -1 for an extra packet."
    )
    packet_pts: list[int] = _col(pa.list_(pa.int64()), "Per packet: presentation time stamp, as in the source.")
    packet_dts: list[int] = _col(pa.list_(pa.int64()), "Per packet: decode time stamp, as in the source.")
    packet_key: list[bool] = _col(pa.list_(pa.bool_()), "Per packet: whether the source marks it a keyframe.")
    extra_packets: list[bytes] = _col(
        pa.list_(pa.large_binary()), "Bytes of the packets with step -1, in decode order."
    )
    source_path: str = _col(pa.string(), "The video file, relative to the episode's source_uri.")
    source_digest: str = _col(pa.string(), "sha256 of that file.")


@dataclass(frozen=True, kw_only=True)
class QuarantineRow:
    """An input that could not be ingested, with what to do about it."""

    source_uri: str = _col(pa.string(), "Root of the source dataset.")
    source_path: str = _col(pa.string(), "The file (or files) at fault.")
    source_format: str = _col(pa.string(), "Reader that rejected it.")
    source_episode_index: int = _col(pa.int64(), "Episode index in the source, -1 when unknown.")
    reason_code: str = _col(
        pa.string(), "Machine-readable class: corrupt_file, missing_video, frame_count, non_finite, ..."
    )
    reason: str = _col(pa.string(), "What is wrong and what to do next.")
    quarantined_at: int = _col(pa.int64(), "Unix nanoseconds.")


@dataclass(frozen=True, kw_only=True)
class EmbodimentRow:
    """One embodiment: its spec (modality.json semantics) and normalisation statistics."""

    embodiment: str = _col(pa.string(), "Embodiment tag.")
    spec_json: str = _col(pa.string(), "EmbodimentSpec as JSON (GR00T modality.json plus cameras, fps, dims).")
    stats_json: str = _col(
        pa.string(), "Per-dimension state/action statistics as JSON: mean, std, min, max, q01, q99, count."
    )
    num_episodes: int = _col(pa.int64(), "Episodes of this embodiment in the lake.")
    num_steps: int = _col(pa.int64(), "Steps of this embodiment in the lake.")


@dataclass(frozen=True, kw_only=True)
class SignalRow:
    """A chunk of one recorded stream of one episode, every message as the source wrote it.

    A stream is one topic (or dataset key); messages of one topic whose layout differs (two
    publishers with different joints, a TF topic whose messages carry different frames) form
    parts. Each numeric field of a part keeps its own dtype and width: field `i`'s values are
    `numpy.frombuffer(data[i], dtypes[i]).reshape(count, widths[i])`. See
    `robolake.lake.sources.record`.
    """

    episode_id: str = _col(pa.string(), "Episode the stream belongs to.")
    stream: str = _col(pa.string(), "Topic or key name, as recorded.")
    part: int = _col(pa.int32(), "Layout group of the stream (0 unless its messages' layout changes).")
    chunk: int = _col(pa.int32(), "Order of this chunk within the part.")
    kind: str = _col(pa.string(), "numeric, or camera (capture times of frames; no values).")
    msgtype: str = _col(pa.string(), "Message type or source dtype description.")
    clock: str = _col(
        pa.string(),
        "What t_ns is: header (message stamps), log (receive time), source (seconds) or rows (index / fps).",
    )
    count: int = _col(pa.int32(), "Messages in this chunk.")
    t_ns: list[int] = _col(pa.list_(pa.int64()), "Per message: its time in ns on the stream's clock.")
    log_ns: list[int] = _col(pa.list_(pa.int64()), "Per message: its log (receive) time in ns; empty when none.")
    fields: list[str] = _col(pa.list_(pa.string()), "Dotted field paths of the numeric values.")
    dtypes: list[str] = _col(pa.list_(pa.string()), "numpy dtype string of each field, as the source wrote it.")
    widths: list[int] = _col(pa.list_(pa.int32()), "Values per message of each field.")
    scalars: list[bool] = _col(pa.list_(pa.bool_()), "Per field: the source held a scalar (not an array of one).")
    data: list[bytes] = _col(pa.list_(pa.large_binary()), "Per field: count x width values, little-endian, C order.")
    labels: str = _col(pa.string(), "JSON: the part's non-numeric fields (joint names, frame ids), constant in it.")
    source_path: str = _col(pa.string(), "The file the messages came from.")


@dataclass(frozen=True, kw_only=True)
class EventRow:
    """One timestamped event of one episode: a flag, a label, a note, a trigger."""

    episode_id: str = _col(pa.string(), "Episode the event belongs to.")
    stream: str = _col(pa.string(), "Topic, key or field the event came from.")
    kind: str = _col(pa.string(), "bool, enum, string or trigger (a message without content).")
    t_ns: int = _col(pa.int64(), "Its time in ns on the stream's clock (see signals.clock).")
    log_ns: int | None = _col(pa.int64(), "Its log (receive) time in ns, when there is one.", nullable=True)
    value: str | None = _col(pa.string(), "true/false, the enum value, the text; null for a trigger.", nullable=True)
    source_path: str = _col(pa.string(), "The file it came from.")


TABLES: dict[str, type] = {
    "episodes": EpisodeRow,
    "steps": StepRow,
    "media": MediaRow,
    "streams": StreamRow,
    "access": MediaRow,  # access copies: same columns as media, rebuilt from it (robolake.lake.upkeep.access)
    "quarantine": QuarantineRow,
    "embodiments": EmbodimentRow,
    "signals": SignalRow,  # the record of every non-camera stream (robolake.lake.sources.record)
    "events": EventRow,
}


def schema_of(row_cls: type) -> pa.Schema:
    """Build the pyarrow schema of a row dataclass from its fields' metadata."""
    fields = []
    for f in dataclasses.fields(row_cls):
        meta = f.metadata
        fields.append(pa.field(f.name, meta["arrow"], nullable=meta["nullable"], metadata={"doc": meta["doc"]}))
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
