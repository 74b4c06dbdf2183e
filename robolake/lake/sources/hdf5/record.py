"""The record of an HDF5 episode: every dataset of its group, in the dataset's own dtype.

An episode is a group (`data/demo_3`, the file root for ALOHA) or, in a file of indexed key
families, the members of each family with the episode's index (`states_3`, `qvel_3`, and every
dataset under `ep_3/` when a mapping names `ep_{i}/qpos`). Each of its datasets is a stream
named by its path relative to the group, with `{i}` for the index (`obs/object`, `states_{i}`),
which is how `robolake inspect` names it; a row is a message. A number dataset keeps its dtype
(float64 qpos stays float64, int64 dones stay integers) and its row shape flattened (a [T, 4, 4]
pose is 16 values a row); a text dataset is string events; a 0-d dataset is one message.

Times are the dataset's stamps where the layout names them (a mapping's `stamps:`), its own
values for a clock (a 1-D float dataset named `t`, `time`, `*_t`, `stamps`, `timestamps`), a
clock of the same group with as many rows, and otherwise the row index over the file's rate
(clock `rows`). An episode cut out of a longer recording (`split:`) keeps the rows inside its
window; a dataset with no clock to place it there is left out, with that reason.

Left out, each with its reason in the episode metadata: camera datasets (their frames are the
media table, their frame times a `camera` part), other image datasets (named or shaped like
frames: the layout did not take them as a camera), ACT's `compress_len` (the byte lengths of
the cameras' padded JPEG rows, part of their frames), and datasets of neither numbers nor text.
Datasets outside every episode (robomimic's `mask/*`) belong to no episode's record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from robolake.lake.sources.columnar import CLOCK_ROWS, CLOCK_SOURCE, ColumnRecord, seconds_to_ns
from robolake.lake.sources.hdf5.layout import Layout, camera_kind

__all__ = ["episode_datasets", "record_group", "is_image_dataset"]

_CLOCK = re.compile(r"(^|[/_])(t|time|times|stamps?|timestamps?)$")  # as `robolake inspect` tells clocks
_IMAGE_NAME = re.compile(r"(image|rgb|depth|camera|cam_|_cam)", re.IGNORECASE)
_INDEXED = re.compile(r"^(?P<prefix>.+?)(?P<index>\d+)(?P<suffix>(\.[A-Za-z]+)?)$")


def episode_datasets(names: Iterable[str], key: str, templates: Iterable[str]) -> dict[str, str]:
    """Stream name -> dataset path of one episode's datasets.

    Args:
        names: Dataset paths relative to the episode group.
        key: The episode's index in a file of key families; "" when the group is the episode.
        templates: Dataset paths holding `{i}` that the layout names.
    """
    if not key:
        return {n: n for n in names}
    groups = []  # `ep_{i}` of a template `ep_{i}/qpos`: every dataset under `ep_<key>/` is the episode's
    for t in templates:
        head, sep, _ = t.partition("{i}")
        rest = t[len(head) + len(sep) :]
        if sep and "/" in rest:
            template = head + "{i}" + rest.split("/", 1)[0]
            groups.append((template, template.replace("{i}", key)))
    out: dict[str, str] = {}
    for name in names:
        parent, _, base = name.rpartition("/")
        m = _INDEXED.match(base)
        if m and m.group("index") == key:
            out[(parent + "/" if parent else "") + m.group("prefix") + "{i}" + m.group("suffix")] = name
            continue
        for template, concrete in groups:
            if name.startswith(concrete + "/"):
                out[template + name[len(concrete) :]] = name
                break
    return out


def _is_text(ds: Any) -> bool:
    import h5py

    return ds.dtype.kind in "SU" or h5py.check_string_dtype(ds.dtype) is not None


def is_image_dataset(path: str, ds: Any) -> bool:
    """Frames: a uint8 [T, H, W(, C)] array, or one named like images that has rows of pixels or bytes."""
    kind = camera_kind(ds)
    named = bool(_IMAGE_NAME.search(path.rsplit("/", 1)[-1]))
    return kind in ("rgb", "rgba", "gray") or (named and (ds.ndim >= 3 or kind == "encoded"))


def _texts(raw: np.ndarray) -> list[str] | None:
    """One text per row (a row of several, as a JSON list); None when the bytes are not UTF-8."""

    def one(x: Any) -> str:
        return x.decode("utf-8") if isinstance(x, (bytes, np.bytes_)) else str(x)

    try:
        rows = raw.reshape(1) if raw.ndim == 0 else raw
        if rows.ndim == 1:
            return [one(x) for x in rows]
        return [json.dumps([one(x) for x in row.reshape(-1)]) for row in rows]
    except UnicodeDecodeError:
        return None


def record_group(
    g: Any,
    into: ColumnRecord,
    *,
    layout: Layout,
    datasets: dict[str, str],
    read: Callable[[str], np.ndarray],
    camera_times: dict[str, np.ndarray],
    concrete: Callable[[str], str],
    fps: float,
    window: tuple[float, float] | None,
) -> None:
    """Every dataset of one episode into `into`.

    Args:
        g: The open episode group.
        layout: The file's layout (which datasets are cameras, stamps, mapped).
        datasets: Stream name -> dataset path (`episode_datasets`).
        read: A dataset's values in its own dtype, read once (the reader's cache, budget-checked).
        camera_times: Camera name -> its frame times in seconds, for the cameras this episode has.
        concrete: A layout path with the episode's `{i}` filled in.
        fps: The file's rate (times of datasets without a clock).
        window: [start, end] seconds on the first state stream's clock, for an episode cut out of
            a recording; None for a whole group.
    """
    stream_of = {p: s for s, p in datasets.items()}
    stamps_of = {concrete(p): concrete(st) for p, st in (*layout.state, *layout.action) if st}
    stamps_of.update({concrete(c[1]): concrete(c[2]) for c in layout.cameras if c[2]})
    mapped = {concrete(p) for p, _ in (*layout.state, *layout.action)} | set(stamps_of.values())
    mapped |= {concrete(x) for x in (layout.split_source, layout.task_from) if x}
    cameras = {concrete(c[1]): c for c in layout.cameras}
    encoded = any(c[3] == "encoded" for c in layout.cameras)
    for path, (name, _, stamps, _) in cameras.items():
        t = camera_times.get(name)
        if t is None or path not in stream_of or not into.wanted(stream_of[path], mapped=True):
            continue
        keep = _in_window(t, window)
        into.camera(
            stream_of[path], seconds_to_ns(t[keep]), clock=CLOCK_SOURCE if stamps else CLOCK_ROWS, msgtype="camera"
        )
    kept: dict[str, str] = {}  # path -> numeric | text
    for stream, path in datasets.items():
        if path in cameras:
            continue
        ds = g[path]
        if encoded and path == "compress_len":
            into.leave_out(stream, "byte lengths of the cameras' padded JPEG rows (part of their frames)")
        elif is_image_dataset(path, ds):
            into.leave_out(stream, f"images, not a camera of the {layout.name} layout (map it under cameras:)")
        elif ds.dtype.kind in "biuf" or _is_text(ds):
            if into.wanted(stream, mapped=path in mapped):
                kept[path] = "numeric" if ds.dtype.kind in "biuf" else "text"
        else:
            into.leave_out(stream, f"{ds.dtype} values: neither numbers nor text")
    clocks = set(stamps_of.values()) | {
        p for p, k in kept.items() if k == "numeric" and _CLOCK.search(p) and g[p].ndim == 1 and g[p].dtype.kind == "f"
    }
    seconds: dict[str, np.ndarray | None] = {}

    def clock_values(c: str) -> np.ndarray | None:
        if c not in seconds:
            t = np.asarray(read(c), dtype=np.float64).reshape(-1)
            seconds[c] = t if np.isfinite(t).all() else None
        return seconds[c]

    def rows(p: str) -> int:
        return int(g[p].shape[0]) if g[p].ndim else 1

    state_path, state_stamps = concrete(layout.state[0][0]), layout.state[0][1]

    def times(p: str) -> tuple[np.ndarray, str] | str:
        """(seconds, clock) of each row of dataset `p`, or why it has none in this episode."""
        first = [stamps_of[p]] if p in stamps_of else [p] if p in clocks else []
        parent = p.rpartition("/")[0]
        first += sorted(c for c in clocks if c.rpartition("/")[0] == parent and c != p and rows(c) == rows(p))
        for c in first:
            t = clock_values(c)
            if t is not None and len(t) == rows(p):
                return t, CLOCK_SOURCE
        if window is not None and state_stamps:  # the window is on the state's stamps
            t = clock_values(concrete(state_stamps))
            if rows(p) == rows(state_path) and t is not None:
                return t, CLOCK_SOURCE
            return "no clock places its rows in this episode's window (give it `stamps:` in a mapping)"
        return np.arange(rows(p), dtype=np.float64) / fps, CLOCK_ROWS

    for path, kind in kept.items():
        stream, ds = stream_of[path], g[path]
        if ds.ndim == 0:
            t_s, clock = np.zeros(1), CLOCK_ROWS
        else:
            timed = times(path)
            if isinstance(timed, str):
                into.leave_out(stream, timed)
                continue
            t_s, clock = timed
        keep = _in_window(t_s, window) if ds.ndim else np.ones(1, bool)
        raw = read(path)
        values = raw.reshape(1) if raw.ndim == 0 else raw
        stored = int(ds.id.get_storage_size()) if window is None else None
        if kind == "numeric":
            into.numeric(
                stream,
                seconds_to_ns(t_s[keep]),
                values[keep],
                scalar=ds.ndim <= 1,
                clock=clock,
                msgtype=f"{ds.dtype}{list(ds.shape[1:])}",
                nbytes=stored,
            )
            continue
        texts = _texts(values[keep])
        if texts is None:
            into.leave_out(stream, "bytes that are not UTF-8 text")
        else:
            into.text(stream, seconds_to_ns(t_s[keep]), texts, clock=clock, nbytes=stored)


def _in_window(t: np.ndarray, window: tuple[float, float] | None) -> np.ndarray:
    if window is None:
        return np.ones(len(t), dtype=bool)
    return (t >= window[0]) & (t <= window[1])
