"""`frame_bytes`: the lake's own bytes for browser-decodable rows, a lossless PNG of the decode otherwise."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from robolake.lake import Lake
from robolake.view.frames import FrameSource, frame_bytes, png_bytes


def _keys(lake: Lake) -> list[tuple[str, str, int]]:
    rows = lake.episodes(columns=["episode_id", "cameras", "num_steps"]).to_pylist()
    return [(r["episode_id"], cam, step) for r in rows for cam in r["cameras"] for step in (0, 1, r["num_steps"] - 1)]


def test_jpeg_rows_are_sent_byte_for_byte(view_lakes) -> None:
    lake = Lake.open(str(view_lakes.jpeg))
    reader = lake.frames()
    keys = _keys(lake)
    stored = reader.read_encoded(keys)
    for key, want in zip(keys, stored, strict=True):
        data, mime = frame_bytes(lake, reader, *key)
        assert mime == "image/jpeg"
        assert data == want


def test_h264_rows_are_decoded_by_the_frame_reader_and_sent_as_lossless_png(view_lakes) -> None:
    lake = Lake.open(str(view_lakes.h264))
    assert {e.split(";")[0] for e in lake.dataset("media").to_table(columns=["encoding"])["encoding"].to_pylist()} == {
        "h264"
    }
    source = FrameSource(lake)
    reader = lake.frames()
    for key in _keys(lake):
        data, mime = source.get(*key)
        assert mime == "image/png"
        img = Image.open(io.BytesIO(data))
        assert img.format == "PNG"
        np.testing.assert_array_equal(np.asarray(img.convert("RGB")), reader.read(*key))


def test_an_unknown_frame_is_a_key_error_naming_it(view_lakes) -> None:
    lake = Lake.open(str(view_lakes.jpeg))
    eid, cam, _ = _keys(lake)[0]
    with pytest.raises(KeyError, match="no frame for episode"):
        frame_bytes(lake, lake.frames(), eid, cam, 10_000)
    with pytest.raises(KeyError, match="camera '../../etc'"):
        frame_bytes(lake, lake.frames(), eid, "../../etc", 0)


def test_png_bytes_round_trip_exactly() -> None:
    rgb = np.random.default_rng(0).integers(0, 256, size=(17, 23, 3), dtype=np.uint8)
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png_bytes(rgb)))), rgb)


def test_stepping_through_decoded_frames_decodes_each_run_once_and_sends_frame_bytes(view_lakes) -> None:
    # before: every frame a person stepped to was its own decode from the keyframe (10 s for 100
    # frames of the GR00T record in the browser test); now a decode brings the next steps with it
    lake = Lake.open(str(view_lakes.h264))
    row = lake.episodes(columns=["episode_id", "cameras", "num_steps"]).to_pylist()[0]
    eid, cam, n = row["episode_id"], row["cameras"][0], row["num_steps"]
    source = FrameSource(lake, read_ahead=8)
    calls = []
    real = source._reader.read_many
    source._reader.read_many = lambda keys, *a, **kw: calls.append(len(keys)) or real(keys, *a, **kw)  # type: ignore[method-assign]
    reader = lake.frames()
    for step in range(n):
        assert source.get(eid, cam, step) == frame_bytes(lake, reader, eid, cam, step)
    assert len(calls) == -(-n // 8) and sum(calls) == n
