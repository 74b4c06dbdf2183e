"""Per-episode and dataset statistics in LeRobot's format (`meta/stats.json`, episode stats).

LeRobot (`lerobot/datasets/compute_stats.py`) stores for every feature min, max, mean, std,
count ([number of frames]) and the quantiles q01, q10, q50, q90, q99 (its DEFAULT_QUANTILES;
GR00T's normalisation reads q01/q99). Camera features get per-channel statistics of shape
[3, 1, 1], scaled to [0, 1].

Numbers are exact: per-dimension statistics of the written rows, the dataset's from all of them
(not merged from episode summaries, so quantiles are true quantiles). Cameras are exact too,
from 256-bin histograms of every frame (LeRobot samples frames; counting all of them costs
little next to the video encode): mean and std from the histogram's moments, min, max and
quantiles from its support and cumulative sum. The dataset's numbers stay in memory until the
end (a few floats a step); a camera costs one [3, 256] histogram whatever its length.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["QUANTILES", "DatasetStats", "image_stats", "pixel_counts", "to_jsonable", "vector_stats"]

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)  # LeRobot's DEFAULT_QUANTILES
_Q_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)

Stats = dict[str, np.ndarray]


def pixel_counts(frame: np.ndarray) -> np.ndarray:
    """int64 [3, 256]: how often each value occurs in each channel of an RGB uint8 frame."""
    return np.stack([np.bincount(frame[..., c].reshape(-1), minlength=256) for c in range(3)])


def vector_stats(x: np.ndarray) -> Stats:
    """Per-dimension statistics of [n, d] values, as LeRobot stores them."""
    v = x.astype(np.float64)
    quant = np.quantile(v, QUANTILES, axis=0)
    out = {"min": v.min(0), "max": v.max(0), "mean": v.mean(0), "std": v.std(0), "count": np.array([len(v)])}
    out.update({k: quant[i] for i, k in enumerate(_Q_KEYS)})
    return out


def image_stats(hist: np.ndarray, frames: int) -> Stats:
    """Per-channel statistics, scaled to [0, 1] and shaped [3, 1, 1], of 256-bin pixel histograms."""
    values = np.arange(256, dtype=np.float64) / 255.0
    total = hist.sum(axis=1, keepdims=True).astype(np.float64)
    mean = (hist * values).sum(axis=1) / total[:, 0]
    var = (hist * values**2).sum(axis=1) / total[:, 0] - mean**2
    nonzero = hist > 0
    lo = values[np.argmax(nonzero, axis=1)]
    hi = values[255 - np.argmax(nonzero[:, ::-1], axis=1)]
    cdf = np.cumsum(hist, axis=1) / total
    out = {"min": lo, "max": hi, "mean": mean, "std": np.sqrt(np.maximum(var, 0.0))}
    out.update({k: values[np.argmax(cdf >= q, axis=1)] for q, k in zip(QUANTILES, _Q_KEYS, strict=True)})
    shaped = {k: v.reshape(3, 1, 1) for k, v in out.items()}
    shaped["count"] = np.array([frames])
    return shaped


class DatasetStats:
    """Statistics of a dataset written one episode at a time."""

    def __init__(self) -> None:
        self._values: dict[str, list[np.ndarray]] = {}
        self._hists: dict[str, np.ndarray] = {}
        self._frames = 0

    def add_episode(self, values: Mapping[str, np.ndarray], hists: Mapping[str, np.ndarray]) -> dict[str, Stats]:
        """Take one episode's numbers ([n, d] per feature) and pixel histograms; returns its statistics.

        Every feature of `values` has the episode's n rows.
        """
        n = len(next(iter(values.values())))
        out = {feature: vector_stats(x) for feature, x in values.items()}
        for feature, x in values.items():
            self._values.setdefault(feature, []).append(x)
        for key, h in hists.items():
            out[key] = image_stats(h, n)
            self._hists[key] = self._hists.get(key, np.zeros((3, 256), dtype=np.int64)) + h
        self._frames += n
        return out

    def dataset(self) -> dict[str, Stats]:
        """Statistics of every episode taken so far."""
        out = {feature: vector_stats(np.concatenate(parts)) for feature, parts in self._values.items()}
        out.update({key: image_stats(h, self._frames) for key, h in self._hists.items()})
        return out


def to_jsonable(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    """Stats with numpy arrays turned into (nested) lists of Python numbers."""
    return {k: {name: np.asarray(v).tolist() for name, v in d.items()} for k, d in stats.items()}
