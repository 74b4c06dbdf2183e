"""HDF5 recordings in the layouts real recorders write: ALOHA/ACT, robomimic, robosuite, custom ones.

These write real files with h5py (imported when a writer runs), for tests, benchmarks and demos.
Each writer mirrors its recorder's own layout and attributes, so the HDF5 reader's layout
detection sees what it sees in the field: `write_robomimic` can add what Isaac Lab Mimic writes
(a nested `obs/datagen_info` group) and odd cameras (grayscale, 5-D); `write_indexed` is the flat
`states_{i}` / `actions_{i}` layout of many home-grown recorders; `CUSTOM_MAPPING` is the `--map`
that reads the home-grown layout of `write_custom`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robolake.testing.images import frames, jpeg

__all__ = ["write_aloha", "write_robomimic", "write_robosuite", "write_custom", "write_indexed", "CUSTOM_MAPPING"]


def write_aloha(
    path: Path,
    *,
    steps: int = 30,
    cams: tuple[str, ...] = ("cam_high", "cam_left_wrist"),
    compress: bool = False,
    size: tuple[int, int] = (48, 64),
    seed: int = 0,
    dof: int = 14,
    sizes: list[tuple[int, int]] | None = None,
) -> Path:
    """ACT's record_episodes layout; `compress` stores JPEG rows zero-padded to one length plus /compress_len."""
    import h5py

    rng = np.random.default_rng(seed)
    qpos = np.cumsum(rng.normal(0, 0.01, (steps, dof)), axis=0).astype(np.float32)
    with h5py.File(path, "w", rdcc_nbytes=1024**2 * 2) as root:
        root.attrs["sim"] = not compress
        root.attrs["compress"] = compress
        obs = root.create_group("observations")
        image = obs.create_group("images")
        encoded: dict[str, list[bytes]] = {}
        for ci, cam in enumerate(cams):
            pix = frames(steps, *size, seed=seed + ci)
            if compress:
                encoded[cam] = [
                    jpeg(pix[i] if sizes is None else frames(1, *sizes[i], seed=i)[0]) for i in range(steps)
                ]
            else:
                image.create_dataset(cam, data=pix, dtype="uint8", chunks=(1, *size, 3))
        if compress:
            lens = np.array([[len(b) for b in encoded[c]] for c in cams])
            padded = int(lens.max())
            for cam in cams:
                rows = np.zeros((steps, padded), np.uint8)
                for i, b in enumerate(encoded[cam]):
                    rows[i, : len(b)] = np.frombuffer(b, np.uint8)
                image.create_dataset(cam, data=rows, dtype="uint8", chunks=(1, padded))
            root.create_dataset("compress_len", data=lens.astype(np.float64))
        obs.create_dataset("qpos", data=qpos)
        obs.create_dataset("qvel", data=np.gradient(qpos, axis=0))
        obs.create_dataset("effort", data=np.zeros_like(qpos))
        root.create_dataset("action", data=np.roll(qpos, -1, axis=0))
    return path


def write_robomimic(
    path: Path,
    *,
    env: str = "Lift",
    robot: str = "Panda",
    demos: int = 3,
    steps: int = 20,
    object_dim: int = 10,
    images: bool = True,
    seed: int = 0,
    control_freq: int | None = 20,
    datagen_info: bool = False,
    gray_camera: bool = False,
    stacked_camera: bool = False,
) -> Path:
    """robomimic's dataset layout: data/demo_N with obs/, actions, rewards, dones, and train/valid masks.

    `control_freq=None` leaves the rate out of env_args; `datagen_info` adds Isaac Lab Mimic's
    nested `obs/datagen_info` group; `gray_camera` a uint8 [T, H, W] `obs/depth_image`;
    `stacked_camera` a 5-D [T, 2, H, W, 3] `obs/stereo_image` (no camera layout robolake reads).
    """
    import h5py

    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["total"] = demos * steps
        kwargs = {"robots": [robot], "has_renderer": False, "camera_names": ["agentview", "robot0_eye_in_hand"]}
        if control_freq is not None:
            kwargs["control_freq"] = control_freq
        data.attrs["env_args"] = json.dumps({"env_name": env, "type": 1, "env_kwargs": kwargs})
        for d in range(demos):
            g = data.create_group(f"demo_{d}")
            g.attrs["num_samples"] = steps
            g.attrs["model_file"] = f"<mujoco model='{env}{d}'/>"
            obs = g.create_group("obs")
            obs.create_dataset("robot0_eef_pos", data=rng.normal(size=(steps, 3)))
            obs.create_dataset("robot0_eef_quat", data=rng.normal(size=(steps, 4)))
            obs.create_dataset("robot0_gripper_qpos", data=rng.normal(size=(steps, 2)))
            obs.create_dataset("object", data=rng.normal(size=(steps, object_dim)))
            if images:
                obs.create_dataset("agentview_image", data=frames(steps, 32, 32, seed=d))
                obs.create_dataset("robot0_eye_in_hand_image", data=frames(steps, 32, 32, seed=d + 50))
            if datagen_info:
                info = obs.create_group("datagen_info")
                info.create_dataset("eef_pose", data=rng.normal(size=(steps, 4, 4)))
                info.create_dataset("target_eef_pose", data=rng.normal(size=(steps, 4, 4)))
                info.create_group("object_pose").create_dataset("cube", data=rng.normal(size=(steps, 4, 4)))
            if gray_camera:
                obs.create_dataset("depth_image", data=frames(steps, 16, 16, seed=d)[..., 0])
            if stacked_camera:
                obs.create_dataset("stereo_image", data=np.stack([frames(steps, 8, 8, seed=d)] * 2, axis=1))
            g.create_dataset("actions", data=rng.uniform(-1, 1, (steps, 7)))
            g.create_dataset("rewards", data=np.r_[np.zeros(steps - 1), 1.0])
            g.create_dataset("dones", data=np.r_[np.zeros(steps - 1), 1].astype(np.int64))
            g.create_dataset("states", data=rng.normal(size=(steps, 32)))
        mask = f.create_group("mask")
        names = [f"demo_{d}".encode() for d in range(demos)]
        mask.create_dataset("train", data=np.array(names[:-1], dtype="S"))
        mask.create_dataset("valid", data=np.array(names[-1:], dtype="S"))
    return path


def write_robosuite(
    path: Path,
    *,
    env: str = "Lift",
    robot: str = "Panda",
    demos: int = 2,
    steps: int = 15,
    state_dim: int = 32,
    seed: int = 0,
) -> Path:
    """robosuite's collect_human_demonstrations / gather_demonstrations_as_hdf5 layout."""
    import h5py

    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["date"] = "12-02-2026"
        data.attrs["time"] = "20:00:00"
        data.attrs["repository_version"] = "1.4.1"
        data.attrs["env"] = env
        data.attrs["env_info"] = json.dumps(
            {"env_name": env, "robots": robot, "controller_configs": {"type": "OSC_POSE"}}
        )
        for d in range(1, demos + 1):  # robosuite numbers demos from 1
            g = data.create_group(f"demo_{d}")
            g.attrs["model_file"] = f"<mujoco model='{env}'><worldbody/></mujoco>"
            g.create_dataset("states", data=rng.normal(size=(steps, state_dim)))
            g.create_dataset("actions", data=rng.uniform(-1, 1, (steps, 7)))
    return path


def write_custom(
    path: Path,
    *,
    seconds: float = 2.0,
    joint_hz: float = 100.0,
    cmd_hz: float = 50.0,
    cam_fps: float = 15.0,
    jitter: float = 0.002,
    seed: int = 0,
    cam_offset: float = 0.0,
) -> Path:
    """A home-grown recorder: each stream with its own per-row timestamps, jittered."""
    import h5py

    rng = np.random.default_rng(seed)

    def clock(hz: float, offset: float = 0.0) -> np.ndarray:
        t = np.arange(int(seconds * hz)) / hz + offset
        return np.sort(t + rng.uniform(0, jitter, t.shape))

    with h5py.File(path, "w") as f:
        tj, tc, tv = clock(joint_hz), clock(cmd_hz, 0.01), clock(cam_fps, 0.005 + cam_offset)
        f.create_dataset("robot/joint_t", data=tj)
        f.create_dataset("robot/joints", data=np.stack([np.sin(tj * (k + 1)) for k in range(6)], axis=1))
        f.create_dataset("robot/gripper", data=np.cos(tj))
        f.create_dataset("teleop/t", data=tc)
        f.create_dataset("teleop/cmd", data=np.stack([np.sin(tc * (k + 1) + 0.1) for k in range(7)], axis=1))
        f.create_dataset("camera/t", data=tv)
        f.create_dataset("camera/rgb", data=frames(len(tv), 24, 32, seed=seed))
        f.attrs["instruction"] = "stack the red block"
    return path


def write_indexed(
    path: Path,
    *,
    episodes: int = 4,
    steps: int = 12,
    state_dim: int = 5,
    action_dim: int = 3,
    images: bool = False,
    fps: float | None = None,
    seed: int = 0,
    skip: tuple[int, ...] = (),
) -> Path:
    """A flat file of key families, one episode per index: `states_<i>` [T, S], `actions_<i>` [T, A]
    (and `images_<i>` uint8 [T, 16, 16, 3]); the values of episode i start at i (state) and -i (action)."""
    import h5py

    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for i in range(episodes):
            if i in skip:
                continue
            f.create_dataset(f"states_{i}", data=i + np.cumsum(rng.normal(0, 0.1, (steps, state_dim)), axis=0))
            f.create_dataset(f"actions_{i}", data=-i + rng.uniform(-1, 1, (steps, action_dim)))
            if images:
                f.create_dataset(f"images_{i}", data=frames(steps, 16, 16, seed=seed + i))
        if fps is not None:
            f.attrs["fps"] = fps
    return path


CUSTOM_MAPPING = {
    "embodiment": "myarm",
    "task_from": "attrs/instruction",
    "fps": 30,
    "state": [
        {"source": "/robot/joints", "stamps": "/robot/joint_t"},
        {"source": "/robot/gripper", "stamps": "/robot/joint_t"},
    ],
    "action": [{"source": "/teleop/cmd", "stamps": "/teleop/t"}],
    "cameras": {"front": {"source": "/camera/rgb", "stamps": "/camera/t"}},
}
