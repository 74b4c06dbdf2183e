"""One tiny source of every format and layout robolake reads, for checking `inspect --suggest-map`.

A suggested mapping must ingest as written and land no less than the default ingest (episodes,
steps, frames). `FIXTURES` maps a name (`format/layout`) to a builder that writes the source
under a given folder and returns the path to hand to `inspect` and `ingest`; a test runs every
entry through both (`tests/integration/test_suggestions.py`). A new reader adds its fixtures
here, so the check covers it without a new test.

Besides the plain layouts, the registry holds the recordings suggestions used to get wrong: a
JointState topic with empty `name` arrays, a bag of cameras only, a RealSense bag (with its
metadata topics), robosuite's `demo.hdf5` of six demos.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from robolake.testing import hdf5, mcap, rlds, ros

__all__ = ["FIXTURES", "realsense_extra", "unnamed_joints_extra"]


def _lerobot(version: str) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

        config = SyntheticConfig.tiny(version=version, embodiments=("single_arm_7dof",), min_length=8, max_length=12)
        return generate_synthetic(root / f"lerobot_{version}", config)[0]

    return build


def _file(name: str, write: Callable[[Path], Any]) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        path = root / name
        write(path)
        return path

    return build


_SHORT = ros.Layout(seconds=0.5)


def unnamed_joints_extra(seconds: float = 0.5, hz: float = 50.0) -> dict[str, Any]:
    """`Layout.extra` of a `/joint_states` topic whose messages leave `name` empty (some drivers do)."""
    t = np.arange(int(seconds * hz)) / hz
    return {"/joint_states": ("joint", [(x, ([], ros.joint_values(x))) for x in t])}


def realsense_extra(seconds: float = 0.5, *, imu: bool = True) -> dict[str, Any]:
    """`Layout.extra` of a RealSense bag (realsense-viewer's recording): device info as KeyValue
    messages at the start, a colour and a depth stream, and an IMU (a D435i; none for a D435)."""

    def key_value(key: str, value: str) -> Any:
        return lambda ts, header: ts.types["diagnostic_msgs/msg/KeyValue"](key=key, value=value)

    info = [
        (0.0, key_value(k, v))
        for k, v in (("Name", "Intel RealSense D435I"), ("Serial Number", "123"), ("Firmware Version", "5.13"))
    ]
    frames = [(i / 15, ros.rgb_frame(i)) for i in range(int(seconds * 15))]
    extra: dict[str, Any] = {
        "/device_0/info": ("custom:diagnostic_msgs/msg/KeyValue", info),
        "/device_0/sensor_1/Color_0/image/data": ("rgb8", frames),
        "/device_0/sensor_0/Depth_0/image/data": ("rgb8", frames),
    }
    if imu:
        extra["/device_0/sensor_2/Accel_0/imu/data"] = (
            "imu",
            [(i / 100, [0, 0, 0, 1, 0.1, 0.2, 0.3, 0, 0, 9.8 + i / 100]) for i in range(int(seconds * 100))],
        )
    return extra


def _bag(extra: dict[str, Any], *, camera: str = "compressed") -> ros.Layout:
    """A layout of `extra` topics only (no joints, no command), and a camera unless `camera` is none."""
    return ros.Layout(seconds=0.5, joint_hz=0.0001, cmd_hz=None, camera=camera, extra=extra)


def _video_layout() -> ros.Layout:
    """Joints and commands, and a camera logged as foxglove CompressedVideo (h264 packets) instead of images."""
    from robolake.testing.video import video_topic

    entries, _ = video_topic(0.5, 15.0)
    return ros.Layout(seconds=0.5, camera="none", extra={"/camera/video": ("video", entries)})


def _zarr(root: Path, *, videos: bool) -> Path:
    from robolake.testing.zarr_buffers import write_replay_buffer

    return write_replay_buffer(
        root / ("dp_real" if videos else "umi"), episodes=2, steps=8, videos=videos, size=(16, 16)
    )


def _rerun(path: Path) -> Path:
    from robolake.testing.rerun_recordings import write_robot

    return write_robot(path, steps=30, hz=30.0, size=(16, 16))


def _npz(root: Path, *, npy: bool) -> Path:
    from robolake.testing.npz_episodes import write_npz_folder

    return write_npz_folder(root, episodes=2, steps=8, npy=npy)


def _lerobot_lance(root: Path) -> Path:
    from robolake.writers.lerobot_lance import write_lerobot_lance

    v3 = _lerobot("v3.0")(root / "v3")
    return write_lerobot_lance(v3, root / "arm_lance")


FIXTURES: dict[str, Callable[[Path], Path]] = {
    "lerobot/v2.0": _lerobot("v2.0"),
    "lerobot/v2.1": _lerobot("v2.1"),
    "lerobot/v3.0": _lerobot("v3.0"),
    "hdf5/aloha": _file("episode_0.hdf5", lambda p: hdf5.write_aloha(p, steps=8, size=(16, 16))),
    "hdf5/robomimic": _file("low_dim.hdf5", lambda p: hdf5.write_robomimic(p, demos=2, steps=8)),
    "hdf5/robosuite": _file("demo.hdf5", lambda p: hdf5.write_robosuite(p, demos=6, steps=8)),
    "hdf5/indexed": _file("flat.hdf5", lambda p: hdf5.write_indexed(p, episodes=3, steps=8)),
    "hdf5/custom": _file("custom.h5", lambda p: hdf5.write_custom(p, seconds=0.5)),
    "rlds": lambda root: rlds.write_tfds(root / "bridge_mini"),
    "ros1": _file("arm.bag", lambda p: ros.write_ros1(p, _SHORT)),
    "ros1/no-camera": _file("arm.bag", lambda p: ros.write_ros1(p, ros.Layout(seconds=0.5, camera="none"))),
    "ros1/unnamed-joints": _file("arm.bag", lambda p: ros.write_ros1(p, _bag(unnamed_joints_extra()))),
    "ros1/cameras-only": _file("cams.bag", lambda p: ros.write_ros1(p, _bag({}, camera="raw"))),
    "ros1/realsense-d435i": _file("d435i.bag", lambda p: ros.write_ros1(p, _bag(realsense_extra(), camera="none"))),
    "ros1/realsense-d435": _file(
        "d435.bag", lambda p: ros.write_ros1(p, _bag(realsense_extra(imu=False), camera="none"))
    ),
    "ros2/sqlite3": _file("bag_sqlite", lambda p: ros.write_ros2(p, _SHORT)),
    "ros2/mcap": _file("bag_mcap", lambda p: ros.write_ros2(p, _SHORT, storage="mcap")),
    "mcap/json": _file("arm.mcap", lambda p: ros.write_mcap_json(p, _SHORT)),
    "mcap/ros1": _file("arm.mcap", lambda p: mcap.write_mcap_ros1(p, _SHORT)),
    "mcap/protobuf": _file("arm.mcap", lambda p: mcap.write_mcap_protobuf(p, _SHORT)),
    "mcap/mixed": _file("arm.mcap", lambda p: mcap.write_mcap_mixed(p, _SHORT)),
    "mcap/compressed-video": _file("video.mcap", lambda p: ros.write_mcap_json(p, _video_layout())),
    "zarr/umi-jpegxl": lambda root: _zarr(root, videos=False),
    "zarr/diffusion-policy-videos": lambda root: _zarr(root, videos=True),
    "rerun": _file("arm.rrd", lambda p: _rerun(p)),
    "npz/folder": lambda root: _npz(root / "demos", npy=False),
    "npz/npy-folders": lambda root: _npz(root / "demos_npy", npy=True),
    "lerobot-lance": lambda root: _lerobot_lance(root),
}
"""Name -> builder: writes a tiny source under the folder given and returns the path to ingest."""
