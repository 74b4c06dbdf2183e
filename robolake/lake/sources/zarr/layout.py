"""What a Zarr replay buffer holds, decided once from its arrays: the part of the reader that runs
on the driver.

Diffusion Policy's `ReplayBuffer` (copied by UMI and many real-robot imitation codebases) keeps
every episode end to end: `data/<key>` arrays whose first axis is the step, concatenated over
episodes, and `meta/episode_ends` (int64, the exclusive end row of each episode). Chunks are
Blosc/zstd for numbers; UMI keeps camera frames in the buffer as uint8 `[N, H, W, 3]` compressed
per frame with imagecodecs' JPEG-XL (numcodecs id `imagecodecs_jpegxl`), and Diffusion Policy's
real-robot recordings keep one mp4 per camera per episode beside the buffer instead
(`videos/<episode>/<camera>.mp4`). The unit is the buffer directory, or the dataset folder that
holds it and its `videos/` tree (so the mp4s are read with it, not reported as unread files).

Roles without a mapping: `data/action` is the action (none: the next row's state, said in a
note); every other float key of one row per step (`[N]`, `[N, k]`, `[N, 4, 4]` flattened) is
state, in name order; uint8 `[N, H, W, 1|3|4]` / `[N, H, W]` keys are cameras, and each camera
stem of `videos/*/` is one (`0.mp4` -> camera `camera_0`); `data/timestamp` is the clock of every
stream (its rate the steps' rate, unless the buffer's attributes or a mapping give one). Other
keys, integer and boolean ones and secondary clocks included, land in the episode's record only.

Nothing is dropped without a word (`Layout.notes`): an image-shaped key no camera reads, a key
shorter than the episodes it should cover, a video folder that matches no episode, a secondary
clock that goes back between episodes (each episode is read on its own, so it still lands). A
buffer whose `meta/episode_ends` is not a non-decreasing list of rows within the data cannot be
trusted as a whole and fails the unit (`bad_metadata`). Every read is bounded by the read
limits before it allocates: declared shapes, chunks and frames are checked first.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.limits import ReadLimits
from robolake.lake.sources.mapping import Mapping, check_sources
from robolake.storage import OutsideRootError, ensure_within

__all__ = [
    "ArrayInfo",
    "array_info",
    "read_ends",
    "Layout",
    "import_zarr",
    "is_replay_buffer",
    "locate",
    "open_buffer",
    "resolve_layout",
    "camera_kind",
    "video_source",
    "ASSUMED_FPS",
    "CLOCK_KEY",
]

ASSUMED_FPS = 10.0  # Diffusion Policy's real-robot control rate, when the buffer records none
CLOCK_KEY = "data/timestamp"
VIDEOS = "videos"
_CLOCK = re.compile(r"(^|_)(t|time|times|stamps?|timestamps?)$")
_ACTION = ("action", "actions")
_DIGITS = re.compile(r"^\d+$")


def import_zarr() -> Any:
    """zarr, imported on first use, with imagecodecs' numcodecs (JPEG-XL, ...) registered when installed.

    Raises:
        ImportError: zarr is not installed (it is the `formats` extra).
    """
    try:
        import zarr
    except ImportError as e:
        raise ImportError("reading Zarr replay buffers needs zarr: pip install 'robolake[formats]'") from e
    try:
        from imagecodecs.numcodecs import register_codecs
    except ImportError:  # a buffer without imagecodecs chunks reads without it; one with them says so on read
        return zarr
    register_codecs(verbose=False)
    return zarr


def _is_group(path: str) -> bool:
    return os.path.isfile(os.path.join(path, ".zgroup")) or os.path.isfile(os.path.join(path, "zarr.json"))


def _is_array(path: str) -> bool:
    return os.path.isfile(os.path.join(path, ".zarray")) or os.path.isfile(os.path.join(path, "zarr.json"))


def is_replay_buffer(path: str) -> bool:
    """A Zarr group with a `data` group and a `meta/episode_ends` array (reads a few stat calls)."""
    return (
        os.path.isdir(path)
        and _is_group(path)
        and _is_group(os.path.join(path, "data"))
        and _is_array(os.path.join(path, "meta", "episode_ends"))
    )


def locate(path: str) -> tuple[str, str | None] | None:
    """(buffer, videos folder or None) of a unit: a buffer, or a folder holding one buffer and `videos/`."""
    if is_replay_buffer(path):
        videos = os.path.join(os.path.dirname(os.path.abspath(path)), VIDEOS)
        return path, videos if os.path.isdir(videos) else None
    if not os.path.isdir(os.path.join(path, VIDEOS)):
        return None
    try:
        inner = [os.path.join(path, n) for n in sorted(os.listdir(path)) if not n.startswith(".")]
    except OSError:
        return None
    buffers = [p for p in inner if is_replay_buffer(p)]
    return (buffers[0], os.path.join(path, VIDEOS)) if len(buffers) == 1 else None


def open_buffer(path: str) -> Any:
    """The buffer's root group, read-only.

    Raises:
        SourceError: `corrupt_file` when its metadata does not parse.
    """
    zarr = import_zarr()
    try:
        return zarr.open_group(path, mode="r")
    except Exception as e:  # zarr raises its own types for every broken store
        raise SourceError("corrupt_file", path, f"the Zarr store cannot be opened ({type(e).__name__}: {e})") from e


def camera_kind(dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
    """`rgb`/`rgba`/`gray` for uint8 frames ([N, H, W, 3|4|1] or [N, H, W]); None for any other array."""
    if dtype != np.uint8:
        return None
    if len(shape) == 4 and shape[-1] in (1, 3, 4):
        return {1: "gray", 3: "rgb", 4: "rgba"}[int(shape[-1])]
    if len(shape) == 3 and min(shape[1:]) > 4:
        return "gray"
    return None


def video_source(stem: str) -> str:
    """The mapping source of a camera of the videos tree: `videos/{i}/<stem>.mp4` (`{i}`: the episode)."""
    return f"{VIDEOS}/{{i}}/{stem}.mp4"


@dataclass(frozen=True, kw_only=True)
class ArrayInfo:
    """One array of the buffer.

    Attributes:
        key: Its path in the buffer (`data/action`).
        dtype: numpy dtype string.
        shape: Full shape (rows first).
        chunks: Chunk shape.
        codec: Its compressor(s), as named in the metadata (`blosc/zstd`, `imagecodecs_jpegxl`).
    """

    key: str
    dtype: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    codec: str

    @property
    def width(self) -> int:
        return int(np.prod(self.shape[1:])) if len(self.shape) > 1 else 1


@dataclass(frozen=True, kw_only=True)
class Layout:
    """What one buffer holds, decided once on the driver (all picklable).

    Attributes:
        name: `images` (cameras in the buffer), `videos` (an mp4 tree), `arrays` (no camera) or `mapped`.
        buffer: The buffer directory.
        videos: The `videos/` folder beside it, or None.
        ends: `meta/episode_ends`.
        arrays: Every `data/` array.
        state: Keys of the state, concatenated in order.
        action: Keys of the action (empty with `action_from_state`).
        state_widths: Width of each state key.
        action_widths: Width of each action key.
        action_from_state: Action = state one row ahead.
        cameras: (camera, source, kind): a `data/` key (`rgb`, `gray`, `rgba`) or `video` (source
            `videos/{i}/<stem>.mp4`).
        clock: The key whose seconds time every stream (`data/timestamp`), or None (rows / fps).
        fps: Step rate.
        fps_source: Where `fps` came from.
        tag: Default embodiment tag.
        task: Instruction of every episode.
        video_episodes: Episode indices that have a folder under `videos/`.
        notes: What was left out or assumed, for the user.
    """

    name: str
    buffer: str
    videos: str | None
    ends: tuple[int, ...]
    arrays: tuple[ArrayInfo, ...]
    state: tuple[str, ...]
    action: tuple[str, ...]
    state_widths: tuple[int, ...]
    action_widths: tuple[int, ...]
    action_from_state: bool
    cameras: tuple[tuple[str, str, str], ...]
    clock: str | None
    fps: float
    fps_source: str
    tag: str
    task: str
    video_episodes: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()

    def array(self, key: str) -> ArrayInfo:
        return next(a for a in self.arrays if a.key == key)

    def rows(self, episode: int) -> tuple[int, int]:
        """[start, end) rows of an episode."""
        return (self.ends[episode - 1] if episode else 0), self.ends[episode]

    def video_path(self, source: str, episode: int) -> str:
        """The mp4 of a video camera's `source` for one episode (under the videos folder).

        Raises:
            SourceError: `outside_source`, when the path (a mapping's `..`, a symlink) leaves the
                dataset folder: nothing outside the source is ever opened.
        """
        if self.videos is None:
            raise ValueError("this buffer has no videos folder")
        rel = source.replace("{i}", str(episode))
        base = os.path.dirname(self.videos)
        path = os.path.join(base, rel)
        try:
            return ensure_within(base, path)
        except OutsideRootError:
            raise SourceError(
                "outside_source",
                path,
                f"the video of episode {episode} ({rel}) resolves outside the dataset folder {base} (a '..' or a "
                "symlink out of it); robolake reads a dataset's own files only: copy the video into videos/",
            ) from None


def _codec(meta: dict[str, Any]) -> str:
    """The compressor(s) of an array from its metadata document (v2 `.zarray` or v3 `zarr.json`)."""
    if meta.get("zarr_format") == 2:
        c = meta.get("compressor") or {}
        filters = [f.get("id", "?") for f in meta.get("filters") or []]
        name = c.get("id", "none") + (f"/{c['cname']}" if c.get("cname") else "")
        return "+".join([*filters, name])
    names = []
    for c in meta.get("codecs") or []:
        if c.get("name") in ("bytes", "transpose"):
            continue
        cfg = c.get("configuration") or {}
        names.append(str(c.get("name")) + (f"/{cfg['cname']}" if cfg.get("cname") else ""))
    return "+".join(names) or "none"


def array_info(arr: Any) -> ArrayInfo:
    try:
        meta = arr.metadata.to_dict()
    except Exception:  # metadata of a zarr version this reader does not know: the codec is not said
        meta = {}
    return ArrayInfo(
        key=str(arr.path).lstrip("/"),
        dtype=str(np.dtype(arr.dtype)),
        shape=tuple(int(x) for x in arr.shape),
        chunks=tuple(int(x) for x in arr.chunks),
        codec=_codec(json.loads(json.dumps(meta, default=str))),
    )


def read_ends(root: Any, path: str, limits: ReadLimits) -> tuple[int, ...]:
    """`meta/episode_ends`, checked: 1-D integers, non-decreasing, non-negative.

    Raises:
        SourceError: `bad_metadata` naming what is wrong.
    """
    arr = root["meta/episode_ends"]
    limits.check_array(arr.shape, np.dtype(arr.dtype).itemsize, path, "meta/episode_ends")
    ends = np.asarray(arr[...])
    if ends.ndim != 1 or ends.dtype.kind not in "iu":
        raise SourceError(
            "bad_metadata",
            path,
            f"meta/episode_ends is {ends.dtype} {ends.shape}; it must be a 1-D integer array of episode end rows",
        )
    if ends.size and (ends[0] < 0 or (np.diff(ends) < 0).any()):
        bad = int(np.flatnonzero(np.diff(ends) < 0)[0]) + 1 if (np.diff(ends) < 0).any() else 0
        raise SourceError(
            "bad_metadata",
            path,
            f"meta/episode_ends goes down at episode {bad} ({ends[max(bad - 1, 0)]} -> {ends[bad]}); "
            "episode end rows must not decrease: the buffer's episodes cannot be told apart",
        )
    return tuple(int(x) for x in ends)


class _Resolver:
    """Builds the Layout of one open buffer."""

    def __init__(self, root: Any, path: str, videos: str | None, options: Any):
        self.root, self.path, self.videos, self.options = root, path, videos, options
        self.mapping: Mapping | None = options.mapping
        self.limits: ReadLimits = options.limits
        self.notes: list[str] = []

    def arrays(self) -> dict[str, ArrayInfo]:
        out: dict[str, ArrayInfo] = {}
        for name, arr in sorted(self.root["data"].arrays()):
            info = array_info(arr)
            out[f"data/{name}"] = ArrayInfo(
                key=f"data/{name}", dtype=info.dtype, shape=info.shape, chunks=info.chunks, codec=info.codec
            )
            self.limits.check_array(info.chunks, np.dtype(info.dtype).itemsize, self.path, f"data/{name} chunk")
        groups = [g for g, _ in self.root["data"].groups()]
        if groups:
            self.notes.append(
                f"{self.path}: data/ holds groups ({', '.join(sorted(groups))}); a replay buffer's data are "
                "arrays, so they are not read"
            )
        return out

    def video_cameras(self, n_episodes: int) -> tuple[list[tuple[str, str, str]], tuple[int, ...]]:
        """Camera stems found under `videos/<episode>/`, and the episodes that have a folder."""
        if self.videos is None:
            return [], ()
        stems: set[str] = set()
        have: list[int] = []
        for name in sorted(os.listdir(self.videos)):
            folder = os.path.join(self.videos, name)
            if not os.path.isdir(folder) or name.startswith("."):
                continue
            if not _DIGITS.match(name) or int(name) >= n_episodes:
                self.notes.append(
                    f"{folder}: a video folder that matches no episode (meta/episode_ends lists {n_episodes}); not read"
                )
                continue
            have.append(int(name))
            stems |= {f[:-4] for f in os.listdir(folder) if f.endswith(".mp4") and not f.startswith(".")}
        cams = [(f"camera_{s}" if _DIGITS.match(s) else s, video_source(s), "video") for s in sorted(stems, key=_order)]
        return cams, tuple(sorted(have))

    def clock_notes(self, arrays: dict[str, ArrayInfo], ends: tuple[int, ...]) -> None:
        """Clocks other than the steps' that go back between episodes or within one (noted, read per episode)."""
        for key, a in arrays.items():
            if key == CLOCK_KEY or len(a.shape) != 1 or not a.dtype.startswith("float") or not _CLOCK.search(key):
                continue
            self.limits.check_array(a.shape, np.dtype(a.dtype).itemsize, self.path, key)
            t = np.asarray(self.root[key][...], dtype=np.float64)
            starts = [e0 for e0, e1 in zip((0, *ends[:-1]), ends, strict=True) if e1 > e0]
            back = [i for i, s in enumerate(starts) if 0 < s <= len(t) - 1 and t[s] < t[s - 1]]
            if back:
                self.notes.append(
                    f"{self.path}: {key} goes back between episodes ({len(back)} time(s), first before the episode "
                    f"starting at row {starts[back[0]]}); each episode is read on its own, so they land; "
                    "it is kept in each episode's record as recorded"
                )

    def fps(self, arrays: dict[str, ArrayInfo], ends: tuple[int, ...]) -> tuple[float, str]:
        if self.mapping is not None and self.mapping.fps is not None:
            return float(self.mapping.fps), "mapping"
        attrs = dict(self.root.attrs)
        for key in ("fps", "frequency", "control_freq", "control_frequency"):
            v = attrs.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                return float(v), f"attribute {key}"
        if CLOCK_KEY in arrays:
            for e0, e1 in zip((0, *ends[:-1]), ends, strict=True):
                if e1 - e0 > 1:
                    t = np.asarray(self.root[CLOCK_KEY][e0:e1], dtype=np.float64)
                    dt = np.diff(t)
                    dt = dt[np.isfinite(dt) & (dt > 0)]
                    if dt.size:
                        rate = 1.0 / float(np.median(dt))
                        near = round(rate)
                        rate = float(near) if near and abs(rate - near) / near < 0.02 else round(rate, 3)
                        return rate, f"measured from {CLOCK_KEY}"
        self.notes.append(
            f"{self.path}: the buffer records no rate (no {CLOCK_KEY}, no fps attribute): {ASSUMED_FPS:g} Hz assumed, "
            "Diffusion Policy's control rate; give `fps:` in a mapping if it differs"
        )
        return ASSUMED_FPS, "assumed (Diffusion Policy's control rate)"

    def resolve(self) -> Layout:
        ends = read_ends(self.root, self.path, self.limits)
        arrays = self.arrays()
        total = ends[-1] if ends else 0
        for key, a in arrays.items():
            if a.shape[0] < total if a.shape else True:
                self.notes.append(
                    f"{self.path}: {key} has {a.shape[0] if a.shape else 0} rows but meta/episode_ends runs to "
                    f"{total}; episodes past its end lack it"
                )
        video_cams, video_eps = self.video_cameras(len(ends))
        self.clock_notes(arrays, ends)
        fps, fps_source = self.fps(arrays, ends)
        if self.mapping is not None:
            return self.mapped(self.mapping, arrays, ends, video_cams, video_eps, fps, fps_source)
        cams: list[tuple[str, str, str]] = []
        state: list[str] = []
        action = [k for k in (f"data/{a}" for a in _ACTION) if k in arrays and self.numeric(arrays[k])][:1]
        for key, a in arrays.items():
            kind = camera_kind(np.dtype(a.dtype), a.shape)
            if kind is not None:
                self.check_frames(key, a)
                cams.append((key.rsplit("/", 1)[-1], key, kind))
            elif len(a.shape) >= 3 and min(a.shape[1:3]) > 4:
                self.notes.append(
                    f"{self.path}: {key} is {a.dtype} {list(a.shape[1:])} per row: image-shaped but not uint8 frames, "
                    "so neither a camera nor a record stream; not ingested"
                )
            elif key not in action and key != CLOCK_KEY and not _CLOCK.search(key) and self.is_state(a):
                state.append(key)
        if not state:
            raise SourceError(
                "missing_key",
                self.path,
                "no float data/ key of one row per step to take as the state "
                f"(it holds {', '.join(arrays) or 'none'}); "
                f"write a mapping (`robolake inspect {self.path} --suggest-map`) and pass --map",
            )
        if not action:
            self.notes.append(
                f"{self.path}: no data/action key: the action is the next row's state (action_from_state)"
            )
        if self.options.state_only:
            cams, video_cams = [], []
        cameras = tuple(cams + video_cams)
        s_w = tuple(arrays[k].width for k in state)
        a_w = tuple(arrays[k].width for k in action)
        return Layout(
            name="videos" if video_cams else "images" if cams else "arrays",
            buffer=self.path,
            videos=self.videos,
            ends=ends,
            arrays=tuple(arrays.values()),
            state=tuple(state),
            action=tuple(action),
            state_widths=s_w,
            action_widths=a_w,
            action_from_state=not action,
            cameras=cameras,
            clock=CLOCK_KEY if CLOCK_KEY in arrays and self.numeric(arrays[CLOCK_KEY]) else None,
            fps=fps,
            fps_source=fps_source,
            tag=f"replay_s{sum(s_w)}_a{sum(a_w) if action else sum(s_w)}",
            task="",
            video_episodes=video_eps,
            notes=tuple(self.notes),
        )

    @staticmethod
    def numeric(a: ArrayInfo) -> bool:
        return np.dtype(a.dtype).kind in "fiub" and len(a.shape) >= 1

    @staticmethod
    def is_state(a: ArrayInfo) -> bool:
        return np.dtype(a.dtype).kind == "f" and 1 <= len(a.shape) <= 3 and a.width <= 4096

    def check_frames(self, key: str, a: ArrayInfo) -> None:
        channels = int(a.shape[3]) if len(a.shape) == 4 else 1
        self.limits.check_frame(int(a.shape[1]), int(a.shape[2]), channels, 1, self.path, key)

    def mapped(
        self,
        m: Mapping,
        arrays: dict[str, ArrayInfo],
        ends: tuple[int, ...],
        video_cams: list[tuple[str, str, str]],
        video_eps: tuple[int, ...],
        fps: float,
        fps_source: str,
    ) -> Layout:
        names = set(arrays) | {src for _, src, _ in video_cams}

        def key(source: str) -> str:
            s = source.strip("/")
            return s if s in names or s.startswith(f"{VIDEOS}/") else f"data/{s}"

        check_sources(
            Mapping(
                state=tuple(type(x)(source=key(x.source)) for x in m.state),
                action=tuple(type(x)(source=key(x.source)) for x in m.action),
                cameras=tuple(type(c)(name=c.name, source=key(c.source)) for c in m.cameras),
                action_from_state=m.action_from_state,
                path=m.path,
            ),
            names,
            self.path,
        )
        if any(s.field or s.stamps or s.names or s.child_frame for s in (*m.state, *m.action)) or m.task_from:
            raise SourceError(
                "bad_metadata",
                self.path,
                f"mapping {m.path}: a replay buffer's streams are whole arrays on one clock ({CLOCK_KEY}); "
                "`field`, `stamps`, `names`, `child_frame` and `task_from` do not apply: name data/ keys only",
            )
        if m.split.by != "file":
            raise SourceError(
                "bad_metadata", self.path, f"mapping {m.path}: meta/episode_ends splits a replay buffer; drop `split:`"
            )
        state = tuple(key(s.source) for s in m.state)
        action = tuple(key(s.source) for s in m.action)
        for k in (*state, *action):
            if not self.numeric(arrays[k]) or len(arrays[k].shape) > 3:
                raise SourceError(
                    "shape",
                    self.path,
                    f"{k} is {arrays[k].dtype} {list(arrays[k].shape)}; state and action keys are numbers, "
                    "one row per step",
                )
        cams: list[tuple[str, str, str]] = []
        chosen = m.cameras if m.cameras_given else ()
        for c in chosen:
            src = key(c.source)
            if src.startswith(f"{VIDEOS}/"):
                cams.append((c.name, src, "video"))
                continue
            a = arrays[src]
            kind = camera_kind(np.dtype(a.dtype), a.shape)
            if kind is None:
                raise SourceError(
                    "shape",
                    self.path,
                    f"mapping {m.path} cameras.{c.name}: {src} is {a.dtype} {list(a.shape)}, not uint8 frames "
                    "[N, H, W, 3|4|1] or [N, H, W]",
                )
            self.check_frames(src, a)
            cams.append((c.name, src, kind))
        if not m.cameras_given:  # the default cameras, as the layout without a mapping finds them
            for k, a in arrays.items():
                kind = camera_kind(np.dtype(a.dtype), a.shape)
                if kind is not None:
                    self.check_frames(k, a)
                    cams.append((k.rsplit("/", 1)[-1], k, kind))
            cams += video_cams
        if self.options.state_only:
            cams = []
        s_w = tuple(arrays[k].width for k in state)
        a_w = tuple(arrays[k].width for k in action)
        return Layout(
            name="mapped",
            buffer=self.path,
            videos=self.videos,
            ends=ends,
            arrays=tuple(arrays.values()),
            state=state,
            action=action,
            state_widths=s_w,
            action_widths=a_w,
            action_from_state=m.action_from_state,
            cameras=tuple(cams),
            clock=CLOCK_KEY if CLOCK_KEY in arrays and self.numeric(arrays[CLOCK_KEY]) else None,
            fps=fps,
            fps_source=fps_source,
            tag=m.embodiment or f"replay_s{sum(s_w)}_a{sum(a_w) if action else sum(s_w)}",
            task=m.task or "",
            video_episodes=video_eps,
            notes=tuple(self.notes),
        )


def _order(stem: str) -> tuple[int, str]:
    return (int(stem), "") if _DIGITS.match(stem) else (1 << 30, stem)


def resolve_layout(root: Any, path: str, videos: str | None, options: Any) -> Layout:
    """The layout of an open buffer (`options`: the reader's `SourceOptions`).

    Raises:
        SourceError: `bad_metadata` (episode ends unusable, a mapping key that does not apply),
            `missing_key` (no state key and no mapping; a mapping names a key the buffer lacks),
            `shape`, `too_large` (a chunk or a frame over the read budget).
    """
    return _Resolver(root, path, videos, options).resolve()
