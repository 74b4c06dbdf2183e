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
files (GR00T's PickNPlace lists a stale `observation.images.egoview`): when `meta/modality.json`
exists its video mapping decides the cameras, and features it does not name are not cameras.
Without a modality.json every video and image feature of info.json is a camera.

What it does not tolerate, and why. Every problem is confined to the dataset or the episode it
belongs to, so one bad dataset never blocks the others beside it, and every problem is said in
a sentence that names the file and the field:

- *Dataset metadata* that cannot be trusted (info.json missing, not JSON, not an object, an
  unknown `codebase_version`, `fps` missing/null/0, a missing or malformed `data_path`, missing
  `episodes.jsonl` / `tasks.jsonl`, an invalid `modality.json`): the constructor raises one
  `SourceError("bad_metadata", ...)` carrying the episodes the dataset declares when they can
  be read, and ingest quarantines each of them (or the dataset as one row). A directory that
  holds LeRobot data (`data/chunk-*`, `meta/episodes.jsonl`, ...) but no `meta/info.json` is
  detected as a LeRobot dataset precisely so that it is reported this way and not skipped.
- *Listing problems* are per episode: an `episode_index` listed twice with different content
  (`duplicate_index`; listed twice identically: read once, with a note), and data files on disk
  that the episode metadata does not list (`unlisted`). Unlisted files are quarantined, not
  ingested: the lake holds what the dataset's metadata vouches for, and a file it no longer
  lists is as likely a removed bad take as a forgotten good one. The quarantine row says how to
  list it.
- *Content problems* are per episode, at read time: a `task_index` with no task in the task
  table (`unknown_task`, never an empty instruction), frames whose size is not the size info.json
  declares or that change size mid-episode (`frame_size`: frames of one camera must never mix
  sizes in the lake), and the checks on values, timestamps and frame counts.
- *Declared cameras without videos* quarantine the episode (`missing_video`) in every layout;
  with `state_only` the reader takes state and action alone and leaves such cameras out.
"""

from __future__ import annotations

import glob
import io
import json
import logging
import math
import os
import re
import string
from collections.abc import Iterator
from typing import Any, TypeGuard

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from robolake.lake.media import VIDEO_FRAME_LAYOUTS, KeyframeEncoder, encode_frame
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
VERSIONS = ("v2.0", "v2.1", "v3.0")
# The placeholders each layout fills in its path templates, and LeRobot's own templates.
_TEMPLATE_KEYS = {
    ("v2", "data_path"): ("episode_chunk", "episode_index"),
    ("v2", "video_path"): ("episode_chunk", "video_key", "episode_index"),
    ("v3", "data_path"): ("chunk_index", "file_index"),
    ("v3", "video_path"): ("video_key", "chunk_index", "file_index"),
}
_TEMPLATE_EXAMPLES = {
    ("v2", "data_path"): "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
    ("v2", "video_path"): "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
    ("v3", "data_path"): "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
    ("v3", "video_path"): "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
}
# Files and folders only a LeRobot dataset has; one of them without meta/info.json is a broken dataset.
_SIGNS = ("meta/episodes.jsonl", "meta/tasks.jsonl", "meta/tasks.parquet", "meta/episodes", "meta/modality.json")


def is_lerobot_dataset(path: str) -> bool:
    """Whether `path` is a LeRobot dataset directory, complete or not.

    A directory with `meta/info.json` is one; so is a directory with LeRobot's other metadata or
    its `data/chunk-*` folders but no info.json, which the reader then reports as broken instead
    of discovery walking into it and skipping its files.
    """
    if not os.path.isdir(path):
        return False
    if os.path.isfile(os.path.join(path, "meta", "info.json")):
        return True
    if any(os.path.exists(os.path.join(path, *s.split("/"))) for s in _SIGNS):
        return True
    return bool(glob.glob(os.path.join(glob.escape(path), "data", "chunk-*", "*.parquet")))


def embodiment_tag(robot_type: str, fallback: str) -> str:
    """snake_case tag of a robot_type (`GR1ArmsOnly` -> `gr1_arms_only`)."""
    text = robot_type or fallback
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text)
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "robot"


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _template_pattern(template: str) -> tuple[str, re.Pattern[str]]:
    """The glob pattern and the regex of a path template, e.g. `episode_{episode_index:06d}.parquet`
    -> `episode_*.parquet` and `episode_(?P<episode_index>[^/]+)\\.parquet`."""
    globs: list[str] = []
    rx: list[str] = []
    seen: set[str] = set()
    for literal, name, _, _ in string.Formatter().parse(template):
        globs.append(glob.escape(literal))
        rx.append(re.escape(literal))
        if name is not None:
            globs.append("*")
            rx.append(f"(?P={name})" if name in seen else f"(?P<{name}>[^/]+)")
            seen.add(name)
    return "".join(globs), re.compile("".join(rx) + r"\Z")


class LeRobotReader:
    """Reads one LeRobot dataset directory.

    Args:
        root: Dataset root (holds `meta/info.json`).
        embodiment: Embodiment tag to give its episodes; defaults to its robot_type in snake_case.
        state_only: Take state and action alone where declared videos are missing, instead of
            quarantining the episodes.
        video_frames: How frames decoded from the videos are stored: `jpeg` (one image a frame)
            or `h264` (key-referenced, no bigger than the source); see `lake.media`.

    Attributes:
        notes: Things a user should hear about that are not errors (cameras left out under
            `state_only`, an episode listed twice identically); ingest prints them.

    Raises:
        SourceError: `bad_metadata`: the dataset's metadata is missing, malformed or of an
            unsupported version; the error names the file and the field, and lists the episodes
            the dataset declares when they can be read.
    """

    def __init__(self, root: str, *, embodiment: str | None = None, state_only: bool = False, video_frames: str = "jpeg"):
        if video_frames not in VIDEO_FRAME_LAYOUTS:
            raise ValueError(f"video_frames must be one of {VIDEO_FRAME_LAYOUTS}, got {video_frames!r}")
        self.root = os.path.abspath(root)
        self.state_only = state_only
        self.video_frames = video_frames
        self.notes: list[str] = []
        self._episodes: dict[int, dict[str, Any]] = {}
        self._episodes_loaded = False
        self.info = self._load_info()
        self.version = self._version()
        self.format_name = f"lerobot-{self.version}"
        self._layout = "v3" if self.version == "v3.0" else "v2"
        self.fps = self._fps()
        self._features = self._check_features()
        self._chunks_size = self._check_chunks_size()
        self._check_template("data_path")
        self.modality = self._load_modality()
        self.tag = embodiment or embodiment_tag(str(self.info.get("robot_type") or ""), os.path.basename(self.root))
        self._duplicates: dict[int, str] = {}
        self._episodes = self._load_episodes()
        self._episodes_loaded = True
        self._tasks = self._load_tasks()
        self.cameras, self._video_keys = self._resolve_cameras()
        self._spec = self._build_spec()

    # --- dataset metadata ------------------------------------------------------------------

    def _bad(self, rel: str, message: str) -> SourceError:
        """A dataset-level error about file `rel` (relative to the root)."""
        return SourceError("bad_metadata", os.path.join(self.root, rel), f"{rel}: {message}", episodes=self._known_episodes())

    def _known_episodes(self) -> tuple[int, ...]:
        """Episodes the dataset declares, as far as they can be read (best effort, never raises)."""
        if self._episodes_loaded:
            return tuple(sorted(self._episodes))
        meta = os.path.join(self.root, "meta")
        found: set[int] = set()
        try:
            if os.path.isfile(os.path.join(meta, "episodes.jsonl")):
                with open(os.path.join(meta, "episodes.jsonl"), encoding="utf-8") as f:
                    for line in f:
                        if not line.strip():
                            continue
                        d = json.loads(line)  # a broken line: the list is unknown, not shorter
                        if not isinstance(d, dict) or not _is_int(d.get("episode_index")):
                            return ()
                        found.add(int(d["episode_index"]))
            else:
                for path in sorted(glob.glob(os.path.join(glob.escape(meta), "episodes", "chunk-*", "file-*.parquet"))):
                    found.update(int(i) for i in pq.read_table(path, columns=["episode_index"])["episode_index"].to_pylist())
        except Exception:  # best effort: a dataset whose episode list is unreadable gets one row
            return ()
        return tuple(sorted(found))

    def _load_info(self) -> dict[str, Any]:
        rel = "meta/info.json"
        path = os.path.join(self.root, rel)
        if not os.path.isfile(path):
            raise self._bad(rel, "is missing: the directory holds LeRobot data but no info.json, so the export is "
                                 "unfinished or was copied in part; re-export or re-download the dataset")
        try:
            with open(path, encoding="utf-8") as f:
                info = json.load(f)
        except json.JSONDecodeError as e:
            raise self._bad(rel, f"is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
                                 "fix the file or re-export the dataset") from None
        except (OSError, UnicodeDecodeError) as e:
            raise self._bad(rel, f"cannot be read ({e}); check its permissions or re-download it") from None
        if not isinstance(info, dict):
            raise self._bad(rel, f"holds {_kind(info)}, expected an object with codebase_version, fps, data_path "
                                 "and features; re-export the dataset")
        return info

    def _version(self) -> str:
        version = self.info.get("codebase_version")
        if version is None:
            # Older exports omit it; the layout on disk says which it is.
            has_v3 = os.path.isdir(os.path.join(self.root, "meta", "episodes"))
            has_v2 = os.path.isfile(os.path.join(self.root, "meta", "episodes.jsonl"))
            return "v3.0" if has_v3 and not has_v2 else "v2.0"
        if version not in VERSIONS:
            raise self._bad("meta/info.json", f"codebase_version is {version!r}; robolake reads LeRobot "
                                              f"{', '.join(VERSIONS)}: convert the dataset with LeRobot's converter")
        return str(version)

    def _fps(self) -> float:
        fps = self.info.get("fps")
        fix = "set fps to the recording rate (frames per second, e.g. 30)"
        if "fps" not in self.info:
            raise self._bad("meta/info.json", f"fps is missing; {fix}")
        if fps is None:
            raise self._bad("meta/info.json", f"fps is null; {fix}")
        if isinstance(fps, bool) or not isinstance(fps, (int, float)):
            raise self._bad("meta/info.json", f"fps is {fps!r} ({_kind(fps)}), not a number; {fix}")
        if not math.isfinite(fps) or fps <= 0:
            raise self._bad("meta/info.json", f"fps is {fps!r}; {fix}")
        return float(fps)

    def _check_features(self) -> dict[str, dict[str, Any]]:
        features = self.info.get("features")
        if not isinstance(features, dict):
            raise self._bad("meta/info.json", f"features is {'missing' if features is None else _kind(features)}; "
                                              "it must map each column to {dtype, shape}: re-export the dataset")
        for key, body in features.items():
            if not isinstance(body, dict):
                raise self._bad("meta/info.json", f"features[{key!r}] is {_kind(body)}, expected an object with dtype and shape")
        for key in (STATE_KEY, ACTION_KEY):
            shape = features.get(key, {}).get("shape") if key in features else None
            if key not in features:
                raise self._bad("meta/info.json", f"features has no {key!r}; robolake needs the {key} vector "
                                                  "(a list of floats per row) and its shape")
            if not isinstance(shape, list) or not shape or not all(_is_int(s) and s > 0 for s in shape):
                raise self._bad("meta/info.json", f"features[{key!r}].shape is {shape!r}; give the vector width, e.g. [7]")
        return features

    def _check_chunks_size(self) -> int:
        size = self.info.get("chunks_size", 1000)
        if not _is_int(size) or size < 0:
            raise self._bad("meta/info.json", f"chunks_size is {size!r}; it must be a positive integer (LeRobot writes 1000)")
        return int(size) or 1000

    def _check_template(self, key: str) -> str:
        """The `data_path` / `video_path` template, checked to fill with this layout's placeholders."""
        example = _TEMPLATE_EXAMPLES[(self._layout, key)]
        names = _TEMPLATE_KEYS[(self._layout, key)]
        template = self.info.get(key)
        if template is None:
            raise self._bad("meta/info.json", f"{key} is {'null' if key in self.info else 'missing'}; "
                                              f"for LeRobot {self.version} it is e.g. {example!r}")
        if not isinstance(template, str):
            raise self._bad("meta/info.json", f"{key} is {_kind(template)}, expected a path template like {example!r}")
        sample = {n: ("observation.images.x" if n == "video_key" else 0) for n in names}
        try:
            first = template.format(**sample)
            moved = template.format(**{n: v if n == "video_key" else 1 for n, v in sample.items()})
        except KeyError as e:
            raise self._bad("meta/info.json", f"{key} {template!r} uses the placeholder {{{e.args[0]}}}, which LeRobot "
                                              f"{self.version} does not fill; use {', '.join('{' + n + '}' for n in names)}") from None
        except (IndexError, ValueError) as e:
            raise self._bad("meta/info.json", f"{key} {template!r} is not a valid path template ({e}); use e.g. {example!r}") from None
        if first == moved:
            raise self._bad("meta/info.json", f"{key} {template!r} gives every episode the same file; it needs "
                                              f"{{{names[-1]}}}, e.g. {example!r}")
        return template

    def _load_modality(self) -> dict[str, Any] | None:
        rel = "meta/modality.json"
        path = os.path.join(self.root, rel)
        if not os.path.isfile(path):
            return None
        try:
            with open(path, encoding="utf-8") as f:
                modality = json.load(f)
        except json.JSONDecodeError as e:
            raise self._bad(rel, f"is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); fix it, or delete it "
                                 "to take state/action widths from meta/info.json") from None
        except (OSError, UnicodeDecodeError) as e:
            raise self._bad(rel, f"cannot be read ({e})") from None
        if not isinstance(modality, dict):
            raise self._bad(rel, f"holds {_kind(modality)}, expected an object with \"state\", \"action\" and \"video\" sections")
        for section in ("state", "action", "video", "annotation"):
            if section in modality and not isinstance(modality[section], dict):
                raise self._bad(rel, f"\"{section}\" is {_kind(modality[section])}, expected an object of named entries")
        return modality

    def _read_jsonl(self, rel: str, what: str) -> list[tuple[int, dict[str, Any]]]:
        """(line number, object) of each non-empty line of `rel`."""
        path = os.path.join(self.root, rel)
        if not os.path.isfile(path):
            raise self._bad(rel, f"is missing; it lists {what}, one JSON object per line: re-export the dataset")
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise self._bad(rel, f"cannot be read ({e})") from None
        rows = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise self._bad(rel, f"line {n} is not valid JSON ({e.msg} at column {e.colno}); fix or delete that line") from None
            if not isinstance(d, dict):
                raise self._bad(rel, f"line {n} holds {_kind(d)}, expected an object")
            rows.append((n, d))
        return rows

    def _load_tasks(self) -> dict[int, str]:
        if self.version == "v3.0":
            rel = "meta/tasks.parquet"
            path = os.path.join(self.root, rel)
            if not os.path.isfile(path):
                raise self._bad(rel, "is missing; it maps task_index to the task text: re-export the dataset")
            try:
                table = pq.read_table(path)
            except (pa.ArrowException, OSError) as e:
                raise self._bad(rel, f"cannot be read ({e}); it is corrupt or truncated: re-export the dataset") from None
            if "task_index" not in table.column_names:
                raise self._bad(rel, f"has no task_index column (columns: {', '.join(table.column_names)})")
            if "task" in table.column_names:
                names = table["task"].to_pylist()
            else:  # the real writer stores the task strings as the pandas index
                index_cols = [c for c in table.column_names if c != "task_index"]
                if not index_cols:
                    raise self._bad(rel, "has no task column next to task_index")
                names = table[index_cols[0]].to_pylist()
            return {int(i): str(t) for i, t in zip(table["task_index"].to_pylist(), names, strict=True) if i is not None}
        rel = "meta/tasks.jsonl"
        tasks: dict[int, str] = {}
        for n, d in self._read_jsonl(rel, '{"task_index", "task"} per task'):
            index, task = d.get("task_index"), d.get("task")
            if not _is_int(index):
                raise self._bad(rel, f"line {n}: task_index is {index!r}, expected an integer")
            if not isinstance(task, str):
                raise self._bad(rel, f"line {n}: task is {task!r}, expected the instruction text")
            if tasks.get(int(index), task) != task:
                raise self._bad(rel, f"line {n}: task_index {index} is listed twice with different texts; keep one")
            tasks[int(index)] = task
        return tasks

    def _load_episodes(self) -> dict[int, dict[str, Any]]:
        if self.version == "v3.0":
            rel_dir = "meta/episodes"
            files = sorted(glob.glob(os.path.join(glob.escape(self.root), "meta", "episodes", "chunk-*", "file-*.parquet")))
            if not files:
                raise self._bad(rel_dir, "has no chunk-*/file-*.parquet; a v3.0 dataset lists its episodes there: re-export it")
            rows: list[tuple[str, dict[str, Any]]] = []
            for path in files:
                rel = os.path.relpath(path, self.root)
                try:
                    table = pq.read_table(path)
                except (pa.ArrowException, OSError) as e:
                    raise self._bad(rel, f"cannot be read ({e}); it is corrupt or truncated: re-export the dataset") from None
                if "episode_index" not in table.column_names:
                    raise self._bad(rel, "has no episode_index column")
                rows += [(f"{rel} row {i}", r) for i, r in enumerate(table.to_pylist())]
            where = "meta/episodes"
        else:
            where = "meta/episodes.jsonl"
            rows = [(f"line {n}", d) for n, d in self._read_jsonl(where, '{"episode_index", "tasks", "length"} per episode')]
        episodes: dict[int, dict[str, Any]] = {}
        places: dict[int, list[str]] = {}
        for place, d in rows:
            index = d.get("episode_index")
            if not _is_int(index) or index < 0:
                raise self._bad(where, f"{place}: episode_index is {index!r}, expected a non-negative integer")
            index = int(index)
            if index in episodes and episodes[index] != d:
                self._duplicates[index] = (
                    f"{where} lists episode_index {index} more than once with different content ({places[index][0]} and "
                    f"{place}); one episode's files cannot be both: remove the wrong entry and ingest again"
                )
            elif index in episodes:
                self.notes.append(f"{self.root}: {where} lists episode_index {index} twice identically "
                                  f"({places[index][0]} and {place}); it is read once")
            places.setdefault(index, []).append(place)
            episodes.setdefault(index, d)
        return episodes

    def _video_features(self) -> list[str]:
        return [k for k, v in self._features.items() if v.get("dtype") == "video"]

    def _image_features(self) -> list[str]:
        return [k for k, v in self._features.items() if v.get("dtype") == "image"]

    def _resolve_cameras(self) -> tuple[tuple[str, ...], dict[str, str]]:
        """Camera name -> source key, from modality.json or from info.json's video/image features.

        A camera whose videos are missing stays a camera (its episodes are quarantined) unless
        `state_only`, which leaves it out with a note.
        """
        if self.modality and self.modality.get("video"):
            mapping = {}
            for name, body in self.modality["video"].items():
                key = body.get("original_key", name) if isinstance(body, dict) else name
                if not isinstance(key, str) or not key:
                    raise self._bad("meta/modality.json", f"video.{name}.original_key is {key!r}, expected a feature name")
                mapping[str(name)] = key
            for key in self._video_features():
                if key not in mapping.values() and self._video_key_has_files(key):
                    # GR00T semantics: modality.json decides the cameras. Say so for one with files.
                    self.notes.append(f"{self.root}: video feature {key!r} has files but meta/modality.json's video "
                                      "section does not name it, so it is not ingested; add it there to ingest it")
        else:
            mapping = {key.split(".")[-1]: key for key in self._video_features() + self._image_features()}
        videos = [k for k in mapping.values() if self._features.get(k, {}).get("dtype") != "image"]
        if videos:
            try:
                self._check_template("video_path")
            except SourceError as e:
                if not self.state_only:
                    raise
                self.notes.append(f"{self.root}: {e.message}; --state-only: ingesting state and action without cameras")
                return tuple(c for c, k in mapping.items() if k not in videos), {c: k for c, k in mapping.items() if k not in videos}
        kept: dict[str, str] = {}
        for cam, key in mapping.items():
            dtype = self._features.get(key, {}).get("dtype")
            if dtype not in ("video", "image"):
                problem = (f"camera {cam!r} is {key!r}, which meta/info.json features do not declare as a video"
                           if key in self._features else f"camera {cam!r} is {key!r}, which meta/info.json does not declare")
                if not self.state_only:
                    raise self._bad("meta/modality.json" if self.modality else "meta/info.json",
                                    f"{problem}; fix the video section or ingest with --state-only to leave it out")
                self.notes.append(f"{self.root}: {problem}; --state-only: left out")
                continue
            if dtype == "video" and self.state_only and not self._video_key_has_files(key):
                self.notes.append(f"{self.root}: camera {cam!r} ({key}) has no video files; --state-only: left out")
                continue
            kept[cam] = key
        return tuple(kept), kept

    def _video_key_has_files(self, key: str) -> bool:
        root = glob.escape(self.root)
        if self.version == "v3.0":
            return bool(glob.glob(os.path.join(root, "videos", glob.escape(key), "*", "*")))
        return bool(glob.glob(os.path.join(root, "videos", "*", glob.escape(key), "*")))

    def _declared_size(self, key: str) -> tuple[int, int] | None:
        """(height, width) that info.json declares for a video/image feature, when it does."""
        body = self._features.get(key, {})
        shape, names = body.get("shape"), body.get("names")
        if not isinstance(shape, list) or len(shape) != 3 or not all(_is_int(s) for s in shape):
            return None
        if isinstance(names, list) and len(names) == 3 and "height" in names and "width" in names:
            return int(shape[names.index("height")]), int(shape[names.index("width")])
        return (int(shape[1]), int(shape[2])) if shape[0] in (1, 3, 4) and shape[2] not in (1, 3, 4) else (int(shape[0]), int(shape[1]))

    def _build_spec(self) -> EmbodimentSpec:
        """The embodiment spec, from modality.json when present, else from info.json widths."""
        s_dim = int(np.prod(self._features[STATE_KEY]["shape"]))
        a_dim = int(np.prod(self._features[ACTION_KEY]["shape"]))
        modality = self.modality or {
            "state": {"state": {"start": 0, "end": s_dim}},
            "action": {"action": {"start": 0, "end": a_dim}},
        }
        modality = {**modality, "video": {c: {"original_key": k} for c, k in self._video_keys.items()}}
        try:
            return EmbodimentSpec.from_modality_json(
                modality,
                tag=self.tag,
                state_dim=s_dim,
                action_dim=a_dim,
                fps=self.fps,
                robot_type=str(self.info.get("robot_type") or ""),
            )
        except ValueError as e:
            text = str(e)
            if self.modality is None:
                raise self._bad("meta/info.json", text) from None
            raise self._bad("meta/modality.json", text.removeprefix("modality.json ")) from None

    def spec(self) -> EmbodimentSpec:
        """The embodiment spec, from modality.json when present, else from info.json widths."""
        return self._spec

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
        """One reference per listed episode, and one per data file the metadata does not list.

        Never raises: an episode whose listing is unusable gets a reference carrying the error,
        which `read_tabular` raises, so that ingest quarantines it like any other bad episode.
        """
        refs = []
        for idx in sorted(self._episodes):
            try:
                loc = self._locate(idx, self._episodes[idx])
            except (KeyError, TypeError, ValueError) as e:
                where = "meta/episodes" if self.version == "v3.0" else "meta/episodes.jsonl"
                field = e.args[0] if isinstance(e, KeyError) and e.args else e
                loc = {"error": ("bad_metadata", os.path.join(self.root, where),
                                 f"{where}: episode {idx} has no usable {field}; re-export the dataset")}
            if idx in self._duplicates:
                loc["error"] = ("duplicate_index", os.path.join(self.root, "meta", "episodes.jsonl" if self._layout == "v2" else "episodes"),
                                self._duplicates[idx])
            refs.append(self._ref(idx, loc))
        refs += self._unlisted()
        return refs

    def _ref(self, idx: int, loc: dict[str, Any]) -> EpisodeRef:
        return EpisodeRef(
            source_uri=self.root,
            source_format=self.format_name,
            episode_index=idx,
            embodiment=self.tag,
            location=tuple(sorted(loc.items())),
        )

    def _locate(self, idx: int, ep: dict[str, Any]) -> dict[str, Any]:
        length = ep.get("length", -1)
        if not _is_int(length):
            raise ValueError(f"length ({length!r})")
        if self.version == "v3.0":
            loc: dict[str, Any] = {
                "data_path": self.info["data_path"].format(
                    chunk_index=int(ep["data/chunk_index"]), file_index=int(ep["data/file_index"])
                ),
                "length": int(length),
            }
            for cam, key in self._video_keys.items():
                if f"videos/{key}/chunk_index" not in ep or ep[f"videos/{key}/chunk_index"] is None:
                    continue
                loc[f"video:{cam}"] = self.info["video_path"].format(
                    video_key=key,
                    chunk_index=int(ep[f"videos/{key}/chunk_index"]),
                    file_index=int(ep[f"videos/{key}/file_index"]),
                )
                loc[f"from:{cam}"] = float(ep[f"videos/{key}/from_timestamp"])
                loc[f"to:{cam}"] = float(ep[f"videos/{key}/to_timestamp"])
            return loc
        chunk = idx // self._chunks_size
        loc = {
            "data_path": self.info["data_path"].format(episode_chunk=chunk, episode_index=idx),
            "length": int(length),
        }
        tasks = ep.get("tasks")
        if isinstance(tasks, list) and tasks and all(isinstance(t, str) for t in tasks):
            loc["listed_tasks"] = tuple(tasks)
        for cam, key in self._video_keys.items():
            if self._features.get(key, {}).get("dtype") == "video":
                loc[f"video:{cam}"] = self.info["video_path"].format(episode_chunk=chunk, video_key=key, episode_index=idx)
        return loc

    def _unlisted(self) -> list[EpisodeRef]:
        """References (carrying an `unlisted` error) for episodes whose data is on disk but not listed."""
        pattern, regex = _template_pattern(self.info["data_path"])
        where = "meta/episodes/" if self.version == "v3.0" else "meta/episodes.jsonl"
        refs = []
        seen: set[int] = set()
        for path in sorted(glob.glob(os.path.join(glob.escape(self.root), pattern))):
            rel = os.path.relpath(path, self.root).replace(os.sep, "/")
            m = regex.match(rel)
            if m is None:
                continue
            if self.version == "v3.0":
                try:
                    found = set(pq.read_table(path, columns=["episode_index"])["episode_index"].to_pylist())
                except (pa.ArrowException, OSError, KeyError) as e:
                    # Its listed episodes are quarantined when read; say so in case it holds others.
                    self.notes.append(f"{self.root}: cannot list the episodes in {rel} ({e}); any it holds "
                                      f"that {where} does not list were not checked")
                    continue
                indices = sorted(int(i) for i in found if i is not None)
            else:
                try:
                    indices = [int(m.group("episode_index"))]
                except (IndexError, ValueError):
                    continue
            for idx in indices:
                if idx in self._episodes or idx in seen:
                    continue
                seen.add(idx)
                msg = (f"episode {idx} is in {rel} but {where} does not list it; if it is a real episode, list it "
                       "(episode_index, tasks, length) and ingest again, else delete its files")
                refs.append(self._ref(idx, {"data_path": rel, "length": -1, "error": ("unlisted", path, msg)}))
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

    def _video_path(self, ref: EpisodeRef, cam: str) -> str | None:
        """The episode's video file of `cam`; None when it has none and that is allowed (image
        columns, or `state_only`). Raises `missing_video` for a declared video that is missing."""
        rel = ref.get(f"video:{cam}")
        key = self._video_keys[cam]
        if rel is None and self._features.get(key, {}).get("dtype") == "image":
            return None
        path = os.path.join(self.root, rel) if rel is not None else None
        if path is not None and os.path.isfile(path):
            return path
        if self.state_only:
            return None
        where = path if path is not None else os.path.join(self.root, "meta", "episodes")
        what = "video file is missing" if path is not None else f"episode {ref.episode_index} lists no video file"
        raise SourceError(
            "missing_video", where,
            f"camera {cam!r} ({key}): {what}; re-download or re-export the videos, or ingest with --state-only "
            "to take state and action alone",
        )

    def _tasks_of(self, ref: EpisodeRef, table: pa.Table, path: str) -> tuple[tuple[str, ...], np.ndarray]:
        """The episode's tasks and per-step local task indices; a task_index with no task is an error."""
        n = table.num_rows
        if "task_index" not in table.column_names:
            listed = ref.get("listed_tasks") or self._episodes.get(ref.episode_index, {}).get("tasks")
            if isinstance(listed, (list, tuple)) and listed and isinstance(listed[0], str):
                return (listed[0],), np.zeros(n, np.int32)
            return (), np.zeros(n, np.int32)
        col = table["task_index"]
        if col.null_count:
            raise SourceError("unknown_task", path, f"column 'task_index' has {col.null_count} null rows; give every row a task")
        task_ids = col.to_numpy().astype(np.int64)
        unique = sorted(set(task_ids.tolist()))
        unknown = [t for t in unique if t not in self._tasks]
        if unknown:
            table_name = "meta/tasks.parquet" if self.version == "v3.0" else "meta/tasks.jsonl"
            rows = int(np.isin(task_ids, unknown).sum())
            raise SourceError(
                "unknown_task", path,
                f"episode {ref.episode_index}: task_index {', '.join(map(str, unknown))} ({rows} rows) is not in {table_name} "
                f"(it has {len(self._tasks)} tasks); add the task there or fix the task_index column",
            )
        tasks = tuple(self._tasks[t] for t in unique)
        return tasks, np.searchsorted(np.asarray(unique), task_ids).astype(np.int32)

    def read_tabular(self, ref: EpisodeRef) -> TabularEpisode:
        """Read and validate an episode's parquet rows; hash its content.

        Raises:
            SourceError: the episode's listing is unusable, or its rows are unreadable,
                incomplete, non-finite or out of order, or a task or declared video is missing.
        """
        error = ref.get("error")
        if error is not None:
            raise SourceError(*error)
        table, path = self._read_rows(ref)
        if table.num_rows == 0:
            raise SourceError("empty", path, f"episode {ref.episode_index} has no rows")
        spec = self.spec()
        state = self._matrix(table, STATE_KEY, path, spec.state_dim)
        action = self._matrix(table, ACTION_KEY, path, spec.action_dim)
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
        tasks, local = self._tasks_of(ref, table, path)
        success = None
        for key in ("next.success", "success"):
            if key in table.column_names:
                success = bool(table[key][-1].as_py())
                break
        digests = []
        for cam in self.cameras:
            video = self._video_path(ref, cam)
            if video is not None:
                digests.append(f"{cam}:{file_digest(video)}:{ref.get(f'from:{cam}')}:{ref.get(f'to:{cam}')}")
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
                state=state, action=action, timestamps=ts, tasks=tasks, task_index=local, media_digests=tuple(digests)
            ),
            metadata={"data_path": ref.get("data_path"), "tasks": list(tasks), "source_version": self.version},
        )

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Decode each camera's frames of the episode and encode them per frame.

        Raises:
            SourceError: a video is missing, undecodable, holds a different number of frames
                than the episode has rows, or frames of another size than info.json declares.
        """
        ref = episode.ref
        n = episode.num_steps
        for cam in self.cameras:
            key = self._video_keys[cam]
            path = self._video_path(ref, cam)
            if path is None and self._features.get(key, {}).get("dtype") == "image":
                yield self._image_column_frames(episode, cam, key)
                continue
            if path is None:  # state_only, and this episode has no video of this camera
                log.info("%s: episode %d has no video of camera %r; --state-only: left out", self.root, ref.episode_index, cam)
                continue
            images: list[bytes] = []
            declared = self._declared_size(key)
            size: tuple[int, int] | None = None
            encoder: KeyframeEncoder | None = None
            for _, rgb, height, width in iter_video_frames(path, start_s=ref.get(f"from:{cam}"), end_s=ref.get(f"to:{cam}"), fps=self.fps,
                                                           encode_jpeg=False):
                self._check_size(path, cam, key, declared, size, (height, width), len(images))
                if size is None and self.video_frames == "h264" and not (height % 2 or width % 2):
                    encoder = KeyframeEncoder(height, width)  # odd sizes cannot be yuv420p: those stay JPEG
                size = (height, width)
                try:
                    images.append(encoder.add(rgb) if encoder is not None else encode_frame(rgb))  # type: ignore[arg-type]
                except (RuntimeError, ValueError) as e:
                    raise SourceError(
                        "encode_failed", path,
                        f"camera {cam!r} frame {len(images)} could not be stored ({e}); ingest with --video-frames jpeg",
                    ) from e
                if len(images) > n:
                    break
            if len(images) != n:
                raise SourceError(
                    "frame_count", path,
                    f"camera {cam!r} has {'more than ' if len(images) > n else ''}{len(images)} frames for "
                    f"episode {ref.episode_index} but the episode has {n} rows; the video is short, long or truncated",
                )
            assert size is not None
            yield EncodedFrames(camera=cam, images=tuple(images), encoding=encoder.encoding if encoder else "jpeg",
                                height=size[0], width=size[1])

    @staticmethod
    def _check_size(
        path: str, cam: str, key: str, declared: tuple[int, int] | None, first: tuple[int, int] | None,
        got: tuple[int, int], index: int,
    ) -> None:
        """Frames of one camera all have one size, the size info.json declares (when it does)."""
        if declared is not None and got != declared:
            raise SourceError(
                "frame_size", path,
                f"camera {cam!r} frame {index} is {got[1]}x{got[0]} but meta/info.json features[{key!r}].shape says "
                f"{declared[1]}x{declared[0]}; re-encode the video at the declared size or fix the shape",
            )
        if first is not None and got != first:
            raise SourceError(
                "frame_size", path,
                f"camera {cam!r} changes frame size mid-episode ({first[1]}x{first[0]} -> {got[1]}x{got[0]} at frame "
                f"{index}); re-encode the video at one size",
            )

    def _image_column_frames(self, episode: TabularEpisode, cam: str, key: str) -> EncodedFrames:
        table, path = self._read_rows(episode.ref)
        if key not in table.column_names:
            raise SourceError("missing_column", path, f"image column {key!r} is missing")
        images = []
        declared = self._declared_size(key)
        first: tuple[int, int] | None = None
        fmt = "png"
        for index, cell in enumerate(table[key].to_pylist()):
            data = cell.get("bytes") if isinstance(cell, dict) else cell
            if not data:
                raise SourceError("missing_video", path, f"image column {key!r} has an empty cell at row {index}")
            try:
                with Image.open(io.BytesIO(data)) as im:  # reads the header only
                    fmt, (w, h) = (im.format or "PNG").lower(), im.size
            except (OSError, ValueError) as e:
                raise SourceError("corrupt_video", path, f"image column {key!r} row {index} is not an image ({e})") from e
            self._check_size(path, cam, key, declared, first, (h, w), index)
            first = (h, w)
            images.append(bytes(data))
        assert first is not None
        return EncodedFrames(camera=cam, images=tuple(images), encoding=fmt, height=first[0], width=first[1])
