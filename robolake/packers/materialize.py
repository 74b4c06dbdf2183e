"""Materialise packed sequences: sample ids -> packed-shard rows (frames, text, state, actions).

Runs inside Ray tasks (for `pack`) or a loader process (for streaming from the lake). Each call
gets a group of packed sequences, gathers every row it needs with one Lance `take` per table
(sorted unique offsets: random access, no scan), normalises vectors with the embodiment's
statistics and lays them out as `PackedRow`s. Shards hold self-contained images: image rows as
they are, FFV1 and h264 rows decoded and JPEG-encoded (`lake.media.standalone_images`), frames
of a camera with an access copy taken from it. With `spec.image_size` set, each frame is written
as a training rendition at the model's input size: the resize happens once here instead of in
the loader on every epoch, and the shards hold small frames.

Recorded videos (`lake.record`) are decoded sequentially, each episode-camera once. `pack` does
it in a stage of its own before the write stage (`pipeline.py`): one task per group of
episode-cameras decodes each whole stream in one pass (`render_stream`: each GOP once) and writes
the rendition of every sample step to a scratch table under the pack output, which the write
stage then takes by offset (`rendered_*`). Packed sequences mix episodes at random, so a write
task that decoded what its sequences need would decode a GOP again in every task that touches
it, and every worker process would decode every stream. The renditions are the bytes the write
stage would have made itself (same decode, same `render_rgb`), so the shards do not change.

Without a scratch table (the lake stream), the first call that needs a frame of a stream decodes
the whole stream and keeps the JPEG of every sample step in a per-process cache
(`RecordFrameCache`, bounded by bytes, least recently used out first); a pass over the stream
costs no more than one call that decodes only its own frames. A cache too small for the lake
stays correct and only decodes again.

`counted_decodes()` counts the stream decodes made inside it: pack's stages report theirs, so
that the tests can check that each stream is decoded once in the whole pack.
"""

from __future__ import annotations

import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import lance
import numpy as np
import pyarrow as pa

from robolake.lake import (
    MEDIA_ROW_COLUMNS,
    Lake,
    NormStats,
    StreamIndex,
    load_streams,
    record_images,
    render_rgb,
    standalone_images,
    take_offsets,
)
from robolake.packers.samples import SampleIndex
from robolake.packers.spec import PackSpec
from robolake.schemas.packed import packed_schema
from robolake.schemas.varlen import cu_seqlens_from_lengths

__all__ = [
    "RECORD_CACHE_BYTES",
    "RENDITION_SCHEMA",
    "RecordFrameCache",
    "SequenceMaterializer",
    "counted_decodes",
    "materializer_for",
]

RECORD_CACHE_BYTES = 1 << 30  # renditions of recorded frames kept per process


class _Tables:
    """A materializer's lake tables, each opened once per process.

    `rows` runs once a batch; opening a table reads its manifest (a HEAD and a GET on an object
    store: a third of the lake stream's S3 requests before this). The handles live with one
    materializer (one pack, one loader), never longer, so a lake deleted and written again at the
    same path and version is read afresh; the process id is in the key, so a forked child opens
    its own (Lance handles are not fork-safe), and pickling leaves them out.
    """

    def __init__(self) -> None:
        self._items: dict[tuple[object, ...], lance.LanceDataset] = {}
        self._lock = threading.Lock()

    def get(self, uri: str, version: int, options: dict[str, str] | None) -> lance.LanceDataset:
        key = (os.getpid(), uri, version)
        with self._lock:
            ds = self._items.get(key)
        if ds is None:
            ds = lance.dataset(uri, version=version, storage_options=options)
            with self._lock:
                self._items[key] = ds
        return ds

    def __getstate__(self) -> dict[str, object]:
        return {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__()  # type: ignore[misc]


class RecordFrameCache:
    """Self-contained frames of recorded streams, per (table, version, episode, camera, size, stride).

    Thread-safe (the lake stream materialises in threads); least recently used streams go first
    once `max_bytes` is passed.
    """

    def __init__(self, max_bytes: int = RECORD_CACHE_BYTES):
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[object, ...], dict[int, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[object, ...]) -> dict[int, bytes] | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: tuple[object, ...], frames: dict[int, bytes]) -> None:
        size = sum(map(len, frames.values()))
        with self._lock:
            if key in self._items:
                return
            self._items[key] = frames
            self._bytes += size
            while self._bytes > self.max_bytes and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                self._bytes -= sum(map(len, old.values()))


_CACHE = RecordFrameCache()
RENDITION_SCHEMA = pa.schema([pa.field("data", pa.binary(), nullable=False)])  # pack's scratch table of renditions
_local = threading.local()


@contextmanager
def counted_decodes() -> Iterator[Counter[tuple[str, str]]]:
    """Counts (episode_id, camera) -> whole-stream decodes (`render_stream`) this thread makes
    inside the block: what pack's stages report. Nothing is counted outside one."""
    passes: Counter[tuple[str, str]] = Counter()
    outer, _local.passes = getattr(_local, "passes", None), passes
    try:
        yield passes
    finally:
        _local.passes = outer


def _take(ds: lance.LanceDataset, offsets: np.ndarray, columns: list[str]) -> tuple[pa.Table, np.ndarray]:
    """Rows at `offsets` (any order, repeats allowed) and, per offset, its row in the result."""
    uniq, inverse = np.unique(offsets, return_inverse=True)
    return take_offsets(ds, uniq, columns), inverse


def _matrix(column: pa.ChunkedArray | pa.Array) -> list[np.ndarray]:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offs = arr.offsets.to_numpy()
    flat = arr.flatten().to_numpy(zero_copy_only=False)
    return [flat[offs[i] : offs[i + 1]] for i in range(len(arr))]


@dataclass(frozen=True, kw_only=True)
class SequenceMaterializer:
    """Builds packed rows from a sample index; picklable, so Ray can ship it to workers.

    Attributes:
        index: The sample index of the run.
        spec: The pack spec.
        steps_uri: The lake's steps table, and its Lance version.
        media_uri: The lake's media table, and its Lance version.
        streams_uri: The lake's streams table (recorded videos) and its version; None: none.
        access_uri: The lake's access-copy table and its version; None: none.
        rendered_uri: `pack`'s scratch table of renditions of recorded streams and its version;
            None: recorded frames are decoded here (through the per-process cache).
        rendered_offset: int64 [E, max_cameras]: row of step 0 of each episode-camera in the
            scratch table (one row per sample step), -1 where it has none.
        stats: Normalisation statistics per embodiment tag.
        storage_options: Lance storage options.
    """

    index: SampleIndex
    spec: PackSpec
    steps_uri: str
    steps_version: int
    media_uri: str
    media_version: int
    stats: dict[str, NormStats]
    storage_options: dict[str, str] | None = None
    streams_uri: str | None = None
    streams_version: int | None = None
    access_uri: str | None = None
    access_version: int | None = None
    rendered_uri: str | None = None
    rendered_version: int | None = None
    rendered_offset: np.ndarray | None = None
    _tables: _Tables = field(default_factory=_Tables, init=False, repr=False, compare=False)

    def read_tables_through(self, tables: _Tables) -> None:
        """Open this materializer's lake tables through `tables` (a loader's cache that serves a
        table's `take` from whole blocks, `loaders/blocks.py`) instead of its own."""
        object.__setattr__(self, "_tables", tables)

    def _open(self, uri: str | None, version: int | None) -> lance.LanceDataset | None:
        if uri is None:
            return None
        if version is None:  # the newest version: not pinned, so not kept
            return lance.dataset(uri, storage_options=self.storage_options)
        return self._tables.get(uri, version, self.storage_options)

    def frames(self, media: lance.LanceDataset, ep: np.ndarray, cam: np.ndarray, t: np.ndarray) -> list[bytes]:
        """Self-contained image bytes of views (episode row, camera index, step), in order."""
        idx, size = self.index, self.spec.image_size
        out: list[bytes | None] = [None] * len(ep)
        use_access = np.zeros(len(ep), dtype=bool) if idx.access_offset is None else idx.access_offset[ep, cam] >= 0
        recorded = (np.zeros(len(ep), dtype=bool) if idx.recorded is None else idx.recorded[ep, cam]) & ~use_access
        plain = ~use_access & ~recorded
        for mask, ds, base in (
            (use_access, self._open(self.access_uri, self.access_version), idx.access_offset),
            (plain, media, idx.media_offset),
        ):
            if not mask.any() or ds is None or base is None:
                continue
            offs = base[ep[mask], cam[mask]] + idx.frame_of(ep[mask], t[mask])
            uniq, inv = np.unique(offs, return_inverse=True)
            rows = take_offsets(ds, uniq, MEDIA_ROW_COLUMNS)
            images = standalone_images(ds, uniq, rows, size)
            for i, j in zip(np.flatnonzero(mask).tolist(), inv.tolist(), strict=True):
                out[i] = images[j]
        if recorded.any() and self.rendered_offset is not None:
            rendered = recorded & (self.rendered_offset[ep, cam] >= 0)
            self._rendered(ep, cam, t, rendered, out)
            recorded &= ~rendered
        if recorded.any():
            self._recorded(media, ep, cam, t, recorded, out)
        if any(o is None for o in out):
            raise ValueError(
                "a frame of a recorded camera has no access copy table or streams table to decode it; "
                "build the materializer with packers.materialize.materializer_for(lake, ...)"
            )
        return [o for o in out if o is not None]

    def _rendered(
        self, ep: np.ndarray, cam: np.ndarray, t: np.ndarray, mask: np.ndarray, out: list[bytes | None]
    ) -> None:
        """Frames of recorded streams from pack's scratch table of renditions (one take)."""
        if not mask.any() or self.rendered_offset is None:
            return
        stride = int(self.index.step_stride)
        ts = t[mask]
        if (ts % stride).any():  # samples sit on the stride grid, which is what the table holds
            raise ValueError(f"step {int(ts[(ts % stride) != 0][0])} is not a sample step of stride {stride}")
        offs = self.rendered_offset[ep[mask], cam[mask]] + ts // stride
        uniq, inv = np.unique(offs, return_inverse=True)
        ds = self._open(self.rendered_uri, self.rendered_version)
        if ds is None:
            raise ValueError("the materializer has rendered offsets but no rendered table; set rendered_uri too")
        data = take_offsets(ds, uniq, ["data"])["data"].to_pylist()
        for i, j in zip(np.flatnonzero(mask).tolist(), inv.tolist(), strict=True):
            out[i] = data[j]

    def render_stream(
        self, media: lance.LanceDataset, streams: dict[tuple[str, str], StreamIndex], e: int, c: int
    ) -> list[bytes]:
        """The rendition of every sample step (0, stride, 2 * stride, ...) of camera `c` of episode
        row `e`, in step order: one pass over its recorded stream, counted by `counted_decodes`.

        Args:
            media: The lake's media table.
            streams: From `lake.media.load_streams` for this episode.
            e: Episode row of the index.
            c: Camera index.
        """
        idx, size, stride = self.index, self.spec.image_size, int(self.index.step_stride)
        eid, camera = str(idx.episodes["episode_id"][e].as_py()), str(idx.episodes["cameras"][e][c].as_py())
        stream = streams.get((eid, camera))
        if stream is None:
            raise ValueError(
                f"episode {eid} camera {camera} is a recorded video but the streams table has no row "
                "for it; run `robolake check`"
            )
        base, n = int(idx.media_offset[e, c]), int(idx.episodes["num_steps"][e].as_py())
        steps = np.arange(0, n, stride, dtype=np.int64)
        shown = idx.frame_of(np.full(len(steps), e), steps).tolist()  # a trimmed episode's original steps
        data = take_offsets(media, np.arange(base, base + stream.num_steps), ["data"])["data"].to_pylist()
        frames = record_images(
            stream, shown, data.__getitem__, lambda rgb: render_rgb(rgb, size), None if size is None else (size, size)
        )
        passes = getattr(_local, "passes", None)
        if passes is not None:
            passes[(eid, camera)] += 1
        return [frames[s] for s in shown]

    def _recorded(
        self,
        media: lance.LanceDataset,
        ep: np.ndarray,
        cam: np.ndarray,
        t: np.ndarray,
        mask: np.ndarray,
        out: list[bytes | None],
    ) -> None:
        """Frames of recorded streams, each stream decoded once per process (see the essay)."""
        idx, size, stride = self.index, self.spec.image_size, int(self.index.step_stride)
        ids, cams = idx.episodes["episode_id"], idx.episodes["cameras"]
        wanted = sorted({(int(e), int(c)) for e, c in zip(ep[mask].tolist(), cam[mask].tolist(), strict=True)})
        got: dict[tuple[int, int], dict[int, bytes]] = {}
        missing = []
        for e, c in wanted:
            key = (self.media_uri, self.media_version, ids[e].as_py(), cams[e][c].as_py(), size, stride)
            hit = _CACHE.get(key)
            if hit is None:
                missing.append((e, c, key))
            else:
                got[(e, c)] = hit
        if missing:
            streams = load_streams(self._open(self.streams_uri, self.streams_version), [k[2] for _, _, k in missing])
            for e, c, key in missing:
                frames = dict(
                    zip(
                        range(0, int(idx.episodes["num_steps"][e].as_py()), stride),
                        self.render_stream(media, streams, e, c),
                        strict=True,
                    )
                )
                _CACHE.put(key, frames)
                got[(e, c)] = frames
        for i in np.flatnonzero(mask).tolist():
            frames = got[(int(ep[i]), int(cam[i]))]
            if int(t[i]) not in frames:  # samples sit on the stride grid, which is what the cache holds
                raise ValueError(f"step {int(t[i])} is not a sample step of stride {stride}")
            out[i] = frames[int(t[i])]

    def rows(self, bins: Sequence[np.ndarray], seq_indices: Sequence[int]) -> pa.Table:
        """Packed rows of `bins` (arrays of sample ids), numbered `seq_indices`."""
        idx, spec = self.index, self.spec
        steps = self._tables.get(self.steps_uri, self.steps_version, self.storage_options)
        media = self._tables.get(self.media_uri, self.media_version, self.storage_options)
        samples = np.concatenate(bins) if bins else np.zeros(0, np.int64)
        ep = idx.episode_of(samples)
        t = idx.step_of(samples, ep).astype(np.int64)
        num_steps = idx.episodes["num_steps"].to_numpy()[ep]
        H = spec.horizon
        chunk = t[:, None] + np.arange(H)[None, :] * spec.action_stride
        valid = np.minimum((num_steps - t + spec.action_stride - 1) // spec.action_stride, H)
        chunk = np.minimum(chunk, num_steps[:, None] - 1)  # past the end: repeat the last action
        base = idx.step_offset[ep]
        state_tab, state_inv = _take(steps, base + t, ["state"])
        action_tab, action_inv = _take(steps, (base[:, None] + chunk).reshape(-1), ["action"])
        cams = idx.media_offset[ep]
        view_mask = cams >= 0
        view_row, view_cam = np.nonzero(view_mask)  # row-major: sample after sample, its cameras in order
        frame_data = self.frames(media, ep[view_row], view_cam, t[view_row])
        cam_names = idx.episodes["cameras"].to_pylist()
        frame_cams = [cam_names[int(ep[r])][int(c)] for r, c in zip(view_row.tolist(), view_cam.tolist(), strict=True)]

        states = _matrix(state_tab["state"])
        actions = _matrix(action_tab["action"])
        tags = idx.episodes["embodiment"].to_pylist()
        tasks = idx.episodes["task"].to_pylist()
        ids = idx.episodes["episode_id"].to_pylist()
        text_cache: dict[int, np.ndarray] = {}

        out: dict[str, list] = {name: [] for name in packed_schema().names}
        pos = 0
        view_pos = 0
        views_per = view_mask.sum(1)
        for seq, b in zip(seq_indices, bins, strict=True):
            n = len(b)
            rows = range(pos, pos + n)
            texts, st, ac, sd, ad, frames, fcams = [], [], [], [], [], [], []
            for r in rows:
                e = int(ep[r])
                if e not in text_cache:
                    text_cache[e] = spec.tokens.encode_text(tasks[e]).astype(np.int32)
                texts.append(text_cache[e])
                norm = self.stats.get(tags[e])
                s = states[state_inv[r]]
                a = np.stack([actions[action_inv[r * H + k]] for k in range(H)])
                if norm is not None and spec.normalization != "none":
                    s = norm.state.normalize(s, spec.normalization)
                    a = norm.action.normalize(a, spec.normalization)
                st.append(s.astype(np.float32))
                ac.append(a.astype(np.float32).reshape(-1))
                sd.append(s.shape[0])
                ad.append(a.shape[1])
                for _ in range(int(views_per[r])):
                    frames.append(frame_data[view_pos])
                    fcams.append(frame_cams[view_pos])
                    view_pos += 1
            lengths = idx.length_of(samples[pos : pos + n]).astype(np.int32)
            hist = [idx.history.tokens(int(ep[r]), int(t[r])) for r in rows] if idx.history is not None else []
            out["history_lengths"].append([len(h[1]) for h in hist] if hist else [0] * n)
            out["history_stream"].append(np.concatenate([h[2] for h in hist]).tolist() if hist else [])
            out["history_dt"].append(np.concatenate([h[1] for h in hist]).tolist() if hist else [])
            out["history_values"].append(np.concatenate([h[0].reshape(-1) for h in hist]).tolist() if hist else [])
            out["seq_index"].append(int(seq))
            out["num_samples"].append(n)
            out["total_tokens"].append(int(lengths.sum()))
            out["horizon"].append(H)
            out["episode_id"].append([ids[int(ep[r])] for r in rows])
            out["step_index"].append(t[pos : pos + n].astype(np.int32).tolist())
            out["embodiment"].append([tags[int(ep[r])] for r in rows])
            out["embodiment_id"].append([idx.embodiments.index(tags[int(ep[r])]) for r in rows])
            out["lengths"].append(lengths.tolist())
            out["cu_seqlens"].append(cu_seqlens_from_lengths(lengths).tolist())
            out["num_views"].append(views_per[pos : pos + n].astype(np.int32).tolist())
            out["cameras"].append(fcams)
            out["frames"].append(frames)
            out["text_lengths"].append([len(x) for x in texts])
            out["text_ids"].append(np.concatenate(texts).tolist() if texts else [])
            out["state_dims"].append(sd)
            out["state"].append(np.concatenate(st).tolist() if st else [])
            out["action_dims"].append(ad)
            out["action"].append(np.concatenate(ac).tolist() if ac else [])
            out["action_valid"].append(valid[pos : pos + n].astype(np.int32).tolist())
            pos += n
        return pa.Table.from_pydict(out, schema=packed_schema())


def materializer_for(lake: Lake, index: SampleIndex, spec: PackSpec) -> SequenceMaterializer:
    """The materializer of `lake`'s samples in `index`, reading every table at the lake's version."""
    return SequenceMaterializer(
        index=index,
        spec=spec,
        steps_uri=lake.table_uri("steps"),
        steps_version=lake.version_info.tables["steps"],
        media_uri=lake.table_uri("media"),
        media_version=lake.version_info.tables["media"],
        stats={tag: lake.norm_stats(tag) for tag in index.embodiments},
        storage_options=lake.storage_options,
        streams_uri=lake.table_uri("streams"),
        streams_version=lake.version_info.tables["streams"],
        access_uri=lake.table_uri("access"),
        access_version=lake.version_info.tables["access"],
    )
