"""Test frames and their encoded bytes, shared by the recording writers of `robolake.testing`.

These write real images with PIL, for tests, benchmarks and demos: frames are smooth moving
gradients, distinct from one another, that survive JPEG well enough to be told apart.
"""

from __future__ import annotations

import io

import numpy as np

__all__ = ["frames", "jpeg", "png"]


def frames(n: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    """`n` smooth, distinct RGB frames (a moving gradient), uint8 [n, h, w, 3]."""
    yy, xx = np.mgrid[0:h, 0:w]
    out = np.empty((n, h, w, 3), np.uint8)
    for i in range(n):
        out[i, ..., 0] = (xx * 4 + i * 7 + seed) % 256
        out[i, ..., 1] = (yy * 4 + i * 3) % 256
        out[i, ..., 2] = (i * 11 + seed * 5) % 256
    return out


def jpeg(frame: np.ndarray, quality: int = 80) -> bytes:
    """The JPEG bytes of one RGB frame."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def png(frame: np.ndarray) -> bytes:
    """The PNG bytes of one RGB frame."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="PNG")
    return buf.getvalue()
