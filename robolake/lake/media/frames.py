"""Camera frames in the lake: the record, access copies, and the one reader of both.

A robot-data team keeps camera data for years and trains on it many times, so the lake keeps
two things apart. The **record** is what the cameras recorded, never bigger than the source and
never changed: a source video's own encoded packets (`lake.record`: h264, hevc, AV1, with a
per-frame index; decoding a frame from the lake gives exactly the pixels decoding the source
file with PyAV gives), images a source holds intra-coded (JPEG/PNG cells, `CompressedImage`,
RLDS JPEGs, LeRobot image columns) byte for byte, and raw pixel arrays compressed losslessly
(FFV1, `lake.codecs`). Each `media` row is one (episode, camera, step); its `encoding` says what
it holds and `codecs.fidelity` how faithful that is. Lossy storage of the record is opt-in
(`--frames jpeg`, `--frames h264 --crf N`) and says so in every row and in `robolake info`.

**Speed comes from derived copies.** A long-GOP record answers a random frame by decoding from
its keyframe; the key-referenced h264 *access copy* (`lake.access`, `robolake optimize LAKE
--access-copy h264`, or `ingest --access-copy h264`) answers it in at most two decodes. It is a
table the lake version references, rebuilt deterministically from the record, and dropped by
`gc` once no kept version names it. Readers use it where an episode has one and the record
elsewhere (`FrameReader(exact=True)` always reads the record). Training renditions (`pack
--image-size`) stay JPEG at the model's input size in packed shards.

Why not one layout for both jobs (issue 15's finding): intra-only coding costs 2-5x the bytes of
inter-coded video at any quality worth training on, and inter coding needs a reference decode
per frame. Per-frame JPEG q80, the format-1 default, was 5.2x the source's bytes at 34.2 dB on
the real GR00T data.

Measured (`robolake bench scale --quick --sections media`; every frame of every episode
compared with decoding the source file with PyAV; reads are random frames against mp4
seek-and-decode from the source with PyAV's default decoder settings, 3 paired runs, median
(range), taken on a shared 2-core machine: sizes and exactness do not depend on load, timings do):

    data, layout                    bytes x source  fidelity            1 a call            64 a call
    real GR00T (h264)
      record (default)              1.004           bit-exact           1.94x (1.86-2.11)   6.36x (6.18-6.57)
      access copy h264 (derived)    +0.584          37.5 dB (min 35.2)  17.3x (16.8-20.8)   63.5x (47.8-63.6)
      --frames jpeg                 5.158           34.2 dB (min 32.9)  37.4x (33.9-46.8)   154x (117-191)
      --frames h264                 0.584           37.5 dB (min 35.2)  15.7x (12.9-17.6)   59.2x (58.2-60.1)
    synthetic AV1 v3.0, record      1.054           bit-exact           1.26x (1.23-1.69)   5.04x (4.60-5.84)
    synthetic h264 64 px, record    1.020           bit-exact           1.77x (1.52-1.78)   4.76x (4.62-5.86)

The record's packets alone are 0.91-0.99x the source's video bytes; the rest is its index, 21
bytes a packet (step, pts, dts, keyframe), which on the 128 px synthetic AV1 (about 260 bytes a
packet) is 8% of the bytes: camera-sized packets keep it under 1%. `pack` at 64 px took 1.00 s
from the record against 0.67 s from the JPEG lake on the GR00T data (1.53x, `bench media
--pack-pairs 5`): decoding h264 costs more than a JPEG decoded at 1/4 scale in the DCT domain.

Reads. `FrameReader.read_many` takes every row it needs in one Lance take, groups the requested
frames of a recorded stream into decode runs (`StreamIndex.runs`: one pass per GOP however many
of its frames are wanted, non-reference pictures skipped), and decodes packets already in
memory: no container open, no demux, no seek. On the GR00T data (250-frame GOPs) a random frame
from the record still costs a decode from its keyframe: what an mp4 seek costs less the
container work and the non-reference pictures, on one decoder thread (1.9x against PyAV's
default slice threads, 1.5x against a one-thread seek), which is why the access copy exists.
Its P-frames reference its B-pictures, so no more than the non-reference ones can be skipped.
Decoded frames become RGB through one swscale context per thread (`record.rgb`; PyAV's
`to_ndarray` builds one per frame, which cost more than the decode on these frames), scaled to
a requested size in the same pass. `pack` and
`LakeStream` decode each recorded episode-camera sequentially once per worker process
(`packers.materialize`). A single-row Lance take costs 0.3-0.5 ms whatever the bytes, so
everything reads many rows per take.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import lance
import numpy as np
import pyarrow as pa

from robolake.lake.media.codecs import (
    FRAME_LAYOUTS,
    JPEG_QUALITY,
    RENDITION_QUALITY,
    VIDEO_CRF,
    VIDEO_GOP,
    KeyframeEncoder,
    decode_frame,
    decode_row,
    encode_frame,
    encode_raw,
    fidelity,
    frame_size,
    render_frame,
    render_rgb,
    video_gop,
)
from robolake.lake.media.kept import kept_of
from robolake.lake.media.record import StreamIndex, decode_runs, rgb
from robolake.lake.protocol.offsets import row_offsets, take_offsets
from robolake.lake.query import sql_in, sql_quote

__all__ = [
    "FRAME_LAYOUTS",
    "JPEG_QUALITY",
    "RENDITION_QUALITY",
    "VIDEO_CRF",
    "VIDEO_GOP",
    "VIDEO_FRAME_LAYOUTS",
    "MEDIA_ROW_COLUMNS",
    "FrameReader",
    "KeyframeEncoder",
    "decode_frame",
    "decode_row",
    "encode_frame",
    "encode_raw",
    "fidelity",
    "frame_size",
    "load_streams",
    "read_rows",
    "record_images",
    "render_frame",
    "standalone_images",
    "video_gop",
]

VIDEO_FRAME_LAYOUTS = FRAME_LAYOUTS  # the name SourceOptions checks `video_frames` against
MEDIA_ROW_COLUMNS = ["episode_id", "step_index", "encoding", "data"]
STREAM_COLUMNS = [
    "episode_id",
    "camera",
    "codec",
    "decoder",
    "extradata",
    "width",
    "height",
    "time_base_num",
    "time_base_den",
    "params",
    "packet_step",
    "packet_pts",
    "packet_dts",
    "packet_key",
    "extra_packets",
    "source_path",
    "source_digest",
]


def _keyframes(ds: lance.LanceDataset, offsets: np.ndarray, rows: pa.Table) -> list[bytes | None]:
    """Per row of `rows` (taken at `offsets`): its keyframe's data, or None where none is needed.

    An episode's frames of one camera are contiguous and in step order in the table (ingest
    writes them so), so a keyframe sits `step % gop` rows before its frame; the take checks it.
    """
    steps = rows["step_index"].to_numpy()
    gops = np.array([video_gop(e) or 0 for e in rows["encoding"].to_pylist()], dtype=np.int64)
    back = np.where(gops > 0, steps % np.maximum(gops, 1), 0)
    need = back > 0
    out: list[bytes | None] = [None] * len(offsets)
    if not need.any():
        return out
    key_off = np.asarray(offsets, dtype=np.int64)[need] - back[need]
    uniq, inv = np.unique(key_off, return_inverse=True)
    keys = take_offsets(ds, uniq, MEDIA_ROW_COLUMNS)
    k_ep, k_step, k_data = keys["episode_id"].to_pylist(), keys["step_index"].to_numpy(), keys["data"].to_pylist()
    eps = rows["episode_id"].to_pylist()
    for i, u in zip(np.flatnonzero(need).tolist(), inv.tolist(), strict=True):
        want = int(steps[i] - back[i])
        if k_ep[u] != eps[i] or int(k_step[u]) != want:
            raise ValueError(
                f"media row of episode {eps[i]} step {int(steps[i])} expects its keyframe (step {want}) "
                f"{int(back[i])} rows earlier, but finds episode {k_ep[u]} step {int(k_step[u])}; "
                "the media table is out of order: "
                "run `robolake check` and re-ingest the episode"
            )
        out[i] = k_data[u]
    return out


def read_rows(ds: lance.LanceDataset, offsets: Sequence[int], size: tuple[int, int] | None = None) -> list[np.ndarray]:
    """Decoded RGB frames of self-describing rows (images, FFV1, key-referenced h264) at `offsets`
    (global row offsets, any order, repeats allowed): one take for the rows, one for their keyframes."""
    if not len(offsets):
        return []
    uniq, inv = np.unique(np.asarray(offsets, dtype=np.int64), return_inverse=True)
    rows = take_offsets(ds, uniq, MEDIA_ROW_COLUMNS)
    keys = _keyframes(ds, uniq, rows)
    data, enc = rows["data"].to_pylist(), rows["encoding"].to_pylist()
    frames = [decode_row(d, e, k, size) for d, e, k in zip(data, enc, keys, strict=True)]
    return [frames[i] for i in inv.tolist()]


def standalone_images(ds: lance.LanceDataset, offsets: np.ndarray, rows: pa.Table, size: int | None) -> list[bytes]:
    """Self-contained image bytes of self-describing media `rows` (taken at `offsets`).

    What packed shards hold. Image rows pass through (or become a `size` x `size` rendition);
    FFV1 and h264 rows are decoded (h264 from its keyframe) and JPEG-encoded, at `size` when given.
    """
    keys = _keyframes(ds, offsets, rows)
    out = []
    for d, e, k in zip(rows["data"].to_pylist(), rows["encoding"].to_pylist(), keys, strict=True):
        if video_gop(e) is None and not e.startswith("ffv1"):
            out.append(d if size is None else render_frame(d, size))
        else:
            out.append(render_rgb(decode_row(d, e, k), size))
    return out


def load_streams(streams: lance.LanceDataset | None, episode_ids: Iterable[str]) -> dict[tuple[str, str], StreamIndex]:
    """(episode_id, camera) -> the recorded stream, for the given episodes (one filtered scan)."""
    ids = sorted(set(episode_ids))
    if streams is None or not ids:
        return {}
    out = {}
    for i in range(0, len(ids), 512):
        table = streams.to_table(columns=STREAM_COLUMNS, filter=sql_in("episode_id", ids[i : i + 512]))
        for row in table.to_pylist():
            out[(row["episode_id"], row["camera"])] = StreamIndex.from_row(row)
    return out


def record_images(
    index: StreamIndex,
    steps: Sequence[int],
    packet: Callable[[int], bytes],
    render: Callable[[np.ndarray], Any],
    size: tuple[int, int] | None = None,
) -> dict[int, Any]:
    """step -> render(RGB frame, at `size` if given) of `steps` of a recorded stream, each GOP decoded once."""
    return {s: render(rgb(frame, size)) for s, frame in decode_runs(index, index.runs(steps), packet)}


class FrameReader:
    """Random access to single frames of a lake version: the record, or its access copy.

    The first read of an episode looks up its frames' row positions with one query on the
    `episode_id` index (and its streams and access-copy rows); every fetch is then Lance takes,
    no scan and no source file. `read_many` fetches many frames per take and decodes each run
    of a recorded GOP once. Use `Lake.frames()`.

    Keys name steps as the `steps` table numbers them. A trimmed episode's step t shows the frame
    of the original step its metadata maps it to (`kept.KeptSteps`); the reader looks that map up
    with the episode's positions, so callers never see the media rows' own numbering.

    Args:
        media: The media table (the record).
        streams: The streams table (recorded videos), if the lake has one.
        access: The access-copy table, if the lake has one.
        episodes: The episodes table, for trimmed episodes' maps (None: every step shows its own row).
    """

    def __init__(
        self,
        media: lance.LanceDataset,
        streams: lance.LanceDataset | None = None,
        access: lance.LanceDataset | None = None,
        episodes: lance.LanceDataset | None = None,
    ):
        self._ds = media
        self._streams_ds = streams
        self._access_ds = access if access is not None and access.count_rows() else None
        self._episodes_ds = episodes
        self._pos: dict[tuple[str, str, int], int] = {}
        self._access: dict[tuple[str, str, int], int] = {}
        self._streams: dict[tuple[str, str], StreamIndex] = {}
        self._kept: dict[str, np.ndarray] = {}
        self._episodes: set[str] = set()

    def _positions_of(self, ds: lance.LanceDataset, episode_id: str) -> dict[tuple[str, str, int], int]:
        keys = ds.to_table(
            columns=["camera", "step_index"], filter=f"episode_id = {sql_quote(episode_id)}", with_row_id=True
        )
        offsets = row_offsets(ds, keys["_rowid"].to_numpy())
        return {
            (episode_id, c, int(s)): o
            for c, s, o in zip(
                keys["camera"].to_pylist(), keys["step_index"].to_pylist(), offsets.tolist(), strict=True
            )
        }

    def _load_episode(self, episode_id: str) -> None:
        self._pos.update(self._positions_of(self._ds, episode_id))
        if self._access_ds is not None:
            self._access.update(self._positions_of(self._access_ds, episode_id))
        self._streams.update(load_streams(self._streams_ds, [episode_id]))
        if self._episodes_ds is not None:
            meta = self._episodes_ds.to_table(columns=["metadata"], filter=f"episode_id = {sql_quote(episode_id)}")
            kept = kept_of(meta["metadata"][0].as_py()) if meta.num_rows else None
            if kept is not None:
                self._kept[episode_id] = kept.frame_steps
        self._episodes.add(episode_id)

    def _media_keys(self, keys: Sequence[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
        """The keys with each trimmed episode's step replaced by the original step it shows."""
        out = []
        for key in keys:
            if key[0] not in self._episodes:
                self._load_episode(key[0])
            kept = self._kept.get(key[0])
            if kept is None:
                out.append(key)
            elif 0 <= key[2] < len(kept):
                out.append((key[0], key[1], int(kept[key[2]])))
            else:
                raise KeyError(
                    f"no frame for episode {key[0]!r}, camera {key[1]!r}, step {key[2]}: the trimmed episode "
                    f"has {len(kept)} steps"
                )
        return out

    def positions(self, keys: Sequence[tuple[str, str, int]]) -> list[int]:
        """Row positions in the media table of (episode_id, camera, step) keys.

        Raises:
            KeyError: a key has no frame in the lake.
        """
        return self._positions(self._media_keys(keys))

    def _positions(self, keys: Sequence[tuple[str, str, int]]) -> list[int]:
        out = []
        for key in keys:
            try:
                out.append(self._pos[key])
            except KeyError:
                raise KeyError(
                    f"no frame for episode {key[0]!r}, camera {key[1]!r}, step {key[2]} in the lake"
                ) from None
        return out

    def stream(self, episode_id: str, camera: str) -> StreamIndex | None:
        """The recorded stream of an episode's camera, None when its frames are not a recorded video."""
        if episode_id not in self._episodes:
            self._load_episode(episode_id)
        return self._streams.get((episode_id, camera))

    def read_encoded(self, keys: Sequence[tuple[str, str, int]]) -> list[bytes]:
        """Stored bytes of each key in the media table, in order (an h264 row decodes only after its
        keyframe's, a recorded packet only with its stream's)."""
        pos = self.positions(keys)
        if not pos:
            return []
        order = np.argsort(pos)
        table = take_offsets(self._ds, [pos[i] for i in order], ["data"])
        data = table["data"].to_pylist()
        out: list[bytes] = [b""] * len(pos)
        for j, i in enumerate(order):
            out[i] = data[j]
        return out

    def read_many(
        self, keys: Sequence[tuple[str, str, int]], size: tuple[int, int] | None = None, *, exact: bool = False
    ) -> list[np.ndarray]:
        """Decoded RGB frames of (episode_id, camera, step) keys, in order, resized to `size` if given.

        Args:
            keys: The frames.
            size: (height, width) to resize to.
            exact: Read the record even where an access copy exists (the pixels the source holds).
        """
        keys = self._media_keys(keys)  # loads each episode's positions, streams, access rows and kept steps
        self._positions(keys)  # KeyError if a frame is absent
        out: list[np.ndarray | None] = [None] * len(keys)
        plain: list[int] = []
        copy: list[int] = []
        recorded: dict[tuple[str, str], list[int]] = {}
        for i, k in enumerate(keys):
            if not exact and k in self._access:
                copy.append(i)
            elif (k[0], k[1]) in self._streams:
                recorded.setdefault((k[0], k[1]), []).append(i)
            else:
                plain.append(i)
        for which, ds, where in ((plain, self._ds, self._pos), (copy, self._access_ds, self._access)):
            if which and ds is not None:
                for i, f in zip(which, read_rows(ds, [where[keys[i]] for i in which], size), strict=True):
                    out[i] = f
        if recorded:
            self._read_recorded(keys, recorded, size, out)
        missing = [i for i, f in enumerate(out) if f is None]
        if missing:  # a key with an access-copy position whose table this reader was not given
            k = keys[missing[0]]
            raise KeyError(
                f"frame of episode {k[0]!r}, camera {k[1]!r}, step {k[2]} could not be read; "
                "open the reader with Lake.frames()"
            )
        return [f for f in out if f is not None]

    def _read_recorded(
        self,
        keys: Sequence[tuple[str, str, int]],
        groups: dict[tuple[str, str], list[int]],
        size: tuple[int, int] | None,
        out: list[np.ndarray | None],
    ) -> None:
        plans = {}
        need: list[tuple[str, str, int]] = []
        for sk, idx in groups.items():
            stream = self._streams[sk]
            runs = stream.runs([keys[i][2] for i in idx])
            plans[sk] = runs
            need += [(sk[0], sk[1], s) for s in stream.owned_steps(runs)]
        offs = [self._pos[k] for k in need]
        order = np.argsort(offs)
        data = take_offsets(self._ds, [offs[j] for j in order], ["data"])["data"].to_pylist() if offs else []
        packets = {need[j]: data[n] for n, j in enumerate(order.tolist())}
        for sk, runs in plans.items():

            def packet(s: int, sk: tuple[str, str] = sk) -> bytes:
                return packets[(sk[0], sk[1], s)]

            frames = {s: rgb(f, size) for s, f in decode_runs(self._streams[sk], runs, packet)}
            for i in groups[sk]:
                out[i] = frames[keys[i][2]]

    def read(self, episode_id: str, camera: str, step: int, *, exact: bool = False) -> np.ndarray:
        """One decoded RGB frame."""
        return self.read_many([(episode_id, camera, step)], exact=exact)[0]
