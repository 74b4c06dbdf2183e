"""Per-embodiment normalisation statistics of state and action, maintained incrementally.

Every step of an embodiment contributes to mean, std, min, max and the 1st/99th percentiles (what
GR00T's `stats.json` holds and what its q01/q99 normalisation needs). Recomputing them from the
steps table on every ingest would make the n-th ingest scan n times the data of the first, so the
lake stores, next to the finished statistics, a `StatsAccumulator` per quantity that an ingest
merges its *new* steps into:

- count, mean and M2 (sum of squared deviations) per dimension, merged with Chan, Golub and
  LeVeque's parallel update: n = na + nb, d = mean_b - mean_a, mean = mean_a + d nb / n,
  M2 = M2_a + M2_b + d^2 na nb / n. In float64 this equals the one-pass mean and population std
  to rounding (tested against numpy at 1e-9 relative);
- min and max, exact;
- q01 and q99 from a `QuantileSketch` (lake/sketch.py): within 0.5% of the value (plus 1e-5
  absolute near zero) of the exact quantile.

Workers accumulate the steps they write; the driver merges the partial accumulators in chunk
order, so the result does not depend on which node ran which chunk. Lakes written before the
accumulator existed get it computed from their steps once, on the next ingest of the embodiment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.lake.stats.sketch import QuantileSketch

__all__ = [
    "VectorStats",
    "NormStats",
    "StatsAccumulator",
    "NormStatsAccumulator",
    "compute_norm_stats",
    "accumulate_norm_stats",
]


@dataclass(frozen=True, kw_only=True)
class VectorStats:
    """Per-dimension statistics of one vector quantity."""

    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    q01: np.ndarray
    q99: np.ndarray
    count: int

    @classmethod
    def of(cls, values: np.ndarray) -> VectorStats:
        if values.ndim != 2 or values.shape[0] == 0:
            raise ValueError(f"need a non-empty [steps, dims] array, got shape {values.shape}")
        v = values.astype(np.float64)
        q01, q99 = np.quantile(v, [0.01, 0.99], axis=0)
        return cls(mean=v.mean(0), std=v.std(0), min=v.min(0), max=v.max(0), q01=q01, q99=q99, count=int(v.shape[0]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "min": self.min.tolist(),
            "max": self.max.tolist(),
            "q01": self.q01.tolist(),
            "q99": self.q99.tolist(),
            "count": self.count,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VectorStats:
        arr = {k: np.asarray(d[k], dtype=np.float64) for k in ("mean", "std", "min", "max", "q01", "q99")}
        return cls(**arr, count=int(d["count"]))

    def normalize(self, x: np.ndarray, mode: str = "mean_std", eps: float = 1e-6) -> np.ndarray:
        """Normalise `x` (last axis = dims) by `mean_std` or to [-1, 1] by `min_max` / `q01_q99`."""
        if mode == "mean_std":
            return ((x - self.mean) / np.maximum(self.std, eps)).astype(np.float32)
        lo, hi = (self.min, self.max) if mode == "min_max" else (self.q01, self.q99)
        if mode not in ("min_max", "q01_q99"):
            raise ValueError(f"unknown normalisation {mode!r}; use mean_std, min_max or q01_q99")
        return (2.0 * (x - lo) / np.maximum(hi - lo, eps) - 1.0).astype(np.float32)

    def unnormalize(self, x: np.ndarray, mode: str = "mean_std", eps: float = 1e-6) -> np.ndarray:
        if mode == "mean_std":
            return (x * np.maximum(self.std, eps) + self.mean).astype(np.float32)
        lo, hi = (self.min, self.max) if mode == "min_max" else (self.q01, self.q99)
        return ((x + 1.0) / 2.0 * np.maximum(hi - lo, eps) + lo).astype(np.float32)


@dataclass(frozen=True, kw_only=True)
class NormStats:
    """State and action statistics of one embodiment."""

    state: VectorStats
    action: VectorStats

    def to_json(self) -> str:
        return json.dumps({"state": self.state.to_dict(), "action": self.action.to_dict()})

    @classmethod
    def from_json(cls, text: str) -> NormStats:
        d = json.loads(text)
        return cls(state=VectorStats.from_dict(d["state"]), action=VectorStats.from_dict(d["action"]))


class StatsAccumulator:
    """Mergeable statistics of one vector quantity (see the module essay).

    Args:
        count: Vectors seen.
        mean: float64 [dims] running mean.
        m2: float64 [dims] sum of squared deviations from the mean.
        min: float64 [dims].
        max: float64 [dims].
        sketch: Quantile sketch of the same vectors.
    """

    def __init__(
        self, *, count: int, mean: np.ndarray, m2: np.ndarray, min: np.ndarray, max: np.ndarray, sketch: QuantileSketch
    ):
        self.count, self.mean, self.m2, self.min, self.max, self.sketch = count, mean, m2, min, max, sketch

    @property
    def dims(self) -> int:
        return int(self.mean.shape[0])

    @classmethod
    def of(cls, values: np.ndarray) -> StatsAccumulator:
        """The accumulator of a non-empty [n, dims] array."""
        if values.ndim != 2 or values.shape[0] == 0:
            raise ValueError(f"need a non-empty [steps, dims] array, got shape {values.shape}")
        v = values.astype(np.float64)
        mean = v.mean(0)
        return cls(
            count=int(v.shape[0]),
            mean=mean,
            m2=((v - mean) ** 2).sum(0),
            min=v.min(0),
            max=v.max(0),
            sketch=QuantileSketch.of(v),
        )

    def merge(self, other: StatsAccumulator) -> StatsAccumulator:
        """The accumulator of both sets of vectors (Chan et al.'s parallel update)."""
        if other.dims != self.dims:
            raise ValueError(f"cannot merge statistics of {self.dims} and {other.dims} dimensions")
        n = self.count + other.count
        delta = other.mean - self.mean
        return StatsAccumulator(
            count=n,
            mean=self.mean + delta * (other.count / n),
            m2=self.m2 + other.m2 + delta**2 * (self.count * other.count / n),
            min=np.minimum(self.min, other.min),
            max=np.maximum(self.max, other.max),
            sketch=self.sketch.merge(other.sketch),
        )

    def subtract(self, other: StatsAccumulator) -> StatsAccumulator | None:
        """The accumulator of these vectors less `other`'s (a subset of them), or None where that is
        not exact and the caller must recompute from the vectors left.

        Chan's update run backwards: na = n - nb, mean_a = (n mean - nb mean_b) / na,
        M2_a = M2 - M2_b - d^2 na nb / n with d = mean_b - mean_a (equal to a fresh pass to
        rounding while the vectors left are at least as many as those taken, which the callers
        ensure). Sketch counts subtract exactly. A min or max cannot: where `other` reaches this
        accumulator's min or max in some dimension, the vectors left may not, so None (unless that
        dimension is constant: then every vector left holds the same value).
        """
        if other.dims != self.dims:
            raise ValueError(f"cannot subtract statistics of {other.dims} from {self.dims} dimensions")
        na = self.count - other.count
        varies = self.min < self.max
        if na <= 0 or bool(np.any(varies & ((other.min <= self.min) | (other.max >= self.max)))):
            return None
        counts = self.sketch.counts - other.sketch.counts
        if bool(np.any(counts < 0)):
            return None
        mean = (self.count * self.mean - other.count * other.mean) / na
        delta = other.mean - mean
        m2 = self.m2 - other.m2 - delta**2 * (na * other.count / self.count)
        return StatsAccumulator(
            count=na,
            mean=mean,
            m2=np.maximum(m2, 0.0),
            min=self.min.copy(),
            max=self.max.copy(),
            sketch=QuantileSketch(self.dims, counts),
        )

    def finish(self) -> VectorStats:
        return VectorStats(
            mean=self.mean.copy(),
            std=np.sqrt(np.maximum(self.m2 / self.count, 0.0)),
            min=self.min.copy(),
            max=self.max.copy(),
            q01=self.sketch.quantile(0.01),
            q99=self.sketch.quantile(0.99),
            count=self.count,
        )

    def to_dict(self) -> dict[str, Any]:
        # float64 values as JSON floats round-trip exactly (repr is shortest round-trip).
        return {
            "count": self.count,
            "mean": self.mean.tolist(),
            "m2": self.m2.tolist(),
            "min": self.min.tolist(),
            "max": self.max.tolist(),
            "sketch": self.sketch.to_json(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StatsAccumulator:
        arr = {k: np.asarray(d[k], dtype=np.float64) for k in ("mean", "m2", "min", "max")}
        return cls(count=int(d["count"]), sketch=QuantileSketch.from_json(d["sketch"]), **arr)


class NormStatsAccumulator:
    """State and action accumulators of one embodiment."""

    def __init__(self, *, state: StatsAccumulator, action: StatsAccumulator):
        self.state, self.action = state, action

    def merge(self, other: NormStatsAccumulator) -> NormStatsAccumulator:
        return NormStatsAccumulator(state=self.state.merge(other.state), action=self.action.merge(other.action))

    def subtract(self, other: NormStatsAccumulator) -> NormStatsAccumulator | None:
        """These statistics less `other`'s (`StatsAccumulator.subtract`), or None where not exact."""
        state, action = self.state.subtract(other.state), self.action.subtract(other.action)
        return None if state is None or action is None else NormStatsAccumulator(state=state, action=action)

    def finish(self) -> NormStats:
        return NormStats(state=self.state.finish(), action=self.action.finish())

    def to_json(self) -> str:
        """The finished statistics (what `NormStats.from_json` reads) plus the accumulators."""
        stats = self.finish()
        return json.dumps(
            {"state": stats.state.to_dict(), "action": stats.action.to_dict(), "accumulator": self.state_action_dict()}
        )

    def state_action_dict(self) -> dict[str, Any]:
        """The accumulators alone, as JSON-able dicts (what a worker hands the driver)."""
        return {"state": self.state.to_dict(), "action": self.action.to_dict()}

    @classmethod
    def from_state_action_dict(cls, d: dict[str, Any]) -> NormStatsAccumulator:
        return cls(state=StatsAccumulator.from_dict(d["state"]), action=StatsAccumulator.from_dict(d["action"]))

    @classmethod
    def from_json(cls, text: str) -> NormStatsAccumulator | None:
        """The accumulators stored in `stats_json`, or None where the lake predates them.

        Raises:
            ValueError: the stored sketch uses other parameters (recompute from the steps).
        """
        acc = json.loads(text).get("accumulator")
        return None if acc is None else cls.from_state_action_dict(acc)


def _stack(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(arr) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    widths = np.diff(arr.offsets.to_numpy())
    if widths.min() != widths.max():
        raise ValueError(f"vectors of one embodiment differ in width ({widths.min()} vs {widths.max()})")
    return arr.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), int(widths[0]))


def compute_norm_stats(steps: pa.Table) -> NormStats:
    """Exact statistics of the `state` and `action` columns of one embodiment's steps."""
    return NormStats(state=VectorStats.of(_stack(steps["state"])), action=VectorStats.of(_stack(steps["action"])))


def accumulate_norm_stats(steps: pa.Table) -> NormStatsAccumulator:
    """Mergeable statistics of the `state` and `action` columns of one embodiment's (non-empty) steps."""
    return NormStatsAccumulator(
        state=StatsAccumulator.of(_stack(steps["state"])), action=StatsAccumulator.of(_stack(steps["action"]))
    )
