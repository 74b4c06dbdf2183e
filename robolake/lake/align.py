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

One episode's rendition is `render_episode` (its steps in memory, or why it has none) and
`rendered_media` (its frames re-pointed); `align_lake` writes what they give, and
`export --fps` (`lake.export`) writes it to a LeRobot dataset instead, leaving the lake as it is.
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
from robolake.lake.media.kept import kept_of
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

__all__ = ["AlignSpec", "AlignResult", "RenderedEpisode", "align_lake", "render_episode", "rendered_media"]

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


@dataclass(frozen=True, kw_only=True)
class RenderedEpisode:
    """One episode's steps rendered from its record, in memory: nothing is written.

    Attributes:
        episode: Its `episodes` row as the rendition makes it (num_steps, fps, metadata `alignment`).
        steps: Its `steps` rows (timestamps from 0; every step has the episode's first task).
        frames: Camera -> the index of the recorded frame each step shows (`Aligned.frames`).
        t0_ns: The time the rendition's seconds count from (`Rendered.t0_ns`).
        lake_t: The lake's step timestamps of the episode (sorted), which its media rows follow.
    """

    episode: dict[str, Any]
    steps: pa.Table
    frames: dict[str, np.ndarray]
    t0_ns: int
    lake_t: np.ndarray

    @property
    def new_frames(self) -> bool:
        """Whether its media rows must be re-pointed (`rendered_media`): it has cameras and its ticks moved."""
        new_t = self.steps["timestamp"].to_numpy()
        same = len(self.lake_t) == len(new_t) and np.allclose(self.lake_t, new_t, atol=1e-9)
        return bool(self.episode["cameras"]) and not same


def render_episode(lake: Lake, row: dict[str, Any], fps: float | None, rules: dict[str, str]) -> RenderedEpisode | str:
    """Render one episode's steps from its record at `fps` (None: its own) with `rules`.

    The lake is only read. The frames are not re-pointed here (`rendered_media` does, when
    `new_frames`), but an episode whose frames cannot take the new ticks is refused here.

    Args:
        lake: The lake the episode is in.
        row: Its `episodes` row.
        fps: Tick rate; None keeps the episode's own.
        rules: (stream or topic) -> alignment rule, over the defaults.

    Returns:
        The rendered episode, or why it cannot be rendered (no record, a record of another
        composition, a recorded video on new ticks, the `SourceError` rendering raised).
    """
    eid = row["episode_id"]
    meta = json.loads(row["metadata"] or "{}")
    comp = meta.get("composition")
    if kept_of(meta) is not None:
        return (
            "trimmed by `robolake trim`: a new rendition would bring its dropped steps back; restore the version "
            "before the trim (`robolake restore`), realign, then trim again"
        )
    if not lake.has_table("signals") or "record" not in meta:
        return "no record: ingested before the record existed (its steps are its record)"
    if not comp:
        return (
            f"its record holds the {row['source_format']} columns at their own rate, one row per step "
            "(steps are built from them one to one); only topic-log episodes (ROS, MCAP) are realigned"
        )
    if comp.get("kind") != "topics":
        return f"its record's composition {comp.get('kind')!r} has no alignment"
    rate = float(fps or row["fps"])
    try:
        rendered = render_topic_steps(
            _episode_record(lake, eid),
            Plan.from_json(comp["plan"]),
            comp["topics"],
            fps=rate,
            mode=str(meta.get("resample", "ticks")),
            path=str((meta.get("recording") or [row["source_uri"]])[0]),
            rules=rules,
        )
    except SourceError as e:
        return f"{e.reason_code}: {e.message}"
    aligned = rendered.aligned
    old = lake.to_arrow("steps", columns=["timestamp", "task_index"], where=f"episode_id = {sql_quote(eid)}")
    task = old["task_index"].to_numpy()
    n = len(aligned.timestamps)
    task_index = np.full(n, int(task[0]) if len(task) else 0, np.int32)
    steps = steps_rows(eid, row["embodiment"], aligned.timestamps, aligned.state, aligned.action, task_index)
    alignment = {"fps": rate, "rules": aligned.metadata.get("rules", {}), "window": aligned.metadata.get("window")}
    meta = {
        **meta,
        "alignment": alignment,
        "notes": [note for note in meta.get("notes", []) if "Hz ticks" not in note]
        + [f"{note}" for note in aligned.metadata.get("notes", [])],
    }
    episode = {**row, "num_steps": n, "fps": rate, "metadata": json.dumps(meta, sort_keys=True)}
    out = RenderedEpisode(
        episode=episode,
        steps=steps,
        frames=dict(aligned.frames),
        t0_ns=rendered.t0_ns,
        lake_t=np.sort(old["timestamp"].to_numpy()),
    )
    if out.new_frames:
        encodings = set(
            lake.to_arrow("media", columns=["encoding"], where=f"episode_id = {sql_quote(eid)}")["encoding"].to_pylist()
        )
        if any(e.startswith(("video;", "h264")) for e in encodings):
            return (
                f"its frames are {sorted(encodings)}: a video's packets cannot take new ticks (its steps are at "
                f"{row['fps']:g} Hz; ingest again with `fps:` in a mapping, or --frames record of image topics)"
            )
    return out


def rendered_media(lake: Lake, episode: RenderedEpisode) -> tuple[pa.Table | None, int]:
    """The media rows of a rendered episode and how many ticks show an earlier frame than theirs.

    None when its frames stay as they are (no cameras, or the ticks did not move). Otherwise
    each new step shows the latest recorded frame at or before it, copied from the media row
    that holds it (every camera of the episode at once).
    """
    if not episode.new_frames:
        return None, 0
    return _media_for(lake, episode)


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
        ep = render_episode(lake, rows[eid], spec.fps, rules)
        if isinstance(ep, str):
            kept[eid] = ep
            continue
        media, n_missing = rendered_media(lake, ep)
        if media is not None:
            new_media.append(media)
            media_replaced.append(eid)
            missing += n_missing
        new_steps.append(ep.steps)
        new_episodes.append(ep.episode)
        before += int(rows[eid]["num_steps"])
        after += ep.steps.num_rows
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


def _media_for(lake: Lake, episode: RenderedEpisode) -> tuple[pa.Table, int]:
    """Media rows of an episode on new ticks, copied from the rows that hold each frame."""
    row = episode.episode
    eid = row["episode_id"]
    meta = json.loads(row["metadata"])
    media = lake.to_arrow("media", where=f"episode_id = {sql_quote(eid)}")
    plan = Plan.from_json(meta["composition"]["plan"])
    old_t0 = (int(meta["t0_ns"]) - episode.t0_ns) / _NS  # both are the first mapped message; kept for safety
    old_ticks = episode.lake_t + float(meta.get("window", [0.0])[0]) + old_t0
    by_cam = {c.name: c.source for c in plan.cameras}
    new_rel = episode.steps["timestamp"].to_numpy()
    step_col, time_col = media.schema.get_field_index("step_index"), media.schema.get_field_index("timestamp")
    out: list[pa.Table] = []
    missing = 0
    for cam in row["cameras"]:
        part = _camera_parts(lake, eid, by_cam[cam])
        stamps = (np.concatenate([p.t_ns for p in part]) - episode.t0_ns) / _NS if part else np.zeros(0)
        capture = Stream(cam, stamps, np.zeros((len(stamps), 0)))
        old_frame = resample_latest(capture, old_ticks)  # the frame each old step shows
        sel = media.filter(pc.equal(media["camera"], cam))
        step_of = {int(s): i for i, s in enumerate(sel["step_index"].to_pylist())}
        holder: dict[int, int] = {}
        for step, f in enumerate(old_frame.tolist()):
            if step in step_of:
                holder.setdefault(int(f), step_of[step])
        have = np.asarray(sorted(holder))
        src: list[int] = []
        for f in episode.frames[cam].tolist():
            if f in holder:
                src.append(holder[f])
            else:
                missing += 1
                j = int(np.searchsorted(have, f, side="right")) - 1
                src.append(holder[int(have[max(j, 0)])])
        taken = sel.take(pa.array(src, pa.int64()))
        taken = taken.set_column(
            step_col, media.schema.field(step_col), pa.array(np.arange(len(src)), media.schema.field(step_col).type)
        )
        taken = taken.set_column(
            time_col, media.schema.field(time_col), pa.array(new_rel[: len(src)], media.schema.field(time_col).type)
        )
        out.append(taken)
    return pa.concat_tables(out) if out else media.schema.empty_table(), missing


def _camera_parts(lake: Lake, eid: str, topic: str) -> list[Any]:
    where = f"episode_id = {sql_quote(eid)} AND stream = {sql_quote(topic)} AND kind = 'camera'"
    rec = read_record(lake.to_arrow("signals", where=where), schema_for_table("events").empty_table())
    return list(rec.signals)
