"""Per-episode and dataset statistics in LeRobot's format.

LeRobot (`lerobot/datasets/compute_stats.py`) stores for every feature min, max, mean, std
(per dimension) and count ([number of frames]). Camera features get per-channel stats of
shape [3, 1, 1], scaled to [0, 1], over a sample of frames (`estimate_num_samples`). Dataset
stats aggregate the episodes' with count-weighted mean and the parallel variance formula;
`meta/stats.json` additionally carries q01/q99 for numeric features, as GR00T's stats.json does
(its normalization reads them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["episode_stats", "aggregate_stats", "to_jsonable"]

_NUMERIC = (
    "observation.state",
    "action",
    "timestamp",
    "frame_index",
    "episode_index",
    "index",
    "task_index",
)


def _sample_indices(n: int, lo: int = 100, hi: int = 10_000, power: float = 0.75) -> np.ndarray:
    k = n if n < lo else max(lo, min(int(n**power), hi))
    return np.round(np.linspace(0, n - 1, k)).astype(int)


def _column(table: pa.Table, key: str) -> np.ndarray:
    col = table.column(key).combine_chunks()
    if pa.types.is_list(col.type):
        return col.values.to_numpy().reshape(len(col), -1)
    return col.to_numpy().reshape(-1, 1)


def _stats(x: np.ndarray, axis: int | tuple[int, ...]) -> dict[str, np.ndarray]:
    return {
        "min": x.min(axis=axis),
        "max": x.max(axis=axis),
        "mean": x.mean(axis=axis, dtype=np.float64),
        "std": x.std(axis=axis, dtype=np.float64),
        "count": np.array([len(x)]),
    }


def episode_stats(
    table: pa.Table, frames: Mapping[str, np.ndarray]
) -> dict[str, dict[str, np.ndarray]]:
    """LeRobot per-episode stats of a data table and its camera frames."""
    out = {key: _stats(_column(table, key), axis=0) for key in _NUMERIC}
    for key, video in frames.items():
        sample = video[_sample_indices(len(video))]
        out[key] = _image_stats(sample)
    return out


def _image_stats(sample: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel stats of uint8 [N, H, W, 3] frames, as [3, 1, 1] in [0, 1]; count = N."""
    px = np.ascontiguousarray(sample.reshape(-1, 3).T)  # [3, pixels]: reductions run contiguous
    mean = px.sum(axis=1, dtype=np.int64) / px.shape[1]
    sq = np.einsum("cp,cp->c", px.astype(np.float32), px.astype(np.float32), dtype=np.float64)
    std = np.sqrt(np.maximum(sq / px.shape[1] - mean**2, 0.0))
    stats = {"min": px.min(axis=1), "max": px.max(axis=1), "mean": mean, "std": std}
    out = {k: (v / 255.0).reshape(3, 1, 1) for k, v in stats.items()}
    out["count"] = np.array([len(sample)])
    return out


def aggregate_stats(
    stats: Sequence[Mapping[str, Mapping[str, np.ndarray]]], tables: Sequence[pa.Table]
) -> dict[str, dict[str, np.ndarray]]:
    """Dataset stats from per-episode stats (LeRobot's `aggregate_stats`) plus q01/q99."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for key in stats[0]:
        means = np.stack([s[key]["mean"] for s in stats])
        var = np.stack([s[key]["std"] ** 2 for s in stats])
        counts = np.stack([s[key]["count"] for s in stats]).astype(np.float64)
        total = counts.sum(axis=0)
        w = counts.reshape(counts.shape + (1,) * (means.ndim - counts.ndim))
        mean = (means * w).sum(axis=0) / w.sum(axis=0)
        variance = ((var + (means - mean) ** 2) * w).sum(axis=0) / w.sum(axis=0)
        out[key] = {
            "min": np.min(np.stack([s[key]["min"] for s in stats]), axis=0),
            "max": np.max(np.stack([s[key]["max"] for s in stats]), axis=0),
            "mean": mean,
            "std": np.sqrt(variance),
            "count": total.astype(np.int64),
        }
        if key in _NUMERIC:
            allx = np.concatenate([_column(t, key) for t in tables]).astype(np.float64)
            out[key]["q01"] = np.quantile(allx, 0.01, axis=0)
            out[key]["q99"] = np.quantile(allx, 0.99, axis=0)
    return out


def to_jsonable(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    """Stats with numpy arrays turned into (nested) lists of Python numbers."""
    return {k: {name: np.asarray(v).tolist() for name, v in d.items()} for k, d in stats.items()}
