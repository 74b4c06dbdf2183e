"""What LeRobot's policies read from `LeRobotDatasetMetadata`, built from a lake selection.

`make_policy(cfg, ds_meta=...)` reads `features` (through `dataset_to_policy_features`: the
dtype "video"/"image" marks a camera, shapes are HWC), and the pre/post-processors read
`stats` (per feature: min, max, mean, std, count and the quantiles q01..q99 as numpy arrays;
cameras per channel, shaped [3, 1, 1], in [0, 1]). Training scripts read `fps`,
`camera_keys`, `video_keys`, `robot_type`, `total_frames`, `total_episodes` and `tasks`.

Statistics: state, action and the index columns are exact over the selection (the same
numbers `robolake export` writes to meta/stats.json). Camera statistics come from a sample of
frames (`image_stats_frames` per episode, evenly spaced, as LeRobot samples frames when it
records): decoding every frame at open would cost more than an epoch of training reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

import numpy as np

from robolake.integrations.lerobot.source import FrameTable

__all__ = ["LakeDatasetMetadata", "vector_stats"]

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)  # LeRobot's DEFAULT_QUANTILES
_Q_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)


def vector_stats(x: np.ndarray) -> dict[str, np.ndarray]:
    """Per-dimension statistics of [n, d] values as LeRobot stores them."""
    v = x.astype(np.float64)
    quant = np.quantile(v, QUANTILES, axis=0)
    out = {"min": v.min(0), "max": v.max(0), "mean": v.mean(0), "std": v.std(0), "count": np.array([len(v)])}
    out.update({k: quant[i] for i, k in enumerate(_Q_KEYS)})
    return out


class LakeDatasetMetadata:
    """LeRobotDatasetMetadata's reading side for a lake selection.

    Args:
        table: The selection's frame table.
        frame_shapes: Each camera key's (height, width, channels).
        sample_frames: Called with [(episode_index, frame_index)] -> uint8 HWC frames of one
            camera key (first argument): what the camera statistics are computed from.
        image_stats_frames: Frames per episode and camera the camera statistics sample.
        repo_id: The name reported as `repo_id`.
    """

    def __init__(
        self,
        table: FrameTable,
        frame_shapes: Mapping[str, tuple[int, int, int]],
        sample_frames: Any,
        *,
        image_stats_frames: int = 16,
        repo_id: str = "robolake/lake",
    ) -> None:
        self._table = table
        self._shapes = dict(frame_shapes)
        self._sample = sample_frames
        self._per_episode = image_stats_frames
        self.repo_id = repo_id
        self.root = None

    # --- what LeRobotDatasetMetadata exposes ------------------------------------------------

    @property
    def fps(self) -> int:
        fps = self._table.fps
        return int(fps) if float(fps).is_integer() else fps  # type: ignore[return-value]

    @property
    def robot_type(self) -> str:
        return self._table.spec.robot_type or self._table.spec.tag

    @property
    def camera_keys(self) -> list[str]:
        return list(self._table.camera_keys)

    @property
    def video_keys(self) -> list[str]:
        return list(self._table.camera_keys)

    @property
    def image_keys(self) -> list[str]:
        return []

    @property
    def depth_keys(self) -> list[str]:
        return []

    @property
    def total_episodes(self) -> int:
        return self._table.num_episodes

    @property
    def total_frames(self) -> int:
        return self._table.num_frames

    @property
    def total_tasks(self) -> int:
        return len(self._table.tasks)

    @property
    def features(self) -> dict[str, dict[str, Any]]:
        """info.json's `features`: cameras (HWC, dtype "video"), state, action and the index columns."""
        t = self._table
        out: dict[str, dict[str, Any]] = {}
        for key in t.camera_keys:
            h, w, c = self._shapes[key]
            out[key] = {
                "dtype": "video",
                "shape": [h, w, c],
                "names": ["height", "width", "channels"],
                "info": {"video.height": h, "video.width": w, "video.fps": self.fps, "video.channels": c},
            }
        out["observation.state"] = {
            "dtype": "float32",
            "shape": [t.state.shape[1]],
            "names": _names(t.spec.state, t.state.shape[1]),
        }
        out["action"] = {
            "dtype": "float32",
            "shape": [t.action.shape[1]],
            "names": _names(t.spec.action, t.action.shape[1]),
        }
        out["timestamp"] = {"dtype": "float64", "shape": [1], "names": None}
        for key in ("frame_index", "episode_index", "index", "task_index"):
            out[key] = {"dtype": "int64", "shape": [1], "names": None}
        return out

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {k: tuple(f["shape"]) for k, f in self.features.items()}

    @property
    def names(self) -> dict[str, Any]:
        return {k: f["names"] for k, f in self.features.items()}

    @property
    def info(self) -> dict[str, Any]:
        return {
            "codebase_version": "v3.0",
            "robot_type": self.robot_type,
            "total_episodes": self.total_episodes,
            "total_frames": self.total_frames,
            "total_tasks": self.total_tasks,
            "fps": self.fps,
            "features": self.features,
        }

    @property
    def tasks(self) -> Any:
        """Task string (index "task") -> task_index, as a pandas DataFrame like LeRobot's."""
        import pandas as pd

        return pd.DataFrame(
            {"task_index": range(len(self._table.tasks))}, index=pd.Index(self._table.tasks, name="task")
        )

    @property
    def episodes(self) -> list[dict[str, Any]]:
        """Per episode: episode_index, tasks, length, dataset_from_index, dataset_to_index, lake episode_id."""
        t = self._table
        return [
            {
                "episode_index": e,
                "tasks": list(t.episode_tasks[e]),
                "length": int(t.lengths[e]),
                "dataset_from_index": int(t.starts[e]),
                "dataset_to_index": int(t.starts[e + 1]),
                "episode_id": t.episode_ids[e],
            }
            for e in range(t.num_episodes)
        ]

    @cached_property
    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        """Normalisation statistics per feature (see the module essay for which are sampled)."""
        t = self._table
        ep = np.repeat(np.arange(t.num_episodes), t.lengths)
        frame = np.arange(t.num_frames) - t.starts[ep]
        out = {
            "observation.state": vector_stats(t.state),
            "action": vector_stats(t.action),
            "timestamp": vector_stats(t.timestamp[:, None]),
            "frame_index": vector_stats(frame[:, None]),
            "episode_index": vector_stats(ep[:, None]),
            "index": vector_stats(np.arange(t.num_frames)[:, None]),
            "task_index": vector_stats(t.task_index[:, None]),
        }
        picks = [
            (e, int(f))
            for e in range(t.num_episodes)
            for f in np.unique(np.linspace(0, int(t.lengths[e]) - 1, self._per_episode).round().astype(np.int64))
        ]
        for key in t.camera_keys:
            hist = np.zeros((3, 256), dtype=np.int64)
            for frame in self._sample(key, picks):
                hist += np.stack([np.bincount(frame[..., c].reshape(-1), minlength=256) for c in range(3)])
            out[key] = _image_stats(hist, len(picks))
        return out


def _image_stats(hist: np.ndarray, frames: int) -> dict[str, np.ndarray]:
    """Per-channel statistics in [0, 1], shaped [3, 1, 1], from 256-bin histograms of uint8 pixels."""
    values = np.arange(256, dtype=np.float64) / 255.0
    total = hist.sum(axis=1).astype(np.float64)
    mean = (hist * values).sum(axis=1) / total
    var = (hist * values**2).sum(axis=1) / total - mean**2
    nonzero = hist > 0
    cdf = np.cumsum(hist, axis=1) / total[:, None]
    out = {
        "min": values[np.argmax(nonzero, axis=1)],
        "max": values[255 - np.argmax(nonzero[:, ::-1], axis=1)],
        "mean": mean,
        "std": np.sqrt(np.maximum(var, 0.0)),
    }
    out.update({k: values[np.argmax(cdf >= q, axis=1)] for q, k in zip(QUANTILES, _Q_KEYS, strict=True)})
    return {k: v.reshape(3, 1, 1) for k, v in out.items()} | {"count": np.array([frames])}


def _names(slices: Any, dim: int) -> list[str]:
    names = [f"motor_{i}" for i in range(dim)]
    for s in slices:
        for j in range(s.start, s.end):
            names[j] = f"{s.name}_{j - s.start}"
    return names
