"""Message decoding: fields, joints by name, geometry and std_msgs flattening, image encodings."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from robolake.lake.sources.topics import ros_messages as rm

rosbags = pytest.importorskip("rosbags")


@pytest.fixture(scope="module")
def T():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.LATEST).types


def _header(T, sec=5, nsec=250):
    return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="x")


def test_joint_state_reordered_and_selected_by_name(T):
    e = np.zeros(0)
    msg = T["sensor_msgs/msg/JointState"](
        header=_header(T),
        name=["b", "a", "c"],
        position=np.array([2.0, 1.0, 3.0]),
        velocity=np.array([20.0, 10.0, 30.0]),
        effort=e,
    )
    assert rm.joint_vector(msg, "position", ["a", "b", "c"]).tolist() == [1.0, 2.0, 3.0]
    assert rm.joint_vector(msg, "velocity", ["c", "a"]).tolist() == [30.0, 10.0]
    with pytest.raises(rm.FieldError, match=r"joints \['gripper'\] are not in this JointState"):
        rm.joint_vector(msg, "position", ["a", "gripper"])
    with pytest.raises(rm.FieldError, match="0 values for 3 joints"):
        rm.joint_vector(msg, "effort", ["a"])
    assert rm.header_stamp_ns(msg) == 5_000_000_250
    assert rm.default_field("sensor_msgs/msg/JointState", msg) == "position"


def test_geometry_and_std_msgs_flatten_in_declaration_order(T):
    P, Q, V = T["geometry_msgs/msg/Point"], T["geometry_msgs/msg/Quaternion"], T["geometry_msgs/msg/Vector3"]
    pose = T["geometry_msgs/msg/Pose"](position=P(x=1, y=2, z=3), orientation=Q(x=0.1, y=0.2, z=0.3, w=0.9))
    stamped = T["geometry_msgs/msg/PoseStamped"](header=_header(T), pose=pose)
    f = rm.default_field("geometry_msgs/msg/PoseStamped", stamped)
    assert f == "pose" and rm.to_vector(stamped, f).tolist() == [1, 2, 3, 0.1, 0.2, 0.3, 0.9]
    assert rm.to_vector(stamped, "pose.orientation.w").tolist() == [0.9]
    twist = T["geometry_msgs/msg/TwistStamped"](
        header=_header(T), twist=T["geometry_msgs/msg/Twist"](linear=V(x=1, y=0, z=0), angular=V(x=0, y=0, z=-1))
    )
    assert rm.to_vector(twist, rm.default_field("geometry_msgs/msg/TwistStamped", twist)).tolist() == [
        1,
        0,
        0,
        0,
        0,
        -1,
    ]
    arr = T["std_msgs/msg/Float32MultiArray"](
        layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0), data=np.array([1.5, 2.5], np.float32)
    )
    assert rm.default_field("std_msgs/msg/Float32MultiArray", arr) == "data"
    assert rm.to_vector(arr, "data").tolist() == [1.5, 2.5]
    assert rm.to_vector(T["std_msgs/msg/Bool"](data=True), "data").tolist() == [1.0]
    assert rm.to_vector(
        T["std_msgs/msg/Float64"](data=0.25),
        rm.default_field("std_msgs/msg/Float64", T["std_msgs/msg/Float64"](data=0.25)),
    ).tolist() == [0.25]
    with pytest.raises(
        rm.FieldError, match=r"'pose.orientation.nope' does not exist; fields there: \['x', 'y', 'z', 'w'\]"
    ):
        rm.to_vector(stamped, "pose.orientation.nope")
    # JSON dicts take the same paths
    assert rm.to_vector({"pose": {"position": {"x": 1, "y": 2, "z": 3}}}, "pose.position").tolist() == [1, 2, 3]


@pytest.mark.parametrize("encoding", ["rgb8", "bgr8", "mono8", "rgba8"])
def test_raw_image_encodings_become_rgb(T, encoding: str):
    rgb = np.zeros((4, 5, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 10, 20, 30
    ch = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4}[encoding]
    if encoding == "bgr8":
        px = rgb[..., ::-1]
    elif encoding == "mono8":
        px = rgb[..., :1]
    elif encoding == "rgba8":
        px = np.concatenate([rgb, np.full((4, 5, 1), 255, np.uint8)], axis=2)
    else:
        px = rgb
    step = 5 * ch + 3  # rows padded, as some drivers do
    buf = np.zeros((4, step), np.uint8)
    buf[:, : 5 * ch] = px.reshape(4, -1)
    msg = T["sensor_msgs/msg/Image"](
        header=_header(T), height=4, width=5, encoding=encoding, is_bigendian=0, step=step, data=buf.reshape(-1)
    )
    out = rm.image_rgb(msg)
    want = np.repeat(rgb[..., :1], 3, axis=2) if encoding == "mono8" else rgb
    np.testing.assert_array_equal(out, want)


def test_compressed_png_passes_through_and_unknown_bytes_fail(T):
    buf = io.BytesIO()
    Image.fromarray(np.full((6, 7, 3), 128, np.uint8)).save(buf, format="PNG")
    png = buf.getvalue()
    msg = T["sensor_msgs/msg/CompressedImage"](header=_header(T), format="png", data=np.frombuffer(png, np.uint8))
    data, codec = rm.compressed_image(msg)
    assert data == png and codec == "png" and rm.image_size(data) == (6, 7)
    bad = T["sensor_msgs/msg/CompressedImage"](
        header=_header(T), format="16UC1; compressedDepth", data=np.zeros(10, np.uint8)
    )
    with pytest.raises(rm.FieldError, match="neither JPEG nor PNG"):
        rm.compressed_image(bad)


def test_raw_header_stamp_matches_decoded(T):
    from rosbags.typesys import Stores, get_typestore

    ts2 = get_typestore(Stores.LATEST)
    msg = T["sensor_msgs/msg/CompressedImage"](
        header=_header(T, 1_700_000_123, 456_789), format="jpeg", data=np.zeros(3, np.uint8)
    )
    raw = ts2.serialize_cdr(msg, "sensor_msgs/msg/CompressedImage")
    assert rm.raw_header_stamp_ns(raw, ros2=True) == 1_700_000_123_000_456_789
    ts1 = get_typestore(Stores.ROS1_NOETIC)
    m1 = ts1.types["sensor_msgs/msg/CompressedImage"](
        header=ts1.types["std_msgs/msg/Header"](
            seq=7, stamp=ts1.types["builtin_interfaces/msg/Time"](sec=42, nanosec=9), frame_id="c"
        ),
        format="jpeg",
        data=np.zeros(3, np.uint8),
    )
    assert (
        rm.raw_header_stamp_ns(ts1.serialize_ros1(m1, "sensor_msgs/msg/CompressedImage"), ros2=False) == 42_000_000_009
    )


def test_camera_names_and_kinds():
    assert rm.camera_name("/wrist/image_raw/compressed") == "wrist"
    assert rm.camera_name("/cam_high/color/image_raw") == "cam_high"
    assert rm.kind_of("foxglove.CompressedImage") == rm.COMPRESSED_IMAGE
    assert rm.kind_of("sensor_msgs/msg/Image") == rm.IMAGE and rm.kind_of("sensor_msgs/JointState") == rm.JOINT_STATE
