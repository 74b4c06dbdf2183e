"""The record of a LeRobot episode: every column of its parquet rows, in the column's own type.

A LeRobot row is one tick of the recorder, so each column is a stream with one message per row
at the row's `timestamp` (clock `source`; `frame_index / fps`, clock `rows`, where a dataset has
no timestamp column). A number column (`next.reward` float64, `next.done` bool, `index` int64)
is a stream of scalars; a list column (`observation.state` list<double>[44]) a stream of vectors
of its element type, nested lists flattened row-major; rows of a list column that differ in
width form one part per width. A null row is no message; a null inside a row is NaN (an integer
or boolean column with nulls is read as float64, the one type that holds both). String columns
are string events. The cameras' frame times are `camera` parts: a row's timestamp is its frame's.

`episode_index` is left out: it is the same in every row of an episode and the episode row
keeps it (`source_episode_index`). So is a column of structures or bytes that is not a camera
(an image column the dataset does not use as one), with its reason.

The arrays are taken from the rows already read, zero-copy where Arrow allows (numbers without
nulls), so the record costs little beyond the parquet table the reader holds anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robolake.lake.sources.columnar import ColumnRecord

__all__ = ["record_rows", "column_values", "parquet_column_bytes", "SKIPPED"]

SKIPPED = {"episode_index": "the episode's own index, the same in every row; the episode row keeps it"}


def _is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))


def _is_number(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def column_values(column: pa.ChunkedArray | pa.Array) -> list[tuple[np.ndarray, np.ndarray, bool]] | str:
    """A number or list-of-numbers column as (row indices, values [n, width], scalar), one per width;
    or why it is not one (a string)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    rows = np.arange(len(arr), dtype=np.int64)
    if arr.null_count:
        valid = arr.is_valid()
        rows = np.flatnonzero(valid.to_numpy(zero_copy_only=False))
        arr = arr.filter(valid)
    n = len(arr)
    counts = np.ones(n, dtype=np.int64)  # leaf values per row
    scalar = not _is_list(arr.type)
    level: pa.Array = arr
    while _is_list(level.type):
        lens = pc.fill_null(pc.list_value_length(level), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        owner = np.repeat(np.arange(n, dtype=np.int64), counts)  # element of this level -> its row
        counts = np.bincount(owner, weights=lens, minlength=n).astype(np.int64)
        level = pc.list_flatten(level)
    if pa.types.is_timestamp(level.type) or pa.types.is_duration(level.type):
        level = level.cast(pa.int64())
    if not _is_number(level.type):
        return f"{column.type} values are not numbers"
    if level.null_count and not pa.types.is_floating(level.type):
        level = level.cast(pa.float64())  # NaN marks the nulls
    leaf = level.to_numpy(zero_copy_only=False)
    widths = np.unique(counts)
    if len(widths) <= 1:
        width = int(widths[0]) if len(widths) else 1
        return [(rows, leaf.reshape(n, width), scalar)]
    elem_row = np.repeat(np.arange(n, dtype=np.int64), counts)
    out = []
    for w in widths.tolist():
        sel = np.flatnonzero(counts == w)
        out.append((rows[sel], leaf[np.isin(elem_row, sel)].reshape(len(sel), int(w)), scalar))
    return out


def record_rows(
    table: pa.Table,
    into: ColumnRecord,
    *,
    t_ns: np.ndarray,
    clock: str,
    cameras: Mapping[str, str],
    mapped: Iterable[str] = (),
    column_bytes: Mapping[str, int] | None = None,
) -> None:
    """Every column of one episode's rows into `into`.

    Args:
        table: The episode's rows.
        t_ns: int64 time of each row.
        clock: What `t_ns` is (`source`, `rows`).
        cameras: Column or video key -> its dtype (`video`, `image`) of each camera with frames.
        mapped: Columns kept whatever `--streams` says (state, action, ...).
        column_bytes: Stored (compressed) bytes of each column, when the file holds this episode alone.
    """
    keep = set(mapped)
    sizes = column_bytes or {}
    for key, dtype in cameras.items():
        if into.wanted(key, mapped=True):
            into.camera(key, t_ns, clock=clock, msgtype=dtype)
    for name in table.column_names:
        if name in cameras:
            continue
        if name in SKIPPED:
            into.leave_out(name, SKIPPED[name])
            continue
        if not into.wanted(name, mapped=name in keep):
            continue
        col = table[name]
        if _is_text(col.type) or (pa.types.is_dictionary(col.type) and _is_text(col.type.value_type)):
            texts = col.cast(pa.string()).to_pylist() if pa.types.is_dictionary(col.type) else col.to_pylist()
            into.text(name, t_ns, texts, clock=clock, nbytes=sizes.get(name))
            continue
        parts = column_values(col)
        if isinstance(parts, str) and pa.types.is_struct(col.type) and col.type.get_field_index("bytes") >= 0:
            parts = "images (bytes and path per row), not a camera of this dataset"
        if isinstance(parts, str):
            into.leave_out(name, parts)
            continue
        for rows, values, scalar in parts:
            into.numeric(
                name,
                t_ns[rows],
                values,
                scalar=scalar,
                clock=clock,
                msgtype=str(col.type),
                nbytes=sizes.get(name) if len(parts) == 1 else None,
            )


def parquet_column_bytes(md: pq.FileMetaData, names: Iterable[str]) -> dict[str, int]:
    """Compressed bytes of each top-level column of a parquet file, summed over its row groups and leaves."""
    by_len = sorted(names, key=len, reverse=True)
    out: dict[str, int] = {}
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j in range(rg.num_columns):
            c = rg.column(j)
            path = c.path_in_schema
            name = next((n for n in by_len if path == n or path.startswith(n + ".")), None)
            if name is not None:
                out[name] = out.get(name, 0) + int(c.total_compressed_size)
    return out
