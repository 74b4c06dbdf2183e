"""What a Rerun column holds: numbers, text, images, video, or something else; and its values.

Rerun stores every component as an Arrow list per row: a `Scalars` row is a list of doubles (one
per series), a `Transform3D:translation` row a list of one fixed-size [3] float vector, an
`Image:buffer` row the raw pixel bytes (with `Image:format` beside it: width, height, color
model, channel type), an `EncodedImage:blob` row a JPEG or PNG file. This module sorts columns
into kinds by their archetype and Arrow type, flattens numeric rows into [N, width] arrays in the
dtype Rerun stored (float64 scalars stay float64, float32 vectors float32), and turns image rows
into the bytes the media table keeps. Nothing here decides a role; `rerun.plan` does.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.lake.sources.rerun.load import Column

__all__ = [
    "NUMERIC",
    "TEXT",
    "IMAGE",
    "ENCODED_IMAGE",
    "column_kind",
    "numeric_rows",
    "text_rows",
    "stream_name",
    "image_rows",
]

NUMERIC, TEXT, IMAGE, ENCODED_IMAGE = "numeric", "text", "image", "encoded_image"
_PART_OF_IMAGE = {"Image:format", "EncodedImage:media_type", "EncodedImage:opacity", "Image:opacity"}
_DEPTH = {"DepthImage", "SegmentationImage", "EncodedDepthImage"}
_VIDEO = {"VideoStream", "AssetVideo", "VideoFrameReference"}
# ColorModel and ChannelDatatype codes of `Image:format` (rerun.datatypes)
_CHANNELS = {1: 1, 2: 3, 3: 4, 4: 3, 5: 4}  # L, RGB, RGBA, BGR, BGRA
_BGR = {4, 5}
_U8 = 6


def _leaf(t: pa.DataType) -> tuple[pa.DataType, bool]:
    """The element type under list / fixed-size-list layers, and whether any layer is variable-length
    below the row's own list."""
    ragged = False
    first = True
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if not first and not pa.types.is_fixed_size_list(t):
            ragged = True
        first = False
        t = t.value_type
    return t, ragged


def column_kind(col: Column) -> tuple[str, str]:
    """(kind, why) of a column: `numeric`, `text`, `image`, `encoded_image`, or `other` with why it is not read."""
    if col.component in _PART_OF_IMAGE:
        return "part", "part of its entity's images"
    if col.archetype in _DEPTH:
        return "other", f"{col.archetype}: depth / segmentation images are not a camera (map them under cameras: ...)"
    if col.archetype in _VIDEO:
        return "other", f"{col.archetype}: video is not read by this reader yet (log frames as Image or EncodedImage)"
    if col.component == "Image:buffer":
        return IMAGE, ""
    if col.component == "EncodedImage:blob":
        return ENCODED_IMAGE, ""
    leaf, ragged = _leaf(col.values.type)
    if pa.types.is_string(leaf) or pa.types.is_large_string(leaf):
        return TEXT, ""
    if ragged:
        return "other", "nested lists of varying length (not a fixed-width vector)"
    if pa.types.is_integer(leaf) or pa.types.is_floating(leaf) or pa.types.is_boolean(leaf):
        if col.component.endswith(":blob") or col.component.endswith(":buffer"):
            return "other", "binary payload (a blob), not numbers"
        return NUMERIC, ""
    return "other", f"{leaf} values: neither numbers nor text"


def stream_name(col: Column) -> str:
    """The stream an entity's component is in the record: the entity for its `Scalars` (and text
    logs), `<entity>:<component>` for any other component (`/tf:Transform3D:translation`)."""
    if col.component in ("Scalars:scalars", "TextLog:text", "TextDocument:text"):
        return col.entity
    return f"{col.entity}:{col.component}"


def numeric_rows(col: Column) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """The column's numbers: (rows that hold a value, [(row indices, values [n, width])] per width).

    Rows of one width form one group (a `Scalars` entity that logs 3 series, then 4, has two);
    values keep Rerun's dtype.
    """
    arr = col.values
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    counts = np.asarray(arr.value_lengths().fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    inner: Any = arr.flatten()
    mult = 1
    while pa.types.is_fixed_size_list(inner.type):
        mult *= inner.type.list_size
        inner = inner.flatten()
    flat = np.asarray(inner.to_numpy(zero_copy_only=False))
    widths = counts * mult
    has = valid & (widths > 0)
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]) if len(widths) else np.zeros(0, np.int64)
    groups = []
    for w in sorted({int(x) for x in widths[has]}):
        rows = np.flatnonzero(has & (widths == w))
        idx = starts[rows][:, None] + np.arange(w)[None, :]
        groups.append((rows, flat[idx]))
    return has, groups


def text_rows(col: Column) -> list[str | None]:
    """One text per row (several, joined by a newline); None where the row holds none."""
    out: list[str | None] = []
    for v in col.values.to_pylist():
        out.append(None if not v else "\n".join(str(x) for x in v))
    return out


def _media_codec(data: bytes) -> str | None:
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    return None


def image_rows(
    buffer: Column, fmt: Column | None, rows: list[int], encode_raw: Any
) -> dict[int, tuple[bytes, str, tuple[int, int]]]:
    """(bytes, codec, (height, width)) of the chosen rows of an image column.

    `EncodedImage` JPEG/PNG bytes pass through as recorded; other encodings are decoded and
    re-encoded; raw `Image` pixels (8-bit L / RGB / RGBA / BGR / BGRA) go through `encode_raw`
    (lossless in the record).

    Raises:
        ValueError: a row holds no image, an unsupported pixel format, or bytes that are not one.
    """
    out: dict[int, tuple[bytes, str, tuple[int, int]]] = {}
    if buffer.component == "EncodedImage:blob":
        from PIL import Image

        for i in rows:
            v = buffer.values[i].as_py()
            if not v:
                raise ValueError(f"row {i} holds no image")
            data = bytes(v[0])
            try:
                with Image.open(io.BytesIO(data)) as im:
                    size = (int(im.height), int(im.width))
                    codec = _media_codec(data)
                    if codec is None:
                        out[i] = (*encode_raw(np.asarray(im.convert("RGB"))), size)
                        continue
            except Exception as e:  # noqa: BLE001 - PIL raises many kinds for bytes that are not an image
                raise ValueError(f"row {i} holds bytes that are not an image ({type(e).__name__}: {e})") from None
            out[i] = (data, codec, size)
        return out
    if fmt is None:
        raise ValueError("raw Image rows without an Image:format component")
    for i in rows:
        f = fmt.values[i].as_py()
        v = buffer.values[i].as_py()
        if not f or not v:
            raise ValueError(f"row {i} holds no image (or no format)")
        f0 = f[0]
        model, dtype = f0.get("color_model"), f0.get("channel_datatype")
        if f0.get("pixel_format") is not None or model not in _CHANNELS or dtype != _U8:
            raise ValueError(
                f"row {i}: pixel format {f0} is not 8-bit L/RGB/RGBA/BGR/BGRA; log it as EncodedImage or convert it"
            )
        h, w, c = int(f0["height"]), int(f0["width"]), _CHANNELS[model]
        px = np.frombuffer(bytes(v[0]), dtype=np.uint8)
        if px.size != h * w * c:
            raise ValueError(f"row {i}: {px.size} bytes for a {h}x{w}x{c} image")
        img = px.reshape(h, w, c)
        if model in _BGR:
            img = img[:, :, [2, 1, 0, 3][:c]]
        rgb = np.repeat(img, 3, axis=2) if c == 1 else img[:, :, :3]
        data, codec = encode_raw(np.ascontiguousarray(rgb))
        out[i] = (data, codec, (h, w))
    return out
