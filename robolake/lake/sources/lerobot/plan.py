"""What a LeRobot dataset holds, episode by episode: its cameras, spec, and each episode's files.

From the checked metadata (`lerobot_meta`) this resolves, once per dataset on the driver, what
the reader will read, without opening a parquet row or a video frame:

- *Cameras.* When `meta/modality.json` exists its video section decides the cameras (GR00T
  semantics), and features it does not name are not cameras: GR00T's PickNPlace lists a stale
  `observation.images.egoview` in info.json that has no files. A feature left out that does have
  files is said in a note. Without a modality.json every video and image feature of info.json is
  a camera. A declared camera whose videos are missing stays a camera (its episodes are
  quarantined, `missing_video`) unless `state_only`, which leaves it out with a note.
- *The embodiment spec*, from modality.json when present, else from info.json's widths.
- *The episode plan*: one `EpisodeRef` per listed episode, saying which parquet holds its rows
  and, per camera, which video file and (v3.0) which time span hold its frames. A listing that
  cannot be used, or an `episode_index` listed twice with different content, gives a reference
  that carries its error, so that ingest quarantines that episode alone. A data file on disk
  that the episode metadata does not list gets a reference carrying an `unlisted` error: the
  lake holds what the dataset's metadata vouches for, and a file it no longer lists is as likely
  a removed bad take as a forgotten good one. The quarantine row says how to list it.
"""

from __future__ import annotations

import glob
import os
import re
import string
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robolake.lake.sources.base import EpisodeRef, SourceError
from robolake.lake.sources.lerobot.meta import (
    ACTION_KEY,
    STATE_KEY,
    LeRobotMeta,
    inside_dataset,
    is_int,
    resolves_inside,
)
from robolake.schemas.embodiment import EmbodimentSpec

__all__ = ["LeRobotPlan"]


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


class LeRobotPlan:
    """The cameras, spec and per-episode references of one LeRobot dataset.

    Args:
        meta: The dataset's checked metadata; notes are added to `meta.notes`.
        tag: Embodiment tag of its episodes.
        state_only: Leave out cameras without videos instead of quarantining their episodes.

    Attributes:
        cameras: Camera names, in order.
        video_keys: Camera name -> its info.json feature (video or image column).
        spec: The embodiment spec.

    Raises:
        SourceError: `bad_metadata`: a camera the metadata names is not a declared video or
            image feature, `video_path` is malformed, or modality.json does not fit the widths.
    """

    def __init__(self, meta: LeRobotMeta, *, tag: str, state_only: bool = False):
        self.meta = meta
        self.tag = tag
        self.state_only = state_only
        self.format_name = f"lerobot-{meta.version}"
        self.cameras, self.video_keys = self._resolve_cameras()
        self.spec = self._build_spec()

    def _resolve_cameras(self) -> tuple[tuple[str, ...], dict[str, str]]:
        """Camera name -> source key, from modality.json or from info.json's video/image features."""
        meta = self.meta
        if meta.modality and meta.modality.get("video"):
            mapping = {}
            for name, body in meta.modality["video"].items():
                key = body.get("original_key", name) if isinstance(body, dict) else name
                if not isinstance(key, str) or not key:
                    raise meta.bad(
                        "meta/modality.json", f"video.{name}.original_key is {key!r}, expected a feature name"
                    )
                mapping[str(name)] = key
            for key in meta.video_features():
                if key not in mapping.values() and meta.video_key_has_files(key):
                    # GR00T semantics: modality.json decides the cameras. Say so for one with files.
                    meta.notes.append(
                        f"{meta.root}: video feature {key!r} has files but meta/modality.json's video "
                        "section does not name it, so it is not ingested; add it there to ingest it"
                    )
        else:
            mapping = {key.split(".")[-1]: key for key in meta.video_features() + meta.image_features()}
        videos = [k for k in mapping.values() if meta.dtype(k) != "image"]
        if videos:
            try:
                meta.check_template("video_path")
            except SourceError as e:
                if not self.state_only:
                    raise
                meta.notes.append(f"{meta.root}: {e.message}; --state-only: ingesting state and action without cameras")
                return tuple(c for c, k in mapping.items() if k not in videos), {
                    c: k for c, k in mapping.items() if k not in videos
                }
        for key in videos:
            # A feature name fills {video_key}: one that climbs out of the dataset must not be read.
            sample = (
                {"video_key": key, "chunk_index": 0, "file_index": 0}
                if meta.layout == "v3"
                else {"video_key": key, "episode_chunk": 0, "episode_index": 0}
            )
            if not inside_dataset(meta.info["video_path"].format(**sample)):
                raise meta.bad(
                    "meta/info.json",
                    f"features key {key!r} makes video_path point outside the dataset "
                    "(an absolute path, '..' or a NUL byte); rename the feature",
                )
        kept: dict[str, str] = {}
        for cam, key in mapping.items():
            dtype = meta.dtype(key)
            if dtype not in ("video", "image"):
                problem = (
                    f"camera {cam!r} is {key!r}, which meta/info.json features do not declare as a video"
                    if key in meta.features
                    else f"camera {cam!r} is {key!r}, which meta/info.json does not declare"
                )
                if not self.state_only:
                    raise meta.bad(
                        "meta/modality.json" if meta.modality else "meta/info.json",
                        f"{problem}; fix the video section or ingest with --state-only to leave it out",
                    )
                meta.notes.append(f"{meta.root}: {problem}; --state-only: left out")
                continue
            if dtype == "video" and self.state_only and not meta.video_key_has_files(key):
                meta.notes.append(f"{meta.root}: camera {cam!r} ({key}) has no video files; --state-only: left out")
                continue
            kept[cam] = key
        return tuple(kept), kept

    def _build_spec(self) -> EmbodimentSpec:
        """The embodiment spec, from modality.json when present, else from info.json widths."""
        meta = self.meta
        s_dim = int(np.prod(meta.features[STATE_KEY]["shape"]))
        a_dim = int(np.prod(meta.features[ACTION_KEY]["shape"]))
        modality = meta.modality or {
            "state": {"state": {"start": 0, "end": s_dim}},
            "action": {"action": {"start": 0, "end": a_dim}},
        }
        modality = {**modality, "video": {c: {"original_key": k} for c, k in self.video_keys.items()}}
        try:
            return EmbodimentSpec.from_modality_json(
                modality,
                tag=self.tag,
                state_dim=s_dim,
                action_dim=a_dim,
                fps=meta.fps,
                robot_type=str(meta.info.get("robot_type") or ""),
            )
        except ValueError as e:
            text = str(e)
            if meta.modality is None:
                raise meta.bad("meta/info.json", text) from None
            raise meta.bad("meta/modality.json", text.removeprefix("modality.json ")) from None

    # --- the episode plan --------------------------------------------------------------------

    def discover(self) -> list[EpisodeRef]:
        """One reference per listed episode, and one per data file the metadata does not list.

        Never raises: an episode whose listing is unusable gets a reference carrying the error,
        which the reader raises when it reads it, so that ingest quarantines it like any other
        bad episode.
        """
        meta = self.meta
        refs = []
        for idx in sorted(meta.episodes):
            try:
                loc = self._locate(idx, meta.episodes[idx])
            except (KeyError, TypeError, ValueError) as e:
                where = "meta/episodes" if meta.version == "v3.0" else "meta/episodes.jsonl"
                field = e.args[0] if isinstance(e, KeyError) and e.args else e
                loc = {
                    "error": (
                        "bad_metadata",
                        os.path.join(meta.root, where),
                        f"{where}: episode {idx} has no usable {field}; re-export the dataset",
                    )
                }
            if idx in meta.duplicates:
                loc["error"] = (
                    "duplicate_index",
                    os.path.join(meta.root, "meta", "episodes.jsonl" if meta.layout == "v2" else "episodes"),
                    meta.duplicates[idx],
                )
            refs.append(self._ref(idx, loc))
        refs += self._unlisted()
        return refs

    def _ref(self, idx: int, loc: dict[str, Any]) -> EpisodeRef:
        return EpisodeRef(
            source_uri=self.meta.root,
            source_format=self.format_name,
            episode_index=idx,
            embodiment=self.tag,
            location=tuple(sorted(loc.items())),
        )

    def _locate(self, idx: int, ep: dict[str, Any]) -> dict[str, Any]:
        """Where episode `idx` lives: its parquet, its length, and per camera its video (and span)."""
        meta = self.meta
        length = ep.get("length", -1)
        if not is_int(length):
            raise ValueError(f"length ({length!r})")
        if meta.version == "v3.0":
            loc: dict[str, Any] = {
                "data_path": meta.info["data_path"].format(
                    chunk_index=int(ep["data/chunk_index"]), file_index=int(ep["data/file_index"])
                ),
                "length": int(length),
            }
            for cam, key in self.video_keys.items():
                if f"videos/{key}/chunk_index" not in ep or ep[f"videos/{key}/chunk_index"] is None:
                    continue
                loc[f"video:{cam}"] = meta.info["video_path"].format(
                    video_key=key,
                    chunk_index=int(ep[f"videos/{key}/chunk_index"]),
                    file_index=int(ep[f"videos/{key}/file_index"]),
                )
                loc[f"from:{cam}"] = float(ep[f"videos/{key}/from_timestamp"])
                loc[f"to:{cam}"] = float(ep[f"videos/{key}/to_timestamp"])
            return loc
        chunk = idx // meta.chunks_size
        loc = {
            "data_path": meta.info["data_path"].format(episode_chunk=chunk, episode_index=idx),
            "length": int(length),
        }
        tasks = ep.get("tasks")
        if isinstance(tasks, list) and tasks and all(isinstance(t, str) for t in tasks):
            loc["listed_tasks"] = tuple(tasks)
        for cam, key in self.video_keys.items():
            if meta.dtype(key) == "video":
                loc[f"video:{cam}"] = meta.info["video_path"].format(
                    episode_chunk=chunk, video_key=key, episode_index=idx
                )
        return loc

    def _unlisted(self) -> list[EpisodeRef]:
        """References (carrying an `unlisted` error) for episodes whose data is on disk but not listed."""
        meta = self.meta
        pattern, regex = _template_pattern(meta.info["data_path"])
        where = "meta/episodes/" if meta.version == "v3.0" else "meta/episodes.jsonl"
        refs = []
        seen: set[int] = set()
        for path in sorted(glob.glob(os.path.join(glob.escape(meta.root), pattern))):
            rel = os.path.relpath(path, meta.root).replace(os.sep, "/")
            m = regex.match(rel)
            if m is None or not resolves_inside(meta.root, rel):  # a link out of the dataset is never opened
                continue
            if meta.version == "v3.0":
                try:
                    found = set(pq.read_table(path, columns=["episode_index"])["episode_index"].to_pylist())
                except (pa.ArrowException, OSError, KeyError) as e:
                    # Its listed episodes are quarantined when read; say so in case it holds others.
                    meta.notes.append(
                        f"{meta.root}: cannot list the episodes in {rel} ({e}); any it holds "
                        f"that {where} does not list were not checked"
                    )
                    continue
                indices = sorted(int(i) for i in found if i is not None)
            else:
                try:
                    indices = [int(m.group("episode_index"))]
                except (IndexError, ValueError):
                    continue
            for idx in indices:
                if idx in meta.episodes or idx in seen:
                    continue
                seen.add(idx)
                msg = (
                    f"episode {idx} is in {rel} but {where} does not list it; if it is a real episode, list it "
                    "(episode_index, tasks, length) and ingest again, else delete its files"
                )
                refs.append(self._ref(idx, {"data_path": rel, "length": -1, "error": ("unlisted", path, msg)}))
        return refs
