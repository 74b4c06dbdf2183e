"""Camera frames in the lake: one JPEG per (episode, step, camera) in the `media` table.

Training reads frames at random (episode, step) positions. A video file answers that by seeking to
the previous keyframe and decoding forward, on average half a GOP of frames for each one
wanted; the cost grows with the GOP length and the resolution and is paid again every epoch.
Storing each frame as its own JPEG makes a random frame one small read plus one image decode,
independent of where it sits in the episode, at the price of a larger lake (JPEG frames are
several times the size of the same frames in h264) and one JPEG encode per frame at ingest.

We measured both (`robolake bench ingest`, `random_frame_access`): per-frame JPEG fetches from the
lake beat mp4 seek-and-decode from the source by a wide margin on the shared GR00T data, so the
lake stores per-frame JPEG. The alternative, indexed video segments (short GOPs with a frame
index), keeps files small but still decodes several frames per random read and ties every reader
to a video decoder; it stays a possible later option for very large camera arrays.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import lance
import numpy as np
from PIL import Image

__all__ = ["JPEG_QUALITY", "encode_frame", "decode_frame", "FrameReader"]

JPEG_QUALITY = 92


def encode_frame(frame: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    """JPEG bytes of an RGB uint8 [H, W, 3] frame."""
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"frames must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
    buf = io.BytesIO()
    Image.fromarray(frame, mode="RGB").save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def decode_frame(data: bytes, size: tuple[int, int] | None = None) -> np.ndarray:
    """RGB uint8 [H, W, 3] of JPEG (or PNG) bytes, resized to `size` = (height, width) if given."""
    img: Image.Image = Image.open(io.BytesIO(data))
    if img.mode != "RGB":
        img = img.convert("RGB")
    if size is not None and (img.height, img.width) != tuple(size):
        img = img.resize((size[1], size[0]), Image.Resampling.BILINEAR)
    return np.asarray(img)


class FrameReader:
    """Random access to single frames of a media table at one version.

    The (episode, camera, step) -> row position map is read once from the key columns; each
    fetch is then one Lance `take` of the encoded bytes, no scan and no video decode.
    """

    def __init__(self, media: lance.LanceDataset):
        self._ds = media
        keys = media.to_table(columns=["episode_id", "camera", "step_index"])
        self._pos: dict[tuple[str, str, int], int] = {
            (e, c, int(s)): i
            for i, (e, c, s) in enumerate(
                zip(
                    keys["episode_id"].to_pylist(),
                    keys["camera"].to_pylist(),
                    keys["step_index"].to_pylist(),
                    strict=True,
                )
            )
        }

    def __len__(self) -> int:
        return len(self._pos)

    def positions(self, keys: Sequence[tuple[str, str, int]]) -> list[int]:
        """Row positions of (episode_id, camera, step) keys.

        Raises:
            KeyError: a key has no frame in the lake.
        """
        out = []
        for key in keys:
            try:
                out.append(self._pos[key])
            except KeyError:
                raise KeyError(f"no frame for episode {key[0]!r}, camera {key[1]!r}, step {key[2]} in the lake") from None
        return out

    def read_encoded(self, keys: Sequence[tuple[str, str, int]]) -> list[bytes]:
        """Encoded frame bytes of each key, in order."""
        pos = self.positions(keys)
        if not pos:
            return []
        order = np.argsort(pos)
        table = self._ds.take([pos[i] for i in order], columns=["data"])
        data = table["data"].to_pylist()
        out: list[bytes] = [b""] * len(pos)
        for j, i in enumerate(order):
            out[i] = data[j]
        return out

    def read(self, episode_id: str, camera: str, step: int) -> np.ndarray:
        """One decoded RGB frame."""
        return decode_frame(self.read_encoded([(episode_id, camera, step)])[0])
