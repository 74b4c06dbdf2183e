"""`robolake align`: a new steps rendition of a lake, derived from its record without the sources.

Ingest keeps every message in the record (`signals`, `events`) and writes the steps at today's
defaults. `align_lake` rebuilds the steps of each episode from that record at another rate or
with other rules (`resample.parse_rule`) by the very function ingest used
(`topics.render.render_topic_steps`), and publishes them as one new lake version: the record is
never rewritten, so any earlier rendition stays a `restore` away, and a killed align leaves the
lake at its last version (nothing is published before the one commit).

Frames are the cameras' record: when the new ticks differ from the old, each new step shows the
latest recorded frame at or before it, copied from the media row that holds that frame. A frame
the old steps never showed (a 30 fps camera on 10 Hz ticks) is not in the media table; the step
then shows the latest frame that is, and the count is reported. An episode whose frames are a
recorded video (`video;codec=...` rows) cannot take new ticks this way (its packets are decoded
in order, one row per frame) and keeps its steps; it is named in the result. An episode without a
record (ingested before it existed, or by a reader that keeps none) keeps its steps too. Access
copies of a realigned episode are dropped (`robolake optimize --access-copy h264` rebuilds them).

The rate and rules of the rendition are in the version's summary and in each episode's metadata
(`alignment`), which `robolake info` shows.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.intake.ingest import steps_rows
from robolake.lake.lake import Lake
from robolake.lake.protocol import faults
from robolake.lake.protocol.versions import who
from robolake.lake.query import sql_in, sql_quote
from robolake.lake.sources.base import SourceError
from robolake.lake.sources.record import read_record
from robolake.lake.sources.resample import Stream, parse_rule, resample_latest
from robolake.lake.sources.topics.plan import Plan
from robolake.lake.sources.topics.render import render_topic_steps
from robolake.lake.stats.embodiments import refresh_embodiments
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.schemas.tables import schema_for_table

__all__ = ["AlignSpec", "AlignResult", "align_lake"]

log = logging.getLogger(__name__)
_NS = 1_000_000_000


@dataclass(frozen=True, kw_only=True)
class AlignSpec:
    """A steps rendition: its rate and the rule of each stream.

    Attributes:
        fps: Tick rate; None keeps each episode's own.
        rules: (stream or topic, rule) pairs over the defaults (linear state, hold action, latest frame).
        where: Realign only the episodes this `--where` filter keeps (None: every episode).
    """

    fps: float | None = None
    rules: tuple[tuple[str, str], ...] = ()
    where: str | None = None

    def __post_init__(self) -> None:
        if self.fps is not None and not (self.fps > 0 and np.isfinite(self.fps)):
            raise ValueError(f"--fps must be a positive rate in Hz, got {self.fps}")
        for stream, rule in self.rules:
            if not stream:
                raise ValueError(f"--rule needs STREAM=RULE, got {stream}={rule}")
            parse_rule(rule)

    def describe(self) -> dict[str, Any]:
        return {"fps": self.fps, "rules": dict(self.rules)}


@dataclass(frozen=True, kw_only=True)
class AlignResult:
    """What `align_lake` did.

    Attributes:
        lake: The lake URI.
        version: The version it published (the same as before when nothing changed).
        realigned: Episode ids with new steps.
        kept: Episode id -> why its steps stay as they are.
        steps_before: Steps of the realigned episodes before.
        steps_after: And after.
        frames_missing: New steps that show an earlier frame because theirs was never stored.
    """

    lake: str
    version: int
    realigned: tuple[str, ...] = ()
    kept: dict[str, str] = field(default_factory=dict)
    steps_before: int = 0
    steps_after: int = 0
    frames_missing: int = 0


def _episode_record(lake: Lake, episode_id: str) -> Any:
    where = f"episode_id = {sql_quote(episode_id)}"
    return read_record(lake.to_arrow("signals", where=where), lake.to_arrow("events", where=where))


def align_lake(lake: Lake | str, spec: AlignSpec, *, storage_options: dict[str, str] | None = None) -> AlignResult:
    """Rebuild the steps of a lake's episodes from their record, as one new version.

    Raises:
        ValueError: the filter keeps no episode.
    """
    lake = lake if isinstance(lake, Lake) else Lake.open(lake, storage_options=storage_options)
    if spec.where:
        from robolake.lake.where import parse_where, select_episode_ids

        ids = select_episode_ids(lake, parse_where(spec.where))
        if not ids:
            raise ValueError(f"--where {spec.where!r} keeps no episode of lake {lake.uri}; nothing was realigned")
    else:
        ids = lake.episode_ids()
    rows = {r["episode_id"]: r for r in lake.episodes(where=sql_in("episode_id", ids) if ids else None).to_pylist()}
    kept: dict[str, str] = {}
    new_steps: list[pa.Table] = []
    new_media: list[pa.Table] = []
    new_episodes: list[dict[str, Any]] = []
    media_replaced: list[str] = []
    before = after = missing = 0
    rules = dict(spec.rules)
    for eid in ids:
        row = rows[eid]
        meta = json.loads(row["metadata"] or "{}")
        comp = meta.get("composition")
        if not comp or not lake.has_table("signals"):
            kept[eid] = "no record: ingested before the record existed, or by a reader that keeps none"
            continue
        if comp.get("kind") != "topics":
            kept[eid] = f"its record's composition {comp.get('kind')!r} has no alignment"
            continue
        record = _episode_record(lake, eid)
        fps = float(spec.fps or row["fps"])
        try:
            rendered = render_topic_steps(
                record,
                Plan.from_json(comp["plan"]),
                comp["topics"],
                fps=fps,
                mode=str(meta.get("resample", "ticks")),
                path=str((meta.get("recording") or [row["source_uri"]])[0]),
                rules=rules,
            )
        except SourceError as e:
            kept[eid] = f"{e.reason_code}: {e.message}"
            continue
        aligned = rendered.aligned
        old = lake.to_arrow("steps", columns=["timestamp", "task_index"], where=f"episode_id = {sql_quote(eid)}")
        old_t = np.sort(old["timestamp"].to_numpy())
        new_t = aligned.timestamps - aligned.timestamps[0]
        same_ticks = len(old_t) == len(new_t) and np.allclose(old_t, new_t, atol=1e-9)
        if row["cameras"] and not same_ticks:
            media, n_missing, why = _media_for(lake, eid, row, meta, rendered, old_t)
            if media is None:
                kept[eid] = why
                continue
            new_media.append(media)
            media_replaced.append(eid)
            missing += n_missing
        task = old["task_index"].to_numpy()
        task_index = np.full(len(new_t), int(task[0]) if len(task) else 0, np.int32)
        new_steps.append(
            steps_rows(eid, row["embodiment"], aligned.timestamps, aligned.state, aligned.action, task_index)
        )
        alignment = {"fps": fps, "rules": aligned.metadata.get("rules", {}), "window": aligned.metadata.get("window")}
        meta = {
            **meta,
            "alignment": alignment,
            "notes": [n for n in meta.get("notes", []) if "Hz ticks" not in n]
            + [f"{n}" for n in aligned.metadata.get("notes", [])],
        }
        new_episodes.append({**row, "num_steps": len(new_t), "fps": fps, "metadata": json.dumps(meta, sort_keys=True)})
        before += int(row["num_steps"])
        after += len(new_t)
    done = tuple(e["episode_id"] for e in new_episodes)
    if not done:
        return AlignResult(lake=lake.uri, version=lake.version, kept=kept)
    touched = sorted({e["embodiment"] for e in new_episodes})
    with lake.begin() as tx:
        tx.acquire()
        for chunk in _batches(list(done)):
            tx.delete("steps", sql_in("episode_id", chunk))
            tx.delete("episodes", sql_in("episode_id", chunk))
        for chunk in _batches(media_replaced):
            tx.delete("media", sql_in("episode_id", chunk))
            tx.delete("access", sql_in("episode_id", chunk))
        tx.append_table("steps", pa.concat_tables(new_steps))
        if new_media:
            tx.append_table("media", pa.concat_tables(new_media))
        tx.append_table("episodes", pa.Table.from_pylist(new_episodes, schema=schema_for_table("episodes")))
        _set_spec_fps(tx, touched, spec.fps)
        refresh_embodiments(tx, touched)
        tx.index_episodes()
        faults.hook("align:before_commit")
        lv = tx.commit(
            "align",
            {
                "who": who(),
                "rendition": spec.describe(),
                "episodes_realigned": len(done),
                "episodes_kept": len(kept),
                "steps_before": before,
                "steps_after": after,
            },
        )
    log.info("lake %s: version %d realigned %d episodes (%d kept)", lake.uri, lv.version, len(done), len(kept))
    return AlignResult(
        lake=lake.uri,
        version=lv.version,
        realigned=done,
        kept=kept,
        steps_before=before,
        steps_after=after,
        frames_missing=missing,
    )


def _batches(ids: list[str], n: int = 500) -> list[list[str]]:
    return [ids[i : i + n] for i in range(0, len(ids), n)]


def _set_spec_fps(tx: Any, tags: list[str], fps: float | None) -> None:
    """The embodiment specs say the new rate (the steps' rate is the spec's)."""
    if fps is None:
        return
    table = tx.dataset("embodiments").to_table()
    rows = table.to_pylist()
    changed = False
    for r in rows:
        if r["embodiment"] in tags:
            spec = EmbodimentSpec.from_json(r["spec_json"])
            if spec.fps != fps:
                r["spec_json"] = dataclasses.replace(spec, fps=fps).to_json()
                changed = True
    if changed:
        tx.overwrite("embodiments", pa.Table.from_pylist(rows, schema=schema_for_table("embodiments")))


def _media_for(
    lake: Lake, eid: str, row: dict[str, Any], meta: dict[str, Any], rendered: Any, old_t: np.ndarray
) -> tuple[pa.Table | None, int, str]:
    """Media rows of an episode on new ticks, copied from the rows that hold each frame; or why not."""
    media = lake.to_arrow("media", where=f"episode_id = {sql_quote(eid)}")
    encodings = set(media["encoding"].to_pylist())
    if any(e.startswith(("video;", "h264")) for e in encodings):
        return (
            None,
            0,
            (
                f"its frames are {sorted(encodings)}: a video's packets cannot take new ticks; its steps stay at "
                f"{row['fps']:g} Hz (ingest again with `fps:` in a mapping, or --frames record of image topics)"
            ),
        )
    plan = Plan.from_json(meta["composition"]["plan"])
    aligned = rendered.aligned
    old_t0 = (int(meta["t0_ns"]) - rendered.t0_ns) / _NS  # both are the first mapped message; kept for safety
    old_ticks = old_t + float(meta.get("window", [0.0])[0]) + old_t0
    by_cam = {c.name: c.source for c in plan.cameras}
    rows_out: dict[str, list[Any]] = {k: [] for k in media.schema.names}
    missing = 0
    new_rel = aligned.timestamps - aligned.timestamps[0]
    for cam in row["cameras"]:
        part = [p for p in _camera_parts(lake, eid, by_cam[cam])]
        stamps = (np.concatenate([p.t_ns for p in part]) - rendered.t0_ns) / _NS if part else np.zeros(0)
        capture = Stream(cam, stamps, np.zeros((len(stamps), 0)))
        old_frame = resample_latest(capture, old_ticks)  # the frame each old step shows
        sel = media.filter(pc.equal(media["camera"], cam))
        step_of = {int(s): i for i, s in enumerate(sel["step_index"].to_pylist())}
        holder: dict[int, int] = {}
        for step, f in enumerate(old_frame.tolist()):
            if step in step_of:
                holder.setdefault(int(f), step_of[step])
        have = np.asarray(sorted(holder))
        want = aligned.frames[cam]
        for k, f in enumerate(want.tolist()):
            if f in holder:
                src = holder[f]
            else:
                missing += 1
                j = int(np.searchsorted(have, f, side="right")) - 1
                src = holder[int(have[max(j, 0)])]
            for name in media.schema.names:
                rows_out[name].append(sel[name][src].as_py())
            rows_out["step_index"][-1] = k
            rows_out["timestamp"][-1] = float(new_rel[k])
    return pa.Table.from_pydict(rows_out, schema=media.schema), missing, ""


def _camera_parts(lake: Lake, eid: str, topic: str) -> list[Any]:
    where = f"episode_id = {sql_quote(eid)} AND stream = {sql_quote(topic)} AND kind = 'camera'"
    rec = read_record(lake.to_arrow("signals", where=where), schema_for_table("events").empty_table())
    return list(rec.signals)
