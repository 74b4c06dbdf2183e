"""Suggest a packed-sequence capacity (`max_tokens`) for the sample lengths at hand.

Packing beats padding only when lengths differ: if every sample has the same length, a padded
batch wastes nothing and packing can only lose the tail of each sequence. For a given length
mix the fill of best-fit-decreasing depends on how the capacity divides into the lengths (four
samples of 300 tokens fill 1200 exactly, leave 224 of 1424 empty), so the suggestion tries every
capacity on a grid between the longest sample and twice the current one (multiples of 64 and of
the commonest lengths) and keeps the one with the best fill (of the capacities within 0.2% of it,
the one closest to the current capacity, so batches keep about the size the user chose). It runs
on a seeded subsample (BFD is O(n log n); 50,000 lengths take tens of milliseconds), so it is
cheap enough to print after every pack.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robolake.packers.binpack import best_fit_decreasing

__all__ = ["CapacitySuggestion", "suggest_max_tokens"]


@dataclass(frozen=True, kw_only=True)
class CapacitySuggestion:
    """Attributes:
    max_tokens: The suggested capacity.
    fill: BFD fill at that capacity (on the subsample).
    current_fill: BFD fill at the current capacity (same subsample).
    uniform: All lengths are equal (packing cannot beat padding).
    """

    max_tokens: int
    fill: float
    current_fill: float
    uniform: bool


def suggest_max_tokens(
    lengths: np.ndarray, current: int, *, multiple: int = 64, sample: int = 50_000, seed: int = 0
) -> CapacitySuggestion:
    """The capacity in [max(lengths), 2 * current] (a multiple of `multiple`) that packs `lengths` best.

    Raises:
        ValueError: `lengths` is empty or `current` < 1.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0 or current < 1:
        raise ValueError("need at least one sample length and current >= 1")
    if lengths.size > sample:
        lengths = np.random.default_rng(seed).choice(lengths, sample, replace=False)
    longest = int(lengths.max())
    lo = -(-longest // multiple) * multiple
    hi = max(lo, 2 * current)
    values, counts = np.unique(lengths, return_counts=True)
    common = values[np.argsort(counts)[::-1][:3]]  # whole multiples of the commonest lengths fill exactly
    exact = [k * int(v) for v in common for k in range(1, hi // max(1, int(v)) + 1) if k * int(v) >= longest]
    grid = np.unique(np.concatenate([np.arange(lo, hi + 1, multiple), exact, [current] if current >= longest else []]))

    def fill(capacity: int) -> float:
        return float(best_fit_decreasing(lengths, int(capacity), on_oversize="reject").fill)

    fills = {int(c): fill(int(c)) for c in grid}
    top = max(fills.values())
    near = [c for c, f in fills.items() if f >= top - 0.002]
    best = min(near, key=lambda c: (abs(c - current), c))  # within 0.2% of the best fill, closest to what was asked
    return CapacitySuggestion(
        max_tokens=best,
        fill=fills[best],
        current_fill=fills.get(int(current), fill(current)) if current >= longest else 0.0,
        uniform=bool(lengths.min() == lengths.max()),
    )
