"""Reader for HDF5 recordings: ALOHA/ACT, robomimic, raw robosuite, and any layout through a mapping.

HDF5 is a container, not a format: each recorder picks its own tree. The layouts in wide use are
recognised by their keys, so they need no mapping:

* **ALOHA / ACT** (one episode per file): `/observations/qpos` [T, 14] (state), `qvel`, `effort`,
  `/action` [T, 14], and `/observations/images/<cam>` either raw uint8 [T, H, W, 3] or, when the
  recorder's `compress` option was on, JPEG bytes zero-padded to a common row length [T, L] with
  the true lengths in `/compress_len` [cams, T]. File attributes: `sim`, `compress`. Rows are
  ticks at 50 Hz (the ALOHA control rate; a `fps` / `control_freq` attribute overrides it).
* **robomimic** (many demos per file): `data/demo_N/obs/<key>` (low-dimensional keys are
  concatenated in name order into the state; uint8 [T, H, W, 3] keys ending in `_image` are
  cameras), `actions`, `rewards`, `dones`, `states`; `data.attrs["env_args"]` is JSON with the
  env name, robot and control rate; `mask/<split>` lists the demos of each split.
* **raw robosuite** (`collect_human_demonstrations`): `data/demo_N/states` (the flattened MuJoCo
  state) and `actions`, `data.attrs["env"]`, a per-demo `model_file` XML (its sha256 is kept in
  the episode metadata so the scene can be matched later without storing the XML per episode).

The default embodiment tag separates layouts of different widths, so one folder of mixed tasks
lands without a mapping: `robosuite_<robot>_<env>` / `robomimic_<robot>_<env>` (a robosuite
state's width depends on the scene), and `aloha` for the 14-joint ALOHA, `aloha_s<S>_a<A>` for
other widths. Anything else is read through a mapping (`--map`), whose sources are dataset paths
relative to each episode group (`episodes:` names the group whose children are episodes; the
file root otherwise), with optional `stamps:` datasets holding per-row times so streams recorded
at different rates are resampled onto one clock (see `resample`), and `split:` cuts one long
recording into episodes at pauses of the first state stream's clock (`by: gap`) or where a
row-aligned boolean dataset is true (`by: topic`).

The reader keeps no file open between calls: readers travel to Ray workers by pickle, and an
`h5py.File` does not pickle. Images stored as JPEG/PNG are passed through unchanged; raw pixels
are JPEG-encoded once, here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    TabularEpisode,
    content_hash,
)
from robolake.lake.sources.mapping import Mapping, check_sources
from robolake.lake.sources.registry import SourceFormat, SourceOptions
from robolake.lake.sources.resample import (
    Stream,
    align,
    check_frame_sizes,
    check_stream,
    segments_by_flag,
    segments_by_gap,
)
from robolake.lake.sources.video import file_digest
from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec

__all__ = ["HDF5Reader", "is_hdf5_file", "inspect_hdf5", "FORMAT"]

log = logging.getLogger(__name__)

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
ALOHA_FPS = 50.0
ROBOSUITE_FPS = 20.0


def is_hdf5_file(path: str) -> bool:
    """An HDF5 file: the signature at offset 0 or at a user-block offset (512, 1024, 2048, ...)."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            for offset in (0, 512, 1024, 2048):
                f.seek(offset)
                if f.read(8) == HDF5_MAGIC:
                    return True
    except OSError:
        return False
    return False


def _h5py() -> Any:
    try:
        import h5py
    except ImportError as e:  # pragma: no cover - h5py is a core dependency
        raise ImportError("reading HDF5 needs h5py: pip install h5py") from e
    return h5py


def _tag(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "robot"


def _demo_key(name: str) -> tuple[int, str]:
    m = re.search(r"(\d+)$", name)
    return (int(m.group(1)) if m else 1 << 30, name)


def _attr_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.size == 1:
        return _attr_text(value.reshape(-1)[0])
    return str(value)


def _is_image_dataset(ds: Any) -> bool:
    return ds.dtype == np.uint8 and ds.ndim == 4 and ds.shape[-1] == 3


def _is_encoded_dataset(ds: Any) -> bool:
    """JPEG/PNG rows: uint8 [T, L] (ACT's padded rows) or a variable-length bytes dataset."""
    return (ds.dtype == np.uint8 and ds.ndim == 2 and ds.shape[1] > 64) or ds.dtype.kind == "O" or ds.dtype.kind == "S"


@dataclass(frozen=True, kw_only=True)
class _Layout:
    """What one file holds, decided once on the driver (all picklable)."""

    name: str                              # aloha | robomimic | robosuite | mapped
    episodes: tuple[tuple[int, str], ...]  # (episode index, group path; "" = file root)
    state: tuple[tuple[str, str | None], ...]   # (dataset relative to the episode group, stamps)
    action: tuple[tuple[str, str | None], ...]
    cameras: tuple[tuple[str, str, str | None], ...]  # (camera, dataset, stamps)
    state_widths: tuple[int, ...]
    action_widths: tuple[int, ...]
    fps: float
    task: str
    task_from: str | None
    tag: str
    action_from_state: bool
    splits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    attrs: tuple[tuple[str, str], ...] = ()
    split_by: str = "file"                 # file | gap | topic (mapping `split:`)
    split_seconds: float = 0.0
    split_source: str | None = None


class HDF5Reader:
    """Reads one HDF5 file (one or many episodes).

    Args:
        path: The file.
        options: Embodiment tag, mapping, state-only choice.

    Raises:
        SourceError: the file cannot be opened (truncated, not HDF5), or a mapping names a dataset
            the file lacks.
        ValueError: the layout is unknown and no mapping was given.
    """

    def __init__(self, path: str, options: SourceOptions | None = None):
        self.root = os.path.abspath(path)
        self.options = options or SourceOptions()
        with self._open() as f:
            self.layout = self._resolve(f)
        self.format_name = f"hdf5-{self.layout.name}"
        self.tag = self.options.embodiment or self.layout.tag
        self.fps = self.layout.fps
        self.cameras = tuple(c for c, _, _ in self.layout.cameras)

    def _open(self) -> Any:
        h5py = _h5py()
        try:
            return h5py.File(self.root, "r")
        except OSError as e:
            raise SourceError(
                "corrupt_file", self.root,
                f"HDF5 file cannot be opened ({e}); it is truncated or corrupt: re-copy it from the recorder",
            ) from e

    # --- layout ------------------------------------------------------------------------------

    def _resolve(self, f: Any) -> _Layout:
        mapping = self.options.mapping
        if mapping is not None:
            return self._mapped(f, mapping)
        if "observations" in f and "qpos" in f["observations"] and "action" in f:
            return self._aloha(f)
        data = f.get("data")
        if data is not None and hasattr(data, "keys"):
            demos = sorted((k for k in data.keys() if hasattr(data[k], "keys")), key=_demo_key)
            if demos and "obs" in data[demos[0]] and "actions" in data[demos[0]]:
                return self._robomimic(f, data, demos)
            if demos and "states" in data[demos[0]] and "actions" in data[demos[0]]:
                return self._robosuite(f, data, demos)
        keys = self._keys(f)
        raise ValueError(
            f"{self.root}: HDF5 layout not recognised (not ALOHA /observations/qpos + /action, robomimic "
            f"data/demo_N/obs, or robosuite data/demo_N/states); it holds {', '.join(keys[:12])}"
            f"{' ...' if len(keys) > 12 else ''}; write a mapping (`robolake inspect {self.root}`) and pass --map"
        )

    @staticmethod
    def _keys(f: Any) -> list[str]:
        h5py = _h5py()
        out: list[str] = []
        f.visititems(lambda name, obj: out.append(name) if isinstance(obj, h5py.Dataset) else None)
        return out

    def _width(self, ds: Any, name: str) -> int:
        if ds.ndim == 1:
            return 1
        if ds.ndim != 2:
            raise SourceError("shape", self.root, f"dataset {name!r} has shape {ds.shape}; state/action datasets are [T, width]")
        return int(ds.shape[1])

    def _file_fps(self, f: Any, default: float) -> float:
        for key in ("fps", "control_freq", "frequency"):
            if key in f.attrs:
                try:
                    return float(np.asarray(f.attrs[key]).reshape(-1)[0])
                except (TypeError, ValueError):
                    pass
        return default

    def _aloha(self, f: Any) -> _Layout:
        obs = f["observations"]
        cams: list[tuple[str, str, str | None]] = []
        if "images" in obs:
            for cam in sorted(obs["images"].keys()):
                ds = obs["images"][cam]
                if _is_image_dataset(ds) or _is_encoded_dataset(ds):
                    cams.append((cam, f"observations/images/{cam}", None))
                else:
                    log.info("%s: observations/images/%s has shape %s dtype %s; not an RGB camera, skipped", self.root, cam, ds.shape, ds.dtype)
        s_w, a_w = self._width(obs["qpos"], "observations/qpos"), self._width(f["action"], "action")
        attrs = tuple((k, _attr_text(f.attrs[k])) for k in sorted(f.attrs.keys()))
        return _Layout(
            name="aloha", episodes=((0, ""),), state=(("observations/qpos", None),), action=(("action", None),),
            cameras=tuple(cams), state_widths=(s_w,), action_widths=(a_w,), fps=self._file_fps(f, ALOHA_FPS),
            # ALOHA files carry no instruction; their folder is named for the task (sim_transfer_cube_scripted/).
            task=_attr_text(f.attrs.get("task", f.attrs.get("language_instruction", "")))
            or os.path.basename(os.path.dirname(self.root)).replace("_", " "),
            task_from=None,
            # A file that names its robot (ALOHA-style logs from other rigs) keeps that tag.
            tag=_attr_text(f.attrs.get("robot_type", f.attrs.get("embodiment", "")))
            or ("aloha" if (s_w, a_w) == (14, 14) else f"aloha_s{s_w}_a{a_w}"),
            action_from_state=False,
            attrs=attrs,
        )

    def _env_info(self, data: Any) -> tuple[str, str, float]:
        """(env name, robot, control rate) from robomimic env_args or robosuite env/env_info."""
        env, robot, fps = "", "", ROBOSUITE_FPS
        for key in ("env_args", "env_info"):
            if key in data.attrs:
                try:
                    info = json.loads(_attr_text(data.attrs[key]))
                except json.JSONDecodeError:
                    continue
                kwargs = info.get("env_kwargs", info)
                env = env or str(info.get("env_name", kwargs.get("env_name", "")))
                robots = kwargs.get("robots", "")
                robot = robot or (robots[0] if isinstance(robots, list) and robots else str(robots))
                if kwargs.get("control_freq"):
                    fps = float(kwargs["control_freq"])
        if "env" in data.attrs:
            env = env or _attr_text(data.attrs["env"])
        return env, robot, fps

    def _splits(self, f: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
        mask = f.get("mask")
        if mask is None or not hasattr(mask, "keys"):
            return ()
        return tuple(
            (name, tuple(_attr_text(x) for x in np.asarray(mask[name][()]).reshape(-1))) for name in sorted(mask.keys())
        )

    def _robomimic(self, f: Any, data: Any, demos: list[str]) -> _Layout:
        obs = data[demos[0]]["obs"]
        low = [k for k in sorted(obs.keys()) if not _is_image_dataset(obs[k]) and obs[k].ndim <= 2 and obs[k].dtype.kind in "fiub"]
        cams = [(k[: -len("_image")] if k.endswith("_image") else k, f"obs/{k}", None) for k in sorted(obs.keys()) if _is_image_dataset(obs[k])]
        if not low:
            raise SourceError("missing_key", self.root, f"robomimic demo {demos[0]} has no low-dimensional obs keys; it has {list(obs.keys())}")
        env, robot, fps = self._env_info(data)
        return _Layout(
            name="robomimic", episodes=tuple((_demo_key(d)[0] if _demo_key(d)[0] < 1 << 30 else i, f"data/{d}") for i, d in enumerate(demos)),
            state=tuple((f"obs/{k}", None) for k in low), action=(("actions", None),), cameras=tuple(cams),
            state_widths=tuple(self._width(obs[k], f"obs/{k}") for k in low),
            action_widths=(self._width(data[demos[0]]["actions"], "actions"),), fps=fps, task=env, task_from=None,
            tag=_tag("_".join(x for x in ("robomimic", robot, env) if x)), action_from_state=False, splits=self._splits(f),
        )

    def _robosuite(self, f: Any, data: Any, demos: list[str]) -> _Layout:
        first = data[demos[0]]
        env, robot, fps = self._env_info(data)
        return _Layout(
            name="robosuite", episodes=tuple((_demo_key(d)[0] if _demo_key(d)[0] < 1 << 30 else i, f"data/{d}") for i, d in enumerate(demos)),
            state=(("states", None),), action=(("actions", None),), cameras=(),
            state_widths=(self._width(first["states"], "states"),), action_widths=(self._width(first["actions"], "actions"),),
            fps=fps, task=env, task_from=None, tag=_tag("_".join(x for x in ("robosuite", robot, env) if x)),
            action_from_state=False, splits=self._splits(f),
        )

    def _mapped(self, f: Any, m: Mapping) -> _Layout:
        if m.episodes:
            group = f.get(m.episodes.strip("/"))
            if group is None or not hasattr(group, "keys"):
                raise SourceError("missing_key", self.root, f"mapping {m.path} episodes: {m.episodes!r} is not a group in this file; it has {list(f.keys())}")
            names = sorted((k for k in group.keys() if hasattr(group[k], "keys")), key=_demo_key)
            episodes = tuple((i, f"{m.episodes.strip('/')}/{k}") for i, k in enumerate(names))
        else:
            episodes = ((0, ""),)
        if not episodes:
            raise SourceError("empty", self.root, f"mapping {m.path} episodes: {m.episodes!r} holds no episode groups")
        first = f[episodes[0][1]] if episodes[0][1] else f
        have = [*self._keys(first), *(f"attrs/{k}" for k in first.attrs.keys())]
        if self.options.state_only:  # a camera the file lacks is dropped, not an error
            kept = tuple(c for c in m.cameras if c.source.strip("/") in have)
            for c in m.cameras:
                if c not in kept:
                    log.info("%s: camera %r (%s) missing; --state-only ingests without it", self.root, c.name, c.source)
            m = dataclasses.replace(m, cameras=kept)
        check_sources(m, have, self.root)

        def rel(p: str) -> str:
            return p.strip("/")

        state = tuple((rel(s.source), rel(s.stamps) if s.stamps else None) for s in m.state)
        action = tuple((rel(s.source), rel(s.stamps) if s.stamps else None) for s in m.action)
        widths_s = tuple(self._width(first[p], p) for p, _ in state)
        widths_a = tuple(self._width(first[p], p) for p, _ in action) if action else widths_s
        stamps = [s for _, s in (*state, *action) if s] + [c.stamps for c in m.cameras if c.stamps]
        fps = m.fps
        if fps is None and not stamps:
            raise ValueError(f"{m.path}: the mapped datasets of {self.root} carry no `stamps:` and the mapping gives no `fps:`; add one")
        if fps is None:
            t = np.asarray(first[rel(m.state[0].stamps)][()] if m.state[0].stamps else first[rel(stamps[0])][()], dtype=np.float64)
            dt = np.diff(t)
            fps = float(1.0 / np.median(dt[dt > 0])) if (dt > 0).any() else 0.0
            if not fps > 0:
                raise SourceError("timestamps", self.root, f"cannot tell the rate of {m.state[0].source}; give `fps:` in the mapping")
        s_dim = sum(widths_s)
        a_dim = sum(widths_a)
        return _Layout(
            name="mapped", episodes=episodes, state=state, action=action,
            cameras=tuple((c.name, rel(c.source), rel(c.stamps) if c.stamps else None) for c in m.cameras),
            state_widths=widths_s, action_widths=widths_a, fps=float(fps), task=m.task or "",
            task_from=rel(m.task_from) if m.task_from else None, tag=m.embodiment or f"hdf5_s{s_dim}_a{a_dim}",
            action_from_state=m.action_from_state, split_by=m.split.by, split_seconds=float(m.split.seconds or 0.0),
            split_source=rel(m.split.source) if m.split.source else None,
        )

    # --- reader protocol -----------------------------------------------------------------

    def spec(self) -> EmbodimentSpec:
        lay = self.layout

        def slices(names: tuple[tuple[str, str | None], ...], widths: tuple[int, ...]) -> tuple[SliceSpec, ...]:
            out, start = [], 0
            for (path, _), w in zip(names, widths, strict=True):
                out.append(SliceSpec(name=path.rsplit("/", 1)[-1], start=start, end=start + w))
                start += w
            return tuple(out)

        action_names = lay.action if lay.action else lay.state
        return EmbodimentSpec(
            tag=self.tag, state_dim=sum(lay.state_widths), action_dim=sum(lay.action_widths),
            state=slices(lay.state, lay.state_widths), action=slices(action_names, lay.action_widths),
            cameras=self.cameras, video_keys=tuple((c, p) for c, p, _ in lay.cameras), fps=self.fps,
            robot_type=lay.tag,
        )

    def discover(self) -> list[EpisodeRef]:
        split_of: dict[str, list[str]] = {}
        for split, demos in self.layout.splits:
            for d in demos:
                split_of.setdefault(d, []).append(split)
        if self.layout.split_by != "file":
            return self._discover_windows()
        return [
            EpisodeRef(
                source_uri=self.root, source_format=self.format_name, episode_index=idx, embodiment=self.tag,
                location=(("group", group), ("splits", tuple(split_of.get(group.rsplit("/", 1)[-1], [])))),
            )
            for idx, group in self.layout.episodes
        ]

    def _discover_windows(self) -> list[EpisodeRef]:
        """Episodes cut out of each recording by a pause in the state clock or by a boolean dataset."""
        lay, refs = self.layout, list[EpisodeRef]()
        with self._open() as f:
            for _, group in lay.episodes:
                g = f[group] if group else f
                probe = EpisodeRef(source_uri=self.root, source_format=self.format_name, episode_index=0, embodiment=self.tag,
                                   location=(("group", group),))
                path, stamps = lay.state[0]
                t = self._stream(g, path, stamps, probe).t
                if lay.split_by == "gap":
                    spans = segments_by_gap(t, lay.split_seconds)
                else:
                    flags = self._read_array(g, str(lay.split_source), probe).reshape(-1)
                    if len(flags) != len(t):
                        raise SourceError("shape", self.root, f"split source {lay.split_source!r} has {len(flags)} rows but {path} has {len(t)}; they must be row-aligned")
                    spans = segments_by_flag(t, flags)
                for a, b in spans:
                    refs.append(EpisodeRef(
                        source_uri=self.root, source_format=self.format_name, episode_index=len(refs), embodiment=self.tag,
                        location=(("group", group), ("splits", ()), ("window", (a, b))),
                    ))
        return refs

    def _group(self, f: Any, ref: EpisodeRef) -> Any:
        g = ref.get("group", "")
        if g and g not in f:
            raise SourceError("missing_key", self.root, f"episode group {g!r} is missing")
        return f[g] if g else f

    def _dataset(self, g: Any, path: str, ref: EpisodeRef) -> Any:
        if path not in g:
            here = sorted(self._keys(g))
            raise SourceError(
                "missing_key", self.root,
                f"{ref.get('group') or '/'}: dataset {path!r} is missing (this episode has {', '.join(here[:20])}); "
                "fix the mapping or drop the episode",
            )
        return g[path]

    def _read_array(self, g: Any, path: str, ref: EpisodeRef) -> np.ndarray:
        ds = self._dataset(g, path, ref)
        try:
            arr = np.asarray(ds[()], dtype=np.float64)
        except (OSError, ValueError, TypeError) as e:
            raise SourceError("corrupt_file", self.root, f"dataset {path!r} cannot be read ({e}); the file is truncated or corrupt") from e
        if arr.ndim == 0:
            return arr.reshape(1, 1)
        return arr.reshape(len(arr), -1) if arr.size else arr.reshape(len(arr), int(np.prod(arr.shape[1:])))

    def _stream(self, g: Any, path: str, stamps: str | None, ref: EpisodeRef) -> Stream:
        values = self._read_array(g, path, ref)
        t = self._read_array(g, stamps, ref).reshape(-1) if stamps else np.arange(len(values), dtype=np.float64) / self.fps
        return Stream(name=f"{ref.get('group') or ''}/{path}".lstrip("/"), t=t, values=values, path=self.root)

    def read_tabular(self, ref: EpisodeRef) -> TabularEpisode:
        """Read, check and align one episode's state and action.

        Raises:
            SourceError: a dataset is missing, unreadable, empty, non-finite, of changing width, or
                the streams disagree in length (no stamps) or do not overlap in time (stamps).
        """
        lay = self.layout
        with self._open() as f:
            g = self._group(f, ref)
            state = [self._stream(g, p, s, ref) for p, s in lay.state]
            action = [self._stream(g, p, s, ref) for p, s in lay.action]
            cam_t = {c: self._frame_times(g, p, s, ref) for c, p, s in lay.cameras
                     if not (self.options.state_only and p not in g)}
            task = self._task(f, g, ref)
            success = self._success(g)
            model_sha = None
            if "model_file" in g.attrs:
                model_sha = hashlib.sha256(_attr_text(g.attrs["model_file"]).encode()).hexdigest()
        for s, w in zip([*state, *action], [*lay.state_widths, *lay.action_widths], strict=False):
            if s.values.shape[1] != w:  # type: ignore[union-attr]
                raise SourceError(
                    "shape", self.root,
                    f"{s.name} has width {s.values.shape[1]} but the file's first episode has {w}; "  # type: ignore[union-attr]
                    "episodes of one file must share a layout: split the file or give them different --embodiment tags",
                )
        stamped = any(st for _, st in (*lay.state, *lay.action)) or any(st for _, _, st in lay.cameras)
        group = ref.get("group") or "/"
        window = ref.get("window")
        if stamped or window is not None:
            cams = {c: Stream(name=f"camera {c}", t=t, values=np.zeros((len(t), 0)), path=self.root) for c, t in cam_t.items()}
            al = align(state=state, action=action, cameras=cams, fps=lay.fps, action_from_state=lay.action_from_state,
                       window=tuple(window) if window is not None else None, path=self.root)
            ts, st_v, ac_v, frames, meta = al.timestamps, al.state, al.action, al.frames, al.metadata
        else:
            streams = [*state, *action]
            for s in streams:
                check_stream(s)
            lengths = {s.name: len(s) for s in streams} | {f"camera {c}": len(t) for c, t in cam_t.items()}
            if len(set(lengths.values())) > 1:
                raise SourceError(
                    "shape", self.root,
                    f"{group}: datasets differ in length ({', '.join(f'{k}={v}' for k, v in lengths.items())}); "
                    "each row should be one tick: trim them, or give per-row `stamps:` in a mapping",
                )
            n = len(state[0])
            ts = np.arange(n, dtype=np.float64) / lay.fps
            st_v = np.concatenate([np.asarray(s.values) for s in state], axis=1)
            ac_v = np.concatenate([np.asarray(s.values) for s in action], axis=1) if action else np.concatenate([st_v[1:], st_v[-1:]])
            frames = {c: np.arange(n, dtype=np.int64) for c in cam_t}
            meta = {"action_from_state": True} if lay.action_from_state else {}
        tasks = (task,)
        task_index = np.zeros(len(ts), dtype=np.int32)
        digest = file_digest(self.root) if lay.cameras else ""
        digests = tuple(f"{c}:{digest}:{group}:{hashlib.sha256(frames[c].tobytes()).hexdigest()[:16]}" for c in frames)
        metadata: dict[str, Any] = {
            "file": self.root, "group": group, "layout": lay.name, "tasks": list(tasks),
            "frame_index": {c: frames[c].tolist() for c in frames}, **meta,
        }
        if ref.get("splits"):
            metadata["splits"] = list(ref.get("splits"))
        if model_sha:
            metadata["model_file_sha256"] = model_sha
        if lay.attrs:
            metadata["attrs"] = dict(lay.attrs)
        return TabularEpisode(
            ref=ref, state=st_v.astype(np.float32), action=ac_v.astype(np.float32), timestamps=ts,
            task_index=task_index, tasks=tasks, success=success, fps=lay.fps,
            content_hash=content_hash(state=st_v, action=ac_v, timestamps=ts, tasks=tasks, task_index=task_index, media_digests=digests),
            metadata=metadata,
        )

    def _frame_times(self, g: Any, path: str, stamps: str | None, ref: EpisodeRef) -> np.ndarray:
        ds = self._dataset(g, path, ref)
        if stamps:
            return self._read_array(g, stamps, ref).reshape(-1)
        return np.arange(ds.shape[0], dtype=np.float64) / self.fps

    def _task(self, f: Any, g: Any, ref: EpisodeRef) -> str:
        src = self.layout.task_from
        if not src:
            return self.layout.task
        if src.startswith("attrs/"):
            key = src[len("attrs/"):]
            holder = g if key in g.attrs else f
            if key not in holder.attrs:
                raise SourceError("missing_key", self.root, f"task_from attribute {key!r} is missing; it has {list(g.attrs.keys())}")
            return _attr_text(holder.attrs[key])
        value = np.asarray(self._dataset(g, src, ref)[()]).reshape(-1)
        return _attr_text(value[0]) if value.size else ""

    @staticmethod
    def _success(g: Any) -> bool | None:
        if "dones" in g:
            d = np.asarray(g["dones"][()]).reshape(-1)
            return bool(d[-1]) if d.size else None
        if "success" in g.attrs:
            return bool(np.asarray(g.attrs["success"]).reshape(-1)[0])
        return None

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Each camera's frames at the episode's ticks: stored JPEG/PNG bytes unchanged, raw pixels JPEG-encoded.

        Raises:
            SourceError: a camera dataset is missing or unreadable, or its image size changes.
        """
        from PIL import Image

        from robolake.lake.media import encode_frame

        ref = episode.ref
        index = episode.metadata.get("frame_index", {})
        with self._open() as f:
            g = self._group(f, ref)
            for cam, path, _ in self.layout.cameras:
                try:
                    ds = self._dataset(g, path, ref)
                except SourceError:
                    if self.options.state_only:
                        log.warning("%s: camera %r missing; --state-only keeps the episode without it", self.root, cam)
                        continue
                    raise
                idx = np.asarray(index.get(cam, range(episode.num_steps)), dtype=np.int64)
                if _is_image_dataset(ds):
                    # Frame by frame (recorders chunk per frame): a 1000-step 480p episode is ~1 GB raw.
                    encoded: dict[int, bytes] = {}
                    try:
                        for i in dict.fromkeys(idx.tolist()):
                            encoded[i] = encode_frame(np.ascontiguousarray(ds[i]))
                    except OSError as e:
                        raise SourceError("corrupt_file", self.root, f"camera dataset {path!r} cannot be read ({e}); the file is truncated") from e
                    images = tuple(encoded[i] for i in idx.tolist())
                    yield EncodedFrames(camera=cam, images=images, encoding="jpeg", height=int(ds.shape[1]), width=int(ds.shape[2]))
                    continue
                rows = self._encoded_rows(f, g, ds, cam, path, ref)
                chosen = [rows[i] for i in idx]
                sizes, encodings = [], set()
                for data in chosen:
                    try:
                        with Image.open(io.BytesIO(data)) as im:
                            sizes.append((im.height, im.width))
                            encodings.add((im.format or "").lower())
                    except Exception as e:
                        raise SourceError("corrupt_video", self.root, f"camera {cam!r} ({path}) holds bytes that are not an image ({e})") from e
                h, w = check_frame_sizes(sizes, f"{cam} ({path})", self.root)
                enc = encodings.pop() if len(encodings) == 1 else "jpeg"
                if enc not in ("jpeg", "png"):
                    raise SourceError("corrupt_video", self.root, f"camera {cam!r} ({path}) holds {enc} images; only JPEG and PNG pass through")
                yield EncodedFrames(camera=cam, images=tuple(chosen), encoding=enc, height=h, width=w)

    def _encoded_rows(self, f: Any, g: Any, ds: Any, cam: str, path: str, ref: EpisodeRef) -> list[bytes]:
        """The encoded image of each row: vlen bytes as stored, ACT's padded rows cut to compress_len."""
        try:
            raw = ds[()]
        except OSError as e:
            raise SourceError("corrupt_file", self.root, f"camera dataset {path!r} cannot be read ({e}); the file is truncated") from e
        if ds.dtype.kind in "OS":
            return [bytes(x.tobytes() if isinstance(x, np.ndarray) else x) for x in np.asarray(raw).reshape(-1)]
        lengths = None
        holder = g if "compress_len" in g else f
        if "compress_len" in holder:
            cl = np.asarray(holder["compress_len"][()])
            cams = [c for c, _, _ in self.layout.cameras]
            if cl.ndim == 2 and cl.shape[0] == len(cams) and cl.shape[1] == raw.shape[0]:
                lengths = cl[cams.index(cam)].astype(np.int64)
        out = []
        for i, row in enumerate(raw):
            if lengths is not None:
                out.append(bytes(row[: int(lengths[i])]))
                continue
            data = bytes(row)
            end = data.rfind(b"\xff\xd9")  # JPEG end-of-image; padding zeros follow it
            out.append(data[: end + 2] if end >= 0 else data.rstrip(b"\0"))
        return out

    def inspect(self) -> dict[str, Any]:
        """Datasets (dtype, shape, rows; demo_N groups collapsed), attributes, layout, episodes, span."""
        lay = self.layout
        info = inspect_hdf5(self.root, fps=None if lay.name == "mapped" else self.fps)
        first = ("data/demo_*/" if lay.name in ("robomimic", "robosuite") else (lay.episodes[0][1] + "/" if lay.episodes[0][1] else "")) + lay.state[0][0]
        frames = int(info["keys"].get(re.sub(r"demo_\d+", "demo_*", first), {}).get("count", 0))
        return {
            "format": self.format_name, "path": self.root, "embodiment": self.tag, "layout": lay.name,
            "episodes": len(lay.episodes), "fps": self.fps, "frames": frames,
            "duration_s": frames / self.fps if self.fps and lay.name != "mapped" else None, "cameras": list(self.cameras),
            "state": [p for p, _ in lay.state], "action": [p for p, _ in lay.action],
            "splits": {k: len(v) for k, v in lay.splits}, **{k: v for k, v in info.items() if k not in ("format", "path")},
        }


def inspect_hdf5(path: str, fps: float | None = None) -> dict[str, Any]:
    """Every dataset of an HDF5 file (dtype, shape, rows; demo_N groups collapsed) and its attributes.

    1-D float datasets named like clocks (`t`, `time`, `*_t`, `stamps`, `timestamps`) get their
    rate and span, which is what a mapping's `stamps:` needs.

    Raises:
        SourceError: the file cannot be opened.
    """
    h5py = _h5py()
    keys: dict[str, dict[str, Any]] = {}
    samples: dict[str, str] = {}
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise SourceError("corrupt_file", path, f"HDF5 file cannot be opened ({e}); it is truncated or corrupt") from e
    with f:
        def visit(name: str, obj: Any) -> None:
            if not isinstance(obj, h5py.Dataset):
                return
            key = re.sub(r"demo_\d+", "demo_*", name)
            samples.setdefault(key, name)
            entry = keys.setdefault(key, {"type": str(obj.dtype), "shape": list(obj.shape[1:]), "count": 0, "groups": 0})
            entry["count"] += int(obj.shape[0]) if obj.ndim else 1
            entry["groups"] += 1

        f.visititems(visit)
        attrs = {k: _attr_text(f.attrs[k])[:200] for k in f.attrs.keys()}
        if "data" in f and hasattr(f["data"], "attrs"):
            attrs.update({f"data.{k}": _attr_text(f["data"].attrs[k])[:200] for k in f["data"].attrs.keys()})
        for key, entry in keys.items():
            entry["rate_hz"] = fps
            obj = f[samples[key]]
            if obj.ndim == 1 and obj.dtype.kind == "f" and re.search(r"(^|[/_])(t|time|times|stamps?|timestamps?)$", key):
                t = np.asarray(obj[()], dtype=np.float64)
                dt = np.diff(t)
                if t.size > 1 and (dt >= 0).all() and (dt > 0).any():
                    entry.update(rate_hz=float(1.0 / np.median(dt[dt > 0])), start_s=float(t[0]), end_s=float(t[-1]), clock=True)
    return {"format": "hdf5", "path": os.path.abspath(path), "attrs": attrs, "keys": keys}


def _open_hdf5(path: str, options: SourceOptions) -> HDF5Reader:
    return HDF5Reader(path, options)


FORMAT = SourceFormat(
    name="hdf5",
    description="HDF5 recordings: ALOHA/ACT, robomimic, raw robosuite, others via --map",
    detect=is_hdf5_file,
    open=_open_hdf5,
    unit="file",
    inspect_unit=inspect_hdf5,
)
