"""How much memory one read of a source may take, checked before anything is allocated.

A recording says how big its contents are before a reader holds them: an HDF5 dataset declares
its shape and dtype, a camera its frame size, a ROS 1 bag chunk or an MCAP chunk its compressed
bytes (and an MCAP chunk its uncompressed size). A file that declares more than any real robot
log needs (a sparse `(50, 20000, 20000, 3)` camera dataset is a few KB on disk and 60 GB in
memory; a bz2 chunk of zeros expands a thousandfold) must not be read at all, or one bad file
takes the whole ingest down with it. So each reader asks `ReadLimits` before it reads:

* `max_read_bytes` bounds one allocation: a dataset or column read whole, one camera frame, one
  decompressed chunk, one message. A declared size over it is refused with a `too_large`
  quarantine row naming the file and the field; the other files land.
* `max_frame_pixels` bounds one camera frame (height x width), whatever its dtype, so that a
  frame too big to encode in reasonable time is refused as fast as one too big to hold.
* Decompression is bounded while it runs (`bounded_decompress`): the output stops at
  `max_read_bytes + 1` bytes, so a chunk that lies about its size is refused after at most the
  budget, never after filling memory.

The limits travel with `SourceOptions` (`IngestConfig.max_read_bytes`, `--max-read-gb`). The
defaults are far above real data (a 4K RGB frame is 25 MB; the largest ALOHA camera dataset read
whole, JPEG rows of 1,000 steps, is ~100 MB) and far below what takes a machine down.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from robolake.lake.sources.base import SourceError

__all__ = ["ReadLimits", "DEFAULT_MAX_READ_BYTES", "DEFAULT_MAX_FRAME_PIXELS", "bounded_decompress", "human_bytes"]

DEFAULT_MAX_READ_BYTES = 2_000_000_000
DEFAULT_MAX_FRAME_PIXELS = 64_000_000


def human_bytes(n: float) -> str:
    """`1.2 GB`, `640 KB`: sizes in messages."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


@dataclass(frozen=True, kw_only=True)
class ReadLimits:
    """The most memory a reader may take for one read of a source.

    Attributes:
        max_read_bytes: Bytes one allocation may need (a dataset read whole, a frame, a
            decompressed chunk, a message). Default 2 GB.
        max_frame_pixels: Pixels (height x width) of one camera frame. Default 64 Mpx (8K is 33).
    """

    max_read_bytes: int = DEFAULT_MAX_READ_BYTES
    max_frame_pixels: int = DEFAULT_MAX_FRAME_PIXELS

    def __post_init__(self) -> None:
        if isinstance(self.max_read_bytes, bool) or not isinstance(self.max_read_bytes, int) or self.max_read_bytes < 1:
            raise ValueError(f"max_read_bytes must be a positive number of bytes, got {self.max_read_bytes!r}")
        if (
            isinstance(self.max_frame_pixels, bool)
            or not isinstance(self.max_frame_pixels, int)
            or self.max_frame_pixels < 1
        ):
            raise ValueError(f"max_frame_pixels must be a positive number of pixels, got {self.max_frame_pixels!r}")

    def _refuse(self, path: str, field: str, what: str) -> SourceError:
        return SourceError(
            "too_large",
            path,
            f"{field}: {what}; refused before reading it (read budget {human_bytes(self.max_read_bytes)} per read, "
            f"{self.max_frame_pixels / 1e6:.0f} Mpx per frame); the file is damaged or not a robot log, "
            "or raise the budget "
            "(ingest --max-read-gb, IngestConfig.max_read_bytes)",
        )

    def check_bytes(self, nbytes: float, path: str, field: str, what: str = "") -> None:
        """Refuse a read declared to need `nbytes`.

        Raises:
            SourceError: `too_large`, naming `path` and `field`.
        """
        if nbytes > self.max_read_bytes:
            raise self._refuse(path, field, f"{what or 'declares'} {human_bytes(nbytes)}")

    def check_array(self, shape: tuple[int, ...], itemsize: int, path: str, field: str) -> None:
        """Refuse reading a whole array of `shape` (declared, e.g. an HDF5 dataset's)."""
        nbytes = math.prod(int(x) for x in shape) * int(itemsize)
        self.check_bytes(nbytes, path, field, f"declares shape {tuple(int(x) for x in shape)} = {human_bytes(nbytes)}")

    def check_frame(self, height: int, width: int, channels: int, itemsize: int, path: str, field: str) -> None:
        """Refuse a camera whose frames are too big to hold or to encode."""
        pixels = int(height) * int(width)
        if pixels > self.max_frame_pixels:
            raise self._refuse(path, field, f"declares {int(height)}x{int(width)} frames ({pixels / 1e6:.0f} Mpx)")
        self.check_bytes(
            pixels * int(channels) * int(itemsize),
            path,
            field,
            f"declares {int(height)}x{int(width)}x{channels} frames of",
        )


def bounded_decompress(kind: str, limit: int, path: str, field: str) -> Callable[[bytes], bytes]:
    """A decompressor of `kind` (`bz2`, `lz4`, `none`) whose output stops past `limit` bytes.

    Raises (when called):
        SourceError: `too_large`, when the data expands past `limit`.
    """

    def refuse() -> SourceError:
        return SourceError(
            "too_large",
            path,
            f"{field}: a {kind} chunk expands past the read budget of {human_bytes(limit)}; "
            "refused while decompressing "
            "(a damaged or hostile file, or raise the budget: ingest --max-read-gb, IngestConfig.max_read_bytes)",
        )

    def run(data: bytes) -> bytes:
        if kind == "none":
            if len(data) > limit:
                raise refuse()
            return data
        if kind == "bz2":
            import bz2

            d = bz2.BZ2Decompressor()
            out = d.decompress(data, max_length=limit + 1)
        elif kind == "lz4":
            import lz4.frame

            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=limit + 1)
        else:
            raise SourceError("corrupt_file", path, f"{field}: unknown compression {kind!r}")
        if len(out) > limit:
            raise refuse()
        if not d.eof:
            raise SourceError(
                "corrupt_file",
                path,
                f"{field}: a {kind} chunk ends before its compressed stream does; the file is truncated",
            )
        return out

    return run
