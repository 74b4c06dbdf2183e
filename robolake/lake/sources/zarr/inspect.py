"""What a Zarr replay buffer holds, described for `robolake inspect`, whatever ingest makes of it.

One row per array: `data/<key>` and `meta/episode_ends` with dtype, codec (`blosc/zstd`,
`imagecodecs_jpegxl`), rows, per-row shape, rate and span; one row per camera of the `videos/`
tree (`videos/{i}/0.mp4`: files, codec, frame size). Rows are ticks of the buffer's clock
(`data/timestamp`), so every key gets the clock's measured rate and span; other 1-D float keys
named like clocks get their own, and one that goes back between episodes is said. Where the
layout resolved, each row says what ingest does with it (state, action, camera, clock, kept in
the record only, or left out and why) and the layout is written out as a mapping that ingests
exactly what the default does (`suggested_mapping`); where it did not, a mapping is suggested
from the names, dtypes and shapes. Every read is checked against the read budget first.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Protocol

import numpy as np

from robolake.lake.sources.base import SourceError, iso_time
from robolake.lake.sources.registry import SourceOptions
from robolake.lake.sources.zarr.layout import (
    CLOCK_KEY,
    VIDEOS,
    Layout,
    array_info,
    camera_kind,
    locate,
    open_buffer,
    read_ends,
    video_source,
)

__all__ = ["describe_buffer", "describe_reader", "describe_unopened", "layout_yaml"]

_CLOCK = re.compile(r"(^|_)(t|time|times|stamps?|timestamps?)$")
_STATE = re.compile(r"(pos|pose|state|joint|qpos|eef|gripper|proprio)", re.IGNORECASE)


class _Resolved(Protocol):
    """What `describe_reader` reads of a reader whose layout resolved (the Zarr reader)."""

    layout: Layout
    root: str
    buffer: str
    videos: str | None
    options: SourceOptions
    format_name: str
    tag: str
    cameras: Any
    fps: float
    notes: Any


def _video_rows(videos: str, n_episodes: int) -> dict[str, dict[str, Any]]:
    """One row per camera stem of `videos/<episode>/`: files, codec and frame size of its first readable file."""
    stems: dict[str, list[str]] = {}
    for name in sorted(os.listdir(videos)):
        folder = os.path.join(videos, name)
        if not os.path.isdir(folder) or not name.isdigit() or int(name) >= n_episodes:
            continue
        for f in sorted(os.listdir(folder)):
            if f.endswith(".mp4") and not f.startswith("."):
                stems.setdefault(f[:-4], []).append(os.path.join(folder, f))
    out: dict[str, dict[str, Any]] = {}
    for stem, files in sorted(stems.items()):
        row: dict[str, Any] = {"type": "mp4", "count": len(files), "camera": "video"}
        for path in files:
            try:
                import av

                with av.open(path) as c:
                    s = c.streams.video[0]
                    row.update(
                        encoding=s.codec_context.name,
                        shape=[int(s.codec_context.height), int(s.codec_context.width)],
                        rate_hz=round(float(s.average_rate or 0), 3) or None,
                    )
                break
            except Exception:  # a truncated file: the next one says the camera's codec
                continue
        out[video_source(stem)] = row
    return out


def describe_buffer(buffer: str, videos: str | None, options: SourceOptions) -> dict[str, Any]:
    """Every array of a buffer (dtype, codec, rows, shape; clocks with rate and span), its episodes, its videos.

    Raises:
        SourceError: the store cannot be opened, or `meta/episode_ends` is unusable.
    """
    root = open_buffer(buffer)
    ends = read_ends(root, buffer, options.limits)
    keys: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    clocks: dict[str, np.ndarray] = {}
    for name, arr in sorted(root["data"].arrays()):
        key = f"data/{name}"
        dtype = np.dtype(arr.dtype)
        row: dict[str, Any] = {
            "type": str(dtype),
            "encoding": array_info(arr).codec,
            "count": int(arr.shape[0]) if arr.ndim else 1,
            "shape": [int(x) for x in arr.shape[1:]],
        }
        kind = camera_kind(dtype, tuple(arr.shape))
        if kind is not None:
            row["camera"] = kind
        keys[key] = row
        if arr.ndim == 1 and dtype.kind == "f" and (key == CLOCK_KEY or _CLOCK.search(key)):
            try:
                options.limits.check_array(arr.shape, dtype.itemsize, buffer, key)
            except SourceError as e:
                row["note"] = e.message
                continue
            clocks[key] = np.asarray(arr[...], dtype=np.float64)
    e_arr = root["meta/episode_ends"]
    keys["meta/episode_ends"] = {
        "type": str(np.dtype(e_arr.dtype)),
        "encoding": array_info(e_arr).codec,
        "count": len(ends),
        "shape": [],
        "role": "episode boundaries",
    }
    starts = [0, *ends[:-1]]
    for key, t in clocks.items():
        dts = [np.diff(t[a:b]) for a, b in zip(starts, ends, strict=True) if b - a > 1 and b <= len(t)]
        dt = np.concatenate(dts) if dts else np.zeros(0)
        dt = dt[np.isfinite(dt) & (dt > 0)]
        finite = t[np.isfinite(t)]
        if dt.size and finite.size:
            keys[key].update(
                rate_hz=round(float(1.0 / np.median(dt)), 3), start_s=float(finite.min()), end_s=float(finite.max())
            )
            keys[key]["clock"] = True
        back = [i for i, s in enumerate(starts) if 0 < s < len(t) and t[s] < t[s - 1]]
        if back:
            notes.append(
                f"{buffer}: {key} goes back between episodes {back[0] - 1} and {back[0]} "
                f"({t[starts[back[0]] - 1]:.6f} -> {t[starts[back[0]]]:.6f} s; {len(back)} time(s)); "
                "each episode is read on its own, so they land"
            )
    out: dict[str, Any] = {"format": "zarr", "path": buffer, "episodes": len(ends), "rows": ends[-1] if ends else 0}
    out.update(_spans(keys))
    main = keys.get(CLOCK_KEY, {})
    if main.get("clock"):
        for key, row in keys.items():  # rows are ticks of the buffer's clock
            if key.startswith("data/") and not row.get("clock"):
                row.update(rate_hz=main["rate_hz"], start_s=main["start_s"], end_s=main["end_s"])
    if videos is not None:
        keys.update(_video_rows(videos, len(ends)))
    out["keys"] = keys
    attrs = {str(k): str(v)[:200] for k, v in dict(root.attrs).items()}
    if attrs:
        out["attrs"] = attrs
    if notes:
        out["notes"] = notes
    return out


def _spans(keys: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each clock's span as seconds from its own first time (a buffer's clocks need not share an epoch);
    epoch clocks also as ISO 8601; the buffer's duration is the longest."""
    clocks = [r for r in keys.values() if r.get("clock")]
    if not clocks:
        return {}
    out: dict[str, Any] = {"duration_s": round(max(r["end_s"] - r["start_s"] for r in clocks), 6)}
    for r in clocks:
        t0, t1 = r["start_s"], r["end_s"]
        if 1e8 < t0 < 1e10:
            r["start"], r["end"] = iso_time(int(t0 * 1e9)), iso_time(int(t1 * 1e9))
            out.setdefault("start", r["start"])
            out.setdefault("end", r["end"])
        r["start_s"], r["end_s"] = 0.0, round(t1 - t0, 6)
    return out


def _role(key: str, row: dict[str, Any], lay: Layout) -> str:
    for i, k in enumerate(lay.state):
        if k == key:
            return f"state[{i}]"
    for i, k in enumerate(lay.action):
        if k == key:
            return f"action[{i}]"
    for cam, src, kind in lay.cameras:
        if src == key:
            return f"camera {cam} ({kind})"
    if key == lay.clock:
        return "clock of every stream (in the record)"
    if row.get("role"):
        return str(row["role"])
    if key.startswith(f"{VIDEOS}/"):
        return "not ingested: a camera the mapping leaves out"
    if row.get("camera"):
        return "not ingested: frames no camera of the mapping reads (map it under cameras:)"
    if len(row.get("shape", [])) >= 2 and min(row["shape"][:2]) > 4:
        return "not ingested: image-shaped but not uint8 frames"
    if not str(row.get("type", "")).startswith(("float", "int", "uint", "bool")):
        return f"not kept: {row.get('type')} values are neither numbers nor text"
    if row.get("clock"):
        return "in the record only: a clock the steps do not use"
    return f"in the record only: not in the {lay.name} layout's steps (map {key} under state: or action:)"


def describe_reader(reader: _Resolved) -> dict[str, Any]:
    """A buffer whose layout resolved: its keys with roles, what ingest makes of it, and the layout as a mapping."""
    lay = reader.layout
    info = describe_buffer(reader.buffer, reader.videos, reader.options)
    for key, row in info["keys"].items():
        row["role"] = _role(key, row, lay)
    s_dim, a_dim = sum(lay.state_widths), sum(lay.action_widths or lay.state_widths)
    out: dict[str, Any] = {
        "format": reader.format_name,
        "path": reader.root,
        "ingest": (
            f"{len(lay.ends)} episode(s) of embodiment {reader.tag!r}: state {s_dim} values, action {a_dim}"
            f"{' (the next state)' if lay.action_from_state else ''}, cameras {list(reader.cameras) or 'none'}, "
            f"at {reader.fps:g} Hz ({lay.fps_source})"
        ),
        "embodiment": reader.tag,
        "layout": lay.name,
        "fps": reader.fps,
        "fps_source": lay.fps_source,
        "cameras": list(reader.cameras),
        "state": list(lay.state),
        "action": list(lay.action),
        **{k: v for k, v in info.items() if k not in ("format", "path", "notes")},
    }
    notes = [*reader.notes, *(n for n in info.get("notes", ()) if n not in reader.notes)]
    if notes:
        out["notes"] = notes
    out["suggested_mapping"] = layout_yaml(lay, reader.root, reader.tag)
    return out


def _q(x: str) -> str:
    return json.dumps(x)


def layout_yaml(lay: Layout, path: str, tag: str) -> str:
    """The resolved layout as a mapping that ingests what the default ingest does, to edit."""
    lines = [f"# the layout robolake found in {path} ({lay.name}), as a mapping to edit", f"embodiment: {_q(tag)}"]
    lines.append("state:")
    lines += [f"  - {{source: {_q(k)}}}" for k in lay.state]
    if lay.action_from_state:
        lines.append("action_from_state: true             # the buffer has no data/action: the next row's state")
    else:
        lines.append("action:")
        lines += [f"  - {{source: {_q(k)}}}" for k in lay.action]
    lines.append("cameras: {" + ", ".join(f"{_q(c)}: {_q(src)}" for c, src, _ in lay.cameras) + "}")
    lines.append(f"fps: {lay.fps:g}                              # {lay.fps_source}")
    if lay.task:
        lines.append(f"task: {_q(lay.task)}")
    return "\n".join(lines) + "\n"


def _suggest(info: dict[str, Any], path: str) -> str:
    """A mapping for a buffer no default layout fits, from its key names, dtypes and shapes."""
    keys: dict[str, dict[str, Any]] = info.get("keys", {})
    numeric = [
        k
        for k, r in keys.items()
        if k.startswith("data/")
        and not r.get("clock")
        and not r.get("camera")
        and len(r.get("shape", [])) <= 2
        and str(r.get("type", "")).startswith(("float", "int", "uint", "bool"))
    ]
    actions = [k for k in numeric if "action" in k.rsplit("/", 1)[-1]]
    states = sorted((k for k in numeric if k not in actions), key=lambda k: (not _STATE.search(k), k))
    cams = [k for k, r in keys.items() if r.get("camera")]
    lines = [
        f"# mapping suggested by `robolake inspect` for {path}: edit it, then ingest with --map THIS_FILE",
        '# embodiment: "my_robot"',
        "state:",
    ]
    lines += [f"  - {{source: {_q(k)}}}   # {keys[k]['type']} {keys[k]['shape']}" for k in states[:1]]
    lines += [f"  # - {{source: {_q(k)}}}   # {keys[k]['type']} {keys[k]['shape']}" for k in states[1:]]
    if actions:
        lines += ["action:", f"  - {{source: {_q(actions[0])}}}"]
    else:
        lines.append("action_from_state: true             # no key named like an action: the next row's state")
    lines.append(
        "cameras: {"
        + ", ".join(
            f"{_q(k.rsplit('/', 2)[-1].removesuffix('.mp4') if k.startswith(VIDEOS) else k.rsplit('/', 1)[-1])}: "
            f"{_q(k)}"
            for k in cams
        )
        + "}"
    )
    if not keys.get(CLOCK_KEY, {}).get("clock"):
        lines.append("fps: 10                              # the buffer records no clock: give the real rate")
    return "\n".join(lines) + "\n"


def describe_unopened(path: str, options: SourceOptions) -> dict[str, Any]:
    """A unit the reader cannot open described from its arrays, with a mapping to start from."""
    found = locate(path)
    if found is None:
        return {"error": "not a Zarr replay buffer (no data/ group and meta/episode_ends array)"}
    info = describe_buffer(found[0], found[1], options)
    info["suggested_mapping"] = _suggest(info, path)
    for row in info["keys"].values():
        row.setdefault("role", "not ingested: the buffer needs a mapping (see --suggest-map)")
    return info
