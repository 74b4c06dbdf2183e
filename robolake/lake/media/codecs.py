"""One encoded camera frame <-> RGB pixels: the image, lossless and key-referenced h264 codecs.

Every frame-level codec the lake uses is here, each with its media-row `encoding` string and
what it costs in fidelity (`fidelity`):

- images as a source recorded them (`jpeg`, `png`, `webp`): stored byte for byte, one decode;
- raw pixels, compressed losslessly (`ffv1;size=WxH`): FFV1 level 1, Golomb-Rice coder, one
  self-contained packet a frame, decoding bit-exact to the source's array. Measured on 100 real
  GR00T frames (256x256, loaded machine, see `lake.media`): FFV1 0.16x the raw bytes, PNG 0.32x
  (level 1-9 alike), WebP lossless 0.20x at 13x FFV1's encode time; FFV1 decodes 2-4x slower
  than PNG, which an access copy (`lake.access`) answers where reads are hot. Lossless h264
  (libx264rgb qp 0) predicted across frames is 0.05x, but a P frame stands only where its
  reference does, and the readers that reuse one message at several steps (topic logs) store
  frames one at a time, so the record keeps each frame alone;
- lossy re-encodes, opt-in (`--frames jpeg`, `--frames h264 --crf N`) and named with their
  settings so a row says it is lossy: `jpeg;q=80` (optimised Huffman tables) and key-referenced
  h264 `h264;gop=16;crf=22`, where every 16th step is an IDR frame and every other step one P
  frame predicted from that keyframe alone (encoded as a fresh two-frame stream [keyframe,
  frame]; x264 on one thread is deterministic, so the pair's IDR equals the stored keyframe, and
  `KeyframeEncoder` checks that it does), so any frame is at most two decodes. The access copy is
  this layout too. Format-1 lakes wrote `h264;gop=16` and bare `jpeg` for re-encodes.

A source video's own packets (`video;codec=...`) decode through their stream (`lake.record`),
not here.
"""

from __future__ import annotations

import functools
import io
import threading
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, cast

import numpy as np
from PIL import Image

from robolake.lake.media.record import is_record, rgb
from robolake.writers.video import CODECS, PIX_FMT

__all__ = [
    "FRAME_LAYOUTS",
    "JPEG_QUALITY",
    "RENDITION_QUALITY",
    "VIDEO_CRF",
    "VIDEO_GOP",
    "KeyframeEncoder",
    "decode_frame",
    "decode_lossless",
    "decode_row",
    "encode_frame",
    "encode_lossless",
    "encode_raw",
    "fidelity",
    "frame_size",
    "jpeg_encoding",
    "lossless_encoding",
    "render_frame",
    "video_gop",
]

JPEG_QUALITY = 80  # lossy lake frames (--frames jpeg)
RENDITION_QUALITY = 90  # training renditions: small frames, so spend bits on fidelity
VIDEO_GOP = 16  # steps per keyframe of key-referenced h264
VIDEO_CRF = 22  # ~38 dB on the real GR00T data, ~34 dB on the 64 px synthetic data
# How frames are stored: `record` keeps what the source holds (a video's own packets, images as
# they are, raw pixels lossless); `jpeg` and `h264` re-encode frames decoded from videos (and
# raw pixels, as JPEG) lossily, as format 1 did.
FRAME_LAYOUTS = ("record", "jpeg", "h264")
_X264 = "scenecut=0:bframes=0:repeat-headers=1:threads=1"  # one packet per frame, in order, headers inline
_IMAGE_CODECS = ("jpeg", "jpg", "png", "webp")


def _codec(encoding: str) -> tuple[str, dict[str, str]]:
    head, *rest = encoding.split(";")
    return head.strip().lower(), dict(p.split("=", 1) for p in rest if "=" in p)


def fidelity(encoding: str) -> str:
    """How a media row's frame relates to what the source recorded.

    `source` (the source's own bytes: a video's packets, an image as recorded), `lossless` (raw
    pixels compressed losslessly), `lossy` (a re-encode that changed pixels) or `unknown`.
    Bare `jpeg` rows of a format-1 lake may be re-encodes: that format did not record it.
    """
    if is_record(encoding):
        return "source"
    codec, params = _codec(encoding)
    if codec == "ffv1":
        return "lossless"
    if codec in _IMAGE_CODECS:
        return "lossy" if "q" in params else "source"
    if codec == "h264" and "gop" in params:
        return "lossy"
    return "unknown"


# ------------------------------------------------------------------------------------ images


def jpeg_encoding(quality: int = JPEG_QUALITY) -> str:
    """The encoding of a frame re-encoded as JPEG at `quality`."""
    return f"jpeg;q={quality}"


def encode_frame(frame: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    """JPEG bytes of an RGB uint8 [H, W, 3] frame (optimised Huffman tables: ~5% smaller, same pixels)."""
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"frames must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
    buf = io.BytesIO()
    Image.fromarray(frame, mode="RGB").save(buf, format="JPEG", quality=quality, optimize=True)
    return buf.getvalue()


def _open_rgb(data: bytes, size: tuple[int, int] | None) -> Image.Image:
    img: Image.Image = Image.open(io.BytesIO(data))
    if size is not None and img.format == "JPEG" and (img.height, img.width) != tuple(size):
        # Let the JPEG decoder scale by 1/2, 1/4 or 1/8 in the DCT domain while staying at or
        # above the target size: far less work than decoding full size and then resizing.
        img.draft("RGB", (size[1], size[0]))
    if img.mode != "RGB":
        img = img.convert("RGB")
    return _resize(img, size)


def _resize(img: Image.Image, size: tuple[int, int] | None) -> Image.Image:
    if size is not None and (img.height, img.width) != tuple(size):
        img = img.resize((size[1], size[0]), Image.Resampling.BILINEAR, reducing_gap=2.0)
    return img


def resize_rgb(rgb: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    """`rgb` resized to `size` = (height, width) (as image rows are), unchanged when it is that size."""
    return rgb if size is None or rgb.shape[:2] == tuple(size) else np.asarray(_resize(Image.fromarray(rgb), size))


def decode_frame(data: bytes, size: tuple[int, int] | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """RGB uint8 [H, W, 3] of JPEG/PNG/WebP bytes, resized to `size` = (height, width) if given.

    Frames already at `size` (training renditions written by `pack --image-size`) are decoded
    and returned without any resize. With `out` (a C-contiguous uint8 [H, W, 3] array of the
    result's shape) the frame is decoded into it and `out` is returned.
    """
    rgb = _jpeg_rgb(data, size, out)
    if rgb is None:
        rgb = np.asarray(_open_rgb(data, size))
        if out is not None:
            out[...] = rgb
            return out
    return rgb


_TURBO_COLORSPACES = frozenset({"YCbCr", "Gray"})  # decoded to RGB exactly as PIL does (tested)


def _jpeg_rgb(data: bytes, size: tuple[int, int] | None, out: np.ndarray | None = None) -> np.ndarray | None:
    """A YCbCr or grey JPEG already at `size` (or any size when None), decoded by libjpeg-turbo
    straight into an array (simplejpeg); None where PIL decodes it instead.

    The loader decodes every view of every batch: PIL spends most of a small frame's decode
    parsing markers in Python and building an Image (0.13 ms a 32 px view against 0.011 ms
    here), with the same libjpeg-turbo defaults (accurate DCT, fancy upsampling), so the pixels
    are identical (the tests compare every subsampling). CMYK, other formats, damaged bytes and
    frames that need a resize go to PIL, which also names what is wrong with a damaged frame.
    """
    if data[:2] != b"\xff\xd8":
        return None
    import simplejpeg

    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:
        return None
    if colorspace not in _TURBO_COLORSPACES or (size is not None and (height, width) != tuple(size)):
        return None
    if out is not None and (out.shape != (height, width, 3) or out.dtype != np.uint8 or not out.flags.c_contiguous):
        raise ValueError(f"decode_frame: out is {out.dtype} {out.shape}, the frame is uint8 ({height}, {width}, 3)")
    try:
        return cast(np.ndarray, simplejpeg.decode_jpeg(data, colorspace="RGB", buffer=out))
    except ValueError:
        return None


def frame_size(data: bytes) -> tuple[int, int]:
    """(height, width) of an encoded image, from its header (no decode)."""
    with Image.open(io.BytesIO(data)) as img:
        return img.height, img.width


def render_frame(data: bytes, size: int, quality: int = RENDITION_QUALITY) -> bytes:
    """A training rendition of an encoded image: resized to size x size and JPEG-encoded.

    A frame already that size and JPEG is returned as it is (no generation loss).
    """
    img = Image.open(io.BytesIO(data))
    if img.format == "JPEG" and img.size == (size, size):
        return data
    buf = io.BytesIO()
    _open_rgb(data, (size, size)).save(buf, format="JPEG", quality=quality, optimize=True)
    return buf.getvalue()


def render_rgb(rgb: np.ndarray, size: int | None, quality: int = RENDITION_QUALITY) -> bytes:
    """A self-contained JPEG of decoded pixels, at size x size when `size` is given."""
    return encode_frame(np.ascontiguousarray(resize_rgb(rgb, None if size is None else (size, size))), quality)


# ---------------------------------------------------------------------------------- lossless

_local = threading.local()


def lossless_encoding(height: int, width: int) -> str:
    """The encoding of raw pixels kept losslessly (FFV1; the size is not in its bitstream)."""
    return f"ffv1;size={width}x{height}"


def _ffv1(height: int, width: int, mode: str) -> Any:
    import av

    cache: dict[tuple[int, int, str], Any] = getattr(_local, "ffv1", None) or {}
    _local.ffv1 = cache
    ctx = cache.get((height, width, mode))
    if ctx is None:
        ctx = av.CodecContext.create("ffv1", cast(Any, mode))
        ctx.width, ctx.height = width, height
        ctx.thread_count = 1  # one small frame at a time; determinism for free
        if mode == "w":
            ctx.pix_fmt, ctx.time_base = "bgr0", Fraction(1, 30)
            ctx.options = {"level": "1", "coder": "0", "context": "0", "g": "1", "slicecrc": "0"}
        cache[(height, width, mode)] = ctx
    return ctx


def encode_lossless(frame: np.ndarray) -> bytes:
    """FFV1 bytes of an RGB uint8 [H, W, 3] frame that decode to exactly its pixels."""
    import av

    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"frames must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
    ctx = _ffv1(frame.shape[0], frame.shape[1], "w")
    vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24").reformat(format="bgr0")
    vf.pts = _local.ffv1_pts = getattr(_local, "ffv1_pts", -1) + 1
    packets = ctx.encode(vf)
    if len(packets) != 1:
        raise RuntimeError(f"FFV1 returned {len(packets)} packets for one frame")
    return bytes(packets[0])


def decode_lossless(data: bytes, encoding: str) -> np.ndarray:
    """RGB uint8 [H, W, 3] of an `ffv1;size=WxH` row."""
    import av

    size = _codec(encoding)[1].get("size", "")
    try:
        w, h = (int(x) for x in size.split("x"))
    except ValueError:
        raise ValueError(f"media encoding {encoding!r} does not say its size (expected 'ffv1;size=WxH')") from None
    frames = _ffv1(h, w, "r").decode(av.Packet(data))
    if not frames:
        raise ValueError("an FFV1 row did not decode to a frame (corrupt media row)")
    return rgb(frames[-1])


def encode_raw(frame: np.ndarray, layout: str = "record") -> tuple[bytes, str]:
    """(bytes, encoding) of raw pixels from a source (ROS `Image`, HDF5 arrays, renders).

    The record keeps them losslessly; the lossy layouts (`jpeg`, `h264`) store them as JPEG.
    """
    if layout not in FRAME_LAYOUTS:
        raise ValueError(f"frame layout must be one of {FRAME_LAYOUTS}, got {layout!r}")
    if layout == "record":
        return encode_lossless(frame), lossless_encoding(frame.shape[0], frame.shape[1])
    return encode_frame(frame), jpeg_encoding()


# ------------------------------------------------------------------------- key-referenced h264


@functools.lru_cache(maxsize=64)  # a lake holds a handful of encodings; reads parse one per row
def video_gop(encoding: str) -> int | None:
    """Steps per keyframe of a key-referenced h264 row (`h264;gop=16;crf=22`); None for other rows."""
    codec, params = _codec(encoding)
    if codec != "h264":
        return None
    try:
        gop = int(params["gop"])
    except (KeyError, ValueError):
        raise ValueError(f"media encoding {encoding!r} does not say its GOP (expected 'h264;gop=N')") from None
    if gop < 1:
        raise ValueError(f"media encoding {encoding!r} has a GOP below 1")
    return gop


class KeyframeEncoder:
    """Encodes one camera's frames, fed in step order, as key-referenced h264 packets.

    Only the current keyframe is held, so an episode never needs more than two raw frames in
    memory. Frames must be uint8 [H, W, 3] with even H and W (yuv420p).
    """

    def __init__(self, height: int, width: int, *, gop: int = VIDEO_GOP, crf: int = VIDEO_CRF):
        if height % 2 or width % 2:
            raise ValueError(f"h264 in yuv420p needs even frame sizes, got {width}x{height}")
        if not 0 <= crf <= 51:
            raise ValueError(f"crf must be in [0, 51], got {crf}")
        self.height, self.width, self.gop, self.crf = height, width, gop, crf
        self._key: tuple[Any, bytes] | None = None
        self._count = 0

    @property
    def encoding(self) -> str:
        return f"h264;gop={self.gop};crf={self.crf}"

    def _encode(self, frames: list[Any]) -> list[bytes]:
        import av

        h264 = CODECS["h264"]  # the one encoder table; this stream's own tuning is below
        ctx = cast("av.VideoCodecContext", av.CodecContext.create(h264.encoder, "w"))
        ctx.width, ctx.height, ctx.pix_fmt = self.width, self.height, PIX_FMT
        ctx.time_base = Fraction(1, 30)
        ctx.thread_count = 1  # determinism: the pair's IDR must equal the stored keyframe
        ctx.options = {
            "crf": str(self.crf),
            "preset": h264.preset,
            "tune": "zerolatency,fastdecode",
            "x264-params": f"keyint={self.gop}:min-keyint={self.gop}:{_X264}",
        }
        out: list[bytes] = []
        for i, f in enumerate(frames):
            f.pts = i
            out += [bytes(p) for p in ctx.encode(f)]
        out += [bytes(p) for p in ctx.encode(None)]
        if len(out) != len(frames):
            raise RuntimeError(f"x264 returned {len(out)} packets for {len(frames)} frames")
        return out

    def add(self, frame: np.ndarray) -> bytes:
        """The packet of the next step's frame."""
        import av

        if frame.dtype != np.uint8 or frame.shape != (self.height, self.width, 3):
            raise ValueError(f"frames must be uint8 [{self.height}, {self.width}, 3], got {frame.dtype} {frame.shape}")
        yuv = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24").reformat(format="yuv420p")
        step, self._count = self._count, self._count + 1
        if step % self.gop == 0:
            packet = self._encode([yuv])[0]
            self._key = (yuv, packet)
            return packet
        if self._key is None:  # unreachable: step 0 is a keyframe
            raise RuntimeError("KeyframeEncoder has no keyframe")
        key, packet = self._encode([self._key[0], yuv])
        if key != self._key[1]:
            raise RuntimeError(
                "x264 re-encoded the keyframe differently; its P frames would not decode (x264 not deterministic here)"
            )
        return packet


class _H264Decoder:
    """One h264 decoder, reset between frames (one per thread: PyAV contexts are not shared)."""

    def __init__(self) -> None:
        import av

        self._av = av
        self._ctx = av.CodecContext.create("h264", "r")
        self._ctx.thread_count = 1  # two small frames: threads cost more than they save
        self._ctx.thread_type = "NONE"

    def decode(self, packets: Sequence[bytes]) -> np.ndarray:
        self._ctx.flush_buffers()
        last = None
        for p in packets:
            got = self._ctx.decode(self._av.Packet(p))
            last = got[-1] if got else last
        if last is None:
            raise ValueError("h264 packets did not decode to a frame (corrupt media row)")
        return rgb(last)


def decode_row(data: bytes, encoding: str, key: bytes | None = None, size: tuple[int, int] | None = None) -> np.ndarray:
    """RGB uint8 [H, W, 3] of one self-describing media row, resized to `size` = (height, width).

    `key` is the keyframe row's data for an h264 row that is not itself a keyframe. A packet of a
    recorded stream (`video;...`) decodes only with its stream: read it through `FrameReader`.

    Raises:
        ValueError: a recorded-stream row, or bytes that do not decode.
    """
    if is_record(encoding):
        raise ValueError(f"a {encoding!r} row is one packet of a recorded video; read it through FrameReader")
    codec = _codec(encoding)[0]
    if codec == "ffv1":
        return resize_rgb(decode_lossless(data, encoding), size)
    if video_gop(encoding) is None:
        return decode_frame(data, size)
    dec = getattr(_local, "h264", None)
    if dec is None:
        dec = _local.h264 = _H264Decoder()
    return resize_rgb(dec.decode([data] if key is None else [key, data]), size)
