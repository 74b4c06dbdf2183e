"""LeRobot's dataset interface over a lake: map-style and iterable torch datasets.

A team that trains LeRobot's policies (ACT, Diffusion Policy, SmolVLA, pi0) feeds them
`LeRobotDataset` items: a dict of tensors per frame, with `delta_timestamps` windows and
`*_is_pad` masks. `LakeLeRobotDataset` hands out the same dicts from a lake version, tag or
split (filtered, one embodiment), so a training script changes the line that builds its dataset
and nothing else. Items are built as `LeRobotDataset.__getitem__` builds them (lerobot 0.6):

- the frame's row: `observation.state`, `action` (float32 [d]), `timestamp` (float32 scalar),
  `frame_index`, `episode_index`, `index`, `task_index` (int64 scalars), numbered as `robolake
  export` numbers the same selection (`source.FrameTable`);
- each `delta_timestamps` key: its frames stacked ([k, d], or [k, C, H, W] for a camera, squeezed
  to [C, H, W] when k = 1), indices clamped into the episode, `<key>_is_pad` marking the slots
  outside it (`windows.window`);
- cameras: float32 CHW in [0, 1] (uint8 with `return_uint8`), decoded by the lake's
  `FrameReader` (never the media table directly: it follows a trimmed episode's kept steps and
  uses an access copy where one exists), then `image_transforms` applied per camera;
- `task`: the task string.

Why it is faster than `LeRobotDataset` on the same data: no container open, demux and seek per
item (the reader decodes packets already in memory), a DataLoader batch is read in one call
(`__getitems__`: every frame the batch needs in one Lance take, each GOP decoded once however
many of its frames the batch wants), and `LakeLeRobotIterable` reads runs of neighbouring frames
together and shuffles within a buffer, so a long-GOP record is decoded about once per epoch.
What it trades: the iterable's order is shuffled by blocks, not frame by frame (a buffer of
`buffer_blocks` x `block_frames` frames from different episodes is shuffled before it is
yielded); use the map-style dataset where a trainer needs i.i.d. order.

Workers. Lance is not fork-safe (a forked child inherits its runtime without the runtime's
threads, and its first read waits for them forever), so a DataLoader with workers must start
them with `multiprocessing_context="forkserver"` (or "spawn"): the dataset is pickled without
its lake handle and each worker opens its own. A worker started by fork raises at its first
read, saying so, rather than hanging.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from robolake.integrations.lerobot.metadata import LakeDatasetMetadata
from robolake.integrations.lerobot.mixture import draw_epoch
from robolake.integrations.lerobot.source import FrameTable, LakeSource
from robolake.integrations.lerobot.windows import check_delta_timestamps, delta_indices, window
from robolake.lake import FrameReader, Lake

__all__ = ["LakeLeRobotDataset", "LakeLeRobotIterable", "MixtureSampler"]

log = logging.getLogger(__name__)

Transform = Callable[[torch.Tensor], torch.Tensor]

_FORKED = False  # set in a child started by fork: Lance cannot be used there


def _mark_forked() -> None:
    global _FORKED
    _FORKED = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)


class LakeLeRobotDataset(torch.utils.data.Dataset):
    """`LeRobotDataset`'s items from a lake selection (map-style).

    Args:
        source: Which lake data (`LakeSource`), or a lake URI for its newest version.
        delta_timestamps: As LeRobot's: feature key -> offsets in seconds (multiples of 1/fps).
            Keys: `observation.state`, `action`, `timestamp`, the index columns, camera keys.
        image_transforms: Applied to each camera's tensor of an item, as LeRobot applies them.
        tolerance_s: LeRobot's tolerance for `delta_timestamps` off the 1/fps grid.
        return_uint8: Cameras as uint8 CHW (LeRobot's `return_uint8`) instead of float32 in [0, 1].
        exact_frames: Decode the record even where an access copy exists (bit-exact pixels;
            an access copy is within codec tolerance, and faster on long-GOP video).
        image_size: (height, width) to resize frames to while decoding (None: stored size, as LeRobot).

    Raises:
        ValueError: the selection is empty or not one LeRobot layout (`FrameTable.load`), or a
            `delta_timestamps` key or offset LeRobot would refuse.
    """

    def __init__(
        self,
        source: LakeSource | str,
        *,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        image_transforms: Transform | None = None,
        tolerance_s: float = 1e-4,
        return_uint8: bool = False,
        exact_frames: bool = False,
        image_size: tuple[int, int] | None = None,
    ) -> None:
        self.source = LakeSource(uri=source) if isinstance(source, str) else source
        lake = self.source.open()
        self.table = FrameTable.load(lake, self.source)
        self.delta_timestamps = None if delta_timestamps is None else {k: list(v) for k, v in delta_timestamps.items()}
        self.image_transforms = image_transforms
        self.tolerance_s = tolerance_s
        self.return_uint8 = return_uint8
        self.exact_frames = exact_frames
        self.image_size = image_size
        self.delta_indices: dict[str, np.ndarray] | None = None
        if self.delta_timestamps is not None:
            unknown = sorted(set(self.delta_timestamps) - set(_ROW_KEYS) - set(self.table.camera_keys))
            if unknown:
                raise ValueError(
                    f"delta_timestamps keys {unknown} are not features of this dataset; "
                    f"use {sorted(_ROW_KEYS) + list(self.table.camera_keys)}"
                )
            check_delta_timestamps(self.delta_timestamps, self.table.fps, tolerance_s)
            self.delta_indices = delta_indices(self.delta_timestamps, self.table.fps)
        self._lake: Lake | None = lake
        self._reader: FrameReader | None = None
        self._pid = os.getpid()
        shapes = {}
        for key, cam in zip(self.table.camera_keys, self.table.cameras, strict=True):
            h, w, c = self.frames_of(cam, [(0, 0)])[0].shape
            shapes[key] = (h, w, c) if image_size is None else (image_size[0], image_size[1], c)
        self.meta = LakeDatasetMetadata(
            self.table, shapes, self._sample_frames, repo_id=f"robolake/{self.table.spec.tag}"
        )

    # --- LeRobotDataset's attributes ---------------------------------------------------------

    @property
    def fps(self) -> int:
        return self.meta.fps

    @property
    def num_frames(self) -> int:
        return self.table.num_frames

    @property
    def num_episodes(self) -> int:
        return self.table.num_episodes

    @property
    def features(self) -> dict[str, dict[str, Any]]:
        return self.meta.features

    def __len__(self) -> int:
        return self.table.num_frames

    def __getitem__(self, idx: int) -> dict[str, Any]:
        return self.items([int(idx)])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """A DataLoader batch in one read (torch's fetcher calls this when it exists)."""
        return self.items(indices)

    def sampler(self, *, epoch: int = 0, shuffle: bool = True) -> MixtureSampler:
        """A sampler drawing each epoch's indices by the source's mixture (every index once
        without one); pass it to `DataLoader(sampler=...)` and call `set_epoch` each epoch."""
        return MixtureSampler(self, epoch=epoch, shuffle=shuffle)

    # --- building items ---------------------------------------------------------------------

    def items(self, indices: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """The items of global frame indices `indices`, in order.

        Raises:
            IndexError: an index outside [0, len(self)).
        """
        t = self.table
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"index out of range for a dataset of {len(self)} frames: {idx.min()}..{idx.max()}")
        idx = np.where(idx < 0, idx + len(self), idx)
        ep = t.episode_of(idx)
        start, stop = t.starts[ep], t.starts[ep + 1]
        rows: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}  # key -> (frames [n] or [n, k], pad)
        for key in (*_ROW_KEYS, *t.camera_keys):
            if self.delta_indices is not None and key in self.delta_indices:
                rows[key] = window(idx, start, stop, self.delta_indices[key])
            else:
                rows[key] = (idx, None)
        # every camera frame of the batch in one read: the reader groups them by GOP
        pixels: dict[str, np.ndarray] = {}
        for key, cam in zip(t.camera_keys, t.cameras, strict=True):
            frames = rows[key][0].reshape(-1)
            e = t.episode_of(frames)
            decoded = self.frames_of(cam, list(zip(e.tolist(), (frames - t.starts[e]).tolist(), strict=True)))
            pixels[key] = np.stack(decoded).reshape(*rows[key][0].shape, *decoded[0].shape)
        out = []
        for n in range(idx.size):
            item: dict[str, Any] = {}
            for key in t.camera_keys:
                item[key] = self._image(pixels[key][n])
            item.update(self._row(rows, n, ep[n], start[n]))
            for key, (_, pad) in rows.items():
                if pad is not None:
                    item[f"{key}_is_pad"] = torch.from_numpy(pad[n].copy())
            if self.image_transforms is not None:
                for key in t.camera_keys:
                    item[key] = self.image_transforms(item[key])
            item["task"] = t.tasks[int(t.task_index[idx[n]])]
            out.append(item)
        return out

    def _row(
        self, rows: Mapping[str, tuple[np.ndarray, np.ndarray | None]], n: int, ep: int, start: int
    ) -> dict[str, Any]:
        t = self.table
        values = {
            "observation.state": lambda f: t.state[f],
            "action": lambda f: t.action[f],
            "timestamp": lambda f: t.timestamp[f].astype(np.float32),
            "frame_index": lambda f: f - t.starts[t.episode_of(f)],
            "episode_index": lambda f: t.episode_of(f),
            "index": lambda f: np.asarray(f, dtype=np.int64),
            "task_index": lambda f: t.task_index[f],
        }
        return {key: torch.from_numpy(np.array(values[key](rows[key][0][n]))) for key in _ROW_KEYS}

    def _image(self, frames: np.ndarray) -> torch.Tensor:
        """uint8 [..., H, W, 3] -> CHW (float32 in [0, 1] unless return_uint8); a window of one squeezed."""
        x = torch.from_numpy(np.ascontiguousarray(frames)).movedim(-1, -3)
        if x.ndim == 4 and x.shape[0] == 1:
            x = x[0]  # LeRobot squeezes dim 0 of the decoded [k, C, H, W]
        return x.contiguous() if self.return_uint8 else x.to(torch.float32).div_(255.0)

    # --- frames -----------------------------------------------------------------------------

    def _frame_reader(self) -> FrameReader:
        if self._reader is None or self._pid != os.getpid():
            if _FORKED and self._pid != os.getpid():
                raise RuntimeError(
                    "this DataLoader worker was started by fork, and Lance (the lake's storage) is not fork-safe: "
                    "pass multiprocessing_context='forkserver' (or 'spawn') to the DataLoader"
                )
            if self._lake is None or self._pid != os.getpid():
                self._lake = self.source.open()  # a Lance handle does not survive fork: reopen per process
                if self._lake.version != self.table.lake_version:
                    self._lake = self._lake.checkout(self.table.lake_version)
            self._reader = self._lake.frames()
            self._pid = os.getpid()
        return self._reader

    def frames_of(self, camera: str, at: Sequence[tuple[int, int]]) -> list[np.ndarray]:
        """uint8 HWC frames of `camera` at (episode_index, frame_index) pairs."""
        ids = self.table.episode_ids
        keys = [(ids[e], camera, f) for e, f in at]
        return self._frame_reader().read_many(keys, self.image_size, exact=self.exact_frames)

    def _sample_frames(self, key: str, at: Sequence[tuple[int, int]]) -> list[np.ndarray]:
        return self.frames_of(self.table.cameras[self.table.camera_keys.index(key)], at)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lake"], state["_reader"] = None, None  # reopened in the worker (spawn pickles the dataset)
        return state


_ROW_KEYS = ("observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index")


class MixtureSampler(torch.utils.data.Sampler[int]):
    """Each epoch's indices of a `LakeLeRobotDataset`: its source's mixture draw (repeats and
    subsamples by weight, `robolake.packers` rules), or every index once; shuffled by (seed, epoch).

    Args:
        dataset: The dataset.
        epoch: The first epoch.
        shuffle: Shuffle the epoch's indices (else ascending).
    """

    def __init__(self, dataset: LakeLeRobotDataset, *, epoch: int = 0, shuffle: bool = True) -> None:
        self.dataset = dataset
        self.epoch = epoch
        self.shuffle = shuffle

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def indices(self) -> np.ndarray:
        ds = self.dataset
        ids = draw_epoch(ds.source, ds.table, epoch=self.epoch)
        if self.shuffle:
            ids = ids[np.random.default_rng([ds.source.seed, 0x4C52, self.epoch]).permutation(ids.size)]
        return ids

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return int(draw_epoch(self.dataset.source, self.dataset.table, epoch=self.epoch).size)


class LakeLeRobotIterable(torch.utils.data.IterableDataset):
    """The same items as `LakeLeRobotDataset`, streamed in block-shuffled order.

    Each epoch's indices (the mixture's draw, or every index) are cut into blocks of
    `block_frames` neighbouring frames; the blocks are shuffled by (seed, epoch), dealt to ranks
    and then to DataLoader workers (block i to rank i mod world_size), read `buffer_blocks` at a
    time in one batched read, and the items of those blocks shuffled before they are yielded.

    Args:
        dataset: The map-style dataset whose items to stream.
        block_frames: Neighbouring frames read together.
        buffer_blocks: Blocks read and shuffled together.
        rank: This process's data-parallel rank (passed in, never read from the environment here).
        world_size: Data-parallel ranks.
    """

    def __init__(
        self,
        dataset: LakeLeRobotDataset,
        *,
        block_frames: int = 32,
        buffer_blocks: int = 8,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if block_frames < 1 or buffer_blocks < 1:
            raise ValueError(f"block_frames and buffer_blocks must be >= 1, got {block_frames} and {buffer_blocks}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        self.dataset = dataset
        self.block_frames = block_frames
        self.buffer_blocks = buffer_blocks
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0

    @property
    def meta(self) -> LakeDatasetMetadata:
        return self.dataset.meta

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def blocks(self, worker: int = 0, num_workers: int = 1) -> list[np.ndarray]:
        """This rank's and worker's blocks of the current epoch, in reading order."""
        ds = self.dataset
        ids = np.sort(draw_epoch(ds.source, ds.table, epoch=self.epoch))
        ep = ds.table.episode_of(ids)
        cuts = np.flatnonzero(np.diff(ep) != 0) + 1  # blocks never span episodes
        blocks = [
            b[i : i + self.block_frames] for b in np.split(ids, cuts) for i in range(0, b.size, self.block_frames)
        ]
        rng = np.random.default_rng([ds.source.seed, 0x49544552, self.epoch])
        order = rng.permutation(len(blocks))
        mine = order[self.rank :: self.world_size][worker::num_workers]
        return [blocks[i] for i in mine]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        blocks = self.blocks(worker, workers)
        rng = np.random.default_rng([self.dataset.source.seed, 0x42554646, self.epoch, self.rank, worker])
        for i in range(0, len(blocks), self.buffer_blocks):
            ids = np.concatenate(blocks[i : i + self.buffer_blocks])
            items = self.dataset.items(ids)
            for j in rng.permutation(len(items)):
                yield items[j]

    def __len__(self) -> int:
        return int(sum(b.size for b in self.blocks()))  # this rank's items, whole epoch
