"""Reader for episodes saved as NumPy arrays: `.npz` files or folders of `.npy` files, one per episode.

Simulation codebases (robomimic exports, D4RL-style recorders, gym wrappers, in-house scripted
experts) save each episode as `np.savez(path, obs_qpos=..., obs_wrist_rgb=..., actions=...,
dones=...)` or as a folder of `.npy` files, with a JSON sidecar holding the instruction and
whether it succeeded. A unit is a folder of such episodes (`npz`), or one `.npz` file given on
its own (`npz-file`); which arrays become state, action and cameras is the plan's
(`npz.plan`: a mapping, or the common `obs_*` / `actions` / `dones` naming), resolved once per
unit from its first readable episode, so one unit is one embodiment.

Nothing is unpickled: headers are read first (`npz.arrays`), every array's declared size is
checked against the read budget before it is loaded, and arrays load with
`allow_pickle=False`; an object array is refused by name (quarantining the episode when the
steps need it, left out of the record, and said, when they do not). A truncated `.npz`, a
sidecar that is not JSON, arrays of different lengths (other than one more observation than
actions, where the last observation is dropped and said) are each that episode's quarantine
row; the other episodes land.

Beside the steps, each episode keeps its record: every array of the episode in its own dtype
(`sources.columnar`), all of its rows (the last observation too), on the rows clock; camera
arrays as camera parts (their pixels are the media table, kept losslessly by default).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from robolake.lake.sources.base import EncodedFrames, EpisodeRef, SourceError, TabularEpisode
from robolake.lake.sources.columnar import CLOCK_ROWS, ColumnRecord
from robolake.lake.sources.limits import ReadLimits
from robolake.lake.sources.npz.arrays import (
    ArrayHeader,
    EpisodeFiles,
    episode_files,
    is_npy_folder,
    load_array,
    read_headers,
    read_sidecar,
)
from robolake.lake.sources.npz.plan import DEFAULT_FPS, NpzPlan, episode_rows, resolve_plan, suggest_mapping
from robolake.lake.sources.record import record_notes
from robolake.lake.sources.registry import DATA_SUFFIXES, SourceFormat, SourceOptions
from robolake.lake.sources.video import file_digest
from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec
from robolake.storage import OutsideRootError, ensure_within

__all__ = ["NpzReader", "is_npz_folder", "is_npz_file", "inspect_npz", "FORMAT", "FILE_FORMAT"]

log = logging.getLogger(__name__)

_OWN = (".npz", ".npy", ".json")


def is_npz_file(path: str) -> bool:
    """A `.npz` file (a zip archive)."""
    if not (path.endswith(".npz") and os.path.isfile(path)):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def is_npz_folder(path: str) -> bool:
    """A folder of episodes: `.npz` files, `.npy` sub-folders, or itself a folder of `.npy` files,
    holding no other kind of recording and no other folder (a folder mixing in bags, HDF5 files
    or folders of other data is walked instead, and its `.npz` files are read one by one)."""
    if not os.path.isdir(path):
        return False
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    files = [e.name for e in entries if e.is_file() and not e.name.startswith(".")]
    if any(n.lower().endswith(DATA_SUFFIXES) and not n.lower().endswith(_OWN) for n in files):
        return False
    dirs = [e.path for e in entries if e.is_dir() and not e.name.startswith(".")]
    if dirs and not all(is_npy_folder(d) for d in dirs):
        return False  # other folders below (datasets, more recordings): walked, not claimed with a stray file
    return any(n.endswith((".npz", ".npy")) for n in files) or bool(dirs)


class NpzReader:
    """Reads a folder of `.npz` / `.npy` episodes, or one `.npz` file.

    Args:
        path: The folder or file.
        options: Embodiment tag, mapping, state-only choice, frame layout, read limits, streams.

    Raises:
        SourceError: no episode at all, no episode whose arrays can be listed, or a plan that
            cannot be made (`missing_key` when nothing is named like a state: write a mapping).
    """

    def __init__(self, path: str, options: SourceOptions | None = None):
        self.root = os.path.abspath(path)
        self.options = options or SourceOptions()
        self.limits: ReadLimits = self.options.limits
        self.episodes = episode_files(self.root)
        if not self.episodes:
            raise SourceError("empty", self.root, "no .npz files or folders of .npy files here")
        plan, first, problems = None, self.episodes[0], []
        for ep in self.episodes:  # the first episode a plan can be made of; the others are checked as read
            try:
                plan = resolve_plan(read_headers(ep), self.options.mapping, self.options.embodiment, ep.path)
                first = ep
                break
            except SourceError as e:
                problems.append(e)
        if plan is None:
            raise problems[0]  # no episode has a plan (there is one episode at least: the first's reason)
        self.plan: NpzPlan = plan
        if self.options.state_only:
            self.plan = _without_cameras(self.plan)
        self.fps, self.fps_source = self._rate(first)
        self.tag = self.plan.tag
        self.cameras = tuple(c for c, _ in self.plan.cameras)
        self.format_name = "npz"
        self.notes: list[str] = []

    def _rate(self, first: EpisodeFiles) -> tuple[float, str]:
        if self.plan.fps is not None:
            return float(self.plan.fps), "mapping"
        try:
            side = read_sidecar(first)
        except SourceError:
            side = None
        if side is not None and side.fps is not None:
            return side.fps, "sidecar"
        return DEFAULT_FPS, f"assumed: no sidecar or mapping gives fps, {DEFAULT_FPS:g} Hz"

    # --- reader protocol -----------------------------------------------------------------

    def spec(self) -> EmbodimentSpec:
        def slices(names: tuple[str, ...], widths: tuple[int, ...]) -> tuple[SliceSpec, ...]:
            out, start = [], 0
            for n, w in zip(names, widths, strict=False):
                out.append(SliceSpec(name=n, start=start, end=start + w))
                start += w
            return tuple(out)

        p = self.plan
        return EmbodimentSpec(
            tag=self.tag,
            state_dim=sum(p.state_widths),
            action_dim=sum(p.action_widths),
            state=slices(p.state, p.state_widths),
            action=slices(p.action or p.state, p.action_widths if p.action else p.state_widths),
            cameras=self.cameras,
            video_keys=tuple(p.cameras),
            fps=self.fps,
            robot_type=self.tag,
        )

    def discover(self) -> list[EpisodeRef]:
        return [
            EpisodeRef(
                source_uri=self.root,
                source_format=self.format_name,
                episode_index=i,
                embodiment=self.tag,
                location=(("path", ep.path), ("sidecar", ep.sidecar)),
            )
            for i, ep in enumerate(self.episodes)
        ]

    @staticmethod
    def _files(ref: EpisodeRef) -> EpisodeFiles:
        return EpisodeFiles(path=str(ref.get("path")), sidecar=ref.get("sidecar"))

    def _check_inside(self, ep: EpisodeFiles) -> None:
        """An episode's files (a `.npz`, a folder's `.npy`, the sidecar) must resolve inside the unit.

        Raises:
            SourceError: `outside_source`, naming the file a symlink (or a `..`) takes out of it.
        """
        base = self.root if os.path.isdir(self.root) else os.path.dirname(self.root)
        paths = [ep.path, *([ep.sidecar] if ep.sidecar else [])]
        if os.path.isdir(ep.path):
            paths += [os.path.join(ep.path, n) for n in sorted(os.listdir(ep.path))]
        for path in paths:
            try:
                ensure_within(base, path)
            except OutsideRootError:
                raise SourceError(
                    "outside_source",
                    path,
                    f"{os.path.relpath(path, base)} resolves outside {base} (a symlink out of it); robolake reads a "
                    "source's own files only: copy the file into the folder",
                ) from None

    def _matrix(self, ep: EpisodeFiles, h: ArrayHeader, cache: dict[str, np.ndarray], n: int, width: int) -> np.ndarray:
        raw = self._load(ep, h, cache)
        arr = np.asarray(raw, dtype=np.float64).reshape(len(raw), -1)[:n]
        if arr.shape[1] != width:
            raise SourceError(
                "shape",
                ep.path,
                f"array {h.name!r} has {arr.shape[1]} values a row but the unit's first episode has {width}; "
                "episodes of one folder share a layout: split the folder or give each its own --embodiment",
            )
        bad = ~np.isfinite(arr)
        if bad.any():
            raise SourceError(
                "non_finite",
                ep.path,
                f"array {h.name!r} has {int(bad.sum())} NaN/inf values (first at row {int(np.argwhere(bad)[0][0])})",
            )
        return arr

    def _load(self, ep: EpisodeFiles, h: ArrayHeader, cache: dict[str, np.ndarray]) -> np.ndarray:
        if h.name not in cache:
            cache[h.name] = load_array(ep, h, self.limits)
        return cache[h.name]

    reads_record = True  # read_tabular(ref, record=False) loads only the arrays the steps need

    def read_tabular(self, ref: EpisodeRef, *, record: bool = True) -> TabularEpisode:
        """Read, check and step one episode; keep every array in its record unless `record=False`.

        Raises:
            SourceError: the `.npz` is truncated, the sidecar is not JSON, an array the steps need
                is missing, an object array, over the budget, non-finite or of another width, or
                the arrays disagree in length (other than one more observation than actions).
        """
        ep = self._files(ref)
        self._check_inside(ep)
        headers = read_headers(ep)
        side = read_sidecar(ep)
        p = self.plan
        for name in (*p.state, *p.action, *(a for _, a in p.cameras)):
            if name not in headers:
                raise SourceError(
                    "missing_key",
                    ep.path,
                    f"array {name!r} is missing (this episode has {', '.join(sorted(headers))}); "
                    "episodes of one folder share their arrays: fix the episode or give a mapping",
                )
        n, dropped = episode_rows(p, headers, ep.path)
        if n == 0:
            raise SourceError("empty", ep.path, "the episode has no steps")
        fps = float(p.fps or side.fps or self.fps)
        cache: dict[str, np.ndarray] = {}
        state = np.concatenate(
            [self._matrix(ep, headers[a], cache, n, w) for a, w in zip(p.state, p.state_widths, strict=True)], axis=1
        )
        if p.action:
            action = np.concatenate(
                [self._matrix(ep, headers[a], cache, n, w) for a, w in zip(p.action, p.action_widths, strict=True)],
                axis=1,
            )
        else:
            action = np.concatenate([state[1:], state[-1:]])
        ts = np.arange(n, dtype=np.float64) / fps
        task = p.task if p.task is not None else side.task
        if task is None and p.task_from and p.task_from in headers:
            text = self._load(ep, headers[p.task_from], cache).reshape(-1)
            task = str(text[0]) if text.size else None
        tasks = (task or "",)
        task_index = np.zeros(n, dtype=np.int32)
        success, success_from = side.success, "sidecar"
        if success is None and p.done and p.done in headers:
            d = self._load(ep, headers[p.done], cache).reshape(-1)
            success, success_from = (bool(d[-1]) if d.size else None), p.done
        notes: list[str] = []
        if dropped:
            notes.append(
                f"{ep.path}: {n + 1} observations for {n} actions: the last observation (after the final action) "
                "is left out of the steps; the record keeps it"
            )
        refused = [h.name for h in headers.values() if h.is_object]
        if refused:
            notes.append(
                f"{ep.path}: object array(s) {', '.join(refused)} left out: NumPy stores them with pickle, which "
                "robolake never loads (save them as numbers or strings to keep them)"
            )
        digests = tuple(f"{c}:{self._digest(ep, a)}" for c, a in p.cameras)
        metadata: dict[str, Any] = {
            "file": ep.path,
            "tasks": list(tasks),
            "fps_source": "mapping" if p.fps else "sidecar" if side.fps else self.fps_source,
            "arrays": {h.name: f"{h.dtype}{list(h.shape)}" for h in headers.values()},
        }
        if ep.sidecar:
            metadata["sidecar"] = ep.sidecar
            metadata.update({f"sidecar.{k}": v for k, v in side.extra})
        if success is not None:
            metadata["success_from"] = success_from
        if dropped:
            metadata["dropped_last_observation"] = True
        if not p.action:
            metadata["action_from_state"] = True
        built = None
        if record:
            into = ColumnRecord(path=ep.path, budget=self.limits.max_read_bytes, streams=self.options.streams)
            self._record(ep, headers, cache, into, fps)
            built = into.build()
            metadata["record"] = into.metadata(built)
            notes += record_notes(built, ep.path)
        if notes:
            metadata["notes"] = notes
        return TabularEpisode.of(
            ref=ref,
            state=state,
            action=action,
            timestamps=ts,
            task_index=task_index,
            tasks=tasks,
            success=success,
            fps=fps,
            media_digests=digests,
            metadata=metadata,
            record=built,
        )

    @staticmethod
    def _digest(ep: EpisodeFiles, array: str) -> str:
        if ep.is_npz:
            return f"{file_digest(ep.path)}:{array}"
        return file_digest(os.path.join(ep.path, array + ".npy"))

    def _record(
        self,
        ep: EpisodeFiles,
        headers: dict[str, ArrayHeader],
        cache: dict[str, np.ndarray],
        into: ColumnRecord,
        fps: float,
    ) -> None:
        """Every array into `into`, in its own dtype, all its rows on the rows clock."""
        roles = self.plan.roles()
        cams = {a for _, a in self.plan.cameras}
        for name, h in sorted(headers.items()):
            t_ns = np.round(np.arange(h.rows, dtype=np.float64) / fps * 1e9).astype(np.int64)
            if h.is_object:
                into.leave_out(name, "an object array: NumPy stores it with pickle, which robolake never loads")
            elif name in cams:
                into.camera(name, t_ns, clock=CLOCK_ROWS, msgtype=f"{h.dtype}{list(h.shape[1:])}")
            elif h.is_image():
                into.leave_out(name, "images that are not a camera here (map it under cameras:)")
            elif h.kind in "biuf" or h.kind in "SU":
                if not into.wanted(name, mapped=name in roles):
                    continue
                raw = self._load(ep, h, cache)
                values = raw.reshape(1) if raw.ndim == 0 else raw
                if h.kind in "SU":
                    texts = [str(x) for x in values.reshape(len(values), -1)[:, 0]] if values.ndim else [str(values)]
                    into.text(name, t_ns, texts, clock=CLOCK_ROWS)
                else:
                    into.numeric(
                        name,
                        t_ns,
                        values,
                        scalar=values.ndim <= 1,
                        clock=CLOCK_ROWS,
                        msgtype=f"{h.dtype}{list(h.shape[1:])}",
                    )
            else:
                into.leave_out(name, f"{h.dtype} values: neither numbers nor text")

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Each camera's frames at the episode's steps: raw pixels kept losslessly (`--frames record`),
        JPEG under the lossy layouts.

        Raises:
            SourceError: a camera array is over the frame or read budget, unreadable or an object array.
        """
        from robolake.lake.media.frames import encode_raw

        ep = self._files(episode.ref)
        headers = read_headers(ep)
        n = episode.num_steps
        for cam, name in self.plan.cameras:
            h = headers[name]
            self.limits.check_frame(h.shape[1], h.shape[2], h.shape[3], 1, ep.path, name)
            frames = load_array(ep, h, self.limits)
            images, encoding = [], ""
            for i in range(n):
                data, encoding = encode_raw(_rgb(frames[i]), self.options.video_frames)
                images.append(data)
            del frames
            yield EncodedFrames(
                camera=cam, images=tuple(images), encoding=encoding, height=int(h.shape[1]), width=int(h.shape[2])
            )

    def inspect(self) -> dict[str, Any]:
        """Every array (dtype, count over the episodes, per-row shape, role), what ingest makes of the
        unit, and the plan as a mapping (`--suggest-map`)."""
        info = describe(self.root, self.episodes)
        roles = self.plan.roles()
        for name, row in info["keys"].items():
            row["role"] = roles.get(name) or _ignored(row)
        p = self.plan
        s_dim, a_dim = sum(p.state_widths), sum(p.action_widths)
        out: dict[str, Any] = {
            "format": self.format_name,
            "path": self.root,
            "ingest": (
                f"{len(self.episodes)} episode(s) of embodiment {self.tag!r}: state {s_dim} values, action {a_dim}"
                f"{'' if p.action else ' (the next state)'}, cameras {list(self.cameras) or 'none'}, at "
                f"{self.fps:g} Hz ({self.fps_source})"
            ),
            "embodiment": self.tag,
            "episodes": len(self.episodes),
            "fps": self.fps,
            "cameras": list(self.cameras),
            "state": list(p.state),
            "action": list(p.action),
            **{k: v for k, v in info.items() if k not in ("format", "path")},
            "suggested_mapping": suggest_mapping(p, self.root, self.fps, self.fps_source),
        }
        return out


def _ignored(row: dict[str, Any]) -> str:
    kind = str(row.get("type", ""))
    if kind == "object":
        return "refused: an object array (pickle), never loaded"
    if row.get("image"):
        return "not kept: images that are not a camera (map it under cameras:)"
    if kind.startswith(("<U", "|S", "<S", ">U")):
        return "in the record only, as text events"
    return "in the record only: not in the steps (map it under state: or action: to include it)"


def describe(root: str, episodes: list[EpisodeFiles]) -> dict[str, Any]:
    """Every array of the unit from its headers alone: dtype, rows over all episodes, per-row shape."""
    keys: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for ep in episodes:
        try:
            headers = read_headers(ep)
        except SourceError as e:
            problems.append(f"{ep.path}: {e.message}")
            continue
        for name, h in headers.items():
            row = keys.setdefault(name, {"type": h.dtype, "shape": list(h.shape[1:]), "count": 0, "groups": 0})
            row["count"] += h.rows
            row["groups"] += 1
            if h.is_image():
                row["image"] = True
    out: dict[str, Any] = {"format": "npz", "path": root, "keys": dict(sorted(keys.items()))}
    sidecars = sum(1 for ep in episodes if ep.sidecar)
    out["sidecars"] = f"{sidecars} of {len(episodes)} episodes"
    if problems:
        out["notes"] = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
    return out


def _without_cameras(plan: NpzPlan) -> NpzPlan:
    import dataclasses

    return dataclasses.replace(plan, cameras=())


def _rgb(frame: np.ndarray) -> np.ndarray:
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.shape[2] == 1:
        return np.ascontiguousarray(np.repeat(frame, 3, axis=2))
    return np.ascontiguousarray(frame[:, :, :3])


def inspect_npz(path: str, options: SourceOptions | None = None) -> dict[str, Any]:
    """A unit described whatever a reader makes of it (for `robolake inspect` of one it cannot open):
    its arrays, and a mapping guessed from their names, shapes and dtypes."""
    root = os.path.abspath(path)
    info = describe(root, episode_files(root))
    keys = info["keys"]
    numeric = [k for k, v in keys.items() if v["type"] != "object" and not v.get("image") and len(v["shape"]) <= 1]
    numeric = [k for k in numeric if np.dtype(keys[k]["type"]).kind in "biuf"]
    actions = [k for k in numeric if "act" in k.lower() or "cmd" in k.lower()]
    states = [k for k in numeric if k not in actions and k not in ("dones", "done", "rewards", "terminals")]
    lines = [f"# mapping suggested by `robolake inspect` for {root}: edit it, then ingest with --map THIS_FILE"]
    lines.append("state:")
    lines += [f'  - {{source: "{k}"}}   # {keys[k]["type"]} {keys[k]["shape"]}' for k in states[:1]]
    lines += [f'  # - {{source: "{k}"}}   # {keys[k]["type"]} {keys[k]["shape"]}' for k in states[1:]]
    if actions:
        lines += ["action:", f'  - {{source: "{actions[0]}"}}']
    else:
        lines.append("action_from_state: true")
    cams = [k for k, v in keys.items() if v.get("image")]
    lines.append("cameras: {" + ", ".join(f'"{k}": "{k}"' for k in cams) + "}")
    lines.append(f"fps: {DEFAULT_FPS:g}                              # give the real rate")
    for row in keys.values():
        row["role"] = "not ingested: the unit needs a mapping (see --suggest-map)"
    info["suggested_mapping"] = "\n".join(lines) + "\n"
    return info


def _open(path: str, options: SourceOptions) -> NpzReader:
    return NpzReader(path, options)


FORMAT = SourceFormat(
    name="npz",
    description="NumPy episodes: a folder of .npz files or of .npy folders (obs_*/actions/dones), JSON sidecars",
    detect=is_npz_folder,
    open=_open,
    unit="directory",
    inspect_unit=inspect_npz,
)

FILE_FORMAT = SourceFormat(
    name="npz-file",
    description="one NumPy .npz episode file (obs_*/actions/dones), with its <stem>.json sidecar",
    detect=is_npz_file,
    open=_open,
    unit="file",
    inspect_unit=inspect_npz,
)
