"""One camera frame as a browser (or Rerun) can show it: `frame_bytes` -> (bytes, MIME type).

The viewer shows the record, never an access copy, and never converts what it does not have
to. A media row whose encoding a browser decodes natively (`jpeg`, `png`, with or without
parameters) is sent exactly as the lake stores it: no decode, no re-encode, no generation loss.
Every other layout (a source video's own packets, `video;codec=...`, decoded through its stream
from the preceding keyframe; FFV1 raw pixels; lossy key-referenced h264) is decoded by
`robolake.lake.media.frames.FrameReader` with `exact=True` (the record even where an access copy
exists: the pixels the camera recorded) and sent as PNG: lossless, so the pixels the page draws
equal the pixels the source decode gives. PNG at compression level 1 costs ~2 ms for a 256x256
frame here, well under a frame period at 20 fps; JPEG would be smaller but would add a lossy
step between the lake and the eye. A recorded frame deep in a long GOP costs a decode from its
keyframe (tens of ms on the GR00T data); `FrameSource`, which the server uses, decodes the next
steps in the same pass, so stepping or playing through an episode decodes each stretch once.

This is the only place that maps a media row to bytes for display: the web app and the Rerun
export both call it, so a new media layout is taught to the viewer by changing this function
(and `FrameReader`) alone.

Lookups go through `FrameReader.positions`, keyed by (episode_id, camera, step) values the
caller has already checked against the lake's own tables; nothing here touches a filesystem
path.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict

import numpy as np
from PIL import Image

from robolake.lake import FrameReader, Lake, take_offsets

__all__ = ["BROWSER_ENCODINGS", "FrameSource", "frame_bytes", "png_bytes"]

# Media encodings (the part before any ';' parameters) a browser decodes as they are.
BROWSER_ENCODINGS: dict[str, str] = {"jpeg": "image/jpeg", "jpg": "image/jpeg", "png": "image/png"}


def png_bytes(rgb: np.ndarray) -> bytes:
    """Lossless PNG bytes of an RGB uint8 [H, W, 3] frame (fast compression: frames are small)."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb), mode="RGB").save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def frame_bytes(lake: Lake, reader: FrameReader, episode_id: str, camera: str, step: int) -> tuple[bytes, str]:
    """The bytes to show for one camera frame, and their MIME type.

    Rows stored as jpeg/png are returned as stored; every other encoding (recorded video packets
    included) is decoded from the record by `reader` and returned as PNG.

    Args:
        lake: The lake handle `reader` was made from (its media table, same version).
        reader: `lake.frames()`, reused across calls (it caches each episode's row positions).
        episode_id: An episode id of the lake.
        camera: One of the episode's cameras.
        step: A step index of the episode.

    Returns:
        (bytes, MIME type), e.g. (b"\\xff\\xd8...", "image/jpeg").

    Raises:
        KeyError: the lake has no frame for (episode_id, camera, step).
    """
    data, mime = stored_bytes(lake, reader, episode_id, camera, step)
    if mime is not None:
        return data, mime
    return png_bytes(reader.read(episode_id, camera, int(step), exact=True)), "image/png"


def stored_bytes(lake: Lake, reader: FrameReader, episode_id: str, camera: str, step: int) -> tuple[bytes, str | None]:
    """The media row's bytes and their MIME type when a browser decodes them as stored, else (b"", None)."""
    pos = reader.positions([(episode_id, camera, int(step))])[0]
    row = take_offsets(lake.dataset("media"), [pos], ["encoding", "data"])
    encoding = str(row["encoding"][0].as_py())
    mime = BROWSER_ENCODINGS.get(encoding.split(";", 1)[0].strip().lower())
    if mime is None:
        return b"", None
    return bytes(row["data"][0].as_py()), mime


class FrameSource:
    """`frame_bytes` over one lake handle, safe to call from a server's worker threads, with read-ahead.

    A person steps or plays through frames in order, and a recorded frame costs a decode from its
    keyframe: so a frame that must be decoded brings the next `read_ahead` steps of its camera with
    it in one `read_many` (one pass through the GOP run, not one per frame), kept decoded in a small
    least-recently-used cache. The bytes sent are exactly `frame_bytes`'s. `FrameReader` fills a
    position cache per episode on first use; a lock keeps two threads from filling it at once.
    """

    def __init__(self, lake: Lake, *, read_ahead: int = 32, cache_frames: int = 256):
        self._lake = lake
        self._reader = lake.frames()
        self._lock = threading.Lock()
        self._read_ahead = read_ahead
        self._cache_frames = cache_frames
        self._decoded: OrderedDict[tuple[str, str, int], np.ndarray] = OrderedDict()

    def get(self, episode_id: str, camera: str, step: int) -> tuple[bytes, str]:
        """`frame_bytes` of one frame (see there)."""
        key = (episode_id, camera, int(step))
        with self._lock:
            rgb = self._decoded.pop(key, None)
            if rgb is None:
                data, mime = stored_bytes(self._lake, self._reader, *key)
                if mime is not None:
                    return data, mime
                rgb = self._decode_ahead(key)
            self._decoded[key] = rgb
            while len(self._decoded) > self._cache_frames:
                self._decoded.popitem(last=False)
        return png_bytes(rgb), "image/png"

    def _decode_ahead(self, key: tuple[str, str, int]) -> np.ndarray:
        """Decode `key` and the steps after it (those the lake has), caching all but `key`."""
        episode_id, camera, step = key
        keys = [key]
        for k in range(step + 1, step + self._read_ahead):
            nxt = (episode_id, camera, k)
            try:
                self._reader.positions([nxt])
            except KeyError:  # past the episode's last step
                break
            keys.append(nxt)
        frames = self._reader.read_many(keys, exact=True)
        for later, rgb in zip(keys[1:], frames[1:], strict=True):
            self._decoded[later] = rgb
        return frames[0]
