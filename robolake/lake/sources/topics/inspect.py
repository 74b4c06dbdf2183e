"""What a topic log holds, described for a person about to write its mapping (`robolake inspect`).

A stranger's bag is opened to be understood before it is ingested, so the description never
depends on a plan resolving: a recording with no JointState, no camera or an unknown layout is
described all the same, with what a default ingest would do with each topic (state, action,
camera, task, or ignored and why) and a suggested mapping (`inspect --suggest-map > arm.yaml`)
that a user edits instead of writing from scratch.

Per topic: the type and encoding, the message count read from the storage (not its metadata),
the rate as measured ((n - 1) / span of the log times, not rounded), the header-stamp rate where
messages carry one (and the rate of distinct stamps where messages share them), the shape and
fields of the first message, its time span as seconds from the recording's start (absolute
times are ISO 8601, UTC), how many messages share a stamp with
another (what resampling would average), and for TF topics the frames they hold. Numeric topics
are decoded for this up to `DECODE_CAP` messages each, so a long recording stays quick to
describe; counts, rates and spans always cover every message.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from robolake.lake.sources.base import SourceError, iso_time
from robolake.lake.sources.topics import ros_messages as rm
from robolake.lake.sources.topics.plan import (
    COMMAND_PATTERN,
    TASK_PATTERN,
    Plan,
    Recording,
    TopicInfo,
    is_metadata,
    is_passive,
    resolve_plan,
    topic_roles,
)

__all__ = ["CANNOT_INGEST", "DECODE_CAP", "describe_recording", "describe_unit", "suggest_mapping"]

DECODE_CAP = 5000
_NS = 1_000_000_000
_STATE_HINT = re.compile(r"(state|pose|odom|joint|position|imu|qpos|feedback)", re.IGNORECASE)


def _rate(ns: list[int]) -> float:
    span = (ns[-1] - ns[0]) / _NS if len(ns) > 1 else 0.0
    return round((len(ns) - 1) / span, 3) if span > 0 else 0.0


def _shared(ns: list[int]) -> tuple[int, int]:
    """(messages whose stamp equals an earlier one's, most messages on one stamp)."""
    if len(ns) < 2:
        return 0, 1
    c = Counter(ns)
    return len(ns) - len(c), max(c.values())


def first_look(rec: Recording, topic: str, info: TopicInfo, raw: Any) -> dict[str, Any]:
    """Fields and shape of a topic's first message (what a mapping can name)."""
    try:
        msg = rec.decode(topic, raw)
    except SourceError as e:
        return {"error": e.message}
    out: dict[str, Any] = {"fields": rm.message_fields(msg), "header_stamp": rm.header_stamp_ns(msg) is not None}
    try:
        if info.kind == rm.JOINT_STATE:
            out["joints"] = [str(n) for n in rm.get_field(msg, "name")]
            out["shape"] = [len(out["joints"])]
            if not out["joints"]:  # positions without names: read by index
                out["shape"] = [int(rm.to_vector(msg, "position").shape[0])]
                out["note"] = "the messages name no joints: the positions are taken by index"
        elif rm.is_video(info.msgtype):  # packets of a video: its codec, not an image size
            _, out["codec"] = rm.compressed_video(msg)
            out["video"] = True
        elif info.kind == rm.COMPRESSED_IMAGE:
            data, codec = rm.compressed_image(msg)
            out["shape"], out["codec"] = list(rm.image_size(data)), codec
        elif info.kind == rm.IMAGE:
            out["shape"] = [int(rm.get_field(msg, "height")), int(rm.get_field(msg, "width"))]
            out["image_encoding"] = str(rm.get_field(msg, "encoding"))
        elif info.kind == rm.TF:
            out["shape"] = [7]
        elif info.kind == rm.NUMERIC:
            field = rm.default_field(info.msgtype, msg)
            out["default_field"] = field
            out["shape"] = [int(rm.to_vector(msg, field).shape[0])]
    except (rm.FieldError, OSError, ValueError) as e:
        out["note"] = str(e)
    return out


def describe_recording(rec: Recording) -> dict[str, Any]:
    """Every topic of one recording: type, count, rates, span, shape, shared stamps, TF frames."""
    topics = rec.topics()
    log_t: dict[str, list[int]] = {t: [] for t in topics}
    stamps: dict[str, list[int]] = {t: [] for t in topics}
    first: dict[str, Any] = {}
    frames: dict[str, Counter[tuple[str, str]]] = {t: Counter() for t, i in topics.items() if i.kind == rm.TF}
    undecodable: set[str] = set()
    for topic, log_ns, raw in rec.messages(sorted(topics)):
        log_t[topic].append(log_ns)
        first.setdefault(topic, raw)
        kind = topics[topic].kind
        if topic in undecodable or len(log_t[topic]) > DECODE_CAP:
            continue
        try:
            if kind in (rm.IMAGE, rm.COMPRESSED_IMAGE):
                stamp = rec.image_stamp_ns(topic, raw)
            else:
                msg = rec.decode(topic, raw)
                stamp = rm.header_stamp_ns(msg)
                if kind == rm.TF:
                    for parent, child in rm.tf_frames(msg):
                        frames[topic][(parent, child)] += 1
                        if child and stamp is None:
                            tr = rm.tf_transform(msg, child)
                            stamp = rm.header_stamp_ns(tr) if tr is not None else None
        except (SourceError, rm.FieldError, ValueError, TypeError):
            undecodable.add(topic)
            continue
        if stamp:
            stamps[topic].append(stamp)
    every = [t for ts in log_t.values() for t in ts]
    t0 = min(every) if every else None
    entry: dict[str, Any] = {}
    for name, info in sorted(topics.items()):
        ts = log_t[name]
        row: dict[str, Any] = {
            "type": info.msgtype,
            "encoding": info.encoding,
            "count": len(ts),
            "rate_hz": _rate(ts),
            "start_s": (ts[0] - t0) / _NS if ts and t0 is not None else None,
            "end_s": (ts[-1] - t0) / _NS if ts and t0 is not None else None,
            "start": iso_time(ts[0]) if ts else None,
            "end": iso_time(ts[-1]) if ts else None,
        }
        if info.count != len(ts):
            row["metadata_count"] = info.count
        if stamps[name]:
            row["header_rate_hz"] = _rate(sorted(stamps[name]))
        n_shared, most = _shared(stamps[name] or ts)
        if n_shared:
            row["shared_stamps"] = n_shared
            row["most_on_one_stamp"] = most
            # the rate of distinct stamps: what ticks resample at (the message rate counts every burst)
            row["distinct_stamps_hz"] = _rate(sorted(set(stamps[name] or ts)))
        if name in frames and frames[name]:
            row["frames"] = {
                child: {"parent": parent, "count": n} for (parent, child), n in sorted(frames[name].items())
            }
        if name in first:
            row.update(first_look(rec, name, info, first[name]))
        entry[name] = row
    return {
        "path": rec.path,
        "start": iso_time(t0),
        "end": iso_time(max(every)) if every else None,
        "duration_s": (max(every) - min(every)) / _NS if every else 0.0,
        "topics": entry,
    }


def describe_unit(reader: Any) -> dict[str, Any]:
    """A topic-log unit for `robolake inspect`: what it holds, what ingest would do, a mapping to start from."""
    recordings: list[dict[str, Any]] = []
    for paths in reader.recordings:
        try:
            with reader.open_recording(paths) as rec:
                recordings.append(describe_recording(rec))
        except SourceError as e:
            recordings.append({"path": paths[0], "error": e.message})
    plan = reader.plan
    why = reader.plan_error.message if reader.plan_error is not None else ""
    topics = {
        name: TopicInfo(
            name=name,
            msgtype=reader.topic_infos[name].msgtype,
            count=int(row.get("count", 0)),
            kind=reader.topic_infos[name].kind,
            encoding=reader.topic_infos[name].encoding,
        )
        for name, row in (recordings[0].get("topics", {}) if recordings else {}).items()
        if name in reader.topic_infos
    }
    roles = topic_roles(topics, plan, "the recording cannot be ingested without a mapping" if plan is None else "")
    if plan is None and reader.plan_error is not None and reader.plan_error.reason_code == "missing_video":
        try:  # only the camera is missing: say what --state-only would take
            alt = resolve_plan(topics, reader.mapping, reader.root, state_only=True)
            roles = {
                t: (r + " with --state-only" if not is_passive(r) else r) for t, r in topic_roles(topics, alt).items()
            }
        except SourceError:
            pass
    for described in recordings:
        for name, row in described.get("topics", {}).items():
            role = roles.get(name, "ignored")
            row["role"] = (
                "ignored: its messages cannot be decoded (why below)" if is_passive(role) and row.get("error") else role
            )
    out: dict[str, Any] = {"format": reader.format_name, "path": reader.root}
    if plan is not None:
        s_dim = sum(reader.state_dims)
        a_dim = s_dim if plan.action_from_state else sum(reader.action_dims)
        n = len(reader.recordings) if plan.split.by == "file" else None
        out["ingest"] = (
            f"{n if n is not None else 'some'} episode(s) of embodiment {reader.tag!r}: state {s_dim} values, "
            f"action {a_dim}{' (state one tick ahead)' if plan.action_from_state else ''}, "
            f"cameras {[c.name for c in plan.cameras] or 'none'}, at {reader.fps:g} Hz "
            f"({'ticks' if reader.resample_mode == 'ticks' else 'a step per message'})"
        )
        out.update(
            embodiment=reader.tag,
            episodes=n,
            fps=reader.fps,
            measured_hz=reader.measured_hz,
            state_dim=s_dim,
            action_dim=a_dim,
            cameras=[c.name for c in plan.cameras],
            mapping=plan.describe(),
        )
    else:
        out["ingest"] = f"quarantined without a mapping: {why}"
    out["recordings"] = recordings
    if reader.notes:
        out["notes"] = list(reader.notes)
    if recordings and "topics" in recordings[0]:
        text = suggest_mapping(recordings[0]["topics"], topics, plan, reader.root, tag=reader.tag if plan else None)
        out["suggested_mapping"] = text
        state_only_helps = any(r.endswith("with --state-only") for r in roles.values())
        if plan is None and not state_only_helps and (suggested := _suggested_roles(text, topics, reader.root)):
            for described in recordings:
                for name, row in described.get("topics", {}).items():
                    row["role"] = suggested.get(name, row["role"])
    return out


def _suggested_roles(text: str, topics: dict[str, TopicInfo], path: str) -> dict[str, str]:
    """Each topic's role under the suggested mapping, so a recording ingest refuses still says
    per topic what a mapping would make of it ({} when the suggestion does not resolve)."""
    import yaml

    from robolake.lake.sources.mapping import mapping_from_dict

    try:
        plan = resolve_plan(topics, mapping_from_dict(yaml.safe_load(text), "the suggested mapping"), path)
    except (SourceError, ValueError, TypeError):
        return {}
    return {t: r if is_passive(r) else f"{r} with --suggest-map" for t, r in topic_roles(topics, plan).items()}


CANNOT_INGEST = "# cannot be ingested as suggested:"


def _why_no_state(topics: dict[str, TopicInfo]) -> str:
    """The first line of a suggestion with no state: an episode needs a state stream, and none is here."""
    cams = [t for t in sorted(topics) if topics[t].kind in (rm.IMAGE, rm.COMPRESSED_IMAGE)]
    return (
        "no topic here holds the robot's state (numbers at a rate); a lake episode needs one"
        + (
            f", and this recording holds cameras only ({', '.join(cams[:4])}{' ...' if len(cams) > 4 else ''})"
            if cams
            else ""
        )
        + ": name a state topic under `state:` (a JointState, a pose, odometry), or record one with the cameras"
    )


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML string, whatever the topic holds


def _line(stream: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_q(v) if isinstance(v, str) else json.dumps(v)}" for k, v in stream.items()) + "}"


def _what(row: dict[str, Any]) -> str:
    shape = row.get("shape")
    bits = [str(row.get("type", "?"))]
    if row.get("joints"):
        bits.append(
            f"{len(row['joints'])} joints: {', '.join(row['joints'][:8])}{' ...' if len(row['joints']) > 8 else ''}"
        )
    elif shape:
        bits.append(f"{shape[0]} values" if len(shape) == 1 else "x".join(map(str, shape)))
    bits.append(f"{row.get('rate_hz', 0):g} Hz, {row.get('count', 0)} msgs")
    return ", ".join(bits)


def _tf_streams(name: str, row: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    return [
        ({"source": name, "child_frame": child}, f"TF {child} in {v['parent']}, {v['count']} transforms")
        for child, v in row.get("frames", {}).items()
    ]


def suggest_mapping(
    rows: dict[str, dict[str, Any]],
    topics: dict[str, TopicInfo],
    plan: Plan | None,
    path: str,
    *,
    tag: str | None = None,
) -> str:
    """A mapping YAML for a recording: the plan where one resolves, else the likeliest streams,
    with every other candidate stream listed as a comment to uncomment."""
    numeric = [
        t
        for t in sorted(topics)
        if topics[t].kind in (rm.JOINT_STATE, rm.NUMERIC)
        and rows.get(t, {}).get("count", 0)
        and "error" not in rows.get(t, {})
        and (rows[t].get("shape") or [0])[0] > 0  # a vector to take: not a message of text only
        and not is_metadata(topics[t])
    ]
    candidates: list[tuple[dict[str, Any], str]] = []
    for t in numeric:
        s: dict[str, Any] = {"source": t}
        if topics[t].kind == rm.JOINT_STATE:
            s["field"] = "position"
        elif rows[t].get("default_field"):
            s["field"] = rows[t]["default_field"]
        candidates.append((s, _what(rows[t])))
    for t in sorted(topics):
        if topics[t].kind == rm.TF and not is_metadata(topics[t]):
            candidates += _tf_streams(t, rows.get(t, {}))
    if plan is not None:
        state = [
            {
                k: v
                for k, v in (
                    ("source", s.source),
                    ("field", s.field),
                    ("names", list(s.names) if s.names else None),
                    ("child_frame", s.child_frame),
                )
                if v
            }
            for s in plan.state
        ]
        action = (
            []
            if plan.action_from_state
            else [
                {
                    k: v
                    for k, v in (
                        ("source", s.source),
                        ("field", s.field),
                        ("names", list(s.names) if s.names else None),
                        ("child_frame", s.child_frame),
                    )
                    if v
                }
                for s in plan.action
            ]
        )
        cameras = {c.name: c.source for c in plan.cameras}
    else:
        states = [  # a stream whose rate can be told: two messages or more, at different times
            c
            for c in candidates
            if not COMMAND_PATTERN.search(c[0]["source"])
            and rows.get(c[0]["source"], {}).get("count", 0) > 1
            and rows[c[0]["source"]].get("rate_hz", 0) > 0
        ]
        states.sort(
            key=lambda c: (
                topics[c[0]["source"]].kind != rm.JOINT_STATE,
                not _STATE_HINT.search(c[0]["source"]),
                "child_frame" in c[0],
            )
        )
        state = [states[0][0]] if states else []
        commands = [c for c in candidates if COMMAND_PATTERN.search(c[0]["source"]) and "child_frame" not in c[0]]
        action = [commands[0][0]] if commands else []
        cameras = {}
        for t in sorted(topics):
            if (
                topics[t].kind in (rm.IMAGE, rm.COMPRESSED_IMAGE)
                and rows.get(t, {}).get("count", 0) > 1
                and "depth" not in t.lower()
                and f"{t.rstrip('/')}/compressed" not in topics
            ):
                name = rm.camera_name(t)
                cameras[name if name not in cameras else f"{name}_{len(cameras) + 1}"] = t
    chosen = [json.dumps(s, sort_keys=True) for s in (*state, *action)]
    others = [(s, why) for s, why in candidates if json.dumps(s, sort_keys=True) not in chosen]
    lines = [
        f"# mapping suggested by `robolake inspect` for {path}",
        "# edit it, then: robolake ingest SRC LAKE --map THIS_FILE   (README: Raw logs in)",
    ]
    if not state:
        lines.insert(0, f"{CANNOT_INGEST} {_why_no_state(topics)}")
    if tag:
        lines.append(f"embodiment: {_q(tag)}")
    else:
        lines.append('# embodiment: "my_robot"            # a tag per robot/layout (default: from the state stream)')
    lines.append("state:")
    if not state:
        lines.append("  # no numeric topic found; name one: {source: /topic, field: a.b}")
    for s in state:
        lines.append(f"  - {_line(s)}" + (f"   # {rows[s['source']]['type']}" if s["source"] in rows else ""))
    lines += [f"  # - {_line(s)}   # {why}" for s, why in others]
    if action:
        lines.append("action:")
        lines += [
            f"  - {_line(s)}" + (f"   # {rows[s['source']]['type']}" if s["source"] in rows else "") for s in action
        ]
        lines += [f"  # - {_line(s)}   # {why}" for s, why in others if COMMAND_PATTERN.search(s["source"])]
    else:
        lines.append("action_from_state: true             # no command topic: action = the state one tick ahead")
        lines += [f"# action: [{_line(s)}]   # {why}" for s, why in others[:3]]
    if cameras:
        lines.append("cameras: {" + ", ".join(f"{_q(k)}: {_q(v)}" for k, v in cameras.items()) + "}")
    else:
        lines.append("cameras: {}                          # none (ingest with --state-only, or map an image topic)")
    images = [
        t for t in sorted(topics) if topics[t].kind in (rm.IMAGE, rm.COMPRESSED_IMAGE) and t not in cameras.values()
    ]
    lines += [f"#   {_q(rm.camera_name(t))}: {_q(t)}   # {_what(rows.get(t, {}))}" for t in images]
    task_topics = [t for t in sorted(topics) if topics[t].kind == rm.STRING and TASK_PATTERN.search(t)]
    if plan is not None and plan.task_from:
        lines.append(f"task_from: {_q(plan.task_from)}")
    elif task_topics:
        lines.append(f"task_from: {_q(task_topics[0])}")
    else:
        lines.append('task: ""                             # the instruction (or task_from: /a/string/topic)')
    stamped = bool(state) and rows.get(str(state[0]["source"]), {}).get("header_stamp")
    lines.append(
        f"clock: {'header' if stamped else 'log'}"
        f"                        # {'header stamps' if stamped else 'no header stamps: log (receive) time'}"
    )
    if state and state[0]["source"] in rows:
        r = rows[state[0]["source"]]
        hz = r.get("distinct_stamps_hz") or r.get("header_rate_hz") or r.get("rate_hz", 0)
        lines.append(f"# fps: {hz:g}                 # tick rate (default: the first state stream's, measured)")
        if r.get("shared_stamps"):
            lines.append(
                f"# resample: none                  # {r['shared_stamps']} messages of {state[0]['source']} share a "
                "stamp: `none` keeps every message as a step (default: averaged per stamp on ticks)"
            )
    lines.append(
        "# split: {by: gap, seconds: 2.0}      # or {by: topic, source: /bool/topic}; default one episode per file"
    )
    return "\n".join(lines) + "\n"
