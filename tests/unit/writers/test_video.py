"""The mp4 encoder: what its settings table declares is what the files hold."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from robolake.writers.video import CODECS, PIX_FMT, Mp4Writer, VideoOptions, encode_video

av = pytest.importorskip("av")


def _segments(lengths: tuple[int, ...] = (9, 14), h: int = 32, w: int = 48) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (h, w, 3))
    return [np.stack([np.roll(base, 2 * t, axis=1) for t in range(n)]).astype(np.uint8) for n in lengths]


def _probe(path: Path) -> dict:
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        out = {
            "codec": stream.codec_context.codec.canonical_name,
            "pix_fmt": stream.codec_context.pix_fmt,
            "rate": stream.average_rate,
            "size": (stream.codec_context.height, stream.codec_context.width),
        }
        packets = [p for p in c.demux(stream) if p.pts is not None]
        out["pts"] = sorted(int(p.pts * stream.time_base * out["rate"]) for p in packets)
        out["keyframes"] = sorted(int(p.pts * stream.time_base * out["rate"]) for p in packets if p.is_keyframe)
    return out


@pytest.mark.parametrize("codec", ["h264", "av1"])
@pytest.mark.parametrize("fps", [20, 29.97])
def test_streams_declare_the_codec_pix_fmt_and_fps(tmp_path: Path, codec: str, fps: float) -> None:
    segments = _segments()
    n = encode_video(tmp_path / "v.mp4", segments, fps=fps, options=VideoOptions(codec=codec))  # type: ignore[arg-type]
    assert n == 23
    probe = _probe(tmp_path / "v.mp4")
    assert probe["codec"] == codec and probe["pix_fmt"] == PIX_FMT
    assert probe["rate"] == Fraction(fps).limit_denominator(1001) and probe["size"] == (32, 48)
    assert probe["pts"] == list(range(23))  # frame n at n / fps
    assert {0, 9} <= set(probe["keyframes"])  # every segment starts on a keyframe


def test_h264_settings_come_from_the_table(tmp_path: Path) -> None:
    # x264 writes the settings it ran with into the stream (an SEI message).
    encode_video(tmp_path / "default.mp4", _segments(), fps=20)
    sei = (tmp_path / "default.mp4").read_bytes()
    table = CODECS["h264"]
    assert table.encoder == "libx264"
    assert f"crf={table.crf}.0".encode() in sei and b"mbtree=0" in sei
    assert b"keyint=40" in sei  # GOP_SECONDS * fps
    encode_video(tmp_path / "opts.mp4", _segments(), fps=20, options=VideoOptions(crf=30, gop=5))
    sei = (tmp_path / "opts.mp4").read_bytes()
    assert b"crf=30.0" in sei and b"keyint=5" in sei
    keyframes = _probe(tmp_path / "opts.mp4")["keyframes"]
    assert {0, 9} <= set(keyframes) and max(np.diff([*keyframes, 23])) <= 5  # segment starts, gop 5


def test_same_frames_same_bytes(tmp_path: Path) -> None:
    for name in ("a.mp4", "b.mp4"):
        with Mp4Writer(tmp_path / name, width=48, height=32, fps=20) as mp4:
            for seg in _segments():
                for i, frame in enumerate(seg):
                    mp4.write(frame, keyframe=i == 0)
            assert mp4.frames == 23
        assert mp4.encoded_bytes > 0
    assert (tmp_path / "a.mp4").read_bytes() == (tmp_path / "b.mp4").read_bytes()


def test_bad_frames_and_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="even frame sizes"):
        encode_video(tmp_path / "odd.mp4", [np.zeros((3, 31, 48, 3), np.uint8)], fps=20)
    with pytest.raises(ValueError, match="uint8"):
        encode_video(tmp_path / "f.mp4", [np.zeros((3, 32, 48, 3), np.float32)], fps=20)
    assert not (tmp_path / "f.mp4").exists()
    with Mp4Writer(tmp_path / "w.mp4", width=48, height=32, fps=20) as mp4:
        with pytest.raises(ValueError, match="expected uint8"):
            mp4.write(np.zeros((32, 40, 3), np.uint8))
    with pytest.raises(ValueError, match="codec must be one of"):
        VideoOptions(codec="vp9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="crf"):
        VideoOptions(crf=99)
