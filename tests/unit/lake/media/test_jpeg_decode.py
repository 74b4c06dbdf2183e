"""`decode_frame` takes libjpeg-turbo straight into an array where it gives Pillow's pixels exactly."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import robolake.lake.media.codecs as codecs
from robolake.lake.media.codecs import decode_frame


def _image(h: int = 48, w: int = 64) -> np.ndarray:
    rng = np.random.default_rng(0)
    ramp = (np.add.outer(np.arange(h), np.arange(w))[:, :, None] * np.array([1, 2, 3])) % 256
    return np.clip(ramp + rng.integers(-20, 20, (h, w, 3)), 0, 255).astype(np.uint8)


def _jpeg(img: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=85, **kw)
    return buf.getvalue()


def _pillow(data: bytes) -> np.ndarray:
    img = Image.open(io.BytesIO(data))
    return np.asarray(img if img.mode == "RGB" else img.convert("RGB"))


CASES = {
    "4:4:4": lambda: _jpeg(Image.fromarray(_image()), subsampling=0),
    "4:2:2": lambda: _jpeg(Image.fromarray(_image()), subsampling=1),
    "4:2:0": lambda: _jpeg(Image.fromarray(_image()), subsampling=2),
    "progressive": lambda: _jpeg(Image.fromarray(_image()), progressive=True),
    "grey": lambda: _jpeg(Image.fromarray(_image()).convert("L")),
    "odd size": lambda: _jpeg(Image.fromarray(_image(47, 63))),
    "cmyk": lambda: _jpeg(Image.fromarray(_image()).convert("CMYK")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_decoded_pixels_are_pillows_exactly(case: str) -> None:
    data = CASES[case]()
    got = decode_frame(data)
    want = _pillow(data)
    assert got.dtype == np.uint8 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    h, w = want.shape[:2]
    np.testing.assert_array_equal(decode_frame(data, size=(h, w)), want)  # at its own size: no resize


def test_the_fast_path_takes_colour_and_grey_jpegs_at_size_and_leaves_the_rest_to_pillow() -> None:
    assert codecs._jpeg_rgb(CASES["4:2:0"](), None) is not None
    assert codecs._jpeg_rgb(CASES["grey"](), (48, 64)) is not None
    assert codecs._jpeg_rgb(CASES["4:2:0"](), (24, 32)) is None  # needs a resize: Pillow's draft + resize
    assert codecs._jpeg_rgb(CASES["cmyk"](), None) is None  # CMYK converts differently: Pillow
    buf = io.BytesIO()
    Image.fromarray(_image()).save(buf, format="PNG")
    assert codecs._jpeg_rgb(buf.getvalue(), None) is None


def test_a_damaged_jpeg_fails_as_pillow_says() -> None:
    data = CASES["4:2:0"]()
    with pytest.raises(OSError, match="truncated"):
        decode_frame(data[: len(data) // 2])


def test_decoding_into_a_buffer_gives_the_same_pixels_through_either_decoder() -> None:
    for case in ("4:2:0", "cmyk"):
        data = CASES[case]()
        out = np.zeros((2, 48, 64, 3), dtype=np.uint8)
        got = decode_frame(data, size=(48, 64), out=out[1])
        assert np.shares_memory(got, out)
        np.testing.assert_array_equal(out[1], _pillow(data))
        assert not out[0].any()
    with pytest.raises(ValueError, match="out is uint8"):
        decode_frame(CASES["4:2:0"](), out=np.zeros((10, 10, 3), dtype=np.uint8))
