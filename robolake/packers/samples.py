"""The sample index: every (episode, step) sample of a lake, with its length and row positions.

A sample is (episode, step t) -> frames of each camera at t, the instruction, the state at t and
the action chunk t..t+H-1. Packing needs only each sample's token length, and materialising a
packed sequence needs to know where its rows are. Both come from metadata: the episodes table
(cameras, instruction, length) and the key columns of the steps and media tables, which are read
once with Lance's row ids and turned into row offsets of the pinned table version. The index is
columnar (numpy), about 40 bytes per sample, so a lake of tens of millions of steps fits on the
driver; frames and vectors are only ever read inside the materialising tasks, by `take`.
"""

from __future__ import annotations

from dataclasses import dataclass

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.lake import Lake
from robolake.lake.media import row_offsets
from robolake.packers.lengths import text_token_lengths
from robolake.packers.spec import PackSpec

__all__ = ["SampleIndex", "build_sample_index"]


@dataclass(frozen=True, kw_only=True)
class SampleIndex:
    """Columnar description of every sample of a pack run.

    Attributes:
        episodes: The episodes table rows used (episode_id, embodiment, task, num_steps, cameras).
        episode: int64 [S] row of `episodes` each sample belongs to.
        step: int32 [S] step t of each sample.
        length: int64 [S] backbone tokens of each sample.
        step_offset: int64 [E] row offset in the steps table of each episode's step 0.
        media_offset: int64 [E, max_cameras] row offset in the media table of each episode's
            camera-c step 0 (-1 where the episode has fewer cameras).
        embodiments: Sorted embodiment tags; embodiment ids index this tuple.
    """

    episodes: pa.Table
    episode: np.ndarray
    step: np.ndarray
    length: np.ndarray
    step_offset: np.ndarray
    media_offset: np.ndarray
    embodiments: tuple[str, ...]

    @property
    def num_samples(self) -> int:
        return int(self.step.shape[0])

    def keys(self, idx: np.ndarray) -> list[tuple[str, int]]:
        ids = self.episodes["episode_id"].to_pylist()
        return [(ids[int(self.episode[i])], int(self.step[i])) for i in idx]


def _first_offsets(ds: lance.LanceDataset, key_cols: list[str], where: str | None) -> pa.Table:
    """Key columns plus global row offsets, sorted by key."""
    t = ds.to_table(columns=key_cols, filter=where, with_row_id=True)
    offsets = row_offsets(ds, t["_rowid"].to_numpy())
    t = t.drop_columns(["_rowid"]).append_column("offset", pa.array(offsets))
    return t.sort_by([(c, "ascending") for c in key_cols])


def _check_contiguous(lake: Lake, table: str, keys: pa.Table) -> None:
    """Ingest writes each episode's (camera's) steps as consecutive rows, 0..n-1; verify it."""
    step = keys["step_index"].to_numpy()
    off = keys["offset"].to_numpy()
    inner = step[1:] > 0
    if not (np.all(np.diff(off)[inner] == 1) and np.all(np.diff(step)[inner] == 1)):
        raise ValueError(
            f"lake {lake.uri}: rows of the {table} table are not stored one episode after another in "
            "step order; this lake was not written by robolake ingest (re-ingest it)"
        )


def build_sample_index(lake: Lake, spec: PackSpec) -> SampleIndex:
    """Enumerate the samples of `lake` selected by `spec`, with lengths and row offsets.

    Raises:
        ValueError: the lake holds no episodes matching `spec.where`, or its steps/media rows are
            incomplete (a step or frame missing that the episodes table promises).
    """
    episodes = lake.episodes(spec.where, columns=["episode_id", "embodiment", "task", "num_steps", "cameras"])
    if episodes.num_rows == 0:
        raise ValueError(f"lake {lake.uri} (version {lake.version}) has no episodes to pack for {spec.where}")
    episodes = episodes.sort_by("episode_id")
    ids = episodes["episode_id"]
    num_steps = episodes["num_steps"].to_numpy().astype(np.int64)
    num_cams = pc.list_value_length(episodes["cameras"]).to_numpy().astype(np.int64)
    pred = None if spec.where is None else lake.predicate("steps", spec.where)

    # Steps: episode e's step t sits at step_offset[e] + t (checked below).
    steps = _first_offsets(lake.dataset("steps"), ["episode_id", "step_index"], pred)
    if steps.num_rows != int(num_steps.sum()):
        raise ValueError(f"lake {lake.uri}: steps table has {steps.num_rows} rows for {int(num_steps.sum())} promised steps")
    starts = np.concatenate([[0], np.cumsum(num_steps)[:-1]]).astype(np.int64)
    _check_contiguous(lake, "steps", steps)
    if not np.array_equal(steps["episode_id"].take(pa.array(starts)), ids.combine_chunks()):
        raise ValueError(f"lake {lake.uri}: steps rows do not line up with the episodes table; re-ingest")
    step_off = steps["offset"].to_numpy()
    step_offset = step_off[starts]

    # Media: per episode and camera (in the episode's camera order), the offset of step 0.
    media = _first_offsets(lake.dataset("media"), ["episode_id", "camera", "step_index"], pred)
    if media.num_rows != int((num_steps * num_cams).sum()):
        raise ValueError(f"lake {lake.uri}: media table has {media.num_rows} frames for {int((num_steps * num_cams).sum())} promised")
    _check_contiguous(lake, "media", media)
    max_cams = int(num_cams.max(initial=0))
    media_offset = np.full((episodes.num_rows, max_cams), -1, dtype=np.int64)
    if max_cams:
        first = media.filter(pc.equal(media["step_index"], 0))
        lookup = {(e, c): o for e, c, o in zip(first["episode_id"].to_pylist(), first["camera"].to_pylist(), first["offset"].to_pylist(), strict=True)}
        for e, (eid, cams) in enumerate(zip(ids.to_pylist(), episodes["cameras"].to_pylist(), strict=True)):
            for c, cam in enumerate(cams):
                if (eid, cam) not in lookup:
                    raise ValueError(f"lake {lake.uri}: episode {eid} has no frames for camera {cam!r}")
                media_offset[e, c] = lookup[(eid, cam)]

    # Samples: every step_stride-th step of every episode; lengths per episode, repeated.
    per_ep = (num_steps + spec.step_stride - 1) // spec.step_stride
    episode = np.repeat(np.arange(episodes.num_rows, dtype=np.int64), per_ep)
    first_sample = np.repeat(np.cumsum(per_ep) - per_ep, per_ep)
    step = ((np.arange(int(per_ep.sum())) - first_sample) * spec.step_stride).astype(np.int32)
    ep_len = num_cams * spec.tokens.tokens_per_view + text_token_lengths(episodes["task"], spec.tokens)
    embodiments = tuple(sorted(set(episodes["embodiment"].to_pylist())))
    return SampleIndex(
        episodes=episodes,
        episode=episode,
        step=step,
        length=ep_len[episode],
        step_offset=step_offset,
        media_offset=media_offset,
        embodiments=embodiments,
    )
