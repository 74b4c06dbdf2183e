"""Collate: packed-shard rows -> one PackedBatch.

A packed shard row stores one packed sequence with its per-sample values flat and a count per
sample next to them (`schemas/packed.py`). Collating a few rows means flattening each list column
once across the rows (Arrow does that without a Python loop), splitting the flat values with the
counts, decoding each view's JPEG to `image_size` x `image_size`, and handing the pieces to
`make_packed_batch`, the one builder of the batch contract.

The backbone lengths the loader derives (`views * tokens_per_view + text tokens`) must equal the
ones the packer stored in `cu_seqlens`: if they differ, the shards were packed with another token
model than the one the loader reads them with, and training on them would cut attention at the
wrong places. `collate_rows` checks this for every batch and raises instead.

Frames may also arrive already decoded (the Ray Data path decodes them in its own map stage): a
`pixels` column of raw uint8 `image_size * image_size * 3` buffers per view replaces `frames`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from robolake.lake import decode_frame, frame_size
from robolake.schemas.batch import PackedBatch, make_packed_batch

__all__ = ["CollateConfig", "collate_rows", "decode_views"]

log = logging.getLogger(__name__)
_resize_logged = False


@dataclass(frozen=True, kw_only=True)
class CollateConfig:
    """How rows become a PackedBatch; the same for every batch of a run.

    Attributes:
        tokens_per_view: Backbone tokens per camera view (the pack spec's `tokens.tokens_per_view`).
        image_size: Views are decoded and resized to image_size x image_size RGB.
        max_state_dim: Width state vectors are padded to.
        max_action_dim: Width action vectors are padded to.
        history_width: Values per stream-history token (the pack spec's `history_width`); 0:
            the shards carry no history.
    """

    tokens_per_view: int
    image_size: int
    max_state_dim: int
    max_action_dim: int
    history_width: int = 0

    def __post_init__(self) -> None:
        for name in ("tokens_per_view", "image_size", "max_state_dim", "max_action_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"CollateConfig.{name} must be a positive integer, got {value!r}")


def _flat(table: pa.Table, name: str) -> pa.Array:
    """A list column's values across all rows, in row order."""
    col = table.column(name)
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return arr.flatten()


def _np(table: pa.Table, name: str) -> np.ndarray:
    return _flat(table, name).to_numpy(zero_copy_only=False)


def _split(flat: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    return np.split(flat, np.cumsum(counts)[:-1]) if len(counts) else []


def decode_views(frames: list[bytes], image_size: int) -> np.ndarray:
    """uint8 [V, image_size, image_size, 3] of encoded frames (JPEG/PNG), resized where needed.

    Shards packed with `--image-size` equal to `image_size` hold frames at that size already, so
    this only decodes; other shards pay a resize per view per epoch (logged once).
    """
    global _resize_logged
    if frames and not _resize_logged:
        h, w = frame_size(frames[0])
        if (h, w) != (image_size, image_size):
            _resize_logged = True
            log.info(
                "shard frames are %dx%d, the loader wants %dx%d: resizing every view every epoch; "
                "`robolake pack --image-size %d` writes them at that size once",
                w,
                h,
                image_size,
                image_size,
                image_size,
            )
    out = np.empty((len(frames), image_size, image_size, 3), dtype=np.uint8)
    for i, data in enumerate(frames):
        decode_frame(data, size=(image_size, image_size), out=out[i])
    return out


def _pixels(table: pa.Table, image_size: int) -> np.ndarray:
    if "pixels" in table.column_names:
        raw = _flat(table, "pixels").to_pylist()
        if not raw:
            return np.zeros((0, image_size, image_size, 3), np.uint8)
        arr = np.frombuffer(bytearray(b"".join(raw)), dtype=np.uint8)  # writable, as torch wants
        if arr.size != len(raw) * image_size * image_size * 3:
            raise ValueError(
                f"decoded views are not {image_size}x{image_size} RGB; decode and collate with the same image_size"
            )
        return arr.reshape(len(raw), image_size, image_size, 3)
    return decode_views(_flat(table, "frames").to_pylist(), image_size)


def collate_rows(rows: pa.Table | pa.RecordBatch, config: CollateConfig) -> PackedBatch:
    """Collate packed-shard rows (one or several packed sequences) into one PackedBatch.

    Samples keep the order of the rows and, within a row, the packed order; `cu_seqlens` of the
    batch is the rows' stored boundaries laid end to end.

    Args:
        rows: Rows with the packed-shard schema (`packed_schema()`); `frames` may be replaced by
            `pixels` (raw decoded views, see `decode_views`).
        config: Token model, image size and padded widths.

    Returns:
        The batch; `sample_keys` holds (episode_id, step_index) of every sample.

    Raises:
        ValueError: the rows are empty, a vector is wider than the padded width, or the lengths
            the loader derives differ from the stored `cu_seqlens` (shards packed with another
            token model: re-run `robolake pack`).
    """
    table = pa.Table.from_batches([rows]) if isinstance(rows, pa.RecordBatch) else rows
    if table.num_rows == 0:
        raise ValueError("cannot collate zero packed rows into a batch")
    horizons = set(table.column("horizon").to_pylist())
    if len(horizons) != 1:
        raise ValueError(f"rows of one batch have different action horizons {sorted(horizons)}; pack them separately")
    horizon = horizons.pop()

    views = _np(table, "num_views").astype(np.int64)
    text_lengths = _np(table, "text_lengths").astype(np.int64)
    state_dims = _np(table, "state_dims").astype(np.int64)
    action_dims = _np(table, "action_dims").astype(np.int64)
    n = len(views)
    if int(state_dims.max(initial=0)) > config.max_state_dim or int(action_dims.max(initial=0)) > config.max_action_dim:
        raise ValueError(
            f"a sample has state width {int(state_dims.max())} / action width {int(action_dims.max())}, more than "
            f"max_state_dim={config.max_state_dim} / max_action_dim={config.max_action_dim}; "
            "raise them in the loader config"
        )
    text = _split(_np(table, "text_ids").astype(np.int64), text_lengths)
    state = _split(_np(table, "state").astype(np.float32), state_dims)
    flat_actions = _split(_np(table, "action").astype(np.float32), action_dims * horizon)
    action = [a.reshape(horizon, int(d)) for a, d in zip(flat_actions, action_dims, strict=True)]
    episode_ids = _flat(table, "episode_id").to_pylist()
    steps = _np(table, "step_index").astype(np.int64).tolist()
    history = _history(table, config.history_width, n) if config.history_width else None

    batch = make_packed_batch(
        pixels=_pixels(table, config.image_size),
        views_per_sample=views,
        text_ids=text,
        state=state,
        action=action,
        action_valid_steps=_np(table, "action_valid").astype(np.int64),
        embodiment_id=_np(table, "embodiment_id").astype(np.int64),
        tokens_per_view=config.tokens_per_view,
        max_state_dim=config.max_state_dim,
        max_action_dim=config.max_action_dim,
        sample_keys=tuple(zip(episode_ids, steps, strict=True)),
        history=history,
        history_width=config.history_width,
    )
    _check_boundaries(table, batch, n)
    return batch


def _history(table: pa.Table, width: int, n: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per sample (values [k, width], dt [k], stream ids [k]) of its stream-history tokens."""
    if "history_lengths" not in table.column_names:
        raise ValueError(
            "these shards carry no stream history (packed without --history); collate with history_width=0"
        )
    lengths = _np(table, "history_lengths").astype(np.int64)
    if len(lengths) != n:
        raise ValueError(f"history_lengths holds {len(lengths)} samples for {n}: the shards are damaged; re-run pack")
    values = _np(table, "history_values").astype(np.float32).reshape(-1, width)
    dt = _np(table, "history_dt").astype(np.float32)
    ids = _np(table, "history_stream").astype(np.int64)
    return list(zip(_split(values, lengths), _split(dt, lengths), _split(ids, lengths), strict=True))


def _check_boundaries(table: pa.Table, batch: PackedBatch, n: int) -> None:
    """The batch's cu_seqlens must be the stored ones, row after row."""
    stored = [np.asarray(cu, dtype=np.int64) for cu in table.column("cu_seqlens").to_pylist()]
    lengths = np.concatenate([np.diff(cu) for cu in stored]) if stored else np.zeros(0, np.int64)
    expected = np.concatenate([[0], np.cumsum(lengths)])
    got = batch.cu_seqlens.numpy().astype(np.int64)
    if lengths.size != n or not np.array_equal(expected, got):
        seqs = table.column("seq_index").to_pylist()
        bad = int(np.argmax(expected[: got.size] != got[: expected.size])) if lengths.size == n else -1
        raise ValueError(
            f"packed sequences {seqs}: the loader's sample lengths disagree with the stored cu_seqlens "
            f"(first difference at sample {bad}: stored {expected[bad] if bad >= 0 else lengths.size} vs "
            f"derived {got[bad] if bad >= 0 else n}); the shards were packed with another token model "
            "(tokens_per_view / tokenizer) than the manifest says: re-run `robolake pack`"
        )
