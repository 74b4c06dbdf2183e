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

from robolake.lake.query import sql_quote

__all__ = ["JPEG_QUALITY", "encode_frame", "decode_frame", "FrameReader", "row_offsets"]

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


def row_offsets(ds: lance.LanceDataset, row_ids: np.ndarray) -> np.ndarray:
    """Global row offsets (what `LanceDataset.take` accepts) of Lance row ids (fragment << 32 | row)."""
    starts: dict[int, int] = {}
    total = 0
    for f in ds.get_fragments():
        starts[f.fragment_id] = total
        total += f.count_rows()
    lookup = np.zeros(max(starts, default=0) + 1, dtype=np.int64)
    for fid, s in starts.items():
        lookup[fid] = s
    return lookup[(row_ids >> 32).astype(np.int64)] + (row_ids & 0xFFFFFFFF).astype(np.int64)


class FrameReader:
    """Random access to single frames of a media table at one version.

    The first read of an episode looks up its frames' row positions with one query on the
    `episode_id` index; every fetch is then one Lance `take` of the encoded bytes, no scan of
    the table and no video decode.
    """

    def __init__(self, media: lance.LanceDataset):
        self._ds = media
        self._pos: dict[tuple[str, str, int], int] = {}
        self._episodes: set[str] = set()

    def _load_episode(self, episode_id: str) -> None:
        keys = self._ds.to_table(
            columns=["camera", "step_index"], filter=f"episode_id = {sql_quote(episode_id)}", with_row_id=True
        )
        offsets = row_offsets(self._ds, keys["_rowid"].to_numpy())
        for cam, step, off in zip(keys["camera"].to_pylist(), keys["step_index"].to_pylist(), offsets.tolist(), strict=True):
            self._pos[(episode_id, cam, int(step))] = off
        self._episodes.add(episode_id)

    def positions(self, keys: Sequence[tuple[str, str, int]]) -> list[int]:
        """Row positions of (episode_id, camera, step) keys.

        Raises:
            KeyError: a key has no frame in the lake.
        """
        out = []
        for key in keys:
            if key[0] not in self._episodes:
                self._load_episode(key[0])
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
