"""Reader for RLDS / Open-X Embodiment datasets: TFDS directories of TFRecord shards, no TensorFlow.

A prepared TFDS dataset is a directory holding `dataset_info.json` (name, splits, shard lengths),
`features.json` (the feature tree) and shards named `<name>-<split>.tfrecord-XXXXX-of-YYYYY`.
RLDS stores one episode per record, as a `tf.train.Example` whose keys are the feature tree
flattened with `/`: the per-step features under `steps/` hold the values of every step
concatenated (`steps/action` is a FloatList of T x 7 values, `steps/observation/image` a BytesList
of T encoded images, `steps/is_first` an Int64List of T booleans), and `episode_metadata/*` holds
per-episode values. Shapes and dtypes come from `features.json`.

Defaults, so that Open-X datasets need no mapping: the state is `steps/observation/state` when
present, otherwise every numeric observation tensor in name order; the action is `steps/action`
(a dict of tensors, as in RT-1, is concatenated in name order); every Image feature under
`steps/observation` is a camera, its JPEG/PNG bytes passed through unchanged; the instruction is
`steps/language_instruction` (or `steps/observation/natural_language_instruction`); the split
(`train`, `val`, ...) is kept in the episode metadata. RLDS records no clock: steps are ticks at
the mapping's `fps` (10 Hz, the common Open-X control rate, when none is given; the episode
metadata says it was assumed). A mapping's sources are flattened feature keys.

Discovery lists records by reading only the 12-byte record headers of each shard; the episode
content is read on the workers. A record with several `is_first` steps is quarantined rather than
split, since RLDS defines one episode per record and such a record was written wrongly.

Beside the steps, each episode keeps its record (`rlds.record`): every feature, in the dtype
features.json declares (`is_first` stays bool), images as the cameras' frame times only.
`inspect` reads one record, so its counts are the first episode's (`counts_of` says so).
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

from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    TabularEpisode,
    content_hash,
)
from robolake.lake.sources.columnar import ColumnRecord
from robolake.lake.sources.mapping import check_sources
from robolake.lake.sources.record import record_notes
from robolake.lake.sources.registry import SourceFormat, SourceOptions
from robolake.lake.sources.resample import Stream, check_frame_sizes, check_stream
from robolake.lake.sources.rlds.record import record_example
from robolake.lake.sources.rlds.tfrecord import parse_example, read_record, scan_records
from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec

__all__ = ["RLDSReader", "is_tfds_directory", "flatten_features", "FORMAT"]

log = logging.getLogger(__name__)

DEFAULT_FPS = 10.0
_SHARD = re.compile(r"^(?P<name>.+)-(?P<split>[^-]+)\.tfrecord(-\d+-of-\d+)?$")
_TASK_KEYS = (
    "steps/language_instruction",
    "steps/observation/natural_language_instruction",
    "steps/observation/language_instruction",
)


def _shards(path: str) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(path, "*.tfrecord*")) if _SHARD.match(os.path.basename(p)))


def is_tfds_directory(path: str) -> bool:
    return (
        os.path.isdir(path)
        and os.path.isfile(os.path.join(path, "dataset_info.json"))
        and os.path.isfile(os.path.join(path, "features.json"))
        and bool(_shards(path))
    )


def flatten_features(node: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """features.json tree ->
    {"steps/observation/image": {"kind": "image"|"tensor"|"text", "shape", "dtype", "encoding"}}."""
    out: dict[str, dict[str, Any]] = {}
    if "featuresDict" in node:
        for name, child in node["featuresDict"].get("features", {}).items():
            out.update(flatten_features(child, f"{prefix}{name}/"))
        return out
    if "sequence" in node:
        return flatten_features(node["sequence"].get("feature", {}), prefix)
    key = prefix.rstrip("/")
    cls = str(node.get("pythonClassName", ""))
    if "image" in node:
        body = node["image"]
        out[key] = {
            "kind": "image",
            "shape": [int(d) for d in body.get("shape", {}).get("dimensions", [])],
            "dtype": body.get("dtype", "uint8"),
            "encoding": body.get("encodingFormat", "png"),
        }
    elif "text" in node or cls.endswith("Text"):
        out[key] = {"kind": "text", "shape": [], "dtype": "string"}
    elif "tensor" in node:
        body = node["tensor"]
        out[key] = {
            "kind": "tensor",
            "shape": [int(d) for d in body.get("shape", {}).get("dimensions", [])],
            "dtype": body.get("dtype", "float32"),
            "encoding": body.get("encoding", "none"),
        }
    else:
        out[key] = {"kind": "unknown", "shape": [], "dtype": "", "class": cls}
    return out


def _tag(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "robot"


def _numeric(f: dict[str, Any]) -> bool:
    return f["kind"] == "tensor" and f["dtype"] != "string" and f.get("encoding", "none") == "none"


def _width(f: dict[str, Any]) -> int:
    return int(np.prod(f["shape"])) if f["shape"] else 1


class RLDSReader:
    """Reads one TFDS/RLDS dataset directory.

    Args:
        path: The directory (holds dataset_info.json, features.json, *.tfrecord-*).
        options: Embodiment tag, mapping, state-only choice.

    Raises:
        ValueError: metadata unreadable, or no state/action features found (write a mapping).
        SourceError: a mapping names a feature the dataset lacks.
    """

    def __init__(self, path: str, options: SourceOptions | None = None):
        self.root = os.path.abspath(path)
        self.options = options or SourceOptions()
        try:
            with open(os.path.join(self.root, "dataset_info.json")) as f:
                self.info: dict[str, Any] = json.load(f)
            with open(os.path.join(self.root, "features.json")) as f:
                self.features = flatten_features(json.load(f))
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{self.root}: cannot read dataset_info.json / features.json ({e})") from e
        self.name = str(self.info.get("name") or os.path.basename(os.path.dirname(self.root)) or "rlds")
        self.format_name = "rlds"
        steps = {k: v for k, v in self.features.items() if k.startswith("steps/")}
        m = self.options.mapping
        if m is not None:
            check_sources(m, self.features, self.root)
            self.state_keys = tuple(s.source.strip("/") for s in m.state)
            self.action_keys = tuple(s.source.strip("/") for s in m.action)
            self._cams = {c.name: c.source.strip("/") for c in m.cameras}
            self.task_key = m.task_from.strip("/") if m.task_from else None
            self.fixed_task = m.task
            self.fps = m.fps or DEFAULT_FPS
            self.action_from_state = m.action_from_state
            self.fps_assumed = m.fps is None
        else:
            if "steps/observation/state" in steps:
                self.state_keys = ("steps/observation/state",)
            else:
                self.state_keys = tuple(
                    k for k in sorted(steps) if k.startswith("steps/observation/") and _numeric(steps[k])
                )
            if "steps/action" in steps:
                self.action_keys = ("steps/action",)
            else:
                self.action_keys = tuple(
                    k for k in sorted(steps) if k.startswith("steps/action/") and _numeric(steps[k])
                )
            self._cams = {
                k.rsplit("/", 1)[-1]: k
                for k in sorted(steps)
                if k.startswith("steps/observation/") and steps[k]["kind"] == "image"
            }
            self.task_key = next((k for k in _TASK_KEYS if k in steps), None)
            self.fixed_task = None
            self.fps = DEFAULT_FPS
            self.action_from_state = False
            self.fps_assumed = True
            if not self.state_keys or not self.action_keys:
                raise ValueError(
                    f"{self.root}: no state/action features found (steps/observation/state, steps/action); "
                    f"it has {', '.join(sorted(steps)[:20])}; "
                    f"write a mapping (`robolake inspect {self.root}`) and pass --map"
                )
        self.tag = self.options.embodiment or (m.embodiment if m and m.embodiment else _tag(self.name))
        self.cameras = tuple(self._cams)
        self.shards = _shards(self.root)

    def _widths(self, keys: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(_width(self.features[k]) if k in self.features else 1 for k in keys)

    def spec(self) -> EmbodimentSpec:
        def slices(keys: tuple[str, ...]) -> tuple[SliceSpec, ...]:
            out, start = [], 0
            for k, w in zip(keys, self._widths(keys), strict=True):
                out.append(SliceSpec(name=k.rsplit("/", 1)[-1], start=start, end=start + w))
                start += w
            return tuple(out)

        akeys = self.state_keys if self.action_from_state else self.action_keys
        return EmbodimentSpec(
            tag=self.tag,
            state_dim=sum(self._widths(self.state_keys)),
            action_dim=sum(self._widths(akeys)),
            state=slices(self.state_keys),
            action=slices(akeys),
            cameras=self.cameras,
            video_keys=tuple(self._cams.items()),
            fps=self.fps,
            robot_type=self.name,
        )

    def discover(self) -> list[EpisodeRef]:
        refs = []
        index = 0
        for shard in self.shards:
            m = _SHARD.match(os.path.basename(shard))
            split = m.group("split") if m else ""
            for offset, _ in scan_records(shard):
                refs.append(
                    EpisodeRef(
                        source_uri=self.root,
                        source_format=self.format_name,
                        episode_index=index,
                        embodiment=self.tag,
                        location=(("file", os.path.basename(shard)), ("offset", offset), ("split", split)),
                    )
                )
                index += 1
        return refs

    def _example(self, ref: EpisodeRef) -> tuple[dict[str, Any], str]:
        path = os.path.join(self.root, ref.get("file"))
        data = read_record(path, int(ref.get("offset")), self.options.limits)
        try:
            return parse_example(data), path
        except ValueError as e:
            raise SourceError(
                "corrupt_file", path, f"record at byte {ref.get('offset')} is not a tf.train.Example ({e})"
            ) from e

    def _steps(self, ex: dict[str, Any], path: str) -> int:
        for key in ("steps/is_first", "steps/is_last", *self.state_keys):
            if key in ex:
                n = len(ex[key]) // (1 if key.endswith(("is_first", "is_last")) else _width(self.features[key]))
                return int(n)
        raise SourceError("missing_key", path, f"record has none of steps/is_first, {', '.join(self.state_keys)}")

    def _matrix(self, ex: dict[str, Any], key: str, n: int, path: str, offset: int) -> np.ndarray:
        if key not in ex:
            raise SourceError(
                "missing_key",
                path,
                f"record at byte {offset} has no feature {key!r}; it has {', '.join(sorted(ex)[:20])}; "
                "fix the mapping or the dataset",
            )
        v = np.asarray(ex[key], dtype=np.float64)
        if n == 0 or v.size % n:
            raise SourceError("shape", path, f"feature {key!r} holds {v.size} values, not a multiple of its {n} steps")
        w = v.size // n
        want = _width(self.features[key]) if key in self.features else w
        if w != want:
            raise SourceError("shape", path, f"feature {key!r} has {w} values per step but features.json says {want}")
        return v.reshape(n, w)

    reads_record = True  # read_tabular(ref, record=False) leaves the record out

    def read_tabular(self, ref: EpisodeRef, *, record: bool = True) -> TabularEpisode:
        """Read and check one episode record; keep every feature in the episode's record
        (`rlds.record`), unless `record=False` (ingest's first pass, which only decides the
        content hash).

        Raises:
            SourceError: truncated or corrupt record, missing feature, widths off, NaN/inf,
                several episodes in one record.
        """
        ex, path = self._example(ref)
        offset = int(ref.get("offset"))
        n = self._steps(ex, path)
        if n == 0:
            raise SourceError("empty", path, f"record at byte {offset} has no steps")
        if "steps/is_first" in ex:
            firsts = np.flatnonzero(np.asarray(ex["steps/is_first"]).astype(bool))
            if len(firsts) > 1:
                raise SourceError(
                    "shape",
                    path,
                    f"record at byte {offset} holds {len(firsts)} episodes (is_first at steps {firsts.tolist()[:5]}); "
                    "RLDS keeps one per record",
                )
        ts = np.arange(n, dtype=np.float64) / self.fps
        state = np.concatenate(
            [self._checked(self._matrix(ex, k, n, path, offset), k, ts, path) for k in self.state_keys], axis=1
        )
        if self.action_from_state:
            action = np.concatenate([state[1:], state[-1:]])
        else:
            action = np.concatenate(
                [self._checked(self._matrix(ex, k, n, path, offset), k, ts, path) for k in self.action_keys], axis=1
            )
        if self.fixed_task is not None:
            texts = [self.fixed_task]
        elif self.task_key and self.task_key in ex:
            texts = [b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b) for b in ex[self.task_key]]
        else:
            texts = [""]
        tasks = tuple(dict.fromkeys(texts))
        task_index = (
            np.asarray([tasks.index(t) for t in texts], dtype=np.int32) if len(texts) == n else np.zeros(n, np.int32)
        )
        success = None
        if "steps/reward" in ex and len(ex["steps/reward"]) == n:
            success = bool(np.asarray(ex["steps/reward"])[-1] > 0)
        digests = tuple(f"{c}:{len(ex.get(k, []))}:{hash_bytes(ex.get(k, []))}" for c, k in self._cams.items())
        metadata: dict[str, Any] = {
            "file": ref.get("file"),
            "offset": offset,
            "split": ref.get("split"),
            "dataset": self.name,
            "tasks": list(tasks),
        }
        if self.fps_assumed:
            metadata["fps_assumed"] = self.fps
        if self.action_from_state:
            metadata["action_from_state"] = True
        for k, v in ex.items():
            if k.startswith("episode_metadata/") and isinstance(v, list) and len(v) == 1:
                metadata[k] = v[0].decode("utf-8", "replace")
        built = None
        if record:
            into = ColumnRecord(path=path, budget=self.options.limits.max_read_bytes, streams=self.options.streams)
            record_example(
                ex,
                self.features,
                into,
                steps=n,
                fps=self.fps,
                cameras=self._cams,
                mapped=(*self.state_keys, *self.action_keys, *((self.task_key,) if self.task_key else ())),
            )
            built = into.build()
            metadata["record"] = into.metadata(built)
            notes = record_notes(built, path)
            if notes:
                metadata["notes"] = notes
        return TabularEpisode(
            ref=ref,
            state=state.astype(np.float32),
            action=action.astype(np.float32),
            timestamps=ts,
            task_index=task_index,
            tasks=tasks,
            success=success,
            fps=self.fps,
            content_hash=content_hash(
                state=state, action=action, timestamps=ts, tasks=tasks, task_index=task_index, media_digests=digests
            ),
            metadata=metadata,
            record=built,
        )

    @staticmethod
    def _checked(values: np.ndarray, key: str, ts: np.ndarray, path: str) -> np.ndarray:
        check_stream(Stream(name=key, t=ts, values=values, path=path))
        return values

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Each camera's encoded images, unchanged.

        Raises:
            SourceError: a camera is missing (unless --state-only), holds the wrong number of
                images, or its image size changes.
        """
        from PIL import Image

        ex, path = self._example(episode.ref)
        n = episode.num_steps
        for cam, key in self._cams.items():
            images = ex.get(key)
            if not isinstance(images, list) or not images:
                if self.options.state_only:
                    continue
                raise SourceError(
                    "missing_video",
                    path,
                    f"record at byte {episode.ref.get('offset')} has no images for camera {cam!r} ({key}); "
                    "pass --state-only to ingest without it",
                )
            if len(images) != n:
                raise SourceError("frame_count", path, f"camera {cam!r} ({key}) has {len(images)} images for {n} steps")
            sizes, fmt = [], set()
            for data in images:
                try:
                    with Image.open(io.BytesIO(data)) as im:
                        sizes.append((im.height, im.width))
                        fmt.add((im.format or "").lower())
                except Exception as e:
                    raise SourceError(
                        "corrupt_video", path, f"camera {cam!r} ({key}) holds bytes that are not an image ({e})"
                    ) from e
            h, w = check_frame_sizes(sizes, f"{cam} ({key})", path)
            enc = fmt.pop() if len(fmt) == 1 else "png"
            if enc not in ("jpeg", "png"):
                raise SourceError(
                    "corrupt_video", path, f"camera {cam!r} holds {enc} images; only JPEG and PNG pass through"
                )
            yield EncodedFrames(camera=cam, images=tuple(images), encoding=enc, height=h, width=w)

    def inspect(self) -> dict[str, Any]:
        """Features (kind, dtype, shape, steps), splits and episode counts, from metadata and one record."""
        refs = self.discover()
        sample: dict[str, Any] = {}
        steps = 0
        if refs:
            try:
                sample, path = self._example(refs[0])
                steps = self._steps(sample, path)
            except SourceError as e:
                log.warning("%s", e)
        keys = {
            k: {
                "type": f"{f['kind']}:{f['dtype']}",
                "shape": f["shape"],
                "count": (
                    len(sample[k])
                    if isinstance(sample.get(k), list)
                    else (int(np.asarray(sample[k]).size) // max(_width(f), 1) if k in sample else 0)
                ),
                "rate_hz": self.fps if k.startswith("steps/") else None,
            }
            for k, f in self.features.items()
        }
        splits = {}
        for s in self.info.get("splits", []):
            splits[str(s.get("name"))] = int(sum(int(x) for x in s.get("shardLengths", []) or [0]))
        return {
            "format": self.format_name,
            "path": self.root,
            "embodiment": self.tag,
            "dataset": self.name,
            "episodes": len(refs),
            "shards": len(self.shards),
            "fps": self.fps,
            "fps_assumed": self.fps_assumed,
            "first_episode_steps": steps,
            "counts_of": "the first episode (a key's count is its steps or values there)",
            "cameras": list(self.cameras),
            "state": list(self.state_keys),
            "action": list(self.action_keys),
            "task": self.task_key,
            "splits": splits,
            "keys": keys,
        }


def hash_bytes(items: list[bytes]) -> str:
    import hashlib

    h = hashlib.sha256()
    for b in items:
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()[:32]


def _open_rlds(path: str, options: SourceOptions) -> RLDSReader:
    return RLDSReader(path, options)


FORMAT = SourceFormat(
    name="rlds",
    description="RLDS / Open-X TFDS directory (dataset_info.json, features.json, *.tfrecord-*)",
    detect=is_tfds_directory,
    open=_open_rlds,
    unit="directory",
)
