"""Rerun recordings (`.rrd`) written by rerun-sdk itself, for the rerun reader's tests and benchmarks.

A robot logged the way teams log with the Rerun SDK: joint positions as `Scalars` at 100 Hz on
`/robot/joints`, a gripper, commands on `/robot/action`, an end-effector `Transform3D`, a wrist
camera as `EncodedImage` (JPEG) or raw `Image` every third step, `TextLog` lines, and the task as
a static `TextDocument`; times on a `time` timeline (sensor stamps, set with `rr.set_time`) beside
the SDK's own `log_time` / `log_tick`. Values are smooth known functions of the step, so a
reader's output can be checked exactly. The faults are real files too: a scalar entity whose
timeline runs backwards, an image entity whose size changes, an empty recording, and a
recording cut short (the real file, truncated).

`rerun` is imported when a writer runs (it is in the `formats` / `view` / `dev` extras).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robolake.testing.images import frames, jpeg

__all__ = [
    "JOINTS",
    "T0_NS",
    "joint_values",
    "write_robot",
    "write_backwards",
    "write_image_size_change",
    "write_empty",
    "write_truncated",
    "bench_fixture",
]

JOINTS = 7
T0_NS = 1_700_000_000_000_000_000  # the `time` timeline's first stamp


def _rr() -> Any:
    import rerun as rr

    return rr


def joint_values(step: int) -> np.ndarray:
    """The joints' positions at a step (float64 [JOINTS])."""
    return np.sin(0.01 * step + np.arange(JOINTS, dtype=np.float64))


def write_robot(
    path: str | Path,
    *,
    steps: int = 100,
    hz: float = 100.0,
    episodes: int = 1,
    gap_s: float = 2.0,
    camera: str | None = "encoded",
    size: tuple[int, int] = (24, 32),
    task: str = "pick up the cube",
    phase: bool = False,
    app: str = "robot",
) -> Path:
    """A teleop session: `episodes` takes of `steps` steps at `hz`, separated by `gap_s` pauses.

    Args:
        camera: `encoded` (JPEG `EncodedImage`), `raw` (`Image` RGB pixels) or None (no camera).
        phase: Also log `/episode/phase`, a `TextLog` label per take (`take_0`, `take_1`, ...) at its
            first step and an empty one a step after its last.
    """
    rr = _rr()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = rr.RecordingStream(app, recording_id=f"{app}-{path.stem}")
    rec.save(str(path))
    rec.log("/task", rr.TextDocument(task), static=True)
    pix = frames(max(1, steps // 3 + 1), size[0], size[1], seed=1) if camera else None
    step = 0
    t_ns = T0_NS
    dt = int(round(1e9 / hz))
    for take in range(episodes):
        if take:
            t_ns += int(gap_s * 1e9)
        for k in range(steps):
            rec.set_time("time", timestamp=np.datetime64(t_ns, "ns"))
            q = joint_values(step)
            rec.log("/robot/joints", rr.Scalars(q))
            rec.log("/robot/gripper", rr.Scalars([0.5 + 0.5 * np.sin(0.05 * step)]))
            rec.log("/robot/action", rr.Scalars(joint_values(step + 1)))
            rec.log("/robot/ee", rr.Transform3D(translation=[float(q[0]), float(q[1]), 0.5]))
            if phase and k == 0:
                rec.log("/episode/phase", rr.TextLog(f"take_{take}"))
            if k == steps // 2:
                rec.log("/log", rr.TextLog(f"take {take} half way"))
            if pix is not None and (k % 3 == 0 or k == steps - 1):  # the last step too: the window spans every step
                frame = pix[(k // 3) % len(pix)]
                if camera == "raw":
                    rec.log("/camera/wrist", rr.Image(frame))
                else:
                    rec.log("/camera/wrist", rr.EncodedImage(contents=jpeg(frame), media_type="image/jpeg"))
            step += 1
            t_ns += dt
        if phase:  # an empty label ends the take's run
            rec.set_time("time", timestamp=np.datetime64(t_ns, "ns"))
            rec.log("/episode/phase", rr.TextLog(""))
    rec.flush()
    rec.disconnect()
    return path


def write_backwards(path: str | Path, *, steps: int = 60) -> Path:
    """A good robot plus `/sensor/ft` (6 scalars) whose `time` jumps back 0.1 s half way."""
    rr = _rr()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = rr.RecordingStream("robot", recording_id=f"robot-{path.stem}")
    rec.save(str(path))
    for k in range(steps):
        rec.set_time("time", timestamp=np.datetime64(T0_NS + k * 10_000_000, "ns"))
        rec.log("/robot/joints", rr.Scalars(joint_values(k)))
        back = -10 if k >= steps // 2 else 0
        rec.set_time("time", timestamp=np.datetime64(T0_NS + (k + back) * 10_000_000 + 5_000_000, "ns"))
        rec.log("/sensor/ft", rr.Scalars(np.full(6, float(k))))
    rec.flush()
    rec.disconnect()
    return path


def write_image_size_change(path: str | Path, *, steps: int = 30) -> Path:
    """A robot whose `/camera/top` raw `Image` is 16x20 for half the steps, then 24x32."""
    rr = _rr()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = rr.RecordingStream("robot", recording_id=f"robot-{path.stem}")
    rec.save(str(path))
    small, big = frames(1, 16, 20)[0], frames(1, 24, 32)[0]
    for k in range(steps):
        rec.set_time("time", timestamp=np.datetime64(T0_NS + k * 10_000_000, "ns"))
        rec.log("/robot/joints", rr.Scalars(joint_values(k)))
        rec.log("/camera/top", rr.Image(small if k < steps // 2 else big))
    rec.flush()
    rec.disconnect()
    return path


def write_empty(path: str | Path) -> Path:
    """A recording that was started and saved but logged nothing."""
    rr = _rr()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = rr.RecordingStream("robot", recording_id=f"robot-{path.stem}")
    rec.save(str(path))
    rec.flush()
    rec.disconnect()
    return path


def write_truncated(path: str | Path, *, keep: float = 0.5) -> Path:
    """A real recording (`write_robot`) cut to `keep` of its bytes, as a killed writer leaves it."""
    path = write_robot(path, steps=40)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def bench_fixture(d: Path, episodes: int, steps: int) -> None:
    """`episodes` recordings of `steps` steps each under `d` (`robolake bench ingest`): 100 Hz joints,
    commands, a transform and a JPEG wrist camera at a third of the rate."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    for i in range(episodes):
        write_robot(d / f"run_{i:04d}.rrd", steps=steps, app="bench_robot")
