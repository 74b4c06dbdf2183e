"""Which lake data a LeRobot-shaped dataset serves, and its frame table in LeRobot's numbering.

A LeRobot dataset is one feature layout numbered 0..N-1: episodes in a fixed order, each
episode's frames contiguous, `index` global, `episode_index` the episode's position and
`task_index` a global task number. `robolake export` writes a lake selection in exactly that
numbering (episodes sorted by embodiment, source, source episode index and id; tasks in an
order that keeps each episode's own order); this module computes the same numbering from the
lake without writing anything, so an item of the adapter and the item `LeRobotDataset` returns
on the export of the same selection name the same frame.

What is held in memory: the selection's steps (state and action as float32, timestamps, task
indices), about 2 x dims x 4 bytes a step (44-dim GR00T state and action: 350 bytes a step,
350 MB for a million steps), shared copy-on-write by DataLoader workers started by fork.
Frames are not held: they are read through the lake's `FrameReader` per item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from robolake.lake import (
    Lake,
    episode_tasks,
    lerobot_cameras,
    lerobot_timestamps,
    parse_where,
    select_episode_ids,
    sql_in,
    task_order,
    video_key,
)
from robolake.schemas import EmbodimentSpec

__all__ = ["LakeSource", "FrameTable"]

_EPISODE_COLUMNS = [
    "episode_id",
    "embodiment",
    "task",
    "num_steps",
    "fps",
    "cameras",
    "metadata",
    "source_uri",
    "source_episode_index",
]


@dataclass(frozen=True, kw_only=True)
class LakeSource:
    """Which lake data to serve: a version, tag or split of a lake, filtered, one embodiment.

    Attributes:
        uri: The lake (a local directory or an object-store URI).
        version: A lake version (default: the newest). Not with `tag` or `split`.
        tag: A tag (`robolake tag`), e.g. one naming a selection. Not with `split`.
        split: A part of `robolake split` ("train", "val", "test": the tag `split:PART`).
        where: A `--where` expression choosing episodes (`robolake select --help` lists the names).
        embodiment: The embodiment to serve; needed only when the selection holds several (a
            LeRobot dataset has one feature layout).
        mix: A weighted mixture (`--mix` text, e.g. "task=pick:0.7,*:0.3"); it changes which
            samples an epoch draws (`LakeLeRobotDataset.sampler`), never what an index holds.
        seed: Seed of the mixture's draws and of the iterable dataset's order.
        storage_options: Object-store options (credentials, endpoint) passed to Lance.
    """

    uri: str
    version: int | None = None
    tag: str | None = None
    split: str | None = None
    where: str | None = None
    embodiment: str | None = None
    mix: str | None = None
    seed: int = 0
    storage_options: Mapping[str, str] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        given = [n for n in ("version", "tag", "split") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of version, tag or split, not {' and '.join(given)}")
        if self.where is not None:
            parse_where(self.where)  # a WhereError names the problem now, not in a worker
        if self.mix is not None:
            from robolake.packers import load_mix

            load_mix(self.mix)

    def open(self) -> Lake:
        """The lake at this source's version, tag or split."""
        tag = self.tag if self.split is None else f"split:{self.split}"
        opts = None if self.storage_options is None else dict(self.storage_options)
        return Lake.open(self.uri, version=self.version, tag=tag, storage_options=opts)


@dataclass(frozen=True)
class FrameTable:
    """The selection's frames in LeRobot's numbering, with their numbers and vectors.

    Attributes:
        episode_ids: Lake episode id of each episode_index.
        lengths: int64 [episodes] frames of each episode.
        starts: int64 [episodes + 1] global index of each episode's first frame (`dataset_from_index`).
        state: float32 [frames, state_dim].
        action: float32 [frames, action_dim].
        timestamp: float64 [frames] seconds from the episode's first frame, as the export writes them.
        task_index: int64 [frames] global task number.
        tasks: Task strings in task_index order.
        episode_tasks: Each episode's tasks.
        spec: The embodiment's spec (state/action names, cameras).
        cameras: Lake camera names, in the export's order.
        camera_keys: LeRobot feature key of each camera.
        fps: Frames per second (one for the selection).
        lake_version: The lake version read.
    """

    episode_ids: tuple[str, ...]
    lengths: np.ndarray
    starts: np.ndarray
    state: np.ndarray
    action: np.ndarray
    timestamp: np.ndarray
    task_index: np.ndarray
    tasks: tuple[str, ...]
    episode_tasks: tuple[tuple[str, ...], ...]
    spec: EmbodimentSpec
    cameras: tuple[str, ...]
    camera_keys: tuple[str, ...]
    fps: float
    lake_version: int

    @property
    def num_frames(self) -> int:
        return int(self.starts[-1])

    @property
    def num_episodes(self) -> int:
        return len(self.episode_ids)

    def episode_of(self, index: np.ndarray | int) -> np.ndarray:
        """int64: episode_index of each global frame index."""
        return np.searchsorted(self.starts, np.asarray(index, dtype=np.int64), side="right") - 1

    @classmethod
    def load(cls, lake: Lake, source: LakeSource) -> FrameTable:
        """Read the selection's episodes and steps.

        Raises:
            ValueError: nothing is selected, the selection holds several embodiments and
                `source.embodiment` does not choose one, or the episodes do not share one fps
                and camera set (what one LeRobot dataset needs).
        """
        rows = lake.episodes(columns=_EPISODE_COLUMNS).to_pylist()
        if source.where is not None:
            keep = set(select_episode_ids(lake, source.where))
            rows = [r for r in rows if r["episode_id"] in keep]
        tags = sorted({r["embodiment"] for r in rows})
        if source.embodiment is not None:
            rows = [r for r in rows if r["embodiment"] == source.embodiment]
        elif len(tags) > 1:
            raise ValueError(
                f"the selection of lake {lake.uri} holds {len(tags)} embodiments {tags}; a LeRobot dataset has one "
                "feature layout, so choose one (LakeSource(embodiment=...)) and open one dataset per embodiment"
            )
        if not rows:
            raise ValueError(
                f"no episode of lake {lake.uri} (version {lake.version}) matches where={source.where!r}, "
                f"embodiment={source.embodiment!r}; its embodiments are {tags or sorted(lake.embodiments())}"
            )
        rows.sort(key=lambda r: (r["embodiment"], r["source_uri"], r["source_episode_index"], r["episode_id"]))
        spec = lake.embodiments()[rows[0]["embodiment"]]
        rates = sorted({float(r["fps"]) for r in rows})
        if len(rates) > 1:
            raise ValueError(
                f"the selected episodes were recorded at different rates {rates}; a LeRobot dataset has one fps, "
                'so select one rate (where="fps = ...") or render one with `robolake align --fps`'
            )
        cameras = lerobot_cameras(spec, rows, "narrow the selection (where=...)")
        ep_tasks = [episode_tasks(r) for r in rows]
        order = task_order(ep_tasks)
        number = {t: i for i, t in enumerate(order)}
        ids = [r["episode_id"] for r in rows]
        steps = _read_steps(lake, ids)
        trimmed = lake.trimmed(ids)
        lengths = np.asarray([int(r["num_steps"]) for r in rows], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        n = int(starts[-1])
        state = np.empty((n, spec.state_dim), np.float32)
        action = np.empty((n, spec.action_dim), np.float32)
        ts = np.empty(n, np.float64)
        task = np.empty(n, np.int64)
        for e, eid in enumerate(ids):
            part = steps.get(eid)
            a, b = int(starts[e]), int(starts[e + 1])
            if part is None or part.num_rows != b - a:
                raise ValueError(
                    f"episode {eid} has {0 if part is None else part.num_rows} step rows but num_steps={b - a}; "
                    f"the lake is inconsistent: run `robolake check {lake.uri}`"
                )
            state[a:b] = _matrix(part["state"], b - a)
            action[a:b] = _matrix(part["action"], b - a)
            ts[a:b] = lerobot_timestamps(part["timestamp"].to_numpy(), trimmed.get(eid), rates[0])
            local = part["task_index"].to_numpy().astype(np.int64)
            task[a:b] = np.asarray([number[t] for t in ep_tasks[e]], dtype=np.int64)[local]
        return cls(
            episode_ids=tuple(ids),
            lengths=lengths,
            starts=starts,
            state=state,
            action=action,
            timestamp=ts,
            task_index=task,
            tasks=tuple(order),
            episode_tasks=tuple(tuple(t) for t in ep_tasks),
            spec=spec,
            cameras=tuple(cameras),
            camera_keys=tuple(video_key(spec, c) for c in cameras),
            fps=rates[0],
            lake_version=lake.version,
        )


def _read_steps(lake: Lake, ids: Sequence[str]) -> dict[str, pa.Table]:
    """Each episode's steps in step order, read in one scan of the selection."""
    table = lake.to_arrow(
        "steps",
        columns=["episode_id", "step_index", "timestamp", "state", "action", "task_index"],
        where=sql_in("episode_id", ids) if len(ids) < 5000 else None,
    ).sort_by([("episode_id", "ascending"), ("step_index", "ascending")])
    eids = table["episode_id"].to_numpy(zero_copy_only=False)
    out: dict[str, pa.Table] = {}
    if not len(eids):
        return out
    cuts = np.flatnonzero(eids[1:] != eids[:-1]) + 1
    bounds = np.concatenate([[0], cuts, [len(eids)]])
    want = set(ids)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        eid = str(eids[a])
        if eid in want:
            out[eid] = table.slice(int(a), int(b - a))
    return out


def _matrix(column: pa.ChunkedArray, n: int) -> np.ndarray:
    flat = column.combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    return flat.reshape(n, -1)
