"""Reader for LeRobot datasets: layouts v2.0, v2.1 and v3.0, with GR00T's modality.json.

v2.0 / v2.1 keep one parquet and one mp4 per camera per episode, found through the
`data_path` / `video_path` templates of `meta/info.json`; episodes and tasks are listed in
`meta/episodes.jsonl` and `meta/tasks.jsonl` (v2.1 adds `meta/episodes_stats.jsonl`, which
we do not need: the lake computes its own statistics). v3.0 keeps many episodes per parquet and
per mp4: `meta/episodes/chunk-*/file-*.parquet` says, per episode, which data file holds its rows
(`data/chunk_index`, `data/file_index`) and which video file and time range hold its frames
(`videos/<key>/chunk_index`, `videos/<key>/file_index`, `videos/<key>/from_timestamp`,
`videos/<key>/to_timestamp`); tasks are in `meta/tasks.parquet`.

Real datasets have quirks this reader tolerates: timestamps that do not start at 0, no
`frame_index` column, `total_chunks` of 0, and video features listed in info.json that have no
files (GR00T's PickNPlace lists a stale `observation.images.egoview`). When `meta/modality.json`
exists its video mapping decides the cameras; otherwise every video feature with files does.
"""

from __future__ import annotations

import glob
import io
import json
import logging
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    TabularEpisode,
    content_hash,
)
from robolake.lake.sources.video import file_digest, iter_video_frames
from robolake.schemas.embodiment import EmbodimentSpec

__all__ = ["LeRobotReader", "is_lerobot_dataset", "embodiment_tag"]

log = logging.getLogger(__name__)

STATE_KEY = "observation.state"
ACTION_KEY = "action"


def is_lerobot_dataset(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "meta", "info.json"))


def embodiment_tag(robot_type: str, fallback: str) -> str:
    """snake_case tag of a robot_type (`GR1ArmsOnly` -> `gr1_arms_only`)."""
    text = robot_type or fallback
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text)
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "robot"


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class LeRobotReader:
    """Reads one LeRobot dataset directory.

    Args:
        root: Dataset root (holds `meta/info.json`).
        embodiment: Embodiment tag to give its episodes; defaults to its robot_type in snake_case.

    Raises:
        ValueError: the dataset's metadata is missing or of an unsupported version.
    """

    def __init__(self, root: str, *, embodiment: str | None = None):
        self.root = os.path.abspath(root)
        meta = os.path.join(self.root, "meta")
        try:
            with open(os.path.join(meta, "info.json")) as f:
                self.info: dict[str, Any] = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{self.root}: cannot read meta/info.json ({e}); is this a LeRobot dataset?") from e
        version = str(self.info.get("codebase_version", "v2.0"))
        if version not in ("v2.0", "v2.1", "v3.0"):
            raise ValueError(f"{self.root}: LeRobot codebase_version {version!r} is not supported (v2.0, v2.1, v3.0)")
        self.version = version
        self.format_name = f"lerobot-{version}"
        self.fps = float(self.info.get("fps", 0.0))
        if self.fps <= 0:
            raise ValueError(f"{self.root}: meta/info.json has no positive 'fps'")
        modality_path = os.path.join(meta, "modality.json")
        self.modality: dict[str, Any] | None = None
        if os.path.isfile(modality_path):
            with open(modality_path) as f:
                self.modality = json.load(f)
        self.tag = embodiment or embodiment_tag(str(self.info.get("robot_type", "")), os.path.basename(self.root))
        self._tasks = self._load_tasks()
        self._episodes = self._load_episodes()
        self.cameras, self._video_keys = self._resolve_cameras()

    # --- metadata --------------------------------------------------------------------------

    def _load_tasks(self) -> dict[int, str]:
        meta = os.path.join(self.root, "meta")
        if self.version == "v3.0":
            table = pq.read_table(os.path.join(meta, "tasks.parquet"))
            if "task" in table.column_names:
                names = table["task"].to_pylist()
            else:  # the real writer stores the task strings as the pandas index
                index_cols = [c for c in table.column_names if c != "task_index"]
                names = table[index_cols[0]].to_pylist()
            return {int(i): str(t) for i, t in zip(table["task_index"].to_pylist(), names, strict=True)}
        return {int(d["task_index"]): str(d["task"]) for d in _read_jsonl(os.path.join(meta, "tasks.jsonl"))}

    def _load_episodes(self) -> dict[int, dict[str, Any]]:
        meta = os.path.join(self.root, "meta")
        if self.version == "v3.0":
            files = sorted(glob.glob(os.path.join(meta, "episodes", "chunk-*", "file-*.parquet")))
            if not files:
                raise ValueError(f"{self.root}: v3.0 dataset has no meta/episodes/chunk-*/file-*.parquet")
            rows: list[dict[str, Any]] = []
            for path in files:
                rows.extend(pq.read_table(path).to_pylist())
            return {int(r["episode_index"]): r for r in rows}
        return {int(d["episode_index"]): d for d in _read_jsonl(os.path.join(meta, "episodes.jsonl"))}

    def _video_features(self) -> list[str]:
        return [k for k, v in self.info.get("features", {}).items() if v.get("dtype") == "video"]

    def _image_features(self) -> list[str]:
        return [k for k, v in self.info.get("features", {}).items() if v.get("dtype") == "image"]

    def _resolve_cameras(self) -> tuple[tuple[str, ...], dict[str, str]]:
        """Camera name -> source key, from modality.json or from info.json features with files."""
        if self.modality and self.modality.get("video"):
            mapping = {
                name: str(body.get("original_key", name)) if isinstance(body, dict) else name
                for name, body in self.modality["video"].items()
            }
        else:
            mapping = {}
            for key in self._video_features():
                if self._video_key_has_files(key):
                    mapping[key.split(".")[-1]] = key
                else:
                    log.warning("%s: video feature %r has no files; ignoring it", self.root, key)
            for key in self._image_features():
                mapping[key.split(".")[-1]] = key
        return tuple(mapping), mapping

    def _video_key_has_files(self, key: str) -> bool:
        if self.version == "v3.0":
            return bool(glob.glob(os.path.join(self.root, "videos", key, "*", "*")))
        return bool(glob.glob(os.path.join(self.root, "videos", "*", key, "*")))

    def spec(self) -> EmbodimentSpec:
        """The embodiment spec, from modality.json when present, else from info.json widths."""
        features = self.info.get("features", {})
        s_dim = int(np.prod(features.get(STATE_KEY, {}).get("shape", [0])))
        a_dim = int(np.prod(features.get(ACTION_KEY, {}).get("shape", [0])))
        modality = self.modality or {
            "state": {"state": {"start": 0, "end": s_dim}} if s_dim else {},
            "action": {"action": {"start": 0, "end": a_dim}} if a_dim else {},
        }
        modality = {**modality, "video": {c: {"original_key": k} for c, k in self._video_keys.items()}}
        return EmbodimentSpec.from_modality_json(
            modality,
            tag=self.tag,
            state_dim=s_dim or None,
            action_dim=a_dim or None,
            fps=self.fps,
            robot_type=str(self.info.get("robot_type", "")),
        )

    def inspect(self) -> dict[str, Any]:
        """What the dataset holds: features (dtype, shape), cameras, episodes, frames, fps, tasks."""
        feats = self.info.get("features", {})
        lengths = [int(e.get("length", 0)) for e in self._episodes.values()]
        return {
            "format": self.format_name,
            "path": self.root,
            "embodiment": self.tag,
            "episodes": len(self._episodes),
            "fps": self.fps,
            "frames": int(sum(lengths)),
            "duration_s": float(sum(lengths) / self.fps) if self.fps else 0.0,
            "cameras": list(self.cameras),
            "tasks": sorted(set(self._tasks.values()))[:20],
            "keys": {
                k: {"type": str(v.get("dtype", "")), "shape": list(v.get("shape", [])), "count": int(sum(lengths)),
                    "rate_hz": self.fps}
                for k, v in feats.items()
            },
        }

    def discover(self) -> list[EpisodeRef]:
        refs = []
        chunks_size = int(self.info.get("chunks_size", 1000)) or 1000
        for idx in sorted(self._episodes):
            ep = self._episodes[idx]
            if self.version == "v3.0":
                loc: dict[str, Any] = {
                    "data_path": self.info["data_path"].format(
                        chunk_index=int(ep["data/chunk_index"]), file_index=int(ep["data/file_index"])
                    ),
                    "length": int(ep.get("length", -1)),
                }
                for cam, key in self._video_keys.items():
                    if f"videos/{key}/chunk_index" not in ep:
                        continue
                    loc[f"video:{cam}"] = self.info["video_path"].format(
                        video_key=key,
                        chunk_index=int(ep[f"videos/{key}/chunk_index"]),
                        file_index=int(ep[f"videos/{key}/file_index"]),
                    )
                    loc[f"from:{cam}"] = float(ep[f"videos/{key}/from_timestamp"])
                    loc[f"to:{cam}"] = float(ep[f"videos/{key}/to_timestamp"])
            else:
                chunk = idx // chunks_size
                loc = {
                    "data_path": self.info["data_path"].format(episode_chunk=chunk, episode_index=idx),
                    "length": int(ep.get("length", -1)),
                }
                for cam, key in self._video_keys.items():
                    if key in self._video_features():
                        loc[f"video:{cam}"] = self.info["video_path"].format(
                            episode_chunk=chunk, video_key=key, episode_index=idx
                        )
            refs.append(
                EpisodeRef(
                    source_uri=self.root,
                    source_format=self.format_name,
                    episode_index=idx,
                    embodiment=self.tag,
                    location=tuple(sorted(loc.items())),
                )
            )
        return refs

    # --- episode content -----------------------------------------------------------------

    def _read_rows(self, ref: EpisodeRef) -> tuple[pa.Table, str]:
        path = os.path.join(self.root, ref.get("data_path"))
        if not os.path.exists(path):
            raise SourceError("missing_file", path, "episode parquet file is missing; re-export the dataset")
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as e:
            raise SourceError("corrupt_file", path, f"parquet file cannot be read ({e}); it is corrupt or truncated") from e
        if self.version == "v3.0":
            if "episode_index" not in table.column_names:
                raise SourceError("missing_column", path, "v3.0 data file has no 'episode_index' column")
            table = table.filter(pc.equal(table["episode_index"], ref.episode_index))
        return table, path

    @staticmethod
    def _matrix(table: pa.Table, key: str, path: str, expected_width: int | None) -> np.ndarray:
        if key not in table.column_names:
            raise SourceError("missing_column", path, f"column {key!r} is missing; the reader needs it")
        col = table[key].combine_chunks()
        if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type) or pa.types.is_fixed_size_list(col.type)):
            raise SourceError("shape", path, f"column {key!r} has type {col.type}, expected a list of numbers")
        if col.null_count:
            raise SourceError("non_finite", path, f"column {key!r} has {col.null_count} null rows")
        if pa.types.is_fixed_size_list(col.type):
            widths = np.full(len(col), col.type.list_size)
        else:
            widths = np.diff(col.offsets.to_numpy())
        if len(widths) and widths.min() != widths.max():
            raise SourceError("shape", path, f"column {key!r} rows differ in width ({widths.min()}..{widths.max()})")
        width = int(widths[0]) if len(widths) else 0
        if expected_width is not None and width != expected_width:
            raise SourceError(
                "shape", path,
                f"column {key!r} has width {width} but meta/modality.json / info.json say {expected_width}; "
                "fix the metadata or the data",
            )
        values = col.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
        return values.reshape(len(col), width)

    def read_tabular(self, ref: EpisodeRef) -> TabularEpisode:
        """Read and validate an episode's parquet rows; hash its content.

        Raises:
            SourceError: the rows are unreadable, incomplete, non-finite or out of order.
        """
        table, path = self._read_rows(ref)
        if table.num_rows == 0:
            raise SourceError("empty", path, f"episode {ref.episode_index} has no rows")
        spec = self.spec()
        modality_width = self.modality is not None
        state = self._matrix(table, STATE_KEY, path, spec.state_dim if modality_width or spec.state_dim else None)
        action = self._matrix(table, ACTION_KEY, path, spec.action_dim if modality_width or spec.action_dim else None)
        for name, arr in (("observation.state", state), ("action", action)):
            bad = ~np.isfinite(arr)
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise SourceError(
                    "non_finite", path, f"{name} has {int(bad.sum())} NaN/inf values (first at row {row}); clean or drop the episode"
                )
        if "timestamp" in table.column_names:
            ts = table["timestamp"].to_numpy().astype(np.float64)
        elif "frame_index" in table.column_names:
            ts = table["frame_index"].to_numpy().astype(np.float64) / self.fps
        else:
            raise SourceError("missing_column", path, "neither 'timestamp' nor 'frame_index' is present")
        if not np.all(np.isfinite(ts)):
            raise SourceError("timestamps", path, "timestamps contain NaN/inf")
        steps = np.diff(ts)
        if len(steps) and steps.min() <= 0:
            row = int(np.argmin(steps)) + 1
            raise SourceError(
                "timestamps", path,
                f"timestamps are not strictly increasing (row {row}: {ts[row - 1]:.4f} -> {ts[row]:.4f}); "
                "re-sort the rows or fix the recorder clock",
            )
        expected_len = int(ref.get("length", -1))
        if expected_len >= 0 and expected_len != table.num_rows:
            raise SourceError(
                "frame_count", path,
                f"episode {ref.episode_index} has {table.num_rows} rows but the episode metadata says {expected_len}",
            )
        task_ids = table["task_index"].to_numpy().astype(np.int64) if "task_index" in table.column_names else np.zeros(len(ts), np.int64)
        unique = sorted(set(task_ids.tolist()))
        tasks = tuple(self._tasks.get(t, "") for t in unique)
        local = np.searchsorted(np.asarray(unique), task_ids).astype(np.int32)
        success = None
        for key in ("next.success", "success"):
            if key in table.column_names:
                success = bool(table[key][-1].as_py())
                break
        digests = tuple(
            f"{cam}:{file_digest(os.path.join(self.root, ref.get(f'video:{cam}')))}:{ref.get(f'from:{cam}')}:{ref.get(f'to:{cam}')}"
            for cam in self.cameras
            if ref.get(f"video:{cam}") is not None
        )
        return TabularEpisode(
            ref=ref,
            state=state.astype(np.float32),
            action=action.astype(np.float32),
            timestamps=ts,
            task_index=local,
            tasks=tasks,
            success=success,
            fps=self.fps,
            content_hash=content_hash(
                state=state, action=action, timestamps=ts, tasks=tasks, task_index=local, media_digests=digests
            ),
            metadata={"data_path": ref.get("data_path"), "tasks": list(tasks), "source_version": self.version},
        )

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Decode each camera's frames of the episode and encode them per frame.

        Raises:
            SourceError: a video is missing, undecodable, or holds a different number of frames
                than the episode has rows.
        """
        ref = episode.ref
        n = episode.num_steps
        for cam in self.cameras:
            key = self._video_keys[cam]
            rel = ref.get(f"video:{cam}")
            if rel is None and key in self._image_features():
                yield self._image_column_frames(episode, cam, key)
                continue
            if rel is None:
                raise SourceError("missing_video", ref.source_uri, f"episode {ref.episode_index} has no video for camera {cam!r}")
            path = os.path.join(self.root, rel)
            images: list[bytes] = []
            size = (0, 0)
            for _, img, height, width in iter_video_frames(path, start_s=ref.get(f"from:{cam}"), end_s=ref.get(f"to:{cam}"), fps=self.fps):
                images.append(img)  # type: ignore[arg-type]
                size = (height, width)
                if len(images) > n:
                    break
            if len(images) != n:
                raise SourceError(
                    "frame_count", path,
                    f"camera {cam!r} has {'more than ' if len(images) > n else ''}{len(images)} frames for "
                    f"episode {ref.episode_index} but the episode has {n} rows; the video is short, long or truncated",
                )
            yield EncodedFrames(camera=cam, images=tuple(images), encoding="jpeg", height=size[0], width=size[1])

    def _image_column_frames(self, episode: TabularEpisode, cam: str, key: str) -> EncodedFrames:
        table, path = self._read_rows(episode.ref)
        if key not in table.column_names:
            raise SourceError("missing_column", path, f"image column {key!r} is missing")


        images = []
        for cell in table[key].to_pylist():
            data = cell.get("bytes") if isinstance(cell, dict) else cell
            if not data:
                raise SourceError("missing_video", path, f"image column {key!r} has an empty cell")
            images.append(bytes(data))
        with Image.open(io.BytesIO(images[0])) as im:
            fmt, (w, h) = (im.format or "PNG").lower(), im.size
        return EncodedFrames(camera=cam, images=tuple(images), encoding=fmt, height=h, width=w)
