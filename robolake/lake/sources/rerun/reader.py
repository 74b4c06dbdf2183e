"""Reader for Rerun recordings (`.rrd`): scalars, transforms and text as streams, images as cameras.

Teams that log their robots with the Rerun SDK write one `.rrd` file per run: `Scalars` at
80-100 Hz, `Image` / `EncodedImage` frames, `Transform3D`s and `TextLog`s, on the SDK's own
timelines (`log_time`, `log_tick`) and any the user set. The file is read with rerun-sdk's own
decoder (`rerun.load`), the entities given roles by a mapping or the defaults (`rerun.plan`),
and each episode built the way the other multi-rate readers build theirs: the state and action
streams resampled onto fixed-rate ticks by `resample.align` (linear state, held action, latest
frame), and beside the steps the episode's record (`columnar.ColumnRecord`): every numeric
component of every entity at its own times in Rerun's dtype, text as string events, each
camera's frame times. A file is one episode unless the mapping splits it (`split: {by: gap}`
on the first state stream, or `{by: topic, source: /entity}`: a numeric entity true while an
episode runs, or a text entity whose runs of one label are episodes).

Bad input is named: a file rerun-sdk cannot read, an empty recording, a mapped entity that is
missing, runs backwards or changes width, an image entity whose size changes, each is a
quarantine row or a note naming the file and the entity; the rest of the source lands. Frames
are read only in `read_frames`, and only the rows the ticks use: `EncodedImage` JPEG/PNG bytes
as recorded, raw `Image` pixels encoded losslessly.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from robolake.lake.sources.base import EncodedFrames, EpisodeRef, SourceError, TabularEpisode
from robolake.lake.sources.columnar import CLOCK_ROWS, CLOCK_SOURCE, ColumnRecord
from robolake.lake.sources.record import record_notes
from robolake.lake.sources.registry import SourceFormat, SourceOptions
from robolake.lake.sources.rerun.inspect import describe
from robolake.lake.sources.rerun.load import MISSING, RrdContents, load_rrd
from robolake.lake.sources.rerun.plan import RerunPlan, resolve_plan, stream_column
from robolake.lake.sources.rerun.values import (
    ENCODED_IMAGE,
    IMAGE,
    NUMERIC,
    TEXT,
    column_kind,
    image_rows,
    numeric_rows,
    stream_name,
    text_rows,
)
from robolake.lake.sources.resample import Stream, align, check_frame_sizes, segments_by_flag, segments_by_gap
from robolake.lake.sources.topics.streams import nice_rate, robust_rate
from robolake.lake.sources.video import file_digest
from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec

__all__ = ["RerunReader", "is_rrd_file", "inspect_rrd", "FORMAT"]

RRD_MAGIC = b"RRF"  # RRF0/RRF1/RRF2: the encoded log-message stream


def is_rrd_file(path: str) -> bool:
    """A Rerun file: the `.rrd` extension (an empty or truncated one too: it is quarantined, not
    skipped) or the `RRF` magic."""
    if not os.path.isfile(path):
        return False
    if path.lower().endswith(".rrd"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(3) == RRD_MAGIC
    except OSError:
        return False


class RerunReader:
    """Reads one `.rrd` file (one episode, or several cut by the mapping's `split:`).

    Args:
        path: The file.
        options: Mapping, embodiment, state-only, resample mode, read limits, `--streams`.

    Raises:
        SourceError: the file cannot be read, holds nothing, or its entities do not fit the mapping.
    """

    def __init__(self, path: str, options: SourceOptions | None = None):
        self.root = os.path.abspath(path)
        self.options = options or SourceOptions()
        self.limits = self.options.limits
        contents = load_rrd(self.root, limits=self.limits, pixels=False)
        self.plan: RerunPlan = resolve_plan(
            contents, self.options.mapping, self.root, state_only=self.options.state_only
        )
        self.format_name = "rerun"
        self.notes = list(self.plan.notes)
        self.t0_ns = _t0(contents, self.plan.timeline)
        self.state_dims = [self._stream(contents, s, None).values.shape[1] for s in self.plan.state]  # type: ignore[union-attr]
        self.action_dims = [self._stream(contents, s, None).values.shape[1] for s in self.plan.action]  # type: ignore[union-attr]
        first = stream_column(contents, self.plan.state[0], self.root)
        t = first.times.get(self.plan.timeline, np.zeros(0, np.int64))
        self.measured_hz, unc = robust_rate(t[t != MISSING].tolist())
        if self.plan.fps is not None:
            self.fps = float(self.plan.fps)
        elif self.plan.sequence:
            self.fps = 30.0
        else:
            self.fps = nice_rate(self.measured_hz, unc)
        if not self.fps > 0:
            raise SourceError(
                "empty",
                self.root,
                f"entity {self.plan.state[0].source} has too few rows to tell its rate; give `fps:` in a mapping",
            )
        mapping = self.options.mapping
        self.tag = self.options.embodiment or (
            mapping.embodiment if mapping and mapping.embodiment else self._default_tag(contents)
        )
        self._episode_windows: list[tuple[float, float] | None] = self._windows(contents)

    # --- time --------------------------------------------------------------------------

    def _seconds(self, t: np.ndarray) -> np.ndarray:
        """Seconds from the recording's start on the plan's timeline."""
        rel = (np.asarray(t, dtype=np.int64) - self.t0_ns).astype(np.float64)
        return rel / self._fps_or_1() if self.plan.sequence else rel / 1e9

    def _fps_or_1(self) -> float:
        return float(getattr(self, "fps", None) or self.plan.fps or 30.0)

    def _t_ns(self, t: np.ndarray) -> np.ndarray:
        """Record times in ns: the timeline's own (temporal) or tick / fps (sequence)."""
        if self.plan.sequence:
            return self.t0_ns + np.round(self._seconds(t) * 1e9).astype(np.int64)
        return np.asarray(t, dtype=np.int64)

    def _stream(self, contents: RrdContents, s: Any, window: tuple[float, float] | None) -> Stream:
        """A mapped entity's rows on the plan's timeline as float64 [N, width], in log order.

        Raises:
            SourceError: the entity is missing, not on the timeline, or changes width.
        """
        col = stream_column(contents, s, self.root)
        where = f"entity {col.entity} ({col.component})"
        on = col.on(self.plan.timeline)
        if not on.any():
            raise SourceError(
                "timestamps", self.root, f"{where} has no row on timeline {self.plan.timeline}; name another (stamps:)"
            )
        if column_kind(col)[0] != NUMERIC:
            raise SourceError("shape", self.root, f"{where} holds no numbers; map a Scalars or transform entity")
        has, groups = numeric_rows(col)
        if len(groups) != 1:
            raise SourceError(
                "shape",
                self.root,
                f"{where}: its width changes ({', '.join(str(v.shape[1]) for _, v in groups)} values per row); "
                "log one width per entity",
            )
        rows, values = groups[0]
        keep = on[rows]
        t = self._seconds(col.times[self.plan.timeline][rows[keep]])
        return Stream(name=col.entity, t=t, values=values[keep].astype(np.float64), path=self.root)

    def _default_tag(self, contents: RrdContents) -> str:
        app = "".join(ch if ch.isalnum() else "_" for ch in contents.application_id.lower()).strip("_") or "rerun"
        s_dim = sum(self.state_dims)
        a_dim = s_dim if self.plan.action_from_state else sum(self.action_dims)
        return f"{app}_{s_dim}x{a_dim}"

    # --- episodes ----------------------------------------------------------------------

    def _windows(self, contents: RrdContents) -> list[tuple[float, float] | None]:
        split = self.plan.split
        if split.by == "file":
            return [None]
        if split.by == "gap":
            t = self._stream(contents, self.plan.state[0], None).t
            return list(segments_by_gap(t, float(split.seconds or 0)))
        src = str(split.source)
        cols = [c for c in contents.of(src) if column_kind(c)[0] in (NUMERIC, TEXT) and c.on(self.plan.timeline).any()]
        if not cols:
            raise SourceError(
                "missing_key",
                self.root,
                f"split entity {src} holds no numbers or text on timeline {self.plan.timeline}",
            )
        col = cols[0]
        on = col.on(self.plan.timeline)
        t = self._seconds(col.times[self.plan.timeline][on])
        if column_kind(col)[0] == NUMERIC:
            has, groups = numeric_rows(col)
            flags = np.zeros(len(col), bool)
            for rows, v in groups:
                flags[rows] = v[:, 0] != 0
            return list(segments_by_flag(t, flags[on]))
        labels = [x for x, o in zip(text_rows(col), on, strict=True) if o]
        out: list[tuple[float, float] | None] = []
        i = 0
        while i < len(labels):  # each run of one label is an episode, until the next label starts
            j = i
            while j + 1 < len(labels) and labels[j + 1] == labels[i]:
                j += 1
            if labels[i]:
                end = float(t[j + 1]) if j + 1 < len(t) else float(t[j]) + 1e9
                out.append((float(t[i]), end - 0.5 / self.fps))  # half a tick: the next label's step is not this one's
            i = j + 1
        return out

    def discover(self) -> list[EpisodeRef]:
        return [
            EpisodeRef(
                source_uri=self.root,
                source_format=self.format_name,
                episode_index=i,
                embodiment=self.tag,
                location=(("window", list(w) if w is not None else None),),
            )
            for i, w in enumerate(self._episode_windows)
        ]

    def spec(self) -> EmbodimentSpec:
        def slices(streams: Any, dims: list[int]) -> tuple[SliceSpec, ...]:
            out, start, used = [], 0, set()
            for s, d in zip(streams, dims, strict=True):
                name = (s.source.strip("/").replace("/", "_") or "value") + (
                    f"_{s.field.split(':')[-1]}" if s.field else ""
                )
                while name in used:
                    name += "_"
                used.add(name)
                out.append(SliceSpec(name=name, start=start, end=start + d))
                start += d
            return tuple(out)

        state = slices(self.plan.state, self.state_dims)
        action = state if self.plan.action_from_state else slices(self.plan.action, self.action_dims)
        return EmbodimentSpec(
            tag=self.tag,
            state_dim=sum(self.state_dims),
            action_dim=sum(self.state_dims) if self.plan.action_from_state else sum(self.action_dims),
            state=state,
            action=action,
            cameras=tuple(c.name for c in self.plan.cameras),
            video_keys=tuple((c.name, c.source) for c in self.plan.cameras),
            fps=self.fps,
            robot_type="rerun",
        )

    reads_record = True  # read_tabular(ref, record=False) decodes only the entities the steps need

    def read_tabular(self, ref: EpisodeRef, *, record: bool = True) -> TabularEpisode:
        """One episode's steps (state and action resampled onto ticks) and its record.

        Raises:
            SourceError: a mapped entity is missing, runs backwards, changes width or holds
                NaN/inf; the streams do not overlap; the record passes the read budget.
        """
        plan = self.plan
        wanted = None if record else plan.entities() + [c.source for c in plan.cameras]
        contents = load_rrd(self.root, limits=self.limits, pixels=False, entities=wanted)
        w = ref.get("window")
        window = (float(w[0]), float(w[1])) if w is not None else None
        state = [self._stream(contents, s, window) for s in plan.state]
        action = [self._stream(contents, s, window) for s in plan.action]
        for s, d in zip([*state, *action], [*self.state_dims, *self.action_dims], strict=True):
            if s.values.shape[1] != d:  # type: ignore[union-attr]
                raise SourceError("shape", self.root, f"entity {s.name}: width {s.values.shape[1]}, expected {d}")  # type: ignore[union-attr]
        cams = {c.name: self._camera_stream(contents, c.source) for c in plan.cameras}
        aligned = align(
            state=state,
            action=action,
            cameras={n: Stream(name=f"camera {n}", t=t, values=np.zeros((len(t), 0))) for n, (_, t) in cams.items()},
            fps=self.fps,
            action_from_state=plan.action_from_state,
            window=window,
            path=self.root,
            mode=self.options.resample_mode,
            recorded=record,
        )
        meta = dict(aligned.metadata)
        notes = [f"{self.root}: {n}" for n in meta.pop("notes", [])]
        into = ColumnRecord(path=self.root, budget=self.limits.max_read_bytes, streams=self.options.streams)
        if record:
            self._record(contents, into, window)
        built = into.build()
        tasks = (self._task(contents, window),)
        task_index = np.zeros(len(aligned.timestamps), np.int32)
        digest = file_digest(self.root) if plan.cameras else ""
        frame_index = {n: cams[n][0][aligned.frames[n]].tolist() for n in cams}
        digests = tuple(
            f"{n}:{digest}:{hashlib.sha256(np.asarray(frame_index[n], np.int64).tobytes()).hexdigest()[:16]}"
            for n in sorted(frame_index)
        )
        metadata: dict[str, Any] = {
            "file": self.root,
            "application_id": contents.application_id,
            "recording_id": contents.recording_id,
            "timeline": {"name": plan.timeline, "from": plan.timeline_from, "sequence": plan.sequence},
            "t0_ns": int(self.t0_ns),
            "log_window_s": list(window) if window is not None else None,
            "tasks": list(tasks),
            "frame_rows": frame_index,
            "rate": {"clock": plan.state[0].source, "measured_hz": self.measured_hz, "fps": self.fps},
            **meta,
            "record": into.metadata(built),
        }
        notes += record_notes(built, self.root)
        if self.notes or notes:
            metadata["notes"] = self.notes + notes
        return TabularEpisode.of(
            ref=ref,
            state=aligned.state,
            action=aligned.action,
            timestamps=aligned.timestamps,
            task_index=task_index,
            tasks=tasks,
            fps=self.fps,
            media_digests=digests,
            metadata=metadata,
            record=built,
        )

    def _camera_stream(self, contents: RrdContents, entity: str) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, seconds) of a camera entity's frames on the timeline, in log order."""
        cols = [c for c in contents.of(entity) if column_kind(c)[0] in (IMAGE, ENCODED_IMAGE)]
        if not cols:
            raise SourceError("missing_key", self.root, f"camera entity {entity} holds no Image or EncodedImage")
        col = cols[0]
        rows = np.flatnonzero(col.on(self.plan.timeline))
        if not rows.size:
            raise SourceError(
                "timestamps", self.root, f"camera entity {entity} has no frame on timeline {self.plan.timeline}"
            )
        return rows, self._seconds(col.times[self.plan.timeline][rows])

    def _record(self, contents: RrdContents, into: ColumnRecord, window: tuple[float, float] | None) -> None:
        """Every numeric component, text and camera of the file (its window) into the record."""
        clock = CLOCK_ROWS if self.plan.sequence else CLOCK_SOURCE
        mapped = set(self.plan.entities())
        cameras = {c.source for c in self.plan.cameras}
        for col in contents.columns.values():
            kind, why = column_kind(col)
            name = stream_name(col)
            if kind == "part":
                continue
            if kind in (IMAGE, ENCODED_IMAGE):
                if col.entity not in cameras:
                    into.leave_out(name, "images not mapped as a camera")
                elif into.wanted(name, mapped=True):
                    rows, t = self._camera_stream(contents, col.entity)
                    keep = _in(t, window)
                    into.camera(
                        name, self._t_ns(col.times[self.plan.timeline][rows][keep]), clock=clock, msgtype=col.archetype
                    )
                continue
            if kind not in (NUMERIC, TEXT):
                into.leave_out(name, why)
                continue
            if not into.wanted(name, mapped=col.entity in mapped):
                continue
            if col.static:
                raw_t = np.full(len(col), self.t0_ns, np.int64)
            else:
                on = col.on(self.plan.timeline)
                if not on.any():
                    into.leave_out(name, f"not logged on timeline {self.plan.timeline}")
                    continue
                raw_t = np.where(on, col.times.get(self.plan.timeline, np.full(len(col), MISSING)), MISSING)
            if kind == TEXT:
                texts = text_rows(col)
                ok = np.flatnonzero((raw_t != MISSING) & np.array([x is not None for x in texts], bool))
                ok = ok[_in(self._seconds(raw_t[ok]), window)] if not col.static else ok
                into.text(name, self._t_ns(raw_t[ok]), [texts[i] for i in ok], clock=clock)
                continue
            _, groups = numeric_rows(col)
            for rows, values in groups:
                rows_on = raw_t[rows] != MISSING
                rows, values = rows[rows_on], values[rows_on]
                if not col.static:
                    keep = _in(self._seconds(raw_t[rows]), window)
                    rows, values = rows[keep], values[keep]
                if len(rows):
                    into.numeric(
                        name,
                        self._t_ns(raw_t[rows]),
                        values,
                        scalar=col.component == "Scalars:scalars" and values.shape[1] == 1,
                        clock=clock,
                        msgtype=col.archetype,
                    )

    def _task(self, contents: RrdContents, window: tuple[float, float] | None) -> str:
        if self.plan.task_from is None:
            return self.plan.task or ""
        cols = [c for c in contents.of(self.plan.task_from) if column_kind(c)[0] == TEXT]
        if not cols:
            raise SourceError("missing_key", self.root, f"task entity {self.plan.task_from} holds no text")
        col = cols[0]
        texts = text_rows(col)
        if col.static or window is None or self.plan.timeline not in col.times:
            return next((x for x in texts if x), "")
        t = col.times[self.plan.timeline]
        best = ""
        for x, ti in zip(texts, t, strict=True):  # the last one at or before the window's start, else the first in it
            if ti == MISSING or not x:
                continue
            s = float(self._seconds(np.array([ti]))[0])
            if s <= window[0] or not best:
                best = x
            if s > window[0]:
                break
        return best

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Each camera's frame at each tick (the latest at or before it), decoded once per row used.

        Raises:
            SourceError: a frame is not an image or not a supported pixel format; the image size
                changes within the episode (naming the file and the entity).
        """
        from robolake.lake.media.frames import encode_raw

        rows_of = episode.metadata.get("frame_rows", {})
        cams = [c for c in self.plan.cameras if c.name in rows_of]
        if not cams:
            return
        contents = load_rrd(self.root, limits=self.limits, entities=[c.source for c in cams])
        for cam in cams:
            cols = {c.component: c for c in contents.of(cam.source)}
            buffer = cols.get("EncodedImage:blob") or cols.get("Image:buffer")
            if buffer is None:
                raise SourceError("missing_key", self.root, f"camera {cam.name!r}: entity {cam.source} holds no image")
            idx = [int(i) for i in rows_of[cam.name]]
            try:
                enc = image_rows(
                    buffer,
                    cols.get("Image:format"),
                    sorted(set(idx)),
                    lambda rgb: encode_raw(rgb, self.options.video_frames),
                )
            except ValueError as e:
                raise SourceError(
                    "corrupt_video", self.root, f"camera {cam.name!r} (entity {cam.source}): {e}"
                ) from None
            h, w = check_frame_sizes([enc[i][2] for i in idx], f"{cam.name} (entity {cam.source})", self.root)
            codecs = {enc[i][1] for i in idx}
            if len(codecs) > 1:
                raise SourceError(
                    "corrupt_video",
                    self.root,
                    f"camera {cam.name!r} (entity {cam.source}) mixes {sorted(codecs)} frames",
                )
            yield EncodedFrames(
                camera=cam.name, images=tuple(enc[i][0] for i in idx), encoding=codecs.pop(), height=h, width=w
            )

    def inspect(self) -> dict[str, Any]:
        """Every entity/component (type, count, rate, shape, span, role), the timelines, the plan, a mapping."""
        return describe(self.root, self.options, reader=self)


def _t0(contents: RrdContents, timeline: str) -> int:
    firsts = [
        int(t[t != MISSING].min())
        for c in contents.columns.values()
        if (t := c.times.get(timeline)) is not None and (t != MISSING).any()
    ]
    return min(firsts) if firsts else 0


def _in(t: np.ndarray, window: tuple[float, float] | None) -> np.ndarray:
    if window is None:
        return np.ones(len(t), bool)
    return (t >= window[0]) & (t <= window[1])


def inspect_rrd(path: str, options: SourceOptions | None = None) -> dict[str, Any]:
    """A `.rrd` file described whatever a reader makes of it (for `robolake inspect`)."""
    options = options or SourceOptions()
    path = os.path.abspath(path)
    try:
        return describe(path, options, reader=RerunReader(path, options))
    except SourceError as e:
        return describe(path, options, error=e)


def _open_rrd(path: str, options: SourceOptions) -> RerunReader:
    return RerunReader(path, options)


FORMAT = SourceFormat(
    name="rerun",
    description="Rerun recordings (.rrd): Scalars/transform/text entities as streams, Image/EncodedImage as cameras",
    detect=is_rrd_file,
    open=_open_rrd,
    unit="file",
    inspect_unit=inspect_rrd,
)
