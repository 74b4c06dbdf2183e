"""Row definition of packed shards: one row is one packed sequence of samples.

A packed sequence holds n samples end to end (at most `max_tokens` backbone tokens). Per-sample
values are lists of length n; values with a variable size per sample (camera views, text tokens,
state and action vectors whose width depends on the embodiment) are stored flat with a per-sample
count next to them, so a row decodes with a few `np.split`s and no Python per element.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from robolake.schemas.tables import _col, schema_of

__all__ = ["PackedRow", "packed_schema", "HISTORY_COLUMNS"]

# Added with stream history: shards packed before them lack these columns and read as without history.
HISTORY_COLUMNS = ("history_lengths", "history_stream", "history_dt", "history_values")


@dataclass(frozen=True, kw_only=True)
class PackedRow:
    """One packed sequence."""

    seq_index: int = _col(pa.int64(), "Position of the sequence in the packing plan (0..num_sequences-1).")
    num_samples: int = _col(pa.int32(), "n, samples in the sequence.")
    total_tokens: int = _col(pa.int32(), "Backbone tokens of all samples (<= max_tokens).")
    horizon: int = _col(pa.int32(), "H, action chunk length.")
    episode_id: list[str] = _col(pa.list_(pa.string()), "[n] episode of each sample.")
    step_index: list[int] = _col(pa.list_(pa.int32()), "[n] step t of each sample.")
    embodiment: list[str] = _col(pa.list_(pa.string()), "[n] embodiment tag of each sample.")
    embodiment_id: list[int] = _col(pa.list_(pa.int32()), "[n] index of the tag in the manifest's embodiment list.")
    lengths: list[int] = _col(pa.list_(pa.int32()), "[n] backbone tokens of each sample.")
    cu_seqlens: list[int] = _col(pa.list_(pa.int32()), "[n+1] cumulative lengths, starting at 0.")
    num_views: list[int] = _col(pa.list_(pa.int32()), "[n] camera views of each sample.")
    cameras: list[str] = _col(pa.list_(pa.string()), "[sum num_views] camera name of each view.")
    frames: list[bytes] = _col(pa.list_(pa.large_binary()), "[sum num_views] encoded image of each view (JPEG).")
    text_lengths: list[int] = _col(pa.list_(pa.int32()), "[n] text tokens of each sample.")
    text_ids: list[int] = _col(pa.list_(pa.int32()), "[sum text_lengths] instruction token ids, flat.")
    state_dims: list[int] = _col(pa.list_(pa.int32()), "[n] state width of each sample.")
    state: list[float] = _col(pa.list_(pa.float32()), "[sum state_dims] normalised state at t, flat.")
    action_dims: list[int] = _col(pa.list_(pa.int32()), "[n] action width of each sample.")
    action: list[float] = _col(pa.list_(pa.float32()), "[sum H*action_dims] normalised actions t..t+H-1, flat.")
    action_valid: list[int] = _col(
        pa.list_(pa.int32()), "[n] steps of the chunk inside the episode (the rest repeat the last action)."
    )
    history_lengths: list[int] = _col(
        pa.list_(pa.int32()), "[n] stream-history tokens of each sample (messages in its window).", nullable=True
    )
    history_stream: list[int] = _col(
        pa.list_(pa.int32()), "[sum history_lengths] history stream id of each token.", nullable=True
    )
    history_dt: list[float] = _col(
        pa.list_(pa.float32()), "[sum history_lengths] seconds of each message before the sample (<= 0).", nullable=True
    )
    history_values: list[float] = _col(
        pa.list_(pa.float32()), "[sum history_lengths * history_width] normalised values, flat.", nullable=True
    )


def packed_schema() -> pa.Schema:
    return schema_of(PackedRow)
