"""A mergeable quantile sketch with a relative-error guarantee (DDSketch-style log buckets).

The lake keeps q01/q99 of every state and action dimension for GR00T's q01_q99 normalisation.
Exact quantiles need every value at once, so an ingest would have to rescan all steps of the
embodiment; instead each ingest sketches only its new steps and merges the sketch into the one
stored with the embodiment.

Why this sketch. A rank-error sketch (KLL, t-digest) answers q01 within some +-eps of rank, and
at the 1st percentile a rank error of 0.5% is half the quantile's own rank: the tail is where
rank error hurts. A log-bucket sketch (Masson et al., "DDSketch", VLDB 2019) bounds the error of
the *value* instead: every |x| in (gamma^(k-1), gamma^k] falls into bucket k and is represented
by 2 gamma^k / (gamma + 1), which is within `ALPHA` of x relative to |x|. Buckets are counts, so

- merging is adding count arrays: exact, commutative and associative, so a lake ingested in one
  run, in twenty, or on a cluster in any task order holds bit-identical sketches;
- an update is one vectorised `np.bincount` over [steps, dims];
- memory is fixed: 2 * K + 1 buckets per dimension (K ~ 2,800 for the range below), ~44 KB per
  dimension in memory and a few KB stored (zlib of mostly-zero counts).

Error bound (tested in tests/unit/lake/test_sketch.py against `np.quantile`): for a quantile q
whose neighbouring order statistics x_lo, x_hi lie in [-MAX_VALUE, MAX_VALUE],

    |estimate - exact| <= ALPHA * max(|x_lo|, |x_hi|) + MIN_VALUE

with ALPHA = 0.5% and MIN_VALUE = 1e-5 (values closer to zero share one zero bucket). Values
beyond MAX_VALUE = 1e7 are clamped into the last bucket, where the bound does not hold; robot
states and actions (radians, metres, gripper widths) are far inside it.
"""

from __future__ import annotations

import base64
import math
import zlib
from typing import Any

import numpy as np

__all__ = ["QuantileSketch", "ALPHA", "MIN_VALUE", "MAX_VALUE"]

ALPHA = 0.005
MIN_VALUE = 1e-5
MAX_VALUE = 1e7

_GAMMA = (1.0 + ALPHA) / (1.0 - ALPHA)
_LOG_GAMMA = math.log(_GAMMA)
_KMIN = math.ceil(math.log(MIN_VALUE) / _LOG_GAMMA)
_KMAX = math.ceil(math.log(MAX_VALUE) / _LOG_GAMMA)
_K = _KMAX - _KMIN + 1  # keys per sign
_BUCKETS = 2 * _K + 1  # negative keys (largest magnitude first), zero, positive keys


def _representatives() -> np.ndarray:
    """The value each bucket stands for, ascending across the bucket axis."""
    keys = np.arange(_KMIN, _KMAX + 1, dtype=np.float64)
    pos = 2.0 * np.exp(keys * _LOG_GAMMA) / (_GAMMA + 1.0)
    return np.concatenate([-pos[::-1], [0.0], pos])


_REPS = _representatives()


class QuantileSketch:
    """Per-dimension quantile sketch of a stream of [n, dims] vectors.

    Args:
        dims: Width of the vectors.
        counts: int64 [dims, buckets] bucket counts (for `from_json` and `merge`); zeros if None.
    """

    def __init__(self, dims: int, counts: np.ndarray | None = None):
        if dims < 0:
            raise ValueError(f"dims must be >= 0, got {dims}")
        if counts is None:
            counts = np.zeros((dims, _BUCKETS), dtype=np.int64)
        if counts.shape != (dims, _BUCKETS):
            raise ValueError(f"counts must be [{dims}, {_BUCKETS}], got {counts.shape}")
        self.dims = dims
        self.counts = counts

    @property
    def count(self) -> int:
        """Values seen per dimension."""
        return int(self.counts[0].sum()) if self.dims else 0

    @staticmethod
    def bucket_of(values: np.ndarray) -> np.ndarray:
        """Bucket index of each value (any shape)."""
        v = np.asarray(values, dtype=np.float64)
        mag = np.abs(v)
        with np.errstate(divide="ignore"):
            key = np.ceil(np.log(np.maximum(mag, MIN_VALUE)) / _LOG_GAMMA)
        off = np.clip(key, _KMIN, _KMAX).astype(np.int64) - _KMIN
        idx = np.where(v > 0, _K + 1 + off, _K - 1 - off)
        return np.where(mag < MIN_VALUE, _K, idx)

    def add(self, values: np.ndarray) -> None:
        """Add the rows of a [n, dims] array (finite values)."""
        if values.ndim != 2 or values.shape[1] != self.dims:
            raise ValueError(f"need [n, {self.dims}] values, got shape {values.shape}")
        if values.shape[0] == 0:
            return
        flat = self.bucket_of(values) + np.arange(self.dims, dtype=np.int64)[None, :] * _BUCKETS
        self.counts += np.bincount(flat.ravel(), minlength=self.dims * _BUCKETS).reshape(self.dims, _BUCKETS)

    @classmethod
    def of(cls, values: np.ndarray) -> QuantileSketch:
        s = cls(int(values.shape[1]))
        s.add(values)
        return s

    def merge(self, other: QuantileSketch) -> QuantileSketch:
        """The sketch of both streams (exact: bucket counts add)."""
        if other.dims != self.dims:
            raise ValueError(f"cannot merge sketches of {self.dims} and {other.dims} dimensions")
        return QuantileSketch(self.dims, self.counts + other.counts)

    def quantile(self, q: float) -> np.ndarray:
        """float64 [dims]: the q-quantile of each dimension, interpolated like `np.quantile`.

        Raises:
            ValueError: the sketch is empty or q is outside [0, 1].
        """
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"q must be in [0, 1], got {q}")
        if self.dims == 0:
            return np.zeros(0)
        n = self.count
        if n == 0:
            raise ValueError("quantile of an empty sketch")
        pos = q * (n - 1)
        lo, frac = math.floor(pos), pos - math.floor(pos)
        hi = min(lo + 1, n - 1)
        cum = np.cumsum(self.counts, axis=1)
        # The bucket holding order statistic r (0-based) is the first whose cumulative count > r.
        b_lo = np.array([np.searchsorted(c, lo, side="right") for c in cum])
        b_hi = np.array([np.searchsorted(c, hi, side="right") for c in cum])
        return (1.0 - frac) * _REPS[b_lo] + frac * _REPS[b_hi]

    def to_json(self) -> dict[str, Any]:
        raw = zlib.compress(self.counts.astype("<i8").tobytes(), 6)
        return {
            "alpha": ALPHA,
            "min_value": MIN_VALUE,
            "max_value": MAX_VALUE,
            "dims": self.dims,
            "counts": base64.b64encode(raw).decode("ascii"),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> QuantileSketch:
        """The sketch `to_json` wrote.

        Raises:
            ValueError: it was written with other bucket parameters (a different robolake).
        """
        if (d["alpha"], d["min_value"], d["max_value"]) != (ALPHA, MIN_VALUE, MAX_VALUE):
            raise ValueError(
                f"quantile sketch was written with alpha={d['alpha']}, range [{d['min_value']}, {d['max_value']}]; "
                f"this robolake uses alpha={ALPHA}, range [{MIN_VALUE}, {MAX_VALUE}]; the next ingest of this "
                "embodiment recomputes its statistics from the steps"
            )
        dims = int(d["dims"])
        counts = np.frombuffer(zlib.decompress(base64.b64decode(d["counts"])), dtype="<i8")
        return cls(dims, counts.astype(np.int64).reshape(dims, _BUCKETS))
