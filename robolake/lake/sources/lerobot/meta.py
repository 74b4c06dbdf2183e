"""The metadata of a LeRobot dataset (v2.0, v2.1, v3.0), read and checked before anything else.

Layouts. v2.0 / v2.1 keep one parquet and one mp4 per camera per episode, found through the
`data_path` / `video_path` templates of `meta/info.json`; episodes and tasks are listed in
`meta/episodes.jsonl` and `meta/tasks.jsonl` (v2.1 adds `meta/episodes_stats.jsonl`, which
we do not need: the lake computes its own statistics). v3.0 keeps many episodes per parquet and
per mp4: `meta/episodes/chunk-*/file-*.parquet` says, per episode, which data file holds its rows
(`data/chunk_index`, `data/file_index`) and which video file and time range hold its frames
(`videos/<key>/chunk_index`, `videos/<key>/file_index`, `videos/<key>/from_timestamp`,
`videos/<key>/to_timestamp`); tasks are in `meta/tasks.parquet`.
GR00T's `meta/modality.json`, when present, names the state/action slices and the cameras.

A dataset whose info.json counts 0 episodes and which has no data file (a recording aborted
before its first episode) is *empty*, not broken: `SourceError("empty", ...)` says so.

Real datasets have quirks this tolerates: no `codebase_version` (the layout on disk says which),
`total_chunks` of 0, `chunks_size` of 0, an episode listed twice identically (read once, with a
note). What it does not tolerate is *dataset metadata* that cannot be trusted: info.json missing,
not JSON, not an object, an unknown `codebase_version`, `fps` missing/null/0, features without
`observation.state` / `action` widths, a missing or malformed `data_path` (or a `data_path` /
`video_path` that points outside the dataset: absolute, `..`, NUL, or a file that is a symlink
out of the root; nothing outside the source root is ever opened because of the metadata), missing
`episodes.jsonl` / `tasks.jsonl` (v3.0: `meta/episodes/`, `tasks.parquet`), an invalid
`modality.json`. Each raises one `SourceError("bad_metadata", ...)` whose message names the
file and the field and says what to do, and which carries the episodes the dataset declares
when they can be read, so that ingest quarantines each of them (or the dataset as one row) and
one bad dataset never blocks the others beside it. A directory that holds LeRobot data
(`data/chunk-*`, `meta/episodes.jsonl`, ...) but no `meta/info.json` is detected as a LeRobot
dataset precisely so that it is reported this way and not skipped.

An `episode_index` listed twice with different content is not a dataset error: it is recorded
in `LeRobotMeta.duplicates`, and that episode alone is quarantined (`duplicate_index`).
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from typing import Any, TypeGuard

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robolake.lake.sources.base import SourceError

__all__ = [
    "LeRobotMeta",
    "is_lerobot_dataset",
    "embodiment_tag",
    "inside_dataset",
    "resolves_inside",
    "STATE_KEY",
    "ACTION_KEY",
    "VERSIONS",
]

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
_UNREAD = "stats/"  # the per-episode statistics of v3.0's meta/episodes rows
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


def inside_dataset(rel: str) -> bool:
    """Whether a path from the dataset's metadata names a file under its root (lexically:
    relative, no '..' component, no NUL). Symlinks inside the root are followed as the OS does
    (Hugging Face's cache links every file to a blob outside the snapshot directory)."""
    if not rel or "\0" in rel or os.path.isabs(rel) or rel.startswith(("/", "\\")):
        return False
    parts = rel.replace("\\", "/").split("/")
    return ".." not in parts and not re.match(r"^[A-Za-z]:", rel)


def resolves_inside(root: str, rel: str) -> bool:
    """Whether `rel` (a path from the dataset's metadata) names a file under `root` once symlinks
    are resolved, as well as lexically (`inside_dataset`): a dataset handed to robolake may hold a
    link to `~/.aws/credentials` or another team's data, and its target must never be read as
    the dataset's own. One exception keeps the Hugging Face cache working: in a snapshot
    (`.../datasets--org--name/snapshots/<rev>/`) every file is a link into the repository's
    `blobs/`, so targets there are inside too.
    """
    if not inside_dataset(rel):
        return False
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(root, rel))
    allowed = [real_root]
    parent = real_root
    while os.path.dirname(parent) != parent:  # an HF snapshot anywhere above the root
        if os.path.basename(os.path.dirname(parent)) == "snapshots":
            allowed.append(os.path.join(os.path.dirname(os.path.dirname(parent)), "blobs"))
            break
        parent = os.path.dirname(parent)
    return any(os.path.commonpath([target, a]) == a for a in allowed)


def _kind(value: Any) -> str:
    """How a JSON value reads in a sentence (`an object`, `a list`, `null`, ...)."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def is_int(value: Any) -> TypeGuard[int]:
    """An integer, and not a boolean (JSON and numpy both allow either)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class LeRobotMeta:
    """The checked metadata of one LeRobot dataset directory.

    Args:
        root: Dataset root (holds `meta/info.json`).

    Attributes:
        root: Absolute dataset root.
        info: meta/info.json.
        version: `v2.0`, `v2.1` or `v3.0`; `layout` is `v2` or `v3`.
        fps: Frames per second.
        features: info.json's features (column -> {dtype, shape, ...}).
        chunks_size: Episodes per chunk (v2 paths).
        modality: meta/modality.json, or None.
        episodes: episode_index -> its listing (a jsonl line, or a v3.0 episodes row).
        duplicates: episode_index -> why its listing is contradictory.
        tasks: task_index -> task text.
        notes: Things a user should hear about that are not errors.

    Raises:
        SourceError: `bad_metadata`, naming the file and the field.
    """

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.notes: list[str] = []
        self.episodes: dict[int, dict[str, Any]] = {}
        self.duplicates: dict[int, str] = {}
        self._episodes_loaded = False
        self._refuse_links_out()
        self.info = self._load_info()
        self.version = self._version()
        self.layout = "v3" if self.version == "v3.0" else "v2"
        self.fps = self._fps()
        self.features = self._check_features()
        self.chunks_size = self._check_chunks_size()
        self.check_template("data_path")
        self.modality = self._load_modality()
        self.episodes = self._load_episodes()
        self._episodes_loaded = True
        self.tasks = self._load_tasks()

    def _refuse_links_out(self) -> None:
        """No file under `meta/` may be a symlink out of the dataset (see `resolves_inside`): its
        target would be read as this dataset's metadata. Raised without the declared episodes,
        since listing them would read the linked file."""
        meta = os.path.join(self.root, "meta")
        for dirpath, dirs, files in os.walk(meta):  # symlinked folders are not descended, only checked
            for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]):
                rel = os.path.relpath(os.path.join(dirpath, name), self.root).replace(os.sep, "/")
                if not resolves_inside(self.root, rel):
                    raise SourceError(
                        "bad_metadata",
                        os.path.join(self.root, rel),
                        f"{rel} is a symlink out of the dataset (to {os.path.realpath(os.path.join(self.root, rel))}); "
                        "robolake reads only files under the dataset root: copy the real file there",
                    )

    def bad(self, rel: str, message: str) -> SourceError:
        """A dataset-level error about file `rel` (relative to the root)."""
        return SourceError(
            "bad_metadata", os.path.join(self.root, rel), f"{rel}: {message}", episodes=self._known_episodes()
        )

    def _known_episodes(self) -> tuple[int, ...]:
        """Episodes the dataset declares, as far as they can be read (best effort, never raises)."""
        if self._episodes_loaded:
            return tuple(sorted(self.episodes))
        meta = os.path.join(self.root, "meta")
        found: set[int] = set()
        try:
            if os.path.isfile(os.path.join(meta, "episodes.jsonl")):
                with open(os.path.join(meta, "episodes.jsonl"), encoding="utf-8") as f:
                    for line in f:
                        if not line.strip():
                            continue
                        d = json.loads(line)  # a broken line: the list is unknown, not shorter
                        if not isinstance(d, dict) or not is_int(d.get("episode_index")):
                            return ()
                        found.add(int(d["episode_index"]))
            else:
                for path in sorted(glob.glob(os.path.join(glob.escape(meta), "episodes", "chunk-*", "file-*.parquet"))):
                    found.update(
                        int(i) for i in pq.read_table(path, columns=["episode_index"])["episode_index"].to_pylist()
                    )
        except Exception:  # best effort: a dataset whose episode list is unreadable gets one row
            return ()
        return tuple(sorted(found))

    def _json(self, rel: str, path: str, fix: str, unreadable: str = "") -> Any:
        """The JSON document at `path` (dataset file `rel`); a `bad_metadata` SourceError naming it otherwise."""
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except json.JSONDecodeError as e:
            raise self.bad(rel, f"is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); {fix}") from None
        except RecursionError:
            raise self.bad(rel, f"nests deeper than any metadata does; {fix}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise self.bad(rel, f"cannot be read ({e}){unreadable}") from None

    def _load_info(self) -> dict[str, Any]:
        rel = "meta/info.json"
        path = os.path.join(self.root, rel)
        if not os.path.isfile(path):
            raise self.bad(
                rel,
                "is missing: the directory holds LeRobot data but no info.json, so the export is "
                "unfinished or was copied in part; re-export or re-download the dataset",
            )
        info = self._json(
            rel, path, "fix the file or re-export the dataset", "; check its permissions or re-download it"
        )
        if not isinstance(info, dict):
            raise self.bad(
                rel,
                f"holds {_kind(info)}, expected an object with codebase_version, fps, data_path "
                "and features; re-export the dataset",
            )
        return info

    def _version(self) -> str:
        version = self.info.get("codebase_version")
        if version is None:
            # Older exports omit it; the layout on disk says which it is.
            has_v3 = os.path.isdir(os.path.join(self.root, "meta", "episodes"))
            has_v2 = os.path.isfile(os.path.join(self.root, "meta", "episodes.jsonl"))
            return "v3.0" if has_v3 and not has_v2 else "v2.0"
        if version not in VERSIONS:
            raise self.bad(
                "meta/info.json",
                f"codebase_version is {version!r}; robolake reads LeRobot "
                f"{', '.join(VERSIONS)}: convert the dataset with LeRobot's converter",
            )
        return str(version)

    def _fps(self) -> float:
        fps = self.info.get("fps")
        fix = "set fps to the recording rate (frames per second, e.g. 30)"
        if "fps" not in self.info:
            raise self.bad("meta/info.json", f"fps is missing; {fix}")
        if fps is None:
            raise self.bad("meta/info.json", f"fps is null; {fix}")
        if isinstance(fps, bool) or not isinstance(fps, (int, float)):
            raise self.bad("meta/info.json", f"fps is {fps!r} ({_kind(fps)}), not a number; {fix}")
        if not math.isfinite(fps) or fps <= 0:
            raise self.bad("meta/info.json", f"fps is {fps!r}; {fix}")
        return float(fps)

    def _check_features(self) -> dict[str, dict[str, Any]]:
        features = self.info.get("features")
        if not isinstance(features, dict):
            raise self.bad(
                "meta/info.json",
                f"features is {'missing' if features is None else _kind(features)}; "
                "it must map each column to {dtype, shape}: re-export the dataset",
            )
        for key, body in features.items():
            if not isinstance(body, dict):
                raise self.bad(
                    "meta/info.json", f"features[{key!r}] is {_kind(body)}, expected an object with dtype and shape"
                )
        for key in (STATE_KEY, ACTION_KEY):
            shape = features.get(key, {}).get("shape") if key in features else None
            if key not in features:
                raise self.bad(
                    "meta/info.json",
                    f"features has no {key!r}; robolake needs the {key} vector "
                    "(a list of floats per row) and its shape",
                )
            if not isinstance(shape, list) or not shape or not all(is_int(s) and s > 0 for s in shape):
                raise self.bad(
                    "meta/info.json", f"features[{key!r}].shape is {shape!r}; give the vector width, e.g. [7]"
                )
        return features

    def _check_chunks_size(self) -> int:
        size = self.info.get("chunks_size", 1000)
        if not is_int(size) or size < 0:
            raise self.bad(
                "meta/info.json", f"chunks_size is {size!r}; it must be a positive integer (LeRobot writes 1000)"
            )
        return int(size) or 1000

    def check_template(self, key: str) -> str:
        """The `data_path` / `video_path` template, checked to fill with this layout's placeholders."""
        example = _TEMPLATE_EXAMPLES[(self.layout, key)]
        names = _TEMPLATE_KEYS[(self.layout, key)]
        template = self.info.get(key)
        if template is None:
            raise self.bad(
                "meta/info.json",
                f"{key} is {'null' if key in self.info else 'missing'}; "
                f"for LeRobot {self.version} it is e.g. {example!r}",
            )
        if not isinstance(template, str):
            raise self.bad("meta/info.json", f"{key} is {_kind(template)}, expected a path template like {example!r}")
        sample = {n: ("observation.images.x" if n == "video_key" else 0) for n in names}
        try:
            first = template.format(**sample)
            moved = template.format(**{n: v if n == "video_key" else 1 for n, v in sample.items()})
        except KeyError as e:
            raise self.bad(
                "meta/info.json",
                f"{key} {template!r} uses the placeholder {{{e.args[0]}}}, which LeRobot "
                f"{self.version} does not fill; use {', '.join('{' + n + '}' for n in names)}",
            ) from None
        except (IndexError, ValueError) as e:
            raise self.bad(
                "meta/info.json", f"{key} {template!r} is not a valid path template ({e}); use e.g. {example!r}"
            ) from None
        if first == moved:
            raise self.bad(
                "meta/info.json",
                f"{key} {template!r} gives every episode the same file; it needs {{{names[-1]}}}, e.g. {example!r}",
            )
        if not inside_dataset(first) or not inside_dataset(moved):
            raise self.bad(
                "meta/info.json",
                f"{key} {template!r} points outside the dataset (an absolute path, '..' "
                f"or a NUL byte); robolake reads only files under the dataset root: use a "
                f"relative template like {example!r}",
            )
        return template

    def _load_modality(self) -> dict[str, Any] | None:
        rel = "meta/modality.json"
        path = os.path.join(self.root, rel)
        if not os.path.isfile(path):
            return None
        modality = self._json(rel, path, "fix it, or delete it to take state/action widths from meta/info.json")
        if not isinstance(modality, dict):
            raise self.bad(
                rel, f'holds {_kind(modality)}, expected an object with "state", "action" and "video" sections'
            )
        for section in ("state", "action", "video", "annotation"):
            if section in modality and not isinstance(modality[section], dict):
                raise self.bad(rel, f'"{section}" is {_kind(modality[section])}, expected an object of named entries')
        return modality

    def _read_jsonl(self, rel: str, what: str) -> list[tuple[int, dict[str, Any]]]:
        """(line number, object) of each non-empty line of `rel`."""
        path = os.path.join(self.root, rel)
        if not os.path.isfile(path):
            raise self.bad(rel, f"is missing; it lists {what}, one JSON object per line: re-export the dataset")
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise self.bad(rel, f"cannot be read ({e})") from None
        rows = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise self.bad(
                    rel, f"line {n} is not valid JSON ({e.msg} at column {e.colno}); fix or delete that line"
                ) from None
            if not isinstance(d, dict):
                raise self.bad(rel, f"line {n} holds {_kind(d)}, expected an object")
            rows.append((n, d))
        return rows

    def _load_tasks(self) -> dict[int, str]:
        if self.version == "v3.0":
            rel = "meta/tasks.parquet"
            path = os.path.join(self.root, rel)
            if not os.path.isfile(path):
                raise self.bad(rel, "is missing; it maps task_index to the task text: re-export the dataset")
            try:
                table = pq.read_table(path)
            except (pa.ArrowException, OSError) as e:
                raise self.bad(
                    rel, f"cannot be read ({e}); it is corrupt or truncated: re-export the dataset"
                ) from None
            if "task_index" not in table.column_names:
                raise self.bad(rel, f"has no task_index column (columns: {', '.join(table.column_names)})")
            if "task" in table.column_names:
                names = table["task"].to_pylist()
            else:  # the real writer stores the task strings as the pandas index
                index_cols = [c for c in table.column_names if c != "task_index"]
                if not index_cols:
                    raise self.bad(rel, "has no task column next to task_index")
                names = table[index_cols[0]].to_pylist()
            return {
                int(i): str(t) for i, t in zip(table["task_index"].to_pylist(), names, strict=True) if i is not None
            }
        rel = "meta/tasks.jsonl"
        tasks: dict[int, str] = {}
        for n, d in self._read_jsonl(rel, '{"task_index", "task"} per task'):
            index, task = d.get("task_index"), d.get("task")
            if not is_int(index):
                raise self.bad(rel, f"line {n}: task_index is {index!r}, expected an integer")
            if not isinstance(task, str):
                raise self.bad(rel, f"line {n}: task is {task!r}, expected the instruction text")
            if tasks.get(int(index), task) != task:
                raise self.bad(rel, f"line {n}: task_index {index} is listed twice with different texts; keep one")
            tasks[int(index)] = task
        return tasks

    def _recorded_nothing(self) -> bool:
        """Whether the dataset is empty rather than broken: info.json counts 0 episodes and no
        data file exists (what LeRobot leaves when a recording is stopped before its first episode
        is saved: `meta/info.json` alone)."""
        if self.info.get("total_episodes") != 0:
            return False
        data = os.path.join(self.root, "data")
        return not any(files for _, _, files in os.walk(data))

    def _load_episodes(self) -> dict[int, dict[str, Any]]:
        if self._recorded_nothing():
            raise SourceError(
                "empty",
                self.root,
                f"an empty LeRobot {self.version} dataset: meta/info.json counts 0 episodes and there is no "
                "data/ file (a recording stopped before its first episode was saved); nothing to ingest: "
                "record episodes into it, or delete the folder",
            )
        if self.version == "v3.0":
            rel_dir = "meta/episodes"
            files = sorted(
                glob.glob(os.path.join(glob.escape(self.root), "meta", "episodes", "chunk-*", "file-*.parquet"))
            )
            if not files:
                raise self.bad(
                    rel_dir, "has no chunk-*/file-*.parquet; a v3.0 dataset lists its episodes there: re-export it"
                )
            rows: list[tuple[str, dict[str, Any]]] = []
            for path in files:
                rel = os.path.relpath(path, self.root)
                try:
                    table = pq.read_table(path)
                except (pa.ArrowException, OSError) as e:
                    raise self.bad(
                        rel, f"cannot be read ({e}); it is corrupt or truncated: re-export the dataset"
                    ) from None
                if "episode_index" not in table.column_names:
                    raise self.bad(rel, "has no episode_index column")
                rows += [(f"{rel} row {i}", r) for i, r in enumerate(table.to_pylist())]
            where = "meta/episodes"
        else:
            where = "meta/episodes.jsonl"
            rows = [
                (f"line {n}", d) for n, d in self._read_jsonl(where, '{"episode_index", "tasks", "length"} per episode')
            ]
        episodes: dict[int, dict[str, Any]] = {}
        places: dict[int, list[str]] = {}
        for place, d in rows:
            index = d.get("episode_index")
            if not is_int(index) or index < 0:
                raise self.bad(where, f"{place}: episode_index is {index!r}, expected a non-negative integer")
            index = int(index)
            if index in episodes and episodes[index] != d:
                self.duplicates[index] = (
                    f"{where} lists episode_index {index} more than once with different content "
                    f"({places[index][0]} and {place}); "
                    "one episode's files cannot be both: remove the wrong entry and ingest again"
                )
            elif index in episodes:
                self.notes.append(
                    f"{self.root}: {where} lists episode_index {index} twice identically "
                    f"({places[index][0]} and {place}); it is read once"
                )
            places.setdefault(index, []).append(place)
            episodes.setdefault(index, d)
        # v3.0 rows carry each feature's statistics (80 of a row's 93 columns here), which no
        # reader uses; the reader travels to every ingest task, so a 50k-episode dataset's rows
        # cost each task about 10 s of unpickling before they were dropped (issue 37).
        return {i: {k: v for k, v in d.items() if not k.startswith(_UNREAD)} for i, d in episodes.items()}

    # --- features --------------------------------------------------------------------------

    def dtype(self, key: str) -> Any:
        """The dtype info.json declares for feature `key` (None when it declares none)."""
        return self.features.get(key, {}).get("dtype")

    def video_features(self) -> list[str]:
        return [k for k, v in self.features.items() if v.get("dtype") == "video"]

    def image_features(self) -> list[str]:
        return [k for k, v in self.features.items() if v.get("dtype") == "image"]

    def video_key_has_files(self, key: str) -> bool:
        root = glob.escape(self.root)
        if self.version == "v3.0":
            return bool(glob.glob(os.path.join(root, "videos", glob.escape(key), "*", "*")))
        return bool(glob.glob(os.path.join(root, "videos", "*", glob.escape(key), "*")))

    def declared_size(self, key: str) -> tuple[int, int] | None:
        """(height, width) that info.json declares for a video/image feature, when it does."""
        body = self.features.get(key, {})
        shape, names = body.get("shape"), body.get("names")
        if not isinstance(shape, list) or len(shape) != 3 or not all(is_int(s) for s in shape):
            return None
        if isinstance(names, list) and len(names) == 3 and "height" in names and "width" in names:
            return int(shape[names.index("height")]), int(shape[names.index("width")])
        return (
            (int(shape[1]), int(shape[2]))
            if shape[0] in (1, 3, 4) and shape[2] not in (1, 3, 4)
            else (int(shape[0]), int(shape[1]))
        )
