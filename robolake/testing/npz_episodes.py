"""NumPy episodes as simulation codebases save them: `.npz` files or folders of `.npy` files.

Written with NumPy's own `np.savez` / `np.save`, one episode per file or folder, with a JSON
sidecar (`<stem>.json` beside a `.npz`, `meta.json` in a folder) holding the instruction and
success, and one more observation than actions (the observation after the last action is
recorded), as gym-style recorders do. Values are smooth and known, so what the reader returns
can be checked exactly. The faults are written the way they happen: a pickled object array
(`np.savez` pickles a list of dicts silently), arrays of different lengths, a `.npz` cut short
by a killed writer, a sidecar that is not JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robolake.testing.images import frames

__all__ = [
    "episode_arrays",
    "write_npz_episode",
    "write_npy_episode",
    "write_npz_folder",
    "write_pickled",
    "write_ragged",
    "write_truncated",
    "write_bad_sidecar",
    "bench_fixture",
]


def episode_arrays(
    steps: int = 20, *, seed: int = 0, dof: int = 7, size: tuple[int, int] = (32, 48), camera: bool = True
) -> dict[str, np.ndarray]:
    """One episode's arrays: `steps` actions and `steps + 1` observations (qpos float64, gripper
    float32, a wrist camera), dones, rewards and a text array, in the obs_*/actions naming."""
    rng = np.random.default_rng(seed)
    qpos = np.cumsum(rng.normal(0, 0.01, (steps + 1, dof)), axis=0)  # float64, as MuJoCo gives it
    out = {
        "obs_qpos": qpos,
        "obs_gripper": np.linspace(0, 1, steps + 1, dtype=np.float32)[:, None],
        "actions": (qpos[1:] - qpos[:-1]).astype(np.float32) * 10,
        "rewards": np.linspace(0, 1, steps, dtype=np.float32),
        "dones": np.r_[np.zeros(steps - 1, bool), True],
        "env_state": rng.normal(0, 1, (steps + 1, 4, 4)),  # [T+1, 4, 4]: record only
    }
    if camera:
        out["obs_wrist_rgb"] = frames(steps + 1, size[0], size[1], seed=seed)
    return out


def _sidecar(path: Path, task: str, success: bool | None, fps: float | None) -> None:
    body: dict[str, object] = {"instruction": task, "sim": "mujoco"}
    if success is not None:
        body["success"] = success
    if fps is not None:
        body["fps"] = fps
    path.write_text(json.dumps(body))


def write_npz_episode(
    path: Path,
    *,
    steps: int = 20,
    seed: int = 0,
    task: str = "lift the cube",
    success: bool | None = True,
    fps: float | None = 10.0,
    camera: bool = True,
    arrays: dict[str, np.ndarray] | None = None,
) -> Path:
    """`path` (`.npz`, by `np.savez`) and its sidecar `<stem>.json`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **(arrays if arrays is not None else episode_arrays(steps, seed=seed, camera=camera)))  # type: ignore[arg-type]
    _sidecar(path.with_suffix(".json"), task, success, fps)
    return path


def write_npy_episode(
    folder: Path,
    *,
    steps: int = 20,
    seed: int = 0,
    task: str = "lift the cube",
    success: bool | None = True,
    fps: float | None = 10.0,
    camera: bool = True,
) -> Path:
    """`folder` of `.npy` files (by `np.save`, one per array) and `meta.json`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, arr in episode_arrays(steps, seed=seed, camera=camera).items():
        np.save(folder / f"{name}.npy", arr)
    _sidecar(folder / "meta.json", task, success, fps)
    return folder


def write_npz_folder(
    root: Path, *, episodes: int = 3, steps: int = 20, npy: bool = False, camera: bool = True, fps: float | None = 10.0
) -> Path:
    """`root` holding `episodes` episodes (`episode_000.npz` + `.json`, or `episode_000/` folders of `.npy`),
    the last one failed."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(episodes):
        kw = {"steps": steps + i, "seed": i, "task": f"lift cube {i % 2}", "success": i < episodes - 1, "fps": fps}
        if npy:
            write_npy_episode(root / f"episode_{i:03d}", camera=camera, **kw)  # type: ignore[arg-type]
        else:
            write_npz_episode(root / f"episode_{i:03d}.npz", camera=camera, **kw)  # type: ignore[arg-type]
    return root


def write_pickled(path: Path, *, in_steps: bool = False, steps: int = 20) -> Path:
    """A `.npz` with an object array (`infos`, a list of dicts: `np.savez` pickles it); with `in_steps`,
    the object array is the actions themselves."""
    arrays: dict[str, np.ndarray] = dict(episode_arrays(steps, camera=False))
    infos = np.empty(steps, dtype=object)
    infos[:] = [{"contact": bool(i % 2)} for i in range(steps)]
    if in_steps:
        arrays["actions"] = infos
    else:
        arrays["infos"] = infos
    return write_npz_episode(path, arrays=arrays)


def write_ragged(path: Path, *, steps: int = 20) -> Path:
    """A `.npz` whose gripper has 3 rows fewer than qpos (neither T nor T + 1 of the actions)."""
    arrays = episode_arrays(steps, camera=False)
    arrays["obs_gripper"] = arrays["obs_gripper"][:-3]
    return write_npz_episode(path, arrays=arrays)


def write_truncated(path: Path, *, steps: int = 20, camera: bool = True) -> Path:
    """A `.npz` cut to half its bytes (a writer killed mid-file)."""
    write_npz_episode(path, steps=steps, camera=camera)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def write_bad_sidecar(path: Path, *, steps: int = 20, camera: bool = True) -> Path:
    """A good `.npz` whose sidecar is not JSON (a YAML-ish text)."""
    write_npz_episode(path, steps=steps, camera=camera)
    path.with_suffix(".json").write_text("instruction: lift the cube\nsuccess: yes\n")
    return path


def bench_fixture(d: Path, episodes: int, steps: int) -> None:
    """`episodes` `.npz` episodes of `steps` actions (7-DoF qpos, gripper, a 96x128 wrist camera) under `d`."""
    d.mkdir(parents=True, exist_ok=True)
    for i in range(episodes):
        arrays = episode_arrays(steps, seed=i, size=(96, 128))
        write_npz_episode(d / f"episode_{i:05d}.npz", arrays=arrays, task=f"lift cube {i % 4}", success=i % 3 != 0)
