"""What the lake should hold after ingesting a `robolake.testing.ros` recording (test-only checks).

`expected_episode` recomputes the resampled episode from what a writer `Recorded`,
`episode_ticks` gives a lake episode's tick times from its metadata, and `lake_steps`,
`lake_frames` and `quarantine_rows` read a lake back, sorted for comparison.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from robolake.testing.ros import T0_NS, Recorded


def expected_episode(
    rec: Recorded, fps: float = 100.0, *, action: str = "cmd", ticks: np.ndarray | None = None
) -> dict[str, Any]:
    """The resampled episode, recomputed from what was recorded (header clock, t0 = first stamp).

    `ticks` (seconds since T0) overrides the window computed from the joint/command/camera streams.
    """
    streams = [rec.joint_t] + ([rec.cmd_t] if action == "cmd" else []) + ([rec.cam_t] if len(rec.cam_t) else [])
    t0 = min(float(s[0]) for s in streams)
    if ticks is None:
        start, end = max(float(s[0]) for s in streams) - t0, min(float(s[-1]) for s in streams) - t0
        n = int(np.floor((end - start) * fps + 1e-6)) + 1
        ticks = start + np.arange(n) / fps
    else:
        ticks = np.asarray(ticks, dtype=np.float64) - t0
    state = np.stack(
        [np.interp(ticks, rec.joint_t - t0, rec.joint_v[:, j]) for j in range(rec.joint_v.shape[1])], axis=1
    )
    if action == "cmd":
        act = rec.cmd_v[np.clip(np.searchsorted(rec.cmd_t - t0, ticks, side="right") - 1, 0, None)]
    else:
        act = np.concatenate([state[1:], state[-1:]])
    frames_idx = np.searchsorted(rec.cam_t - t0, ticks, side="right") - 1 if len(rec.cam_t) else None
    return {"ticks": ticks, "state": state, "action": act, "frame_index": frames_idx}


def lake_steps(lake: Any, episode_id: str | None = None) -> dict[str, np.ndarray]:
    steps = lake.to_arrow("steps").to_pylist()
    if episode_id is not None:
        steps = [s for s in steps if s["episode_id"] == episode_id]
    steps.sort(key=lambda s: (s["episode_id"], s["step_index"]))
    return {
        "state": np.array([s["state"] for s in steps], np.float32),
        "action": np.array([s["action"] for s in steps], np.float32),
        "timestamp": np.array([s["timestamp"] for s in steps]),
    }


def lake_frames(lake: Any, camera: str) -> list[bytes]:
    rows = [r for r in lake.to_arrow("media").to_pylist() if r["camera"] == camera]
    rows.sort(key=lambda r: (r["episode_id"], r["step_index"]))
    return [r["data"] for r in rows]


def quarantine_rows(lake: Any) -> list[dict[str, Any]]:
    return lake.to_arrow("quarantine").to_pylist()


def episode_ticks(episode_row: dict[str, Any], timestamps: np.ndarray) -> np.ndarray:
    """Absolute tick times (seconds since T0) of a lake episode, from its metadata."""
    md = json.loads(episode_row["metadata"])
    return (md["t0_ns"] - T0_NS) / 1e9 + md["window"][0] + np.asarray(timestamps)
