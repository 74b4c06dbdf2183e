"""Materialise packed sequences: sample ids -> packed-shard rows (frames, text, state, actions).

Runs inside Ray tasks (for `pack`) or a loader process (for streaming from the lake). Each call
gets a group of packed sequences, gathers every row it needs with one Lance `take` per table
(sorted unique offsets: random access, no scan), normalises vectors with the embodiment's
statistics and lays them out as `PackedRow`s. Shards hold self-contained images
(`lake.media.standalone_images`): image rows as they are, h264 rows decoded from their keyframe
and JPEG-encoded. With `spec.image_size` set, each frame is written as a training rendition at
the model's input size: the resize happens once here instead of in the loader on every epoch,
and the shards hold small frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import lance
import numpy as np
import pyarrow as pa

from robolake.lake.media import MEDIA_ROW_COLUMNS, standalone_images
from robolake.lake.stats import NormStats
from robolake.packers.samples import SampleIndex
from robolake.packers.spec import PackSpec
from robolake.schemas.packed import packed_schema
from robolake.schemas.varlen import cu_seqlens_from_lengths

__all__ = ["SequenceMaterializer"]


def _take(ds: lance.LanceDataset, offsets: np.ndarray, columns: list[str]) -> tuple[pa.Table, np.ndarray]:
    """Rows at `offsets` (any order, repeats allowed) and, per offset, its row in the result."""
    uniq, inverse = np.unique(offsets, return_inverse=True)
    return ds.take(uniq.tolist(), columns=columns), inverse


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

    def rows(self, bins: Sequence[np.ndarray], seq_indices: Sequence[int]) -> pa.Table:
        """Packed rows of `bins` (arrays of sample ids), numbered `seq_indices`."""
        idx, spec = self.index, self.spec
        steps = lance.dataset(self.steps_uri, version=self.steps_version, storage_options=self.storage_options)
        media = lance.dataset(self.media_uri, version=self.media_version, storage_options=self.storage_options)
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
        view_off = (cams + t[:, None])[view_mask]
        uniq_views, frame_inv = np.unique(view_off, return_inverse=True)
        frames_tab = media.take(uniq_views.tolist(), columns=[*MEDIA_ROW_COLUMNS, "camera"])

        states = _matrix(state_tab["state"])
        actions = _matrix(action_tab["action"])
        frame_data = standalone_images(media, uniq_views, frames_tab, spec.image_size)
        frame_cams = frames_tab["camera"].to_pylist()
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
                    frames.append(frame_data[frame_inv[view_pos]])
                    fcams.append(frame_cams[frame_inv[view_pos]])
                    view_pos += 1
            lengths = idx.episode_length[ep[pos : pos + n]].astype(np.int32)
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
