"""What an HDF5 file holds, described for `robolake inspect`, whatever its layout.

Every dataset with its dtype, per-row shape and row count; episode groups (`data/demo_N`, a
mapping's `episodes:` children) and indexed key families (`states_0`, `states_1`, ...) are
collapsed to one row (`data/demo_*/obs/qpos`, `states_{i}`) with the rows summed and the members
counted. 1-D float datasets named like clocks (`t`, `time`, `*_t`, `stamps`, `timestamps`) get
their rate and span, which is what a mapping's `stamps:` needs. Where a layout resolved, each row
says what ingest does with it (state, action, camera, stamps, kept in the episode's record only,
or not kept and why), and the layout is written out as a mapping to edit; where none did, a
mapping is suggested from the names, shapes and dtypes. Reading a clock is checked against the
read budget like every other read.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

import numpy as np

from robolake.lake.sources.base import SourceError, iso_time
from robolake.lake.sources.hdf5.layout import Layout, attr_text, camera_kind, check_links, open_hdf5
from robolake.lake.sources.hdf5.record import is_image_dataset
from robolake.lake.sources.registry import SourceOptions


class _Resolved(Protocol):
    """What `describe_reader` reads of a reader whose layout resolved (the HDF5 reader)."""

    layout: Layout
    root: str
    options: SourceOptions
    format_name: str
    tag: str
    cameras: Any
    fps: float
    notes: Any


__all__ = ["describe_file", "describe_reader", "suggest_hdf5_mapping", "suggested_roles"]

_CLOCK = re.compile(r"(^|[/_])(t|time|times|stamps?|timestamps?)$")
_FAMILY = re.compile(r"^(?P<prefix>.*?\D)(?P<index>\d+)$")
_STATE = re.compile(r"(qpos|state|joint|position|pos$|proprio|obs)", re.IGNORECASE)
_ACTION = re.compile(r"(action|cmd|command)", re.IGNORECASE)


def _collapser(names: list[str], groups: dict[str, str]) -> Any:
    """name -> collapsed key: episode groups to `*`, demo_N to demo_*, index families to `{i}`."""

    def base(name: str) -> str:
        for g, star in groups.items():
            if name.startswith(g + "/"):
                return star + name[len(g) :]
        return re.sub(r"demo_\d+", "demo_*", name)

    fam: dict[str, set[str]] = {}
    for n in names:
        b = base(n)
        parent, _, last = b.rpartition("/")
        m = _FAMILY.match(last)
        if m:
            fam.setdefault((parent + "/" if parent else "") + m.group("prefix") + "{i}", set()).add(m.group("index"))

    def collapse(name: str) -> str:
        b = base(name)
        parent, _, last = b.rpartition("/")
        m = _FAMILY.match(last)
        if m:
            t = (parent + "/" if parent else "") + m.group("prefix") + "{i}"
            if len(fam.get(t, ())) > 1:
                return t
        return b

    return collapse


def describe_file(path: str, options: SourceOptions, groups: dict[str, str] | None = None) -> dict[str, Any]:
    """Every dataset of an HDF5 file (dtype, shape, rows; groups and families collapsed) and its attributes.

    Raises:
        SourceError: the file cannot be opened.
    """
    import h5py

    keys: dict[str, dict[str, Any]] = {}
    samples: dict[str, str] = {}
    problem = None
    with open_hdf5(path) as f:
        try:
            check_links(f, path)
        except SourceError as e:
            problem = e.message
        names: list[str] = []
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        collapse = _collapser(names, groups or {})
        for name in names:
            obj = f[name]
            key = collapse(name)
            samples.setdefault(key, name)
            entry = keys.setdefault(
                key, {"type": str(obj.dtype), "shape": list(obj.shape[1:]), "count": 0, "groups": 0}
            )
            entry["count"] += int(obj.shape[0]) if obj.ndim else 1
            entry["groups"] += 1
        attrs = {k: attr_text(f.attrs[k])[:200] for k in f.attrs.keys()}
        if "data" in f and hasattr(f["data"], "attrs"):
            attrs.update({f"data.{k}": attr_text(f["data"].attrs[k])[:200] for k in f["data"].attrs.keys()})
        for key, entry in keys.items():
            obj = f[samples[key]]
            if obj.ndim == 1 and obj.dtype.kind == "f" and _CLOCK.search(key) and problem is None:
                try:
                    options.limits.check_array(obj.shape, obj.dtype.itemsize, path, samples[key])
                except SourceError as e:
                    entry["note"] = e.message
                    continue
                t = np.asarray(obj[()], dtype=np.float64)
                dt = np.diff(t)
                if t.size > 1 and (dt >= 0).all() and (dt > 0).any():
                    # the rate to the millihertz (62.5 Hz, not 62.4999), spans made relative below
                    entry.update(
                        rate_hz=round(float(1.0 / np.median(dt[dt > 0])), 3),
                        start_s=float(t[0]),
                        end_s=float(t[-1]),
                        clock=True,
                    )
            if is_image_dataset(key, obj):
                entry["image"] = True  # the record leaves it out (`hdf5.record`)
            kind = camera_kind(obj)
            if kind is not None and (
                obj.ndim >= 3 or (kind == "encoded" and re.search(r"(image|rgb|cam)", key, re.IGNORECASE))
            ):
                entry["camera"] = kind
    out: dict[str, Any] = {"format": "hdf5", "path": path, "attrs": attrs, "keys": keys}
    out.update(_relative_spans(keys))
    if problem:
        out["error"] = problem
    return out


def _relative_spans(keys: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Clock spans as seconds from the file's first time; clocks in seconds since the epoch also
    get their ISO 8601 times (per clock, and the file's start and end)."""
    clocks = [e for e in keys.values() if e.get("clock")]
    if not clocks:
        return {}
    t0, t1 = min(e["start_s"] for e in clocks), max(e["end_s"] for e in clocks)
    epoch = 1e8 < t0 < 1e10
    for e in clocks:
        if epoch:
            e["start"], e["end"] = iso_time(int(e["start_s"] * 1e9)), iso_time(int(e["end_s"] * 1e9))
        e["start_s"], e["end_s"] = round(e["start_s"] - t0, 6), round(e["end_s"] - t0, 6)
    out: dict[str, Any] = {"duration_s": round(t1 - t0, 6)}
    if epoch:
        out.update(start=iso_time(int(t0 * 1e9)), end=iso_time(int(t1 * 1e9)))
    return out


def suggested_roles(info: dict[str, Any], text: str) -> None:
    """Each key's role under the suggested mapping (`state[0] with --suggest-map`), for a file no
    layout fits; the others say a mapping is needed."""
    import yaml

    try:
        m = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return
    prefix = "data/demo_*/" if m.get("episodes") == "data" else ""
    roles: dict[str, str] = {}
    for part in ("state", "action"):
        for i, stream in enumerate(m.get(part) or []):
            if isinstance(stream, dict):
                roles.setdefault(prefix + str(stream.get("source")), f"{part}[{i}] with --suggest-map")
                if stream.get("stamps"):
                    roles.setdefault(prefix + str(stream["stamps"]), f"stamps of {part}[{i}] with --suggest-map")
    for name, src in (m.get("cameras") or {}).items():
        roles.setdefault(prefix + str(src), f"camera {name} with --suggest-map")
    for key, row in info.get("keys", {}).items():
        row["role"] = roles.get(key, "not ingested: the file needs a mapping (see --suggest-map)")


def _rows_of(layout: Layout) -> dict[str, str]:
    """Dataset path (relative to an episode group, `{i}` kept) -> its role."""
    roles: dict[str, str] = {}
    for i, (p, st) in enumerate(layout.state):
        roles[p] = f"state[{i}]"
        if st:
            roles.setdefault(st, f"stamps of state[{i}]")
    for i, (p, st) in enumerate(layout.action):
        roles.setdefault(p, f"action[{i}]")
        if st:
            roles.setdefault(st, f"stamps of action[{i}]")
    for name, p, st, kind in layout.cameras:
        roles.setdefault(p, f"camera {name} ({kind})")
        if st:
            roles.setdefault(st, f"stamps of camera {name}")
    if layout.task_from and not layout.task_from.startswith("attrs/"):
        roles.setdefault(layout.task_from, "task")
    if layout.split_source:
        roles.setdefault(layout.split_source, "split flag")
    roles.setdefault("dones", "success (its last row)")
    return roles


def _ignored_why(rel: str, row: dict[str, Any], lay: Layout, inside: bool) -> str:
    """What a default ingest does with a dataset the layout's steps do not use: the episode's
    record keeps it (`hdf5.record`), or leaves it out and why; and how a mapping takes it in."""
    layout, kind = lay.name, str(row.get("type", ""))
    if not inside:
        return "not kept: outside every episode (a file-level dataset)"
    if row.get("error") or row.get("note"):
        return "ignored: unreadable (see below)"
    if rel == "compress_len" and any(c[3] == "encoded" for c in lay.cameras):
        return "not kept: byte lengths of the cameras' padded JPEG rows (part of their frames)"
    if row.get("camera") or row.get("image"):
        return f"not kept: images the {layout} layout does not take as a camera (map it under cameras:)"
    if row.get("clock"):
        return "in the record only: a clock no mapped stream uses"
    if kind.startswith("|S") or kind == "object":
        return "in the record only, as text events"
    if not kind.startswith(("float", "int", "uint", "bool")):
        return f"not kept: {kind} values are neither numbers nor text"
    if rel.startswith("obs/") and rel.count("/") > 1:
        return f"in the record only: in a nested group under obs/ (map {rel} under state: to put it in the steps)"
    return f"in the record only: not in the {layout} layout's steps (map {rel} under state: or action: to include it)"


def describe_reader(reader: _Resolved) -> dict[str, Any]:
    """A file whose layout resolved: its datasets with roles, what ingest makes of it, and the layout as a mapping."""
    lay = reader.layout
    groups: dict[str, str] = {}
    for _, g, _ in lay.episodes:
        if g:
            parent = g.rpartition("/")[0]
            groups[g] = (parent + "/" if parent else "") + "*"
    info = describe_file(reader.root, reader.options, groups)
    roles = _rows_of(lay)
    prefix = next((groups[g] + "/" for _, g, _ in lay.episodes if g), "")
    keyed = any(k for _, _, k in lay.episodes)  # a file of key families: an episode's datasets hold `{i}`
    for key, row in info["keys"].items():
        rel = key[len(prefix) :] if prefix and key.startswith(prefix) else key
        inside = key.startswith(prefix) and (not keyed or "{i}" in rel)
        row["role"] = roles.get(rel) or _ignored_why(rel, row, lay, inside)
    first = prefix + lay.state[0][0]
    frames = int(info["keys"].get(first, {}).get("count", 0))
    s_dim, a_dim = sum(lay.state_widths), sum(lay.action_widths)
    out = {
        "format": reader.format_name,
        "path": reader.root,
        "ingest": (
            f"{len(lay.episodes)} episode(s) of embodiment {reader.tag!r}: state {s_dim} values, action {a_dim}, "
            f"cameras {list(reader.cameras) or 'none'}, at {reader.fps:g} Hz ({lay.fps_source})"
        ),
        "embodiment": reader.tag,
        "layout": lay.name,
        "episodes": len(lay.episodes),
        "fps": reader.fps,
        "fps_source": lay.fps_source,
        "frames": frames,
        "duration_s": frames / reader.fps if reader.fps and lay.name != "mapped" else None,
        "cameras": list(reader.cameras),
        "state": [p for p, _ in lay.state],
        "action": [p for p, _ in lay.action],
        "splits": {k: len(v) for k, v in lay.splits},
        **{k: v for k, v in info.items() if k not in ("format", "path")},
    }
    if reader.notes:
        out["notes"] = list(reader.notes)
    out["suggested_mapping"] = _layout_yaml(lay, reader.root, reader.tag, groups)
    return out


def _q(x: str) -> str:
    return json.dumps(x)


def _layout_yaml(lay: Layout, path: str, tag: str, groups: dict[str, str]) -> str:
    """The resolved layout as a mapping file, to edit (drop a camera, choose the rate, ...)."""
    lines = [f"# the layout robolake found in {path} ({lay.name}), as a mapping to edit", f"embodiment: {_q(tag)}"]
    ep_parent = next((g.rpartition("/")[0] for _, g, _ in lay.episodes if g), "")
    if ep_parent:
        lines.append(f"episodes: {_q(ep_parent)}")

    def stream(p: str, st: str | None) -> str:
        return "{source: " + _q(p) + (", stamps: " + _q(st) if st else "") + "}"

    lines.append("state:")
    lines += [f"  - {stream(p, st)}" for p, st in lay.state]
    if lay.action_from_state:
        lines.append("action_from_state: true")
    else:
        lines.append("action:")
        lines += [f"  - {stream(p, st)}" for p, st in lay.action]
    cams = ", ".join(
        f"{_q(n)}: " + ("{source: " + _q(p) + ", stamps: " + _q(st) + "}" if st else _q(p))
        for n, p, st, _ in lay.cameras
    )
    lines.append("cameras: {" + cams + "}")
    lines.append(f"fps: {lay.fps:g}                              # {lay.fps_source}")
    if lay.task:
        lines.append(f"task: {_q(lay.task)}")
    return "\n".join(lines) + "\n"


def suggest_hdf5_mapping(info: dict[str, Any], path: str) -> str:
    """A mapping for a file no layout fits, from its dataset names, shapes and dtypes."""
    keys: dict[str, dict[str, Any]] = info.get("keys", {})
    episodes = ""
    if any(k.startswith("data/demo_*/") for k in keys):
        episodes = "data"

    def rel(k: str) -> str:
        return k[len("data/demo_*/") :] if episodes and k.startswith("data/demo_*/") else k

    clocks = {k: v for k, v in keys.items() if v.get("clock")}
    numeric = [
        k
        for k, v in keys.items()
        if k not in clocks
        and not v.get("camera")
        and len(v["shape"]) <= 1
        and v["type"].startswith(("float", "int", "uint", "bool"))
    ]
    cams = [k for k, v in keys.items() if v.get("camera")]

    def stamps_for(k: str) -> str | None:
        parent = k.rpartition("/")[0]
        same = [c for c in clocks if c.rpartition("/")[0] == parent and keys[c]["count"] == keys[k]["count"]]
        return same[0] if same else None

    def line(k: str) -> str:
        st = stamps_for(k)
        return "{source: " + _q(rel(k)) + (", stamps: " + _q(rel(st)) if st else "") + "}"

    states = sorted((k for k in numeric if not _ACTION.search(k)), key=lambda k: (not _STATE.search(k), k))
    actions = [k for k in numeric if _ACTION.search(k)]
    lines = [
        f"# mapping suggested by `robolake inspect` for {path}: edit it, then ingest with --map THIS_FILE",
        '# embodiment: "my_robot"',
    ]
    if episodes:
        lines.append(f"episodes: {_q(episodes)}                 # each child group of data/ is an episode")
    lines.append("state:")
    lines += [f"  - {line(k)}   # {keys[k]['type']} {keys[k]['shape']}" for k in states[:1]]
    lines += [f"  # - {line(k)}   # {keys[k]['type']} {keys[k]['shape']}" for k in states[1:]]
    if actions:
        lines.append("action:")
        lines += [f"  - {line(k)}" for k in actions[:1]]
        lines += [f"  # - {line(k)}" for k in actions[1:]]
    else:
        lines.append("action_from_state: true             # no dataset named like an action: the next row's state")
    if cams:
        lines.append(
            "cameras: {"
            + ", ".join(f"{_q(rel(k).rsplit('/', 1)[-1].replace('{i}', '') or 'camera')}: {_q(rel(k))}" for k in cams)
            + "}"
        )
    else:
        lines.append("cameras: {}")
    if not any(stamps_for(k) for k in states[:1]):
        lines.append("fps: 20                              # the file records no clock: give the real rate")
    if any("{i}" in k for k in keys):
        lines.append("# sources holding {i} (states_{i}) are families: one episode per index")
    return "\n".join(lines) + "\n"
