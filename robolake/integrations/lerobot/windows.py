"""LeRobot's `delta_timestamps` windows: which frames an item gathers and which are padding.

`LeRobotDataset` turns `delta_timestamps` (seconds relative to the item's frame, per feature)
into frame offsets (`round(d * fps)`, each required to be a multiple of 1/fps within
`tolerance_s`), gathers those frames with every index clamped into the item's episode, and marks
the ones that fell outside it in `<key>_is_pad`. These functions do the same arithmetic on
arrays, for many items at once, so the adapter's windows and masks are LeRobot's exactly (same
clamping at both episode edges, same rounding), and a bad `delta_timestamps` fails with the same
rule before any data is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["check_delta_timestamps", "delta_indices", "window"]


def check_delta_timestamps(delta_timestamps: Mapping[str, Sequence[float]], fps: float, tolerance_s: float) -> None:
    """Raise unless every delta is a multiple of 1/fps within `tolerance_s` (LeRobot's rule).

    Raises:
        ValueError: names the keys and deltas off the grid.
    """
    off = {
        key: [d for d in deltas if abs(d * fps - round(d * fps)) / fps > tolerance_s]
        for key, deltas in delta_timestamps.items()
    }
    off = {k: v for k, v in off.items() if v}
    if off:
        raise ValueError(
            f"delta_timestamps {off} are not multiples of 1/fps = {1 / fps:g} s within tolerance_s={tolerance_s}; "
            f"use multiples of 1/{fps:g} (e.g. [i / {fps:g} for i in range(H)])"
        )


def delta_indices(delta_timestamps: Mapping[str, Sequence[float]], fps: float) -> dict[str, np.ndarray]:
    """Frame offsets of each key's window: `round(d * fps)` (Python's rounding, as LeRobot's)."""
    return {
        key: np.asarray([round(d * fps) for d in deltas], dtype=np.int64) for key, deltas in delta_timestamps.items()
    }


def window(
    index: np.ndarray, start: np.ndarray, stop: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Frames of each item's window and its padding mask.

    Args:
        index: int64 [n] global frame index of each item.
        start: int64 [n] global index of each item's episode's first frame.
        stop: int64 [n] one past its last frame.
        offsets: int64 [k] the key's frame offsets.

    Returns:
        (int64 [n, k] global frame of each window slot, clamped into the episode;
        bool [n, k] True where the unclamped frame lies outside the episode).
    """
    want = index[:, None] + offsets[None, :]
    pad = (want < start[:, None]) | (want >= stop[:, None])
    return np.clip(want, start[:, None], stop[:, None] - 1), pad
