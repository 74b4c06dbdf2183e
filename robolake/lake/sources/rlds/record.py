"""The record of an RLDS episode: every feature of its record, in the dtype features.json declares.

An RLDS record holds each per-step feature as one list of the values of every step (a FloatList
of T x 7 for `steps/action`, an Int64List of T booleans for `steps/is_first`). Each becomes a
stream named by its feature key, one message per step, at the step's index over the rate (RLDS
records no clock: clock `rows`). Values take the dtype features.json declares for the feature,
which is what TFDS hands a reader (`bool` flags, `int32` counters, `float64` tensors TFDS stored
in a FloatList); a scalar feature is a stream of scalars, a tensor one of its values flattened
row-major. Text features (`steps/language_instruction`) are string events, one per step.
`episode_metadata/*` features are one message at the episode's start.

Image features are the cameras: their frame times are `camera` parts, the frames themselves
the media table; an image feature that is not a camera, a tensor stored as encoded bytes, and a
feature whose values do not divide into its steps are left out, each with its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from robolake.lake.sources.columnar import CLOCK_ROWS, ColumnRecord, seconds_to_ns

__all__ = ["record_example"]


def _dtype(declared: str, parsed: np.dtype) -> np.dtype:
    try:
        return np.dtype(declared)
    except TypeError:
        return parsed


def _text(items: list[Any]) -> list[str] | None:
    try:
        return [b.decode("utf-8") if isinstance(b, bytes) else str(b) for b in items]
    except UnicodeDecodeError:
        return None


def record_example(
    ex: Mapping[str, Any],
    features: Mapping[str, dict[str, Any]],
    into: ColumnRecord,
    *,
    steps: int,
    fps: float,
    cameras: Mapping[str, str],
    mapped: Iterable[str] = (),
) -> None:
    """Every feature of one episode record into `into`.

    Args:
        ex: The parsed tf.train.Example (key -> float32 / int64 array, or list of bytes).
        features: Flattened features.json (`flatten_features`).
        steps: The episode's steps.
        fps: The rate its steps are taken at.
        cameras: Camera name -> image feature key, of the reader's cameras.
        mapped: Keys kept whatever `--streams` says (state, action, task).
    """
    keep = set(mapped)
    t_steps = seconds_to_ns(np.arange(steps, dtype=np.float64) / fps)
    camera_keys = set(cameras.values())
    for key in sorted(ex):
        value = ex[key]
        f = features.get(key, {})
        kind = f.get("kind", "image" if key in camera_keys else "tensor")
        per_step = key.startswith("steps/")
        n = steps if per_step else 1
        t = t_steps if per_step else np.zeros(1, np.int64)
        if kind == "image":
            if key not in camera_keys:
                into.leave_out(key, "images, not a camera of this dataset (map it under cameras:)")
            elif into.wanted(key, mapped=True):
                if isinstance(value, list) and len(value) == n:
                    into.camera(key, t, clock=CLOCK_ROWS, msgtype=f"image:{f.get('encoding', '')}")
            continue
        if not into.wanted(key, mapped=key in keep):
            continue
        if isinstance(value, list):  # a BytesList: text, or a tensor stored as encoded bytes
            texts = _text(value) if kind == "text" or f.get("dtype") == "string" or not f else None
            if texts is None:
                why = "bytes that are not UTF-8 text" if kind == "text" else f"{kind}:{f.get('dtype')} stored as bytes"
                into.leave_out(key, why)
            elif len(texts) != n:
                into.leave_out(key, f"{len(texts)} texts for {n} steps")
            else:
                into.text(key, t, texts, clock=CLOCK_ROWS)
            continue
        arr = np.asarray(value)
        if arr.size == 0:
            into.leave_out(key, "no values in this record")
            continue
        if n == 0 or arr.size % n:
            into.leave_out(key, f"holds {arr.size} values, not a multiple of its {n} steps")
            continue
        width = arr.size // n
        shape = f.get("shape")
        values = arr.astype(_dtype(str(f.get("dtype", "")), arr.dtype), copy=False).reshape(n, width)
        into.numeric(
            key,
            t,
            values,
            scalar=shape == [] if shape is not None else width == 1,
            clock=CLOCK_ROWS,
            msgtype=f"{f.get('kind', 'tensor')}:{f.get('dtype', arr.dtype)}{shape if shape is not None else ''}",
        )
