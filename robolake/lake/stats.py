"""Per-embodiment normalisation statistics of state and action.

Exact statistics over every step of an embodiment: mean, std, min, max and the 1st/99th
percentiles (what GR00T's `stats.json` holds and what its q01/q99 normalisation needs). They are
recomputed from the steps table inside each ingest transaction, so they always describe exactly
the data of the lake version they are published with. That costs one scan of the embodiment's
state and action columns per ingest, which is small next to decoding its video.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["VectorStats", "NormStats", "compute_norm_stats"]


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
        return cls(
            mean=v.mean(0), std=v.std(0), min=v.min(0), max=v.max(0), q01=q01, q99=q99, count=int(v.shape[0])
        )

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


def _stack(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(arr) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    widths = np.diff(arr.offsets.to_numpy())
    if widths.min() != widths.max():
        raise ValueError(f"vectors of one embodiment differ in width ({widths.min()} vs {widths.max()})")
    return arr.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), int(widths[0]))


def compute_norm_stats(steps: pa.Table) -> NormStats:
    """Statistics of the `state` and `action` columns of one embodiment's steps."""
    return NormStats(state=VectorStats.of(_stack(steps["state"])), action=VectorStats.of(_stack(steps["action"])))
