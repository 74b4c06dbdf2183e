"""The sample index: every (episode, step) sample of a lake, with its length and row positions.

A sample is (episode, step t) -> frames of each camera at t, the instruction, the state at t and
the action chunk t..t+H-1. Packing needs only each sample's token length, and materialising a
packed sequence needs to know where its rows are. Both come from metadata: the episodes table
(cameras, instruction, length) and the key columns of the steps and media tables, read once with
Lance's row ids and turned into row offsets of the pinned table version.

The index is held per *episode*, not per sample. Every sample of an episode has the same token
length (views and instruction are per episode) and its step is a multiple of the stride, so
sample ids are a prefix sum over episodes (`sample_start`) and any id's episode, step and length
are one `searchsorted` away (`episode_of`, `step_of`, `length_of`). Memory is O(episodes): at
100M samples of 100-step episodes that is 1M rows, a few tens of MB, where per-sample arrays
would be 2 GB. The per-sample arrays (`episode`, `step`, `length`) are still there for small
runs and tools, built on first use. The steps and media key columns are scanned in batches, so
building the index never holds a whole column of a large lake either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake import Lake, row_offsets
from robolake.packers.history import HistoryData, load_history
from robolake.packers.lengths import text_token_lengths
from robolake.packers.spec import PackSpec

__all__ = ["SampleIndex", "build_sample_index"]


@dataclass(frozen=True, kw_only=True)
class SampleIndex:
    """Columnar description of every sample of a pack run, held per episode.

    Attributes:
        episodes: The episodes table rows used (episode_id, embodiment, task, num_steps, cameras).
        sample_start: int64 [E+1] id of each episode's first sample (prefix sum; the last entry
            is the number of samples).
        step_stride: Every k-th step of an episode is a sample.
        episode_length: int64 [E] backbone tokens of each sample of each episode.
        step_offset: int64 [E] row offset in the steps table of each episode's step 0.
        media_offset: int64 [E, max_cameras] row offset in the media table of each episode's
            camera-c step 0 (-1 where the episode has fewer cameras).
        embodiments: Sorted embodiment tags; embodiment ids index this tuple.
        recorded: bool [E, max_cameras]: camera c of episode e is a recorded video (its media
            rows are packets that decode through its `streams` row); None: none is.
        access_offset: int64 [E, max_cameras] row offset in the access-copy table of camera c's
            step 0 (-1 where it has no access copy); None: the lake has none.
        history: The stream histories samples carry (`packers/history.py`); their tokens vary
            per sample, so with history a sample's length is its episode's plus its own count.
        frame_map: Episode row -> int64 [num_steps] the media row (original step) each step of a
            trimmed episode shows (`robolake trim`); episodes not in it show frame t at step t.
    """

    episodes: pa.Table
    sample_start: np.ndarray
    step_stride: int
    episode_length: np.ndarray
    step_offset: np.ndarray
    media_offset: np.ndarray
    embodiments: tuple[str, ...]
    recorded: np.ndarray | None = None
    access_offset: np.ndarray | None = None
    history: HistoryData | None = None
    frame_map: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        return int(self.sample_start[-1])

    @property
    def num_episodes(self) -> int:
        return int(self.sample_start.shape[0] - 1)

    def episode_of(self, ids: np.ndarray) -> np.ndarray:
        """int64: row of `episodes` of each sample id."""
        return np.searchsorted(self.sample_start, np.asarray(ids, dtype=np.int64), side="right") - 1

    def step_of(self, ids: np.ndarray, episode: np.ndarray | None = None) -> np.ndarray:
        """int32: step t of each sample id (`episode` = `episode_of(ids)` when already known)."""
        ids = np.asarray(ids, dtype=np.int64)
        ep = self.episode_of(ids) if episode is None else episode
        return ((ids - self.sample_start[ep]) * self.step_stride).astype(np.int32)

    def frame_of(self, episode: np.ndarray, step: np.ndarray) -> np.ndarray:
        """int64: the media row, counted from the episode-camera's first, of each (episode row, step)."""
        out = np.asarray(step, dtype=np.int64)
        if not self.frame_map:
            return out
        episode = np.asarray(episode, dtype=np.int64)
        out = out.copy()
        for e in set(np.unique(episode).tolist()) & set(self.frame_map):
            mine = episode == e
            out[mine] = self.frame_map[e][out[mine]]
        return out

    def length_of(self, ids: np.ndarray) -> np.ndarray:
        """int64: backbone tokens of each sample id."""
        ids = np.asarray(ids, dtype=np.int64)
        ep = self.episode_of(ids)
        if self.history is None:
            return self.episode_length[ep]
        return self.episode_length[ep] + self.history.counts(ep, self.step_of(ids, ep))

    def samples_of_episodes(self, episodes: np.ndarray) -> np.ndarray:
        """int64: the sample ids of `episodes` (rows of `episodes`), episode after episode."""
        episodes = np.asarray(episodes, dtype=np.int64)
        counts = self.sample_start[episodes + 1] - self.sample_start[episodes]
        first = np.repeat(self.sample_start[episodes] - np.cumsum(counts) + counts, counts)
        return first + np.arange(int(counts.sum()), dtype=np.int64)

    @cached_property
    def episode(self) -> np.ndarray:
        """int64 [S] row of `episodes` each sample belongs to (built on first use: O(samples))."""
        counts = np.diff(self.sample_start)
        return np.repeat(np.arange(self.num_episodes, dtype=np.int64), counts)

    @cached_property
    def step(self) -> np.ndarray:
        """int32 [S] step t of each sample (built on first use)."""
        return self.step_of(np.arange(self.num_samples, dtype=np.int64), self.episode)

    @cached_property
    def length(self) -> np.ndarray:
        """int64 [S] backbone tokens of each sample (built on first use)."""
        return self.length_of(np.arange(self.num_samples, dtype=np.int64))

    def keys(self, idx: np.ndarray) -> list[tuple[str, int]]:
        idx = np.asarray(idx, dtype=np.int64)
        ids = self.episodes["episode_id"]
        ep = self.episode_of(idx)
        steps = self.step_of(idx, ep)
        return [(ids[int(e)].as_py(), int(t)) for e, t in zip(ep, steps, strict=True)]

    def __getstate__(self) -> dict[str, object]:
        # Ship only the per-episode arrays to Ray tasks, never per-sample arrays built for tools.
        return {k: v for k, v in self.__dict__.items() if k not in ("episode", "step", "length")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)


def _episode_starts(lake: Lake, table: str, key_cols: list[str], where: str | None) -> tuple[pa.Table, int]:
    """(key columns + `offset` of every step-0 row, rows scanned), scanning `table` in batches.

    Checks on the way that rows are stored one episode (camera) after another in step order,
    which is how ingest writes them and what lets a step's row be `offset + t`.
    """
    ds = lake.dataset(table)
    firsts: list[pa.Table] = []
    rows = 0
    prev_off = prev_step = -2
    for batch in ds.to_batches(columns=key_cols, filter=where, with_row_id=True, batch_size=1 << 16):
        if batch.num_rows == 0:
            continue
        off = row_offsets(ds, batch.column("_rowid").to_numpy())
        step = batch.column("step_index").to_numpy().astype(np.int64)
        all_off = np.concatenate([[prev_off], off])
        all_step = np.concatenate([[prev_step], step])
        inner = all_step[1:] > 0
        if not (np.all(np.diff(all_off)[inner] == 1) and np.all(np.diff(all_step)[inner] == 1)):
            raise ValueError(
                f"lake {lake.uri}: rows of the {table} table are not stored one episode after another in "
                "step order; this lake was not written by robolake ingest (re-ingest it)"
            )
        prev_off, prev_step = int(off[-1]), int(step[-1])
        first = np.flatnonzero(step == 0)
        t = pa.Table.from_batches([batch]).select(key_cols[:-1]).take(pa.array(first))
        firsts.append(t.append_column("offset", pa.array(off[first])))
        rows += batch.num_rows
    schema = ds.schema
    empty = pa.table(
        {c: pa.array([], schema.field(c).type) for c in key_cols[:-1]} | {"offset": pa.array([], pa.int64())}
    )
    out = pa.concat_tables(firsts) if firsts else empty
    return out.sort_by([(c, "ascending") for c in key_cols[:-1]]), rows


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
    pred = lake.predicate("steps", spec.where)  # also a tag's subset (a split), when the lake has one

    # Steps: episode e's step t sits at step_offset[e] + t (checked while scanning).
    step_firsts, step_rows = _episode_starts(lake, "steps", ["episode_id", "step_index"], pred)
    if step_rows != int(num_steps.sum()):
        raise ValueError(f"lake {lake.uri}: steps table has {step_rows} rows for {int(num_steps.sum())} promised steps")
    if not step_firsts["episode_id"].combine_chunks().equals(ids.combine_chunks()):
        raise ValueError(f"lake {lake.uri}: steps rows do not line up with the episodes table; re-ingest")
    step_offset = step_firsts["offset"].to_numpy()

    # Media: per episode and camera (in the episode's camera order), the offset of step 0. A
    # trimmed episode keeps every frame ingest wrote; its steps show some of them (`frame_map`).
    row_of = {e: i for i, e in enumerate(ids.to_pylist())}
    frame_rows = num_steps.copy()
    frame_map: dict[int, np.ndarray] = {}
    for eid, kept in lake.trimmed(list(row_of)).items():
        frame_rows[row_of[eid]] = kept.frames
        frame_map[row_of[eid]] = kept.frame_steps
    first, media_rows = _episode_starts(lake, "media", ["episode_id", "camera", "step_index"], pred)
    if media_rows != int((frame_rows * num_cams).sum()):
        raise ValueError(
            f"lake {lake.uri}: media table has {media_rows} frames for {int((frame_rows * num_cams).sum())} promised"
        )
    max_cams = int(num_cams.max(initial=0))
    media_offset = np.full((episodes.num_rows, max_cams), -1, dtype=np.int64)
    if max_cams:
        lookup = {
            (e, c): o
            for e, c, o in zip(
                first["episode_id"].to_pylist(), first["camera"].to_pylist(), first["offset"].to_pylist(), strict=True
            )
        }
        for e, (eid, cams) in enumerate(zip(ids.to_pylist(), episodes["cameras"].to_pylist(), strict=True)):
            for c, cam in enumerate(cams):
                if (eid, cam) not in lookup:
                    raise ValueError(f"lake {lake.uri}: episode {eid} has no frames for camera {cam!r}")
                media_offset[e, c] = lookup[(eid, cam)]

    recorded, access_offset = _record_and_access(lake, ids.to_pylist(), episodes["cameras"].to_pylist(), max_cams)

    # Samples: every step_stride-th step of every episode; one length per episode.
    per_ep = (num_steps + spec.step_stride - 1) // spec.step_stride
    ep_len = num_cams * spec.tokens.tokens_per_view + text_token_lengths(episodes["task"], spec.tokens)
    embodiments = tuple(sorted(set(episodes["embodiment"].to_pylist())))
    history = load_history(lake, episodes, spec.history, width=spec.history_width) if spec.history else None
    return SampleIndex(
        episodes=episodes,
        sample_start=np.concatenate([[0], np.cumsum(per_ep)]).astype(np.int64),
        step_stride=spec.step_stride,
        episode_length=np.asarray(ep_len, dtype=np.int64),
        step_offset=step_offset,
        media_offset=media_offset,
        embodiments=embodiments,
        recorded=recorded,
        access_offset=access_offset,
        history=history,
        frame_map=frame_map,
    )


def _record_and_access(
    lake: Lake, ids: list[str], cameras: list[list[str]], max_cams: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Which (episode, camera) are recorded videos, and where their access-copy rows start.

    Both tables are read whole (key columns only) and matched to the selected episodes: their
    rows are per episode-camera (streams) or per step of recorded cameras (access).
    """
    row_of = {e: i for i, e in enumerate(ids)}
    col_of = [{c: j for j, c in enumerate(cams)} for cams in cameras]

    def place(pairs: list[tuple[str, str]]) -> list[tuple[int, int, int]]:
        out = []
        for n, (e, c) in enumerate(pairs):
            if e in row_of and c in col_of[row_of[e]]:
                out.append((n, row_of[e], col_of[row_of[e]][c]))
        return out

    recorded = None
    if lake.count("streams"):
        t = lake.dataset("streams").to_table(columns=["episode_id", "camera"])
        recorded = np.zeros((len(ids), max_cams), dtype=bool)
        for _, e, c in place(list(zip(t["episode_id"].to_pylist(), t["camera"].to_pylist(), strict=True))):
            recorded[e, c] = True
    access = None
    if lake.count("access"):
        first, _ = _episode_starts(lake, "access", ["episode_id", "camera", "step_index"], None)
        access = np.full((len(ids), max_cams), -1, dtype=np.int64)
        offs = first["offset"].to_numpy()
        for n, e, c in place(list(zip(first["episode_id"].to_pylist(), first["camera"].to_pylist(), strict=True))):
            access[e, c] = offs[n]
    return recorded, access
