"""CompressedVideo topics are cameras: their packets kept as the record, bit-exact, by the image rule.

ROS 2 bags (sqlite3 and MCAP storage, `foxglove_msgs/msg/CompressedVideo`) and standalone MCAP
files (JSON and protobuf `foxglove.CompressedVideo`) of real h264 packets; each frame read from
the lake is compared with PyAV decoding the same packets in order, and each step shows the
latest frame at or before its tick. Faults (no keyframe at the start, a codec change, a corrupt
packet) are named.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.media.record import NOPTS, StreamIndex, decode_runs, rgb
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.testing.mcap import write_mcap_protobuf
from robolake.testing.ros import T0_NS, Layout, write_mcap_json, write_ros2
from robolake.testing.video import decode_packets, video_packets, video_topic

pytest.importorskip("rosbags")
pytest.importorskip("av")

TOPIC = "/camera/video"
WRITERS = {
    "ros2-sqlite3": lambda root, layout: write_ros2(root / "bag", layout),
    "ros2-mcap": lambda root, layout: write_ros2(root / "bag", layout, storage="mcap"),
    "mcap-json": lambda root, layout: write_mcap_json(root / "rig.mcap", layout),
    "mcap-protobuf": lambda root, layout: write_mcap_protobuf(root / "rig.mcap", layout),
}


def _mapping(fps: float | None = None) -> Any:
    d: dict[str, Any] = {"state": ["/joint_states"], "action": ["/arm/joint_command"], "cameras": {"wrist": TOPIC}}
    if fps:
        d["fps"] = fps
    return mapping_from_dict(d)


def _ingest(tmp_path: Path, fmt: str, entries: list[tuple[float, Any]], fps: float | None = None) -> Any:
    layout = Layout(seconds=1.0, camera="none", jitter_s=0.0, extra={TOPIC: ("video", entries)})
    WRITERS[fmt](tmp_path / "src", layout)
    return ingest(str(tmp_path / "src"), str(tmp_path / "lake"), IngestConfig(mapping=_mapping(fps)))


def _lake_frames(tmp_path: Path) -> tuple[list[np.ndarray], np.ndarray, Any, Any]:
    lake = Lake.open(str(tmp_path / "lake"))
    (ep,) = lake.episodes().to_pylist()
    n = int(ep["num_steps"])
    reader = lake.frames()
    frames = reader.read_many([(ep["episode_id"], "wrist", s) for s in range(n)], exact=True)
    ts = lake.to_arrow("steps", where=f"episode_id = '{ep['episode_id']}'").sort_by("step_index")["timestamp"]
    return frames, ts.to_numpy(), reader.stream(ep["episode_id"], "wrist"), lake


def _t0_ns(lake: Lake) -> int:
    return int(json.loads(lake.episodes().to_pylist()[0]["metadata"])["t0_ns"])


def _expected(cam_t: np.ndarray, ticks: np.ndarray) -> np.ndarray:
    """The image rule: the latest frame at or before each tick (the first frame takes earlier ticks)."""
    return np.maximum(np.searchsorted(cam_t, ticks + 1e-9, side="right") - 1, 0)


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_video_topic_is_a_recorded_camera_bit_exact(tmp_path: Path, fmt: str):
    entries, packets = video_topic(1.0, 15.0, gop=8)
    res = _ingest(tmp_path, fmt, entries)
    assert res.ingested == 1 and not res.quarantine
    frames, ts, stream, lake = _lake_frames(tmp_path)
    assert stream.codec == "h264" and stream.extradata.startswith(b"\x00\x00\x00\x01")  # SPS/PPS of message 0
    reference = decode_packets(packets)
    cam_t = np.asarray([t for t, _ in entries])
    ticks = ts + (_t0_ns(lake) - T0_NS) / 1e9  # steps are seconds from the episode's first tick
    want = _expected(cam_t, ticks)
    for s, frame in enumerate(frames):
        np.testing.assert_array_equal(frame, reference[want[s]])
    # every packet the steps need is held once: media rows (repeats hold none) plus extras
    media = lake.to_arrow("media", columns=["data", "encoding"])
    assert set(media["encoding"].to_pylist()) == {"video;codec=h264"}
    held = [d for d in media["data"].to_pylist() if d] + list(stream.extra)
    assert sorted(held) == sorted(packets[: want[-1] + 1])
    assert int(stream.repeats.sum()) == len(frames) - len(np.unique(want))


def test_ticks_slower_than_the_camera_keep_the_frames_between_as_extras(tmp_path: Path):
    entries, packets = video_topic(1.0, 30.0, gop=10)
    res = _ingest(tmp_path, "mcap-json", entries, fps=10)
    assert res.ingested == 1
    frames, ts, stream, lake = _lake_frames(tmp_path)
    assert len(stream.extra) > len(frames)  # two of every three packets no tick lands on
    want = _expected(np.asarray([t for t, _ in entries]), ts + (_t0_ns(lake) - T0_NS) / 1e9)
    reference = decode_packets(packets)
    for s, frame in enumerate(frames):
        np.testing.assert_array_equal(frame, reference[want[s]])


def test_a_stream_that_starts_without_a_keyframe_lands_from_its_first_keyframe(tmp_path: Path):
    entries, packets = video_topic(1.0, 15.0, gop=6)
    res = _ingest(tmp_path, "ros2-sqlite3", entries[3:])  # the recorder started mid-GOP
    assert res.ingested == 1
    assert any("starts without a keyframe: its first 3 packet(s)" in n for n in res.notes)
    frames, _, stream, _ = _lake_frames(tmp_path)
    reference = decode_packets(packets[6:])
    np.testing.assert_array_equal(frames[0], reference[0])  # ticks before the first keyframe show it
    assert bool(stream.packet_key[0])


def test_a_codec_change_mid_stream_is_named(tmp_path: Path):
    h264, _ = video_topic(0.5, 15.0, gop=4)
    h265 = [(t + 0.5, ("h265", p)) for t, p in zip(np.arange(7) / 15.0, video_packets(7, fmt="h265"), strict=True)]
    res = _ingest(tmp_path, "mcap-protobuf", h264 + h265)
    assert res.ingested == 0
    ((_, reason),) = res.quarantine
    assert "codec changes mid-stream (h264 -> h265" in reason


def test_a_corrupt_packet_is_named(tmp_path: Path):
    entries, _ = video_topic(1.0, 15.0, gop=8)
    t, (fmt, data) = entries[5]
    entries[5] = (t, (fmt, b"\x00\x00\x00\x01\x41" + bytes(range(7, 200))))  # a P slice of garbage
    res = _ingest(tmp_path, "mcap-json", entries)
    assert res.ingested == 0
    ((_, reason),) = res.quarantine
    assert "message 5" in reason and ("does not decode" in reason or "decodes to no frame" in reason)


def test_repeat_entries_decode_to_their_packets_frame():
    packets = video_packets(6, gop=3)
    # steps 0,1 show frame 0; step 2 frame 1; frame 2 no step (extra); steps 3,4,5 frame 3, 4, 5
    index = StreamIndex(
        codec="h264",
        decoder="h264",
        extradata=b"",
        width=64,
        height=48,
        time_base=Fraction(1, 30),
        packet_step=[0, 1, 2, -1, 3, 4, 5],
        packet_pts=[0, 0, 1, 2, 3, 4, 5],
        packet_dts=[0, NOPTS, 1, 2, 3, 4, 5],
        packet_key=[True, False, False, False, True, False, False],
        extra=(packets[2],),
    )
    assert index.repeats.tolist() == [False, True, False, False, False, False, False]
    cells = [packets[0], b"", packets[1], packets[3], packets[4], packets[5]]
    reference = decode_packets(packets)
    for steps in ([1], [0, 1], [2], [1, 5], list(range(6))):
        got = {s: rgb(f) for s, f in decode_runs(index, index.runs(steps), cells.__getitem__)}
        for s in steps:
            np.testing.assert_array_equal(got[s], reference[[0, 0, 1, 3, 4, 5][s]])
    assert 1 not in index.owned_steps(index.runs([1]))  # a repeat's row holds no packet to read
