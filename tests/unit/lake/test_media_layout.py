"""Media layout: lake frames, fast downscaled decode, training renditions written by pack."""

from __future__ import annotations

import io

import lance
import numpy as np
import pytest
from PIL import Image

from robolake.lake import Lake
from robolake.lake.ingest import ingest
from robolake.lake.media import JPEG_QUALITY, decode_frame, encode_frame, frame_size, render_frame
from robolake.loaders.collate import decode_views
from robolake.packers import PackSpec, TokenLengthConfig, pack, read_manifest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


def _scene(h: int = 96, w: int = 128) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // w, y * 255 // h, (x + y) * 255 // (w + h)], -1).astype(np.uint8)
    img[20:50, 30:70] = (200, 40, 40)
    return img


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255**2 / max(mse, 1e-12))


def test_encode_decode_quality_and_size() -> None:
    img = _scene()
    data = encode_frame(img)
    assert Image.open(io.BytesIO(data)).format == "JPEG"
    assert frame_size(data) == (96, 128)
    assert _psnr(decode_frame(data), img) > 30
    # optimised Huffman tables: never larger than PIL's default tables at the same quality
    plain = io.BytesIO()
    Image.fromarray(img).save(plain, format="JPEG", quality=JPEG_QUALITY)
    assert len(data) <= len(plain.getvalue())
    with pytest.raises(ValueError, match="uint8"):
        encode_frame(img.astype(np.float32))


def test_downscaled_decode_close_to_full_resize() -> None:
    img = _scene(256, 256)
    data = encode_frame(img, quality=95)
    small = decode_frame(data, size=(64, 64))  # DCT-domain scaling then resize
    ref = np.asarray(Image.fromarray(decode_frame(data)).resize((64, 64), Image.Resampling.BILINEAR, reducing_gap=2.0))
    assert small.shape == (64, 64, 3) and _psnr(small, ref) > 28


def test_render_frame() -> None:
    data = encode_frame(_scene(256, 256))
    r = render_frame(data, 64)
    assert frame_size(r) == (64, 64) and len(r) < len(data)
    assert render_frame(r, 64) is r  # already a rendition: kept as is
    png = io.BytesIO()
    Image.fromarray(_scene(64, 64)).save(png, format="PNG")
    assert Image.open(io.BytesIO(render_frame(png.getvalue(), 64))).format == "JPEG"


@pytest.fixture(scope="module")
def lake(tmp_path_factory, ray_session) -> Lake:
    root = tmp_path_factory.mktemp("media")
    generate_synthetic(root / "syn", SyntheticConfig.tiny(image_size=64))
    ingest(str(root / "syn"), str(root / "lake"))
    return Lake.open(str(root / "lake"))


def test_pack_image_size_writes_renditions(lake, tmp_path) -> None:
    tokens = TokenLengthConfig(tokens_per_view=16, state_tokens=0)
    full = pack(lake, PackSpec(max_tokens=512, horizon=4, tokens=tokens), str(tmp_path / "full"))
    small = pack(lake, PackSpec(max_tokens=512, horizon=4, tokens=tokens, image_size=32), str(tmp_path / "small"))
    assert read_manifest(str(tmp_path / "small")).pack_spec.image_size == 32
    assert full.num_samples == small.num_samples
    rows_full = lance.dataset(str(tmp_path / "full" / "shards.lance")).to_table(columns=["frames"])
    rows_small = lance.dataset(str(tmp_path / "small" / "shards.lance")).to_table(columns=["frames"])
    f_full = [f for r in rows_full["frames"].to_pylist() for f in r]
    f_small = [f for r in rows_small["frames"].to_pylist() for f in r]
    assert len(f_full) == len(f_small) > 0
    assert {frame_size(f) for f in f_small} == {(32, 32)}
    assert {frame_size(f) for f in f_full} == {(64, 64)}
    assert sum(map(len, f_small)) < 0.6 * sum(map(len, f_full))
    # the loader decodes renditions as they are: same pixels as a plain decode, no resize
    views = decode_views(f_small[:5], 32)
    for v, f in zip(views, f_small[:5], strict=True):
        np.testing.assert_array_equal(v, decode_frame(f))
