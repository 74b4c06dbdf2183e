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
* **indexed key families** (flat home-grown files): `states_<i>` [T, S] and `actions_<i>` [T, A]
  pairs (and `images_<i>` cameras), one episode per index; rows are ticks at the file's `fps`
  attribute (20 Hz assumed, and said, without one).

Camera datasets are uint8 [T, H, W, 3] (RGBA and [T, H, W, 1] / [T, H, W] grayscale are read
too, as RGB) or encoded rows; anything else named or shaped like frames is left out with a note.
Which layout a file holds, and what it leaves out, is decided in `hdf5_layout`.

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
are JPEG-encoded once, here. Every read is checked against the read budget first (`limits`):
a dataset declaring more than it is a `too_large` quarantine row naming the file and dataset,
before anything is allocated (HDF5 decompresses a chunked dataset into an array of its
declared shape, so bounding the declared shape bounds the decompression).

Beside the steps, each episode keeps its record (`hdf5.record`): every dataset of the episode
but images, in its own dtype, at its stamps where it has them. Each dataset is read once per
episode: the steps and the record share the arrays.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
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
from robolake.lake.sources.hdf5.inspect import (
    describe_file,
    describe_reader,
    suggest_hdf5_mapping,
    suggested_roles,
)
from robolake.lake.sources.hdf5.layout import (
    ALOHA_FPS,
    ROBOSUITE_FPS,
    Layout,
    attr_text,
    dataset_keys,
    open_hdf5,
    resolve_layout,
)
from robolake.lake.sources.hdf5.record import episode_datasets, record_group
from robolake.lake.sources.record import record_notes
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

__all__ = ["HDF5Reader", "is_hdf5_file", "inspect_hdf5", "FORMAT", "ALOHA_FPS", "ROBOSUITE_FPS"]

log = logging.getLogger(__name__)

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


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


class HDF5Reader:
    """Reads one HDF5 file (one or many episodes).

    Args:
        path: The file.
        options: Embodiment tag, mapping, state-only choice, resample mode, read limits.

    Raises:
        SourceError: the file cannot be opened (truncated, not HDF5), a mapping names a dataset
            the file lacks, a camera declares frames over the read budget, a link points
            outside the file's folder; `missing_key` when the layout is unknown and no mapping
            was given (the message says to write one).
    """

    def __init__(self, path: str, options: SourceOptions | None = None):
        self.root = os.path.abspath(path)
        self.options = options or SourceOptions()
        self.limits = self.options.limits
        with self._open() as f:
            self.layout: Layout = resolve_layout(
                f, self.root, self.options.mapping, state_only=self.options.state_only, limits=self.limits
            )
        self.format_name = f"hdf5-{self.layout.name}"
        self.tag = self.options.embodiment or self.layout.tag
        self.fps = self.layout.fps
        self.cameras = tuple(c[0] for c in self.layout.cameras)
        self.notes = list(self.layout.notes)
        self._names: list[str] | None = None  # dataset paths of a file of key families, listed on first read

    def _open(self) -> Any:
        return open_hdf5(self.root)

    # --- reader protocol -----------------------------------------------------------------

    def spec(self) -> EmbodimentSpec:
        lay = self.layout

        def slices(names: tuple[tuple[str, str | None], ...], widths: tuple[int, ...]) -> tuple[SliceSpec, ...]:
            out, start = [], 0
            for (path, _), w in zip(names, widths, strict=True):
                out.append(
                    SliceSpec(
                        name=path.rsplit("/", 1)[-1].replace("{i}", "").strip("_") or "value",
                        start=start,
                        end=start + w,
                    )
                )
                start += w
            return tuple(out)

        action_names = lay.action if lay.action else lay.state
        return EmbodimentSpec(
            tag=self.tag,
            state_dim=sum(lay.state_widths),
            action_dim=sum(lay.action_widths),
            state=slices(lay.state, lay.state_widths),
            action=slices(action_names, lay.action_widths),
            cameras=self.cameras,
            video_keys=tuple((c[0], c[1]) for c in lay.cameras),
            fps=self.fps,
            robot_type=lay.tag,
        )

    def _location(
        self, group: str, key: str, splits: tuple[str, ...] = (), window: tuple[float, float] | None = None
    ) -> tuple[tuple[str, Any], ...]:
        loc: list[tuple[str, Any]] = [("group", group), ("splits", splits)]
        if key:
            loc.append(("key", key))
        if window is not None:
            loc.append(("window", window))
        return tuple(loc)

    def discover(self) -> list[EpisodeRef]:
        split_of: dict[str, list[str]] = {}
        for split, demos in self.layout.splits:
            for d in demos:
                split_of.setdefault(d, []).append(split)
        if self.layout.split_by != "file":
            return self._discover_windows()
        return [
            EpisodeRef(
                source_uri=self.root,
                source_format=self.format_name,
                episode_index=idx,
                embodiment=self.tag,
                location=self._location(group, key, tuple(split_of.get(group.rsplit("/", 1)[-1], []))),
            )
            for idx, group, key in self.layout.episodes
        ]

    def _discover_windows(self) -> list[EpisodeRef]:
        """Episodes cut out of each recording by a pause in the state clock or by a boolean dataset."""
        lay, refs = self.layout, list[EpisodeRef]()
        with self._open() as f:
            for _, group, key in lay.episodes:
                g = f[group] if group else f
                probe = EpisodeRef(
                    source_uri=self.root,
                    source_format=self.format_name,
                    episode_index=0,
                    embodiment=self.tag,
                    location=self._location(group, key),
                )
                path, stamps = lay.state[0]
                t = self._stream(g, path, stamps, probe).t
                if lay.split_by == "gap":
                    spans = segments_by_gap(t, lay.split_seconds)
                else:
                    flags = self._read_array(g, str(lay.split_source), probe).reshape(-1)
                    if len(flags) != len(t):
                        raise SourceError(
                            "shape",
                            self.root,
                            f"split source {lay.split_source!r} has {len(flags)} rows but {path} has {len(t)}; "
                            "they must be row-aligned",
                        )
                    spans = segments_by_flag(t, flags)
                for a, b in spans:
                    refs.append(
                        EpisodeRef(
                            source_uri=self.root,
                            source_format=self.format_name,
                            episode_index=len(refs),
                            embodiment=self.tag,
                            location=self._location(group, key, (), (a, b)),
                        )
                    )
        return refs

    def _group(self, f: Any, ref: EpisodeRef) -> Any:
        g = ref.get("group", "")
        if g and g not in f:
            raise SourceError("missing_key", self.root, f"episode group {g!r} is missing")
        return f[g] if g else f

    @staticmethod
    def _concrete(path: str, ref: EpisodeRef) -> str:
        return path.replace("{i}", str(ref.get("key", "")))

    def _dataset(self, g: Any, path: str, ref: EpisodeRef) -> Any:
        path = self._concrete(path, ref)
        if path not in g:
            here = sorted(dataset_keys(g))
            raise SourceError(
                "missing_key",
                self.root,
                f"{ref.get('group') or '/'}: dataset {path!r} is missing (this episode has {', '.join(here[:20])}); "
                "fix the mapping or drop the episode",
            )
        ds = g[path]
        if not hasattr(ds, "dtype"):
            raise SourceError(
                "shape",
                self.root,
                f"{ref.get('group') or '/'}: {path!r} is a group, not a dataset; name a dataset inside it",
            )
        return ds

    def _read_raw(self, g: Any, path: str, ref: EpisodeRef, cache: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """A dataset's values in its own dtype, checked against the read budget; read once per `cache`."""
        key = self._concrete(path, ref)
        if cache is not None and key in cache:
            return cache[key]
        ds = self._dataset(g, path, ref)
        self.limits.check_array(ds.shape, ds.dtype.itemsize, self.root, f"{ref.get('group') or ''}/{key}".lstrip("/"))
        try:
            raw = np.asarray(ds[()])
        except (OSError, ValueError, TypeError) as e:
            raise SourceError(
                "corrupt_file", self.root, f"dataset {path!r} cannot be read ({e}); the file is truncated or corrupt"
            ) from e
        if cache is not None:
            cache[key] = raw
        return raw

    def _read_array(self, g: Any, path: str, ref: EpisodeRef, cache: dict[str, np.ndarray] | None = None) -> np.ndarray:
        raw = self._read_raw(g, path, ref, cache)
        try:
            arr = np.asarray(raw, dtype=np.float64)
        except (ValueError, TypeError) as e:
            raise SourceError(
                "corrupt_file", self.root, f"dataset {path!r} cannot be read ({e}); the file is truncated or corrupt"
            ) from e
        if arr.ndim == 0:
            return arr.reshape(1, 1)
        return arr.reshape(len(arr), -1) if arr.size else arr.reshape(len(arr), int(np.prod(arr.shape[1:])))

    def _stream(
        self, g: Any, path: str, stamps: str | None, ref: EpisodeRef, cache: dict[str, np.ndarray] | None = None
    ) -> Stream:
        values = self._read_array(g, path, ref, cache)
        t = (
            self._read_array(g, stamps, ref, cache).reshape(-1)
            if stamps
            else np.arange(len(values), dtype=np.float64) / self.fps
        )
        return Stream(
            name=f"{ref.get('group') or ''}/{self._concrete(path, ref)}".lstrip("/"), t=t, values=values, path=self.root
        )

    reads_record = True  # read_tabular(ref, record=False) reads only the datasets the steps need

    def read_tabular(self, ref: EpisodeRef, *, record: bool = True) -> TabularEpisode:
        """Read, check and align one episode's state and action; keep every dataset of the episode
        in its record (`hdf5.record`), unless `record=False` (ingest's first pass, which only
        decides the content hash). Each dataset is read once, in its own dtype.

        Raises:
            SourceError: a dataset is missing, unreadable, over the read budget, empty,
                non-finite, of changing width, or the streams disagree in length (no stamps) or
                do not overlap in time (stamps).
        """
        lay = self.layout
        cache: dict[str, np.ndarray] = {}  # each dataset read once, in its own dtype: steps and record share it
        into = ColumnRecord(path=self.root, budget=self.limits.max_read_bytes, streams=self.options.streams)
        with self._open() as f:
            g = self._group(f, ref)
            state = [self._stream(g, p, s, ref, cache) for p, s in lay.state]
            action = [self._stream(g, p, s, ref, cache) for p, s in lay.action]
            cam_t = {
                c[0]: self._frame_times(g, c[1], c[2], ref, cache)
                for c in lay.cameras
                if not (self.options.state_only and self._concrete(c[1], ref) not in g)
            }
            task = self._task(f, g, ref, cache)
            success = self._success(g, cache)
            model_sha = None
            if "model_file" in g.attrs:
                model_sha = hashlib.sha256(attr_text(g.attrs["model_file"]).encode()).hexdigest()
            window = ref.get("window")
            if record:
                record_group(
                    g,
                    into,
                    layout=lay,
                    datasets=self._episode_datasets(g, ref),
                    read=lambda p: self._read_raw(g, p, ref, cache),
                    camera_times=cam_t,
                    concrete=lambda p: self._concrete(p, ref),
                    fps=self.fps,
                    window=(float(window[0]), float(window[1])) if window is not None else None,
                )
        cache.clear()
        built = into.build() if record else None
        for s, w in zip([*state, *action], [*lay.state_widths, *lay.action_widths], strict=False):
            if s.values.shape[1] != w:  # type: ignore[union-attr]
                raise SourceError(
                    "shape",
                    self.root,
                    f"{s.name} has width {s.values.shape[1]} but the file's first episode has {w}; "  # type: ignore[union-attr]
                    "episodes of one file must share a layout: split the file or give them different --embodiment tags",
                )
        stamped = any(st for _, st in (*lay.state, *lay.action)) or any(c[2] for c in lay.cameras)
        group = ref.get("group") or "/"
        notes: list[str] = []
        if stamped or window is not None:
            cams = {
                c: Stream(name=f"camera {c}", t=t, values=np.zeros((len(t), 0)), path=self.root)
                for c, t in cam_t.items()
            }
            al = align(
                state=state,
                action=action,
                cameras=cams,
                fps=lay.fps,
                action_from_state=lay.action_from_state,
                window=tuple(window) if window is not None else None,
                path=self.root,
                mode=self.options.resample_mode,
            )
            ts, st_v, ac_v, frames, meta = al.timestamps, al.state, al.action, al.frames, dict(al.metadata)
            notes = [f"{self.root}: {n}" for n in meta.pop("notes", [])]
        else:
            streams = [*state, *action]
            for s in streams:
                check_stream(s)
            lengths = {s.name: len(s) for s in streams} | {f"camera {c}": len(t) for c, t in cam_t.items()}
            if len(set(lengths.values())) > 1:
                raise SourceError(
                    "shape",
                    self.root,
                    f"{group}: datasets differ in length ({', '.join(f'{k}={v}' for k, v in lengths.items())}); "
                    "each row should be one tick: trim them, or give per-row `stamps:` in a mapping",
                )
            n = len(state[0])
            ts = np.arange(n, dtype=np.float64) / lay.fps
            st_v = np.concatenate([np.asarray(s.values) for s in state], axis=1)
            ac_v = (
                np.concatenate([np.asarray(s.values) for s in action], axis=1)
                if action
                else np.concatenate([st_v[1:], st_v[-1:]])
            )
            frames = {c: np.arange(n, dtype=np.int64) for c in cam_t}
            meta = {"action_from_state": True} if lay.action_from_state else {}
        tasks = (task,)
        task_index = np.zeros(len(ts), dtype=np.int32)
        digest = file_digest(self.root) if lay.cameras else ""
        key = ref.get("key", "")
        digests = tuple(
            f"{c}:{digest}:{group}{key}:{hashlib.sha256(frames[c].tobytes()).hexdigest()[:16]}" for c in frames
        )
        metadata: dict[str, Any] = {
            "file": self.root,
            "group": group,
            "layout": lay.name,
            "tasks": list(tasks),
            "fps_source": lay.fps_source,
            "frame_index": {c: frames[c].tolist() for c in frames},
            **meta,
        }
        if key:
            metadata["index"] = key
        if ref.get("splits"):
            metadata["splits"] = list(ref.get("splits"))
        if model_sha:
            metadata["model_file_sha256"] = model_sha
        if lay.attrs:
            metadata["attrs"] = dict(lay.attrs)
        if built is not None:
            metadata["record"] = into.metadata(built)
            notes += record_notes(built, self.root)
        if notes:
            metadata["notes"] = notes
        return TabularEpisode(
            ref=ref,
            state=st_v.astype(np.float32),
            action=ac_v.astype(np.float32),
            timestamps=ts,
            task_index=task_index,
            tasks=tasks,
            success=success,
            fps=lay.fps,
            content_hash=content_hash(
                state=st_v, action=ac_v, timestamps=ts, tasks=tasks, task_index=task_index, media_digests=digests
            ),
            metadata=metadata,
            record=built,
        )

    def _episode_datasets(self, g: Any, ref: EpisodeRef) -> dict[str, str]:
        """Stream name -> path of the episode's datasets: its group's, or its members of the file's key families."""
        key = str(ref.get("key", ""))
        if not key:
            return episode_datasets(dataset_keys(g), "", ())
        if self._names is None:  # a file of key families: its names listed once per reader
            self._names = dataset_keys(g)
        lay = self.layout
        paths = [x for p, st in (*lay.state, *lay.action) for x in (p, st)] + [x for c in lay.cameras for x in c[1:3]]
        templates = [p for p in paths if p and "{i}" in p]
        return episode_datasets(self._names, key, templates)

    def _frame_times(
        self, g: Any, path: str, stamps: str | None, ref: EpisodeRef, cache: dict[str, np.ndarray] | None = None
    ) -> np.ndarray:
        ds = self._dataset(g, path, ref)
        if stamps:
            return self._read_array(g, stamps, ref, cache).reshape(-1)
        return np.arange(ds.shape[0], dtype=np.float64) / self.fps

    def _task(self, f: Any, g: Any, ref: EpisodeRef, cache: dict[str, np.ndarray] | None = None) -> str:
        src = self.layout.task_from
        if not src:
            return self.layout.task
        if src.startswith("attrs/"):
            key = src[len("attrs/") :]
            holder = g if key in g.attrs else f
            if key not in holder.attrs:
                raise SourceError(
                    "missing_key", self.root, f"task_from attribute {key!r} is missing; it has {list(g.attrs.keys())}"
                )
            return attr_text(holder.attrs[key])
        value = self._read_raw(g, src, ref, cache).reshape(-1)
        return attr_text(value[0]) if value.size else ""

    def _success(self, g: Any, cache: dict[str, np.ndarray] | None = None) -> bool | None:
        if "dones" in g and hasattr(g["dones"], "dtype"):
            ds = g["dones"]
            if cache is not None and "dones" in cache:
                d = cache["dones"].reshape(-1)
            else:
                self.limits.check_array(ds.shape, ds.dtype.itemsize, self.root, "dones")
                d = np.asarray(ds[()])
                if cache is not None:
                    cache["dones"] = d
                d = d.reshape(-1)
            return bool(d[-1]) if d.size else None
        if "success" in g.attrs:
            return bool(np.asarray(g.attrs["success"]).reshape(-1)[0])
        return None

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Each camera's frames at the episode's ticks: stored JPEG/PNG bytes unchanged, raw pixels
        lossless (FFV1; JPEG under the lossy `--frames` layouts, `lake.codecs.encode_raw`).

        Raises:
            SourceError: a camera dataset is missing, unreadable or over the read budget, or its
                image size changes.
        """
        from PIL import Image

        from robolake.lake.media.frames import encode_raw

        ref = episode.ref
        index = episode.metadata.get("frame_index", {})
        with self._open() as f:
            g = self._group(f, ref)
            for cam, path, _, kind in self.layout.cameras:
                try:
                    ds = self._dataset(g, path, ref)
                except SourceError:
                    if self.options.state_only:
                        log.warning("%s: camera %r missing; --state-only keeps the episode without it", self.root, cam)
                        continue
                    raise
                idx = np.asarray(index.get(cam, range(episode.num_steps)), dtype=np.int64)
                if kind != "encoded":
                    channels = int(ds.shape[3]) if ds.ndim == 4 else 1
                    self.limits.check_frame(
                        int(ds.shape[1]), int(ds.shape[2]), channels, ds.dtype.itemsize, self.root, path
                    )
                    # Frame by frame (recorders chunk per frame): a 1000-step 480p episode is ~1 GB raw.
                    encoded: dict[int, tuple[bytes, str]] = {}
                    try:
                        for i in dict.fromkeys(idx.tolist()):
                            encoded[i] = encode_raw(_rgb(np.asarray(ds[i])), self.options.video_frames)
                    except OSError as e:
                        raise SourceError(
                            "corrupt_file",
                            self.root,
                            f"camera dataset {path!r} cannot be read ({e}); the file is truncated",
                        ) from e
                    images = tuple(encoded[i][0] for i in idx.tolist())
                    raw_encoding = next(iter(encoded.values()))[1] if encoded else "jpeg"
                    yield EncodedFrames(
                        camera=cam,
                        images=images,
                        encoding=raw_encoding,
                        height=int(ds.shape[1]),
                        width=int(ds.shape[2]),
                    )
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
                        raise SourceError(
                            "corrupt_video",
                            self.root,
                            f"camera {cam!r} ({path}) holds bytes that are not an image ({e})",
                        ) from e
                h, w = check_frame_sizes(sizes, f"{cam} ({path})", self.root)
                enc = encodings.pop() if len(encodings) == 1 else "jpeg"
                if enc not in ("jpeg", "png"):
                    raise SourceError(
                        "corrupt_video",
                        self.root,
                        f"camera {cam!r} ({path}) holds {enc} images; only JPEG and PNG pass through",
                    )
                yield EncodedFrames(camera=cam, images=tuple(chosen), encoding=enc, height=h, width=w)

    def _encoded_rows(self, f: Any, g: Any, ds: Any, cam: str, path: str, ref: EpisodeRef) -> list[bytes]:
        """The encoded image of each row: vlen bytes as stored, ACT's padded rows cut to compress_len."""
        if ds.dtype.kind != "O":  # vlen rows declare no size: they are bounded per row below
            self.limits.check_array(ds.shape, ds.dtype.itemsize, self.root, path)
        try:
            raw = ds[()]
        except OSError as e:
            raise SourceError(
                "corrupt_file", self.root, f"camera dataset {path!r} cannot be read ({e}); the file is truncated"
            ) from e
        if ds.dtype.kind in "OS":
            out_v = [bytes(x.tobytes() if isinstance(x, np.ndarray) else x) for x in np.asarray(raw).reshape(-1)]
            for i, b in enumerate(out_v):
                self.limits.check_bytes(len(b), self.root, f"{path}[{i}]", "holds an image of")
            return out_v
        lengths = None
        holder = g if "compress_len" in g else f
        if "compress_len" in holder:
            cl_ds = holder["compress_len"]
            self.limits.check_array(cl_ds.shape, cl_ds.dtype.itemsize, self.root, "compress_len")
            cl = np.asarray(cl_ds[()])
            cams = [c[0] for c in self.layout.cameras]
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
        """Datasets (dtype, shape, rows, role; demo_N groups collapsed), attributes, layout, episodes, a mapping."""
        return describe_reader(self)


def _rgb(frame: np.ndarray) -> np.ndarray:
    """uint8 [H, W, 3] of a stored frame: RGB as is, RGBA without alpha, grayscale repeated."""
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.shape[2] == 1:
        return np.ascontiguousarray(np.repeat(frame, 3, axis=2))
    return np.ascontiguousarray(frame[:, :, :3])


def inspect_hdf5(path: str, options: SourceOptions | None = None) -> dict[str, Any]:
    """An HDF5 file described whatever its layout (for `robolake inspect` of a file no layout fits)."""
    info = describe_file(os.path.abspath(path), options or SourceOptions())
    info["suggested_mapping"] = suggest_hdf5_mapping(info, os.path.abspath(path))
    suggested_roles(info, info["suggested_mapping"])
    return info


def _open_hdf5(path: str, options: SourceOptions) -> HDF5Reader:
    return HDF5Reader(path, options)


FORMAT = SourceFormat(
    name="hdf5",
    description="HDF5 recordings: ALOHA/ACT, robomimic, raw robosuite, states_N/actions_N families, others via --map",
    detect=is_hdf5_file,
    open=_open_hdf5,
    unit="file",
    inspect_unit=inspect_hdf5,
)
