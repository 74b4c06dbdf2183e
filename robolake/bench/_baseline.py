"""The per-sample baseline: a LeRobot-style loader reading the SOURCE dataset, one sample at a time.

This is the pipeline most teams start with, and what `bench_load` and `bench_e2e` measure
robolake against. For every sample (episode, step t) it does what `LeRobotDataset.__getitem__`
does on a v2.x dataset:

- random access by index into the episode's tabular data (the parquet table is read once per
  worker and kept, as LeRobot memory-maps its Hugging Face dataset), the state at t and the
  action chunk t..t+H-1 gathered from it (past the episode end the last action repeats, and
  the steps inside the episode are counted, exactly as the packer does);
- for every camera, LeRobot's `decode_video_frames_pyav`: open the mp4, seek to the keyframe at
  or before the frame's timestamp, decode forward to the frame, close the file (LeRobot opens
  the file on every call); the frame is resized (PIL bilinear) to the size the model sees, the
  same resize the packed loader applies to its JPEGs;
- state and actions normalised with the lake's statistics (mean/std) and the instruction
  tokenised with the pack spec's tokenizer, so both pipelines hand the model identical samples.

Batches are collated in the workers into the padded layout a dense-attention trainer consumes
(`make_packed_batch(...).to_padded()`, the model's own PaddedBatch), by a torch DataLoader with
2 workers and a seeded shuffle. The `lerobot` package itself is not used: it pins its own torch
(see `bench_load`'s `lerobot_dataset` entry); this module re-implements its read path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, cast

import av
import numpy as np
import pyarrow.parquet as pq
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from robolake.lake import Lake, LeRobotReader, NormStats, SourceError, discover_readers, seek_frame
from robolake.loaders import PackedBatch, PackedShards, PaddedBatch, make_packed_batch
from robolake.packers.lengths import TokenLengthConfig

__all__ = [
    "BaselineSpec",
    "EpisodeFiles",
    "PaddedCollate",
    "PerSampleDataset",
    "baseline_loader",
    "baseline_spec",
    "decode_frame_pyav",
    "keyframe_interval",
    "shard_keys",
    "source_episodes",
]


@dataclass(frozen=True, kw_only=True)
class EpisodeFiles:
    """Where one lake episode's source data lives.

    Attributes:
        data_path: The parquet file holding its steps.
        episode_index: Its index in the source (selects its rows when a file holds several).
        videos: (mp4 path, index of the episode's first frame in that file) per camera, in the
            lake's camera order.
        fps: Frame rate of the videos.
        task: The instruction.
        embodiment: Embodiment tag.
    """

    data_path: str
    episode_index: int
    videos: tuple[tuple[str, int], ...]
    fps: float
    task: str
    embodiment: str


@dataclass(frozen=True, kw_only=True)
class BaselineSpec:
    """What the baseline produces per sample, taken from the pack run it is compared with.

    Attributes:
        image_size: Frames are resized to image_size x image_size.
        horizon: Action chunk length H.
        tokens: The pack spec's token model (tokenizer, tokens per view).
        embodiments: Embodiment tags in id order (the manifest's).
        stats: Normalisation statistics per embodiment tag.
        max_state_dim: Width state is padded to.
        max_action_dim: Width actions are padded to.
    """

    image_size: int
    horizon: int
    tokens: TokenLengthConfig
    embodiments: tuple[str, ...]
    stats: dict[str, NormStats]
    max_state_dim: int
    max_action_dim: int


def source_episodes(src: str, lake: Lake) -> dict[str, EpisodeFiles]:
    """Lake episode id -> its source files (the lake records where each episode came from)."""
    readers = {r.root: r for r in discover_readers(src)}
    refs = {(r.root, ref.episode_index): ref for r in readers.values() for ref in r.discover()}
    cols = ["episode_id", "source_uri", "source_episode_index", "task", "cameras", "embodiment"]
    out: dict[str, EpisodeFiles] = {}
    for e in lake.episodes(columns=cols).to_pylist():
        reader = cast(LeRobotReader, readers[e["source_uri"]])  # the baseline reads LeRobot sources
        ref = refs[(e["source_uri"], e["source_episode_index"])]
        videos = tuple(
            (os.path.join(reader.root, ref.get(f"video:{c}")), round((ref.get(f"from:{c}") or 0.0) * reader.fps))
            for c in e["cameras"]
        )
        out[e["episode_id"]] = EpisodeFiles(
            data_path=os.path.join(reader.root, ref.get("data_path")),
            episode_index=int(e["source_episode_index"]),
            videos=videos,
            fps=float(reader.fps),
            task=e["task"] or "",
            embodiment=e["embodiment"],
        )
    return out


def shard_keys(shards: PackedShards) -> list[tuple[str, int]]:
    """(episode_id, step) of every sample in the packed shards, in shard order."""
    table = shards.dataset().to_table(columns=["episode_id", "step_index"])
    eids = table.column("episode_id").combine_chunks().flatten().to_pylist()
    steps = table.column("step_index").combine_chunks().flatten().to_numpy().tolist()
    return list(zip(eids, steps, strict=True))


def decode_frame_pyav(path: str, index: int, fps: float, size: int) -> np.ndarray:
    """RGB uint8 [size, size, 3] of frame `index`, as LeRobot's `decode_video_frames_pyav` reads it.

    Opens the file, seeks to the keyframe at or before the frame, decodes forward until the
    frame's timestamp (half a frame of tolerance), resizes, and closes the file.

    Raises:
        ValueError: the video has no such frame.
    """
    try:
        frame = seek_frame(path, index, fps)
    except SourceError as e:
        raise ValueError(str(e)) from e
    if frame.shape[:2] != (size, size):
        frame = np.asarray(Image.fromarray(frame).resize((size, size), Image.Resampling.BILINEAR))
    return frame


def keyframe_interval(path: str) -> int:
    """Longest run of frames between keyframes of a video (the most a random seek decodes)."""
    with av.open(path) as container:
        stream = container.streams.video[0]
        flags = [p.is_keyframe for p in container.demux(stream) if p.size]
    starts = [i for i, k in enumerate(flags) if k] + [len(flags)]
    return max(b - a for a, b in zip(starts, starts[1:], strict=False)) if len(starts) > 1 else len(flags)


class PerSampleDataset(Dataset):
    """Map-style dataset: index -> one sample read from the source files (see the module notes)."""

    def __init__(self, episodes: dict[str, EpisodeFiles], keys: list[tuple[str, int]], spec: BaselineSpec) -> None:
        self.episodes = episodes
        self.keys = keys
        self.spec = spec
        self._tables: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def _rows(self, ep: EpisodeFiles) -> tuple[np.ndarray, np.ndarray]:
        """(state [T, S], action [T, A]) of the episode, read once per worker."""
        key = (ep.data_path, ep.episode_index)
        if key not in self._tables:
            cols = ["observation.state", "action"]
            schema_names = pq.read_schema(ep.data_path).names
            table = pq.read_table(
                ep.data_path, columns=[*cols, *(["episode_index"] if "episode_index" in schema_names else [])]
            )
            if "episode_index" in table.column_names:
                mask = table.column("episode_index").to_numpy() == ep.episode_index
                table = table.filter(mask)
            self._tables[key] = tuple(
                np.stack(table[c].to_numpy(zero_copy_only=False)).astype(np.float32) for c in cols
            )  # type: ignore[assignment]
        return self._tables[key]

    def __getitem__(self, i: int) -> dict[str, Any]:
        eid, t = self.keys[i]
        ep = self.episodes[eid]
        spec = self.spec
        frames = [decode_frame_pyav(path, t + first, ep.fps, spec.image_size) for path, first in ep.videos]
        state, action = self._rows(ep)
        chunk = np.minimum(np.arange(t, t + spec.horizon), len(action) - 1)
        norm = spec.stats[ep.embodiment]
        return {
            "key": (eid, t),
            "frames": np.stack(frames) if frames else np.zeros((0, spec.image_size, spec.image_size, 3), np.uint8),
            "state": norm.state.normalize(state[t]),
            "action": norm.action.normalize(action[chunk]),
            "action_valid": min(len(action) - t, spec.horizon),
            "text": spec.tokens.encode_text(ep.task),
            "embodiment_id": spec.embodiments.index(ep.embodiment),
        }


class PaddedCollate:
    """Per-sample dicts -> the padded batch a dense-attention trainer consumes (picklable).

    With `pad=False` the batch is returned as the PackedBatch of the same samples, for a trainer
    that pads it itself (`TrainConfig(layout="padded")` calls `to_padded()` on the host).
    """

    def __init__(self, spec: BaselineSpec, *, pad: bool = True) -> None:
        self.spec = spec
        self.pad = pad

    def __call__(self, items: list[dict[str, Any]]) -> PaddedBatch | PackedBatch:
        spec = self.spec
        batch = make_packed_batch(
            pixels=np.concatenate([x["frames"] for x in items]),
            views_per_sample=[len(x["frames"]) for x in items],
            text_ids=[x["text"] for x in items],
            state=[x["state"] for x in items],
            action=[x["action"] for x in items],
            action_valid_steps=[x["action_valid"] for x in items],
            embodiment_id=[x["embodiment_id"] for x in items],
            tokens_per_view=spec.tokens.tokens_per_view,
            max_state_dim=spec.max_state_dim,
            max_action_dim=spec.max_action_dim,
            sample_keys=tuple(x["key"] for x in items),
        )
        return batch.to_padded() if self.pad else batch


def baseline_spec(
    lake: Lake,
    shards: PackedShards,
    tokens: TokenLengthConfig,
    *,
    image_size: int,
    max_state_dim: int | None = None,
    max_action_dim: int | None = None,
) -> BaselineSpec:
    """The baseline's per-sample settings matching the pack run of `shards` (packed with `tokens`)."""
    manifest = shards.manifest
    return BaselineSpec(
        image_size=image_size,
        horizon=manifest.pack_spec.horizon,
        tokens=tokens,
        embodiments=tuple(manifest.embodiments),
        stats={tag: lake.norm_stats(tag) for tag in manifest.embodiments},
        max_state_dim=max_state_dim or shards.max_state_dim,
        max_action_dim=max_action_dim or shards.max_action_dim,
    )


def baseline_loader(
    dataset: PerSampleDataset, *, batch_size: int, num_workers: int = 2, seed: int = 0, pad: bool = True
) -> DataLoader:
    """A shuffled torch DataLoader over `dataset` (LeRobot's training setup).

    It yields PaddedBatch, or with `pad=False` the PackedBatch of the same samples.
    """
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
        num_workers=num_workers,
        collate_fn=PaddedCollate(dataset.spec, pad=pad),
        multiprocessing_context="forkserver" if num_workers else None,
        prefetch_factor=2 if num_workers else None,
        persistent_workers=num_workers > 0,  # LeRobot's training default: workers start once per run
    )
