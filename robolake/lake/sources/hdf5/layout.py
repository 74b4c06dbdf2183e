"""Which HDF5 layout a file holds, decided once from its keys: the part of the HDF5 reader that
runs on the driver.

The layouts in wide use are recognised by their keys (see `hdf5` for what each holds): ALOHA /
ACT, robomimic, raw robosuite, and flat files of *indexed key families* (`states_0`,
`actions_0`, `states_1`, ...: one episode per index, what many home-grown recorders write);
anything else is read through a mapping. A layout says, all of it picklable, which datasets
are each episode's state, action and cameras, at which rate, and what it left out and why.

Nothing is dropped or assumed without a word (`_Layout.notes`, printed by ingest): a group
where an observation was expected (Isaac Lab's `obs/datagen_info`), a camera dataset of a rank
or dtype no camera has (`[T, H, W]` grayscale is read; a 5-D or float array is not), an index
family a mapping names one member of, and a rate that the file does not record and was assumed.

Two things are refused before anything is read. A camera whose declared frames exceed the read
budget (`limits`) fails the file with a `too_large` row naming the dataset. A link or dataset
whose data lives in another file (an HDF5 external link, external raw storage, a virtual
dataset) must stay inside the file's own folder; one pointing elsewhere fails the file with an
`outside_source` row, since ingest would otherwise read whatever file the HDF5 file names.
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

__all__ = [
    "Layout",
    "resolve_layout",
    "camera_kind",
    "attr_text",
    "demo_key",
    "dataset_keys",
    "check_links",
    "ALOHA_FPS",
    "ROBOSUITE_FPS",
    "ASSUMED_FPS",
]

ALOHA_FPS = 50.0
ROBOSUITE_FPS = 20.0
ASSUMED_FPS = 20.0
_STATE_FAMILY = re.compile(r"(state|obs|qpos|joint|position|proprio)", re.IGNORECASE)
_ACTION_FAMILY = re.compile(r"(action|cmd|command)", re.IGNORECASE)
_INDEXED = re.compile(r"^(?P<prefix>.*?)(?P<index>\d+)(?P<suffix>(\.[A-Za-z]+)?)$")


def import_h5py() -> Any:
    """h5py, imported on first use (the package imports without it until HDF5 is read)."""
    try:
        import h5py
    except ImportError as e:  # pragma: no cover - h5py is a core dependency
        raise ImportError("reading HDF5 needs h5py: pip install h5py") from e
    return h5py


def tag_of(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "robot"


def demo_key(name: str) -> tuple[int, str]:
    m = re.search(r"(\d+)$", name)
    return (int(m.group(1)) if m else 1 << 30, name)


def attr_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.size == 1:
        return attr_text(value.reshape(-1)[0])
    return str(value)


def camera_kind(ds: Any) -> str | None:
    """How a dataset holds camera frames: `rgb` uint8 [T,H,W,3], `rgba` [T,H,W,4], `gray` uint8
    [T,H,W] or [T,H,W,1], `encoded` (JPEG/PNG rows: ACT's padded uint8 [T,L] or vlen bytes);
    None when it is not a camera layout."""
    if ds.dtype == np.uint8 and ds.ndim == 4 and ds.shape[-1] in (1, 3, 4):
        return {1: "gray", 3: "rgb", 4: "rgba"}[int(ds.shape[-1])]
    if ds.dtype == np.uint8 and ds.ndim == 3:
        return "gray"
    if (ds.dtype == np.uint8 and ds.ndim == 2 and ds.shape[1] > 64) or ds.dtype.kind in "OS":
        return "encoded"
    return None


def _looks_like_image(name: str, ds: Any) -> bool:
    """A dataset named or shaped like frames (so that one robolake cannot read is said, not dropped)."""
    return bool(re.search(r"(image|rgb|depth|camera|cam_|_cam)", name.split("/")[-1], re.IGNORECASE)) or ds.ndim >= 3


def dataset_keys(g: Any) -> list[str]:
    h5py = import_h5py()
    out: list[str] = []
    g.visititems(lambda name, obj: out.append(name) if isinstance(obj, h5py.Dataset) else None)
    return out


def _inside(target: str, folder: str) -> bool:
    target, folder = os.path.realpath(target), os.path.realpath(folder)
    return os.path.commonpath([target, folder]) == folder


def check_links(f: Any, root: str) -> None:
    """Refuse a file whose links or datasets reach data outside its own folder.

    Raises:
        SourceError: `outside_source`, naming the link or dataset and where it points.
    """
    h5py = import_h5py()
    folder = os.path.dirname(os.path.abspath(root))

    def refuse(name: str, what: str, target: str) -> SourceError:
        return SourceError(
            "outside_source",
            root,
            f"{name}: {what} {target!r}, outside the file's folder {folder}; "
            "robolake reads data inside the source only: "
            "copy that file beside this one (or fix the link) and ingest again",
        )

    found: list[SourceError] = []  # raised after the walk: h5py's visit does not survive a raise in its callback

    def on_link(name: str, link: Any) -> None:
        if isinstance(link, h5py.ExternalLink) and not _inside(os.path.join(folder, link.filename), folder):
            found.append(refuse(name, "is an external link to", link.filename))

    def on_item(name: str, obj: Any) -> None:
        if not isinstance(obj, h5py.Dataset):
            return
        for ext in obj.external or ():
            target = ext[0].decode() if isinstance(ext[0], bytes) else str(ext[0])
            if not _inside(os.path.join(folder, target), folder):
                found.append(refuse(name, "stores its data in", target))
        if obj.is_virtual:
            for vs in obj.virtual_sources():
                if vs.file_name != "." and not _inside(os.path.join(folder, vs.file_name), folder):
                    found.append(refuse(name, "is a virtual dataset reading", vs.file_name))

    f.visititems_links(on_link)
    if not found:
        f.visititems(on_item)
    if found:
        raise found[0]


@dataclass(frozen=True, kw_only=True)
class Layout:
    """What one file holds, decided once on the driver (all picklable).

    Attributes:
        name: aloha | robomimic | robosuite | indexed | mapped.
        episodes: (episode index, group path ("" = file root), `{i}` key ("" = none)).
        state: (dataset relative to the episode group, stamps dataset) of each state stream.
        action: The same for the action (empty with `action_from_state`).
        cameras: (camera, dataset, stamps, kind) of each camera (`camera_kind`).
        state_widths: Width of each state stream.
        action_widths: Width of each action stream.
        fps: Tick rate.
        fps_source: Where `fps` came from (`attribute fps`, `mapping`, `assumed ...`).
        task: Literal instruction.
        task_from: Dataset or `attrs/<name>` holding it.
        tag: Default embodiment tag.
        action_from_state: Action = state one tick ahead.
        splits: robomimic masks: (split, demo names).
        attrs: File attributes kept in the episode metadata.
        split_by: file | gap | topic (mapping `split:`).
        split_seconds: The pause for `gap`.
        split_source: The boolean dataset for `topic`.
        notes: What was left out or assumed, for the user.
    """

    name: str
    episodes: tuple[tuple[int, str, str], ...]
    state: tuple[tuple[str, str | None], ...]
    action: tuple[tuple[str, str | None], ...]
    cameras: tuple[tuple[str, str, str | None, str], ...]
    state_widths: tuple[int, ...]
    action_widths: tuple[int, ...]
    fps: float
    fps_source: str
    task: str
    task_from: str | None
    tag: str
    action_from_state: bool
    splits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    attrs: tuple[tuple[str, str], ...] = ()
    split_by: str = "file"
    split_seconds: float = 0.0
    split_source: str | None = None
    notes: tuple[str, ...] = ()


class _Resolver:
    """Builds the Layout of one open file."""

    def __init__(self, f: Any, root: str, mapping: Mapping | None, state_only: bool, limits: ReadLimits):
        self.f, self.root, self.mapping, self.state_only, self.limits = f, root, mapping, state_only, limits
        self.notes: list[str] = []
        self._families: dict[str, dict[str, str]] | None = None

    def width(self, ds: Any, name: str) -> int:
        """Values per row: 1 for [T], the rest flattened row-major for [T, ...] (a [T, 4, 4] pose is 16)."""
        if not hasattr(ds, "dtype"):
            raise SourceError("shape", self.root, f"{name!r} is a group, not a dataset; name a dataset inside it")
        if ds.ndim == 0 or ds.dtype.kind not in "fiub":
            raise SourceError(
                "shape",
                self.root,
                f"dataset {name!r} has shape {ds.shape} {ds.dtype}; state/action datasets are "
                "numbers, one row per step",
            )
        return 1 if ds.ndim == 1 else int(np.prod(ds.shape[1:]))

    def camera(
        self, name: str, path: str, ds: Any, stamps: str | None = None
    ) -> tuple[str, str, str | None, str] | None:
        """A camera entry, or None with a note when the dataset is no camera layout robolake reads."""
        kind = camera_kind(ds)
        if kind is None:
            self.notes.append(
                f"{self.root}: {path} has shape {tuple(ds.shape)} {ds.dtype} ({ds.ndim}-D), not camera frames "
                "robolake reads (uint8 [T,H,W,3|4|1], [T,H,W] grayscale, or JPEG/PNG rows); not ingested as a camera"
            )
            return None
        if kind != "encoded":
            channels = int(ds.shape[3]) if ds.ndim == 4 else 1
            self.limits.check_frame(int(ds.shape[1]), int(ds.shape[2]), channels, ds.dtype.itemsize, self.root, path)
        return (name, path, stamps, kind)

    def file_fps(self, default: float, why: str) -> tuple[float, str]:
        for key in ("fps", "control_freq", "frequency"):
            if key in self.f.attrs:
                try:
                    return float(np.asarray(self.f.attrs[key]).reshape(-1)[0]), f"attribute {key}"
                except (TypeError, ValueError):
                    pass
        self.notes.append(
            f"{self.root}: the file records no rate (no fps/control_freq attribute): {default:g} Hz assumed, "
            f"{why}; give `fps:` in a mapping if it differs"
        )
        return default, f"assumed ({why})"

    def resolve(self) -> Layout:
        f = self.f
        if self.mapping is not None:
            return self.mapped(self.mapping)
        if "observations" in f and "qpos" in f["observations"] and "action" in f:
            return self.aloha()
        data = f.get("data")
        if data is not None and hasattr(data, "keys"):
            demos = sorted((k for k in data.keys() if hasattr(data[k], "keys")), key=demo_key)
            if demos and "obs" in data[demos[0]] and "actions" in data[demos[0]]:
                return self.robomimic(data, demos)
            if demos and "states" in data[demos[0]] and "actions" in data[demos[0]]:
                return self.robosuite(data, demos)
        indexed = self.indexed()
        if indexed is not None:
            return indexed
        keys = dataset_keys(f)
        raise SourceError(
            "missing_key",
            self.root,
            "HDF5 layout not recognised (not ALOHA /observations/qpos + /action, robomimic "
            "data/demo_N/obs, robosuite data/demo_N/states, or states_N/actions_N families); "
            f"it holds {', '.join(keys[:12])}{' ...' if len(keys) > 12 else ''}; "
            f"write a mapping (`robolake inspect {self.root} --suggest-map`) and pass --map",
        )

    def aloha(self) -> Layout:
        f = self.f
        obs = f["observations"]
        cams = []
        if "images" in obs:
            for cam in sorted(obs["images"].keys()):
                node = obs["images"][cam]
                if not hasattr(node, "dtype"):
                    self.notes.append(
                        f"{self.root}: observations/images/{cam} is a group, not a camera dataset; not ingested"
                    )
                    continue
                entry = self.camera(cam, f"observations/images/{cam}", node)
                if entry is not None:
                    cams.append(entry)
        s_w, a_w = self.width(obs["qpos"], "observations/qpos"), self.width(f["action"], "action")
        attrs = tuple((k, attr_text(f.attrs[k])) for k in sorted(f.attrs.keys()))
        fps, fps_source = self.file_fps(ALOHA_FPS, "the ALOHA control rate")
        return Layout(
            name="aloha",
            episodes=((0, "", ""),),
            state=(("observations/qpos", None),),
            action=(("action", None),),
            cameras=tuple(cams),
            state_widths=(s_w,),
            action_widths=(a_w,),
            fps=fps,
            fps_source=fps_source,
            # ALOHA files carry no instruction; their folder is named for the task (sim_transfer_cube_scripted/).
            task=attr_text(f.attrs.get("task", f.attrs.get("language_instruction", "")))
            or os.path.basename(os.path.dirname(self.root)).replace("_", " "),
            task_from=None,
            # A file that names its robot (ALOHA-style logs from other rigs) keeps that tag.
            tag=attr_text(f.attrs.get("robot_type", f.attrs.get("embodiment", "")))
            or ("aloha" if (s_w, a_w) == (14, 14) else f"aloha_s{s_w}_a{a_w}"),
            action_from_state=False,
            attrs=attrs,
            notes=tuple(self.notes),
        )

    def env_info(self, data: Any) -> tuple[str, str, float, str]:
        """(env name, robot, control rate, where the rate came from) from robomimic env_args or robosuite
        env/env_info."""
        env, robot, fps, source = "", "", 0.0, ""
        for key in ("env_args", "env_info"):
            if key in data.attrs:
                try:
                    info = json.loads(attr_text(data.attrs[key]))
                except json.JSONDecodeError:
                    continue
                kwargs = info.get("env_kwargs", info)
                env = env or str(info.get("env_name", kwargs.get("env_name", "")))
                robots = kwargs.get("robots", "")
                robot = robot or (robots[0] if isinstance(robots, list) and robots else str(robots))
                if kwargs.get("control_freq"):
                    fps, source = float(kwargs["control_freq"]), f"data.attrs {key} control_freq"
        if "env" in data.attrs:
            env = env or attr_text(data.attrs["env"])
        if not fps:
            fps, source = self.file_fps(ROBOSUITE_FPS, "robosuite's default control rate")
        return env, robot, fps, source

    def splits(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        mask = self.f.get("mask")
        if mask is None or not hasattr(mask, "keys"):
            return ()
        out = []
        for name in sorted(mask.keys()):
            ds = mask[name]
            self.limits.check_array(ds.shape, ds.dtype.itemsize, self.root, f"mask/{name}")
            out.append((name, tuple(attr_text(x) for x in np.asarray(ds[()]).reshape(-1))))
        return tuple(out)

    def robomimic(self, data: Any, demos: list[str]) -> Layout:
        obs = data[demos[0]]["obs"]
        low, cams = [], []
        for k in sorted(obs.keys()):
            node, where = obs[k], f"data/{demos[0]}/obs/{k}"
            if not hasattr(node, "dtype"):
                n = len(dataset_keys(node))
                self.notes.append(
                    f"{self.root}: {where} is a group ({n} datasets), not an observation; skipped: map its "
                    f"datasets (obs/{k}/<key>) under state: to include them"
                )
                continue
            if node.ndim <= 2 and node.dtype.kind in "fiub" and not (node.ndim == 2 and camera_kind(node) == "encoded"):
                low.append(k)
            elif _looks_like_image(k, node):
                entry = self.camera(k[: -len("_image")] if k.endswith("_image") else k, f"obs/{k}", node)
                if entry is not None:
                    cams.append(entry)
            else:
                self.notes.append(
                    f"{self.root}: {where} has shape {tuple(node.shape)} {node.dtype}; neither a [T, width] "
                    "observation nor camera frames; not ingested"
                )
        if not low:
            raise SourceError(
                "missing_key",
                self.root,
                f"robomimic demo {demos[0]} has no low-dimensional obs keys; it has {list(obs.keys())}",
            )
        env, robot, fps, fps_source = self.env_info(data)
        return Layout(
            name="robomimic",
            episodes=self.demo_episodes(demos),
            state=tuple((f"obs/{k}", None) for k in low),
            action=(("actions", None),),
            cameras=tuple(cams),
            state_widths=tuple(self.width(obs[k], f"obs/{k}") for k in low),
            action_widths=(self.width(data[demos[0]]["actions"], "actions"),),
            fps=fps,
            fps_source=fps_source,
            task=env,
            task_from=None,
            tag=tag_of("_".join(x for x in ("robomimic", robot, env) if x)),
            action_from_state=False,
            splits=self.splits(),
            notes=tuple(self.notes),
        )

    @staticmethod
    def demo_episodes(demos: list[str]) -> tuple[tuple[int, str, str], ...]:
        return tuple((demo_key(d)[0] if demo_key(d)[0] < 1 << 30 else i, f"data/{d}", "") for i, d in enumerate(demos))

    def robosuite(self, data: Any, demos: list[str]) -> Layout:
        first = data[demos[0]]
        env, robot, fps, fps_source = self.env_info(data)
        return Layout(
            name="robosuite",
            episodes=self.demo_episodes(demos),
            state=(("states", None),),
            action=(("actions", None),),
            cameras=(),
            state_widths=(self.width(first["states"], "states"),),
            action_widths=(self.width(first["actions"], "actions"),),
            fps=fps,
            fps_source=fps_source,
            task=env,
            task_from=None,
            tag=tag_of("_".join(x for x in ("robosuite", robot, env) if x)),
            action_from_state=False,
            splits=self.splits(),
            notes=tuple(self.notes),
        )

    def families(self) -> dict[str, dict[str, str]]:
        """`{i}` templates of the file's datasets: `states_{i}` -> {"0": "states_0", "1": "states_1", ...}."""
        if self._families is not None:
            return self._families
        out: dict[str, dict[str, str]] = {}
        for name in dataset_keys(self.f):
            parent, _, base = name.rpartition("/")
            m = _INDEXED.match(base)
            if m and m.group("prefix"):
                template = (parent + "/" if parent else "") + m.group("prefix") + "{i}" + m.group("suffix")
                out.setdefault(template, {})[m.group("index")] = name
        self._families = out
        return out

    def template_keys(self, template: str) -> set[str]:
        """The `{i}` values for which `template` (`states_{i}`, `ep_{i}/qpos`) names a dataset of the file."""
        rx = re.compile("^" + re.escape(template.strip("/")).replace(re.escape("{i}"), r"(\d+)") + "$")
        return {m.group(1) for name in dataset_keys(self.f) if (m := rx.match(name))}

    def indexed(self) -> Layout | None:
        """`states_<i>` / `actions_<i>` pairs (and `images_<i>` cameras): one episode per index."""
        fam = self.families()
        states = [
            t
            for t in sorted(fam)
            if _STATE_FAMILY.search(t)
            and not _ACTION_FAMILY.search(t)
            and camera_kind(self.f[next(iter(fam[t].values()))]) is None
        ]
        actions = [t for t in sorted(fam) if _ACTION_FAMILY.search(t)]
        if not states or not actions:
            return None
        keys = sorted(set(fam[states[0]]) & set(fam[actions[0]]), key=int)
        if not keys:
            return None
        s_t, a_t = states[0], actions[0]
        cams = []
        for t in sorted(fam):
            ds = self.f[next(iter(fam[t].values()))]
            if t not in (s_t, a_t) and camera_kind(ds) is not None and _looks_like_image(t, ds):
                entry = self.camera(t.replace("{i}", "").strip("_/") or "camera", t, ds)
                if entry is not None:
                    cams.append(entry)
        lonely = sorted((set(fam[s_t]) | set(fam[a_t])) - set(keys), key=int)
        if lonely:
            self.notes.append(
                f"{self.root}: index(es) {', '.join(lonely[:10])} have only one of {s_t} / {a_t}; not ingested"
            )
        first = keys[0]
        fps, fps_source = self.file_fps(ASSUMED_FPS, "rows taken as ticks")
        s_w = self.width(self.f[s_t.replace("{i}", first)], s_t.replace("{i}", first))
        a_w = self.width(self.f[a_t.replace("{i}", first)], a_t.replace("{i}", first))
        return Layout(
            name="indexed",
            episodes=tuple((int(k), "", k) for k in keys),
            state=((s_t, None),),
            action=((a_t, None),),
            cameras=tuple(cams),
            state_widths=(s_w,),
            action_widths=(a_w,),
            fps=fps,
            fps_source=fps_source,
            task=attr_text(self.f.attrs.get("task", self.f.attrs.get("language_instruction", ""))),
            task_from=None,
            tag=attr_text(self.f.attrs.get("robot_type", "")) or f"hdf5_s{s_w}_a{a_w}",
            action_from_state=False,
            attrs=tuple((k, attr_text(self.f.attrs[k])[:200]) for k in sorted(self.f.attrs.keys())),
            notes=tuple(self.notes),
        )

    def mapped(self, m: Mapping) -> Layout:
        f = self.f
        templated = [s for _, s in m.sources() if "{i}" in s]
        if m.episodes:
            group = f.get(m.episodes.strip("/"))
            if group is None or not hasattr(group, "keys"):
                raise SourceError(
                    "missing_key",
                    self.root,
                    f"mapping {m.path} episodes: {m.episodes!r} is not a group in this file; it has {list(f.keys())}",
                )
            names = sorted((k for k in group.keys() if hasattr(group[k], "keys")), key=demo_key)
            episodes = tuple((i, f"{m.episodes.strip('/')}/{k}", "") for i, k in enumerate(names))
        elif templated:
            have = [self.template_keys(t) for t in templated]
            keys = sorted(set.intersection(*have), key=int)
            if not keys:
                raise SourceError(
                    "missing_key",
                    self.root,
                    f"mapping {m.path} names {templated[0]!r}, but no index has every "
                    f"templated dataset (families here: {', '.join(sorted(self.families())) or 'none'})",
                )
            partial = sorted(set.union(*have) - set(keys), key=int)
            if partial:
                self.notes.append(
                    f"{self.root}: index(es) {', '.join(partial[:10])} lack some of {', '.join(templated)}; "
                    "not ingested"
                )
            episodes = tuple((int(k), "", k) for k in keys)
        else:
            episodes = ((0, "", ""),)
            for _, src in m.sources():
                base = src.strip("/")
                m_ = _INDEXED.match(base.rpartition("/")[2])
                if m_:
                    template = (
                        base[: len(base) - len(base.rpartition("/")[2])]
                        + m_.group("prefix")
                        + "{i}"
                        + m_.group("suffix")
                    )
                    others = self.families().get(template, {})
                    if len(others) > 1:
                        self.notes.append(
                            f"{self.root}: mapping {m.path} names {src!r}; the file also holds {len(others) - 1} "
                            f"more of {template!r}: name {template!r} to ingest each as an episode"
                        )
                        break
        if not episodes:
            raise SourceError("empty", self.root, f"mapping {m.path} episodes: {m.episodes!r} holds no episode groups")
        first_ep = episodes[0]
        first = f[first_ep[1]] if first_ep[1] else f
        have_keys = [*dataset_keys(first), *(f"attrs/{k}" for k in first.attrs.keys())]

        def concrete(p: str) -> str:
            return p.strip("/").replace("{i}", first_ep[2])

        listed = [concrete(x) for x in have_keys]
        if self.state_only:  # a camera the file lacks is dropped, not an error
            kept = tuple(c for c in m.cameras if concrete(c.source) in listed)
            for c in m.cameras:
                if c not in kept:
                    self.notes.append(
                        f"{self.root}: camera {c.name!r} ({c.source}) is not in the file; "
                        "--state-only ingests without it"
                    )
            m = _replace_cameras(m, kept)
        check_sources(_concrete_mapping(m, first_ep[2]), listed, self.root)

        def rel(p: str) -> str:
            return p.strip("/")

        state = tuple((rel(s.source), rel(s.stamps) if s.stamps else None) for s in m.state)
        action = tuple((rel(s.source), rel(s.stamps) if s.stamps else None) for s in m.action)
        widths_s = tuple(self.width(first[concrete(p)], p) for p, _ in state)
        widths_a = tuple(self.width(first[concrete(p)], p) for p, _ in action) if action else widths_s
        cams = []
        for c in m.cameras:
            entry = self.camera(c.name, rel(c.source), first[concrete(c.source)], rel(c.stamps) if c.stamps else None)
            if entry is not None:
                cams.append(entry)
        stamps = [s for _, s in (*state, *action) if s] + [c.stamps for c in m.cameras if c.stamps]
        fps, fps_source = m.fps, "mapping fps"
        if fps is None and not stamps:
            raise ValueError(
                f"{m.path}: the mapped datasets of {self.root} carry no `stamps:` "
                "and the mapping gives no `fps:`; add one"
            )
        if fps is None:
            clock = concrete(m.state[0].stamps if m.state[0].stamps else str(stamps[0]))
            ds = first[clock]
            self.limits.check_array(ds.shape, ds.dtype.itemsize, self.root, clock)
            t = np.asarray(ds[()], dtype=np.float64)
            dt = np.diff(t)
            fps = float(1.0 / np.median(dt[dt > 0])) if (dt > 0).any() else 0.0
            fps_source = f"median interval of {clock}"
            if not fps > 0:
                raise SourceError(
                    "timestamps", self.root, f"cannot tell the rate of {m.state[0].source}; give `fps:` in the mapping"
                )
        s_dim, a_dim = sum(widths_s), sum(widths_a)
        return Layout(
            name="mapped",
            episodes=episodes,
            state=state,
            action=action,
            cameras=tuple(cams),
            state_widths=widths_s,
            action_widths=widths_a,
            fps=float(fps),
            fps_source=fps_source,
            task=m.task or "",
            task_from=rel(m.task_from) if m.task_from else None,
            tag=m.embodiment or f"hdf5_s{s_dim}_a{a_dim}",
            action_from_state=m.action_from_state,
            split_by=m.split.by,
            split_seconds=float(m.split.seconds or 0.0),
            split_source=rel(m.split.source) if m.split.source else None,
            notes=tuple(self.notes),
        )


def _replace_cameras(m: Mapping, cameras: tuple[Any, ...]) -> Mapping:
    import dataclasses

    return dataclasses.replace(m, cameras=cameras)


def _concrete_mapping(m: Mapping, key: str) -> Mapping:
    """The mapping with `{i}` filled in for one episode, to check its sources exist."""
    import dataclasses

    if not key:
        return m

    def fill(x: str | None) -> str | None:
        return x.replace("{i}", key) if x else x

    return dataclasses.replace(
        m,
        state=tuple(dataclasses.replace(s, source=fill(s.source) or s.source, stamps=fill(s.stamps)) for s in m.state),
        action=tuple(
            dataclasses.replace(s, source=fill(s.source) or s.source, stamps=fill(s.stamps)) for s in m.action
        ),
        cameras=tuple(
            dataclasses.replace(c, source=fill(c.source) or c.source, stamps=fill(c.stamps)) for c in m.cameras
        ),
    )


def resolve_layout(f: Any, root: str, mapping: Mapping | None, *, state_only: bool, limits: ReadLimits) -> Layout:
    """The layout of an open file (links checked first).

    Raises:
        SourceError: a mapped dataset is missing, a camera declares frames over the budget, a
            link points outside the file's folder; the layout is unknown and no mapping was
            given (`missing_key`).
    """
    check_links(f, root)
    return _Resolver(f, root, mapping, state_only, limits).resolve()


def open_hdf5(path: str) -> Any:
    """An open h5py.File, read-only.

    Raises:
        SourceError: `corrupt_file` when it does not open.
    """
    try:
        return import_h5py().File(path, "r")
    except OSError as e:
        raise SourceError(
            "corrupt_file",
            path,
            f"HDF5 file cannot be opened ({e}); it is truncated or corrupt: re-copy it from the recorder",
        ) from e
