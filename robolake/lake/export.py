"""Export: one lake version -> LeRobot v3.0 datasets that the LeRobot and GR00T trainers load.

A lake built from bags, HDF5 or RLDS is only useful to most robot-learning code once it is a
LeRobot dataset again. This module is the lake-reading side: it chooses the episodes (filter,
version), reads their steps and frames, and hands them one episode at a time to
`robolake.writers.lerobot.LeRobotWriter`, which writes LeRobot's v3.0 layout (its essay lists
the files, the file rollover and the statistics). The export adds GR00T's `meta/modality.json`,
built from the embodiment spec, and `meta/robolake_export.json` (lineage: lake URI and version,
filter, lake episode ids). A LeRobot dataset has one feature layout, so each embodiment selected
gets its own dataset under `OUT/<tag>/`; with one embodiment `OUT` itself is the dataset.
`robolake ingest OUT` reads both. `ExportConfig.format="lerobot-lance"` (`--format lerobot-lance`)
writes the same datasets in LeRobot's Lance layout (`lerobot-lancedb`: frames / videos / meta
Lance tables, `writers.lerobot_lance`): the v3.0 export is staged beside OUT, converted (no
re-encoding) and removed, so both formats hold the same rows and frames.

Why these choices:

- Values round-trip exactly. State and action are the lake's float32 vectors; timestamps are
  the lake's float64 seconds (LeRobot's default float32 would round them). Per-step task
  indices are global indices of an ordering of tasks that keeps each episode's own task order,
  so a re-ingest gives the same per-episode task lists and per-step task indices.
- Frames come from the record (never an access copy). With `copy_video` (`--copy-video`), a
  camera kept as the source video's own packets (`lake.record`) is copied into the mp4 without
  re-encoding when the codec fits: the stream is h264 or AV1 in yuv420p (what the dataset's
  info.json declares; with copy_video the dataset takes the recorded codec when every selected
  stream has the same one), and the episode decodes alone (its first packet is a keyframe, no
  packet of a neighbouring episode is needed). Re-ingesting such an export gives exactly the
  lake's pixels. Everything else is decoded (images and FFV1 per row; key-referenced h264 from its
  keyframe; recorded streams sequentially, each GOP once) on a few threads, a bounded window
  ahead of the encoder, and encoded once: lossy, a re-ingest gives frames within codec
  tolerance. The statistics read the decoded frames either way.
- Nothing is written outside OUT because of what the lake holds: an embodiment tag (a
  directory name with several embodiments) and each camera's video key (a directory name in the
  dataset) must be safe file names (`writers.lerobot.safe_path_part`: letters, digits, '.', '_',
  '-'), else the export is refused naming the field, before anything is written; and every
  dataset directory must resolve inside OUT (a symlink out of it is refused).
- Statistics are the writer's, from the exported rows and frames (the lake's cover the whole
  embodiment, not the filtered subset).
- Another rate from the record (`fps`, `--fps F`): each selected episode is rendered at F Hz
  from its record by the function `robolake align` uses (`align.render_episode`, around the
  function ingest derives steps with), in memory: the lake is only read, and `align --fps F`
  followed by a plain export gives the same dataset. Each step shows the latest recorded frame
  at or before its tick, copied from the media row that holds it (`align.rendered_media`), so
  the mp4 has one frame per row (a tick whose frame no lake step showed gets the latest one
  stored, counted as `frames_missing` in `robolake_export.json`). A dataset has one fps, so an
  episode that cannot be rendered at F (no record, a recorded video whose packets cannot take
  new ticks, a record the rendering refuses) is not exported at its own rate either: it is left
  out and named, with why, in the result (`ExportResult.refused`) and in
  `robolake_export.json`. An embodiment none of whose selected episodes can be rendered fails
  the export before anything is written (leave it out with `--embodiment`); the layout (OUT or
  OUT/<tag>) is the selection's either way.
- Memory: one episode's steps and one camera's media rows at a time, plus a few floats a step
  for the exact statistics; with `fps`, the rendered steps of every selected episode (rendered
  once, before the first file, so the refused are known) and one episode's media rows.

What is not kept: per-episode metadata beyond task and success (source paths, reader details),
and GR00T annotations other than the task description (the lake does not hold them, e.g.
`human.validity`). Episodes whose timestamps are not at i / fps (within LeRobot's 1e-4 s
tolerance) are exported as they are, with a warning: LeRobot's video lookup would reject them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robolake.lake.align import AlignSpec, RenderedEpisode, render_episode, rendered_media
from robolake.lake.lake import Lake
from robolake.lake.lerobot_layout import episode_tasks, lerobot_cameras, lerobot_timestamps, task_order, video_key
from robolake.lake.media.frames import decode_row, load_streams, video_gop
from robolake.lake.media.kept import KeptSteps
from robolake.lake.media.record import StreamIndex, decode_runs, rgb
from robolake.lake.query import EpisodeFilter, sql_in, sql_quote
from robolake.lake.sources.lerobot.reader import embodiment_tag
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.storage import under_root
from robolake.writers.lerobot import LeRobotFeatures, LeRobotFiles, LeRobotWriter, safe_path_part
from robolake.writers.video import REMUX_CODECS, EncodedSegment, VideoOptions

__all__ = ["ExportConfig", "ExportResult", "export_lerobot", "EXPORT_FORMATS"]

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("lerobot-v3", "lerobot-lance")
_DECODE_AHEAD = 16  # frames decoded ahead of the encoder (bounds memory for large frames)
_TIMESTAMP_TOLERANCE_S = 1e-4  # LeRobot's default tolerance_s
TASK_ANNOTATION = "human.action.task_description"  # GR00T's language key

ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True, kw_only=True)
class ExportConfig(LeRobotFiles):
    """How to write the LeRobot datasets: the writer's `LeRobotFiles` (video, chunks_size, file
    sizes; version v3.0), and

    Attributes:
        decode_threads: Threads decoding the lake's frames ahead of the video encoder.
        copy_video: Copy recorded video packets into the mp4s where the codec fits, instead of
            re-encoding them (see the essay).
        fps: Render every episode from its record at this rate (Hz) and export that rendition;
            episodes that cannot be rendered are refused by name (see the essay). None: export
            the lake's steps as they are.
        format: `lerobot-v3` (parquet + mp4 files) or `lerobot-lance` (LeRobot's Lance layout, the
            same v3.0 dataset as frames / videos / meta Lance tables: `writers.lerobot_lance`).
    """

    decode_threads: int = 2
    copy_video: bool = False
    fps: float | None = None
    format: str = "lerobot-v3"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.format not in EXPORT_FORMATS:
            raise ValueError(f"export format must be one of {', '.join(EXPORT_FORMATS)}, got {self.format!r}")
        if self.version != "v3.0":
            raise ValueError(f"export writes LeRobot v3.0, got version {self.version!r}")
        if self.decode_threads < 1:
            raise ValueError(f"decode_threads must be >= 1, got {self.decode_threads}")
        AlignSpec(fps=self.fps)  # the rate is checked as align checks it


@dataclass(frozen=True, kw_only=True)
class ExportResult:
    """One dataset written by an export.

    Attributes:
        embodiment: Its embodiment tag.
        path: The dataset root (holds meta/info.json).
        lake_version: The lake version it was read from.
        episodes: Episodes written.
        frames: Steps (parquet rows) written.
        videos: mp4 files written.
        tasks: Distinct tasks.
        seconds: Wall time.
        refused: With `ExportConfig.fps`: episode id -> why it is not in the dataset (it could
            not be rendered at that rate); always empty without.
    """

    embodiment: str
    path: Path
    lake_version: int
    episodes: int
    frames: int
    videos: int
    tasks: int
    seconds: float
    refused: dict[str, str] = field(default_factory=dict)


def export_lerobot(
    lake: Lake | str,
    out: str | Path,
    *,
    filter: EpisodeFilter | None = None,
    version: int | None = None,
    config: ExportConfig | None = None,
    progress: ProgressFn | None = None,
) -> list[ExportResult]:
    """Write the lake's episodes (optionally filtered, at any version) as LeRobot v3.0 datasets.

    Args:
        lake: A Lake or a lake URI.
        out: A new or empty local directory. With one embodiment selected it becomes the
            dataset; with several, each embodiment's dataset is `out/<tag>`.
        filter: Which episodes (default: all).
        version: Lake version to read (default: the Lake's version, or the newest for a URI).
        config: File and codec settings.
        progress: Called as progress(embodiment, episodes_done, episodes_total).

    Returns:
        One result per dataset written, in embodiment order; with `config.fps`, each names the
        episodes of its embodiment it refused.

    Raises:
        FileExistsError: `out` exists and is not empty.
        ValueError: no episode matches, or the episodes cannot form a LeRobot dataset
            (frame sizes that differ between episodes, odd sizes, missing frames or cameras),
            or with `config.fps` no selected episode of an embodiment can be rendered at it.
    """
    config = config or ExportConfig()
    if config.format == "lerobot-lance":
        return _export_lance(lake, out, filter=filter, version=version, config=config, progress=progress)
    if isinstance(lake, str):
        lake = Lake.open(lake, version=version)
    elif version is not None and version != lake.version:
        lake = lake.checkout(version)
    if "://" in str(out):
        raise ValueError(f"export writes to a local directory, got {out}; export locally and upload the result")
    out = Path(os.path.abspath(out))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not empty; export into a new directory or remove it first")
    rows = lake.episodes(filter).to_pylist()
    if not rows:
        raise ValueError(
            f"no episode of lake {lake.uri} version {lake.version} matches the filter {_filter_json(filter)}; "
            f"its embodiments are {sorted(lake.embodiments())} (`robolake info {lake.uri}`)"
        )
    by_tag: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: (r["embodiment"], r["source_uri"], r["source_episode_index"], r["episode_id"])):
        by_tag.setdefault(r["embodiment"], []).append(r)
    several = len(by_tag) > 1  # the layout is the selection's, whatever a rendition refuses
    specs = lake.embodiments()
    for tag in by_tag:
        if tag not in specs:
            raise ValueError(f"lake {lake.uri} has episodes of embodiment {tag!r} but no spec for it; re-ingest them")
    rendition = _Rendition.of(lake, by_tag, config.fps) if config.fps is not None else _Rendition()
    by_tag = {tag: rendition.rows(episodes) for tag, episodes in by_tag.items()}
    for tag, episodes in by_tag.items():
        _check_names(specs[tag], episodes, several=several)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for tag, episodes in by_tag.items():
        dest = out if not several else Path(under_root(out, tag, what="embodiment tag"))
        results.append(
            _export_one(
                lake, specs[tag], episodes, dest, filter, _codec_for(lake, episodes, config), progress, rendition
            )
        )
    return results


def _export_lance(
    lake: Lake | str,
    out: str | Path,
    *,
    filter: EpisodeFilter | None,
    version: int | None,
    config: ExportConfig,
    progress: ProgressFn | None,
) -> list[ExportResult]:
    """LeRobot's Lance layout: the v3.0 export, staged beside OUT, then its tables (`write_lerobot_lance`).

    The v3.0 files are a staging step only (removed at the end, also on failure), so the Lance
    dataset holds exactly what a v3.0 export of the same selection holds.
    """
    from robolake.writers.lerobot_lance import write_lerobot_lance

    if "://" in str(out):
        raise ValueError(f"export writes to a local directory, got {out}; export locally and upload the result")
    out = Path(os.path.abspath(out))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not empty; export into a new directory or remove it first")
    staging = out.with_name(f".{out.name}.robolake-v3")
    if staging.exists():
        shutil.rmtree(staging)  # a killed export's staging (ours by name), never a dataset
    try:
        staged = export_lerobot(
            lake,
            staging,
            filter=filter,
            version=version,
            config=dataclasses.replace(config, format="lerobot-v3"),
            progress=progress,
        )
        results = []
        for r in staged:
            t0 = time.perf_counter()
            dest = out / r.path.relative_to(staging)
            write_lerobot_lance(r.path, dest)
            results.append(dataclasses.replace(r, path=dest, seconds=r.seconds + time.perf_counter() - t0))
        return results
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@dataclass(frozen=True)
class _Rendition:
    """With `--fps`: each selected episode rendered from its record, or why it could not be."""

    fps: float | None = None
    episodes: dict[str, RenderedEpisode] = field(default_factory=dict)
    refused: dict[str, dict[str, str]] = field(default_factory=dict)  # embodiment -> episode id -> why

    @classmethod
    def of(cls, lake: Lake, by_tag: dict[str, list[dict[str, Any]]], fps: float) -> _Rendition:
        """Render every selected episode at `fps`; refuse the lot when an embodiment keeps none.

        Raises:
            ValueError: no selected episode of an embodiment can be rendered at `fps`.
        """
        episodes: dict[str, RenderedEpisode] = {}
        refused: dict[str, dict[str, str]] = {}
        for tag, rows in by_tag.items():
            mine = refused.setdefault(tag, {})
            for row in rows:
                got = render_episode(lake, row, fps, {})
                if isinstance(got, str):
                    mine[row["episode_id"]] = got
                else:
                    episodes[row["episode_id"]] = got
            if len(mine) == len(rows):
                why = "; ".join(f"{r['episode_id']}: {mine[r['episode_id']]}" for r in rows[:3])
                more = f" (and {len(rows) - 3} more)" if len(rows) > 3 else ""
                leave = f", or leave embodiment {tag!r} out (--embodiment)" if len(by_tag) > 1 else ""
                raise ValueError(
                    f"export --fps {fps:g}: none of the {len(rows)} selected episodes of embodiment {tag!r} can be "
                    f"rendered from its record at {fps:g} Hz: {why}{more}; export without --fps (at the lake's "
                    f"rate){leave}"
                )
        left_out = sorted(eid for mine in refused.values() for eid in mine)
        if left_out:
            log.warning(
                "export --fps %g: %d episodes cannot be rendered at that rate and are left out: %s",
                fps,
                len(left_out),
                ", ".join(left_out[:10]),
            )
        return cls(fps=fps, episodes=episodes, refused=refused)

    def rows(self, episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The episodes rows to export: each as its rendition makes it; the refused left out."""
        if self.fps is None:
            return episodes
        return [self.episodes[e["episode_id"]].episode for e in episodes if e["episode_id"] in self.episodes]


def _check_names(spec: EmbodimentSpec, episodes: list[dict[str, Any]], *, several: bool) -> None:
    """Refuse names from the lake that would make a path leave OUT (see the essay)."""
    if several and not safe_path_part(spec.tag):
        raise ValueError(
            f"export: embodiment tag {spec.tag!r} is not a safe directory name (letters, digits, '.', '_', "
            "'-'); export it alone (--embodiment) or re-tag it"
        )
    for cam in lerobot_cameras(spec, episodes, "export these episodes separately (--filter)"):
        key = video_key(spec, cam)
        if not safe_path_part(key):
            raise ValueError(
                f"export: camera {cam!r} of embodiment {spec.tag!r} gives the video key {key!r}, which is not a "
                "safe file name (letters, digits, '.', '_', '-'); rename the camera (re-ingest with --map)"
            )


def _codec_for(lake: Lake, episodes: list[dict[str, Any]], config: ExportConfig) -> ExportConfig:
    """With copy_video, the dataset's codec is the recorded one when every selected stream shares it."""
    if not config.copy_video:
        return config
    codecs: set[str] = set()
    ids = [e["episode_id"] for e in episodes]
    for i in range(0, len(ids), 512):
        t = lake.dataset("streams").to_table(columns=["codec"], filter=sql_in("episode_id", ids[i : i + 512]))
        codecs.update(t["codec"].to_pylist())
    if len(codecs) == 1 and (codec := codecs.pop()) in ("h264", "av1") and codec != config.video.codec:
        log.info(
            "export: the recorded streams are %s; the dataset's videos are %s, copied where they fit", codec, codec
        )
        return dataclasses.replace(config, video=VideoOptions(codec=codec, gop=config.video.gop))  # type: ignore[arg-type]
    return config


# --- one embodiment --------------------------------------------------------------------------


def _export_one(
    lake: Lake,
    spec: EmbodimentSpec,
    episodes: list[dict[str, Any]],
    dest: Path,
    filter: EpisodeFilter | None,
    config: ExportConfig,
    progress: ProgressFn | None,
    rendition: _Rendition,
) -> ExportResult:
    t0 = time.perf_counter()
    fps = _common_fps(spec, episodes)
    cameras = lerobot_cameras(spec, episodes, "export these episodes separately (--filter)")
    ep_tasks = [episode_tasks(e) for e in episodes]
    modality, annotation_columns = _modality(spec, cameras)
    success = [e["success"] for e in episodes]
    write_success = all(s is not None for s in success)
    if not write_success and any(s is not None for s in success):
        log.warning("embodiment %s: only some episodes record success; the export leaves next.success out", spec.tag)
    features = LeRobotFeatures(
        fps=fps,
        robot_type=_robot_type(spec),
        video_keys=tuple(video_key(spec, c) for c in cameras),
        state_names=_names(spec.state, spec.state_dim),
        action_names=_names(spec.action, spec.action_dim),
        timestamp_dtype="float64",
        task_columns=tuple(annotation_columns),
        done=True,
        success=write_success,
    )
    pool = ThreadPoolExecutor(max_workers=config.decode_threads, thread_name_prefix="robolake-export")
    trimmed = lake.trimmed([e["episode_id"] for e in episodes])
    with pool, LeRobotWriter(dest, features, config, tasks=task_order(ep_tasks)) as writer:
        off_grid = copied = missing = 0
        for i, (ep, names) in enumerate(zip(episodes, ep_tasks, strict=True)):
            rendered = rendition.episodes.get(ep["episode_id"])
            steps = _read_steps(lake, ep) if rendered is None else rendered.steps
            n = steps.num_rows
            kept = trimmed.get(ep["episode_id"])
            ts = lerobot_timestamps(steps["timestamp"].to_numpy(), kept, fps)
            off_grid += bool(np.abs(ts - np.arange(n) / fps).max() > _TIMESTAMP_TOLERANCE_S)
            media, n_missing = rendered_media(lake, rendered) if rendered is not None else (None, 0)
            missing += n_missing
            streams = {} if media is not None else load_streams(lake.dataset("streams"), [ep["episode_id"]])
            frames, segments = {}, {}
            for cam in cameras:
                key = video_key(spec, cam)
                frames[key], segment = _episode_frames(
                    lake, ep, cam, n, pool, streams.get((ep["episode_id"], cam)), config, media, kept
                )
                if segment is not None:
                    segments[key] = segment
            copied += len(segments)
            writer.add_episode(
                state=_matrix(steps["state"], n),
                action=_matrix(steps["action"], n),
                timestamps=ts,
                tasks=names,
                task_index=steps["task_index"].to_numpy(),
                success=success[i] if write_success else None,
                frames=frames,
                segments=segments,
            )
            if progress is not None:
                progress(spec.tag, i + 1, len(episodes))
        if off_grid:
            log.warning(
                "embodiment %s: %d of %d episodes have timestamps off the 1/%g s grid by more than %g s; "
                "LeRobot's video lookup will reject them (resample them onto the fps at ingest)",
                spec.tag,
                off_grid,
                len(episodes),
                fps,
                _TIMESTAMP_TOLERANCE_S,
            )
        lineage = {
            "lake": lake.uri,
            "lake_version": lake.version,
            "embodiment": spec.tag,
            "filter": _filter_json(filter),
            "exported_at": time.time(),
            "episode_ids": [e["episode_id"] for e in episodes],
            "copied_videos": copied,
            "videos_total": len(episodes) * len(cameras),
        }
        if rendition.fps is not None:
            lineage["rendered_fps"] = rendition.fps  # steps and frames rendered from the record at this rate
            lineage["refused"] = rendition.refused.get(spec.tag, {})
            lineage["frames_missing"] = missing  # ticks showing an earlier frame: theirs was never stored
        writer.finish(meta={"modality.json": modality, "robolake_export.json": lineage})
    log.info("exported %d episodes of %s to %s", len(episodes), spec.tag, dest)
    return ExportResult(
        embodiment=spec.tag,
        path=dest,
        lake_version=lake.version,
        episodes=writer.num_episodes,
        frames=writer.num_frames,
        videos=writer.num_videos,
        tasks=len(writer.tasks),
        seconds=time.perf_counter() - t0,
        refused=dict(rendition.refused.get(spec.tag, {})),
    )


def _common_fps(spec: EmbodimentSpec, episodes: list[dict[str, Any]]) -> float:
    rates = sorted({float(e["fps"]) for e in episodes})
    if len(rates) > 1:
        raise ValueError(
            f"embodiment {spec.tag!r}: the selected episodes were recorded at different rates {rates}; "
            "a LeRobot dataset has one fps, so export each rate separately (--filter)"
        )
    if rates[0] <= 0:
        raise ValueError(f"embodiment {spec.tag!r}: episodes have fps {rates[0]}; a LeRobot dataset needs fps > 0")
    return rates[0]


def _modality(spec: EmbodimentSpec, cameras: list[str]) -> tuple[dict[str, Any], list[str]]:
    """GR00T modality.json of the export, and the annotation columns the parquet files need."""
    modality = spec.to_modality_json()
    if not modality["state"]:
        modality["state"] = {"state": {"start": 0, "end": spec.state_dim}}
    if not modality["action"]:
        modality["action"] = {"action": {"start": 0, "end": spec.action_dim}}
    modality["video"] = {cam: {"original_key": video_key(spec, cam)} for cam in cameras}
    annotation: dict[str, Any] = {}
    columns: list[str] = []
    for name, key in spec.annotations:
        if key == "task_index":
            annotation[name] = {"original_key": "task_index"}
        elif "task_description" in name:
            annotation[name] = {} if key == f"annotation.{name}" else {"original_key": key}
            columns.append(key)
        else:
            log.info("embodiment %s: annotation %r is not kept in the lake; the export leaves it out", spec.tag, name)
    if not annotation:
        annotation[TASK_ANNOTATION] = {}
        columns.append(f"annotation.{TASK_ANNOTATION}")
    modality["annotation"] = annotation
    return modality, columns


def _robot_type(spec: EmbodimentSpec) -> str:
    """info.json robot_type: the spec's, unless a re-ingest would derive another tag from it."""
    if embodiment_tag(spec.robot_type, "") == spec.tag:
        return spec.robot_type
    if embodiment_tag(spec.tag, "") != spec.tag:
        log.warning(
            "embodiment tag %r is not snake_case; re-ingest the export with --embodiment %s", spec.tag, spec.tag
        )
    return spec.tag


def _names(slices: Sequence[Any], dim: int) -> tuple[str, ...]:
    names = [f"motor_{i}" for i in range(dim)]
    for s in slices:
        for j in range(s.start, s.end):
            names[j] = f"{s.name}_{j - s.start}"
    return tuple(names)


def _read_steps(lake: Lake, episode: dict[str, Any]) -> pa.Table:
    steps = lake.to_arrow(
        "steps",
        columns=["step_index", "timestamp", "state", "action", "task_index"],
        where=f"episode_id = {sql_quote(episode['episode_id'])}",
    ).sort_by("step_index")
    n = int(episode["num_steps"])
    if steps.num_rows != n or not np.array_equal(steps["step_index"].to_numpy(), np.arange(n)):
        raise ValueError(
            f"episode {episode['episode_id']} has {steps.num_rows} step rows but num_steps={n} "
            "(or gaps in step_index); the lake is inconsistent: run `robolake check` and re-ingest it"
        )
    return steps


def _matrix(column: pa.ChunkedArray, n: int) -> np.ndarray:
    arr = column.combine_chunks()
    flat = arr.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    return flat.reshape(n, -1) if n else flat.reshape(0, 0)


def _segment(stream: StreamIndex, cells: list[bytes], config: ExportConfig) -> EncodedSegment | None:
    """The stream's packets to copy as they are, when the dataset's codec fits and it decodes alone."""
    fits = (
        config.copy_video
        and stream.codec == config.video.codec
        and stream.codec in REMUX_CODECS
        and stream.params.get("pix_fmt") == "yuv420p"
        and not len(stream.extra)
        and not stream.repeats.any()  # a frame shown on several steps (a video topic): re-encode
        and bool(stream.packet_key[0])
    )
    if not fits:
        return None
    steps = stream.packet_step.tolist()
    return EncodedSegment(
        codec=stream.codec,
        extradata=stream.extradata,
        width=stream.width,
        height=stream.height,
        pix_fmt="yuv420p",
        packets=tuple(cells[s] for s in steps),
        frame_index=tuple(steps),
        keyframes=tuple(bool(k) for k in stream.packet_key),
    )


def _episode_frames(
    lake: Lake,
    episode: dict[str, Any],
    camera: str,
    n: int,
    pool: ThreadPoolExecutor,
    stream: StreamIndex | None,
    config: ExportConfig,
    rendered: pa.Table | None = None,
    kept: KeptSteps | None = None,
) -> tuple[Iterator[np.ndarray], EncodedSegment | None]:
    """The episode's decoded RGB frames of `camera` in step order (the writer checks their sizes),
    and its packets to copy instead of encoding, when they fit (`_segment`). `rendered`: the
    episode's media rows as a rendition re-pointed them (`rendered_media`), instead of the lake's.
    `kept`: a trimmed episode's steps, whose frames are some of its media rows (re-encoded)."""
    eid = episode["episode_id"]
    if rendered is not None:
        media = rendered.filter(pc.equal(rendered["camera"], camera)).sort_by("step_index")
    else:
        media = lake.to_arrow(
            "media",
            columns=["step_index", "encoding", "data"],
            where=f"episode_id = {sql_quote(eid)} AND camera = {sql_quote(camera)}",
        ).sort_by("step_index")
    rows = n if kept is None else kept.frames
    if media.num_rows != rows or not np.array_equal(media["step_index"].to_numpy(), np.arange(rows)):
        raise ValueError(
            f"episode {eid} camera {camera!r} has {media.num_rows} frames for {rows} steps; the lake is "
            "inconsistent: run `robolake check` and re-ingest the episode"
        )
    cells, encodings = media["data"].to_pylist(), media["encoding"].to_pylist()
    shown = range(rows) if kept is None else kept.frame_steps.tolist()
    if stream is not None:
        return _stream_frames(stream, cells, shown), None if kept is not None else _segment(stream, cells, config)
    return _row_frames(cells, encodings, pool, shown), None


def _stream_frames(stream: StreamIndex, cells: list[bytes], shown: Sequence[int]) -> Iterator[np.ndarray]:
    """A recorded stream's frames of steps `shown`, decoded in one sequential pass (each GOP once)."""
    for _, frame in decode_runs(stream, stream.runs(shown), cells.__getitem__):
        yield rgb(frame)


def _row_frames(
    cells: list[bytes], encodings: list[str], pool: ThreadPoolExecutor, shown: Sequence[int]
) -> Iterator[np.ndarray]:
    # Decoding (PIL and PyAV release the GIL) runs on the pool, a bounded window ahead of the encoder.
    pending: deque[Future[np.ndarray]] = deque()
    for i in shown:
        cell, enc = cells[i], encodings[i]
        gop = video_gop(enc)
        key = cells[i - i % gop] if gop and i % gop else None  # rows are steps 0..n-1, checked above
        pending.append(pool.submit(decode_row, cell, enc, key))
        if len(pending) >= _DECODE_AHEAD:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _filter_json(f: EpisodeFilter | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(f).items() if v is not None}
