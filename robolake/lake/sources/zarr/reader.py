"""Reader for Zarr replay buffers: Diffusion Policy / UMI `data/<key>` + `meta/episode_ends`.

The layout (`zarr.layout`) is decided once on the driver; this module reads one episode at a
time from it: the rows [start, end) of every `data/` array (zarr reads only the chunks that
hold them), each checked against the read budget before it is allocated. Rows are ticks at the
buffer's rate; `data/timestamp`, where there is one, is every stream's clock in the record and
must not go backwards inside an episode (`timestamps`). The record keeps every `data/` array of
the episode in its own dtype (float64 poses stay float64, an int `stage` stays int), images
aside: they are the cameras.

Cameras come from two places. Frames in the buffer (UMI's JPEG-XL `camera0_rgb`, raw Blosc
frames) are decoded by zarr through numcodecs and kept losslessly (FFV1; the lake's media codecs
do not decode JPEG-XL, so its bytes cannot pass through). Diffusion Policy's real-robot mp4s
(`videos/<episode>/<camera>.mp4`) keep their own packets bit for bit (`sources.video.read_record`).
A real mp4 tree has faults, each handled by name: a video cut short with no index (the recorder
was killed before it wrote the moov atom) cannot be opened and quarantines its episode
(`corrupt_video`); an episode without its video is `missing_video` (`--state-only` lands it
without); a video one frame shorter than the episode's rows (the recorder stopped a tick before
the robot did) lands the episode with its steps ending at the last frame, the last row kept in
the record and said in a note; any other count is `frame_count`.

The reader keeps no store open between calls: readers travel to Ray workers by pickle.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from robolake.lake.sources.base import EncodedFrames, EpisodeRef, SourceError, TabularEpisode
from robolake.lake.sources.columnar import CLOCK_ROWS, CLOCK_SOURCE, ColumnRecord, seconds_to_ns
from robolake.lake.sources.record import record_notes
from robolake.lake.sources.registry import SourceFormat, SourceOptions
from robolake.lake.sources.resample import Stream, check_stream
from robolake.lake.sources.video import file_digest, read_record
from robolake.lake.sources.zarr.inspect import describe_reader, describe_unopened
from robolake.lake.sources.zarr.layout import Layout, locate, open_buffer, resolve_layout
from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec

__all__ = ["ZarrReader", "is_zarr_unit", "inspect_zarr", "FORMAT"]

log = logging.getLogger(__name__)

# A video this many frames shorter than its episode's rows lands with its steps cut to the frames.
SHORT_VIDEO_FRAMES = 1


def is_zarr_unit(path: str) -> bool:
    """A replay buffer directory, or a folder holding one buffer and its `videos/` tree."""
    try:
        return locate(path) is not None
    except OSError:
        return False


def _video_probe(path: str) -> tuple[int, float, float]:
    """(frames, frame rate, first frame time in s) of an mp4, from its index (packets counted without one).

    Raises:
        SourceError: `corrupt_video` when it cannot be opened (a file cut short has no index).
    """
    import av

    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise SourceError("corrupt_video", path, "file has no video stream")
            stream = container.streams.video[0]
            rate = float(stream.average_rate or stream.guessed_rate or 0) or 0.0
            base = stream.time_base
            first = float(stream.start_time * base) if stream.start_time is not None and base is not None else 0.0
            count = int(stream.frames or 0)
            if not count:
                count = sum(1 for p in container.demux(stream) if p.size)
    except SourceError:
        raise
    except (av.error.FFmpegError, OSError, ValueError) as e:
        raise SourceError(
            "corrupt_video",
            path,
            f"video cannot be opened ({e}); an mp4 cut short (the recorder killed before it wrote its index) "
            "has no moov atom: re-record it, or recover it (untrunc) and ingest again",
        ) from e
    return count, rate, first


def _chunk_digest(array_dir: str, first: int, last: int) -> str:
    """sha256 of the stored chunks of an array whose first chunk index is in [first, last] (v2 and v3 keys)."""
    h = hashlib.sha256()
    found: list[tuple[str, str]] = []
    for dirpath, _, files in os.walk(array_dir):
        for name in files:
            if name.startswith(".") or name == "zarr.json":
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, array_dir).replace(os.sep, ".")
            if rel.startswith("c."):
                rel = rel[2:]
            head = rel.split(".", 1)[0]
            if head.isdigit() and first <= int(head) <= last:
                found.append((rel, full))
    for rel, full in sorted(found):
        h.update(rel.encode() + b"\0")
        with open(full, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:32]


class ZarrReader:
    """Reads one Zarr replay buffer (and the `videos/` tree beside it).

    Args:
        path: The buffer directory, or a folder holding one buffer and `videos/`.
        options: Embodiment tag, mapping, state-only choice, frame layout, read limits, streams.

    Raises:
        SourceError: the store cannot be opened, `meta/episode_ends` is unusable (`bad_metadata`),
            no key can be the state and no mapping was given (`missing_key`), a mapping names a key
            the buffer lacks, or a chunk or frame declares more than the read budget.
        ImportError: zarr is not installed (the `formats` extra).
    """

    reads_record = True  # read_tabular(ref, record=False) reads only the arrays the steps need

    def __init__(self, path: str, options: SourceOptions | None = None):
        self.root = os.path.abspath(path)
        self.options = options or SourceOptions()
        self.limits = self.options.limits
        found = locate(self.root)
        if found is None:
            raise SourceError(
                "missing_key", self.root, "not a Zarr replay buffer (no data/ group and meta/episode_ends array)"
            )
        self.buffer, self.videos = found
        self.layout: Layout = resolve_layout(open_buffer(self.buffer), self.buffer, self.videos, self.options)
        self.format_name = f"zarr-{self.layout.name}"
        self.tag = self.options.embodiment or self.layout.tag
        self.fps = self.layout.fps
        self.cameras = tuple(c[0] for c in self.layout.cameras)
        self.notes = list(self.layout.notes)

    # --- reader protocol -----------------------------------------------------------------

    def spec(self) -> EmbodimentSpec:
        lay = self.layout

        def slices(keys: tuple[str, ...], widths: tuple[int, ...]) -> tuple[SliceSpec, ...]:
            out, start = [], 0
            for k, w in zip(keys, widths, strict=True):
                out.append(SliceSpec(name=k.rsplit("/", 1)[-1], start=start, end=start + w))
                start += w
            return tuple(out)

        action = (lay.action, lay.action_widths) if lay.action else (lay.state, lay.state_widths)
        return EmbodimentSpec(
            tag=self.tag,
            state_dim=sum(lay.state_widths),
            action_dim=sum(action[1]),
            state=slices(lay.state, lay.state_widths),
            action=slices(*action),
            cameras=self.cameras,
            video_keys=tuple((c[0], c[1]) for c in lay.cameras),
            fps=self.fps,
            robot_type=lay.tag,
        )

    def discover(self) -> list[EpisodeRef]:
        return [
            EpisodeRef(
                source_uri=self.root,
                source_format=self.format_name,
                episode_index=i,
                embodiment=self.tag,
                location=(("rows", self.layout.rows(i)),),
            )
            for i in range(len(self.layout.ends))
        ]

    def _read(self, root: Any, key: str, start: int, end: int, cache: dict[str, np.ndarray]) -> np.ndarray:
        """Rows [start, end) of `key` in its own dtype, checked against the read budget; read once per cache."""
        if key in cache:
            return cache[key]
        info = self.layout.array(key)
        if info.shape[0] < end:
            raise SourceError(
                "shape",
                self.buffer,
                f"{key} has {info.shape[0]} rows but this episode runs to row {end} (meta/episode_ends); "
                "the buffer was cut short: drop the episode or rewrite the buffer",
            )
        self.limits.check_array((end - start, *info.shape[1:]), np.dtype(info.dtype).itemsize, self.buffer, key)
        try:
            out = np.asarray(root[key][start:end])
        except Exception as e:  # a missing codec, a truncated chunk: zarr raises its own types
            raise SourceError("corrupt_file", self.buffer, f"{key} rows {start}:{end} cannot be read ({e})") from e
        cache[key] = out
        return out

    def _matrix(self, root: Any, keys: tuple[str, ...], start: int, end: int, cache: dict[str, np.ndarray]) -> Any:
        parts = [self._read(root, k, start, end, cache).reshape(end - start, -1) for k in keys]
        return np.concatenate([p.astype(np.float64) for p in parts], axis=1)

    def _videos(self, ref: EpisodeRef, rows: int) -> tuple[int, dict[str, tuple[str, float, float, int]], list[str]]:
        """(steps, camera -> (mp4, rate, first time, frames), notes) of an episode's video cameras."""
        out: dict[str, tuple[str, float, float, int]] = {}
        for cam, src, kind in self.layout.cameras:
            if kind != "video":
                continue
            path = self.layout.video_path(src, ref.episode_index)
            if not os.path.isfile(path):
                if self.options.state_only:
                    continue
                raise SourceError(
                    "missing_video",
                    path,
                    f"camera {cam!r}: episode {ref.episode_index} has no video (other episodes have "
                    f"{os.path.basename(path)}); re-export it, or ingest with --state-only to take state and action "
                    "alone",
                )
            count, rate, first = _video_probe(path)
            out[cam] = (path, rate or self.fps, first, count)
        steps, notes = rows, []
        for cam, (path, _, _, count) in out.items():
            if count == rows:
                continue
            if rows - SHORT_VIDEO_FRAMES <= count < rows:
                steps = min(steps, count)
                notes.append(
                    f"{path}: camera {cam!r} has {count} frames for {rows} rows of episode {ref.episode_index}: "
                    f"its steps end at the last frame ({rows - count} row(s) kept in the record only)"
                )
                continue
            raise SourceError(
                "frame_count",
                path,
                f"camera {cam!r} has {count} frames but episode {ref.episode_index} has {rows} rows "
                "(meta/episode_ends); the video is short, long or recorded at another rate",
            )
        return steps, out, notes

    def read_tabular(self, ref: EpisodeRef, *, record: bool = True) -> TabularEpisode:
        """Read and check one episode's state and action; keep every `data/` array of it in its record,
        unless `record=False` (ingest's first pass, which only decides the content hash).

        Raises:
            SourceError: an array is shorter than the episode, unreadable or over the read budget;
                the episode is empty, non-finite, or its clock goes back; a video is missing, cut
                short without an index, or has another number of frames than the rows.
        """
        lay = self.layout
        start, end = ref.get("rows")
        rows = end - start
        if rows <= 0:
            raise SourceError("empty", self.buffer, f"episode {ref.episode_index} has no rows (meta/episode_ends)")
        steps, videos, notes = self._videos(ref, rows)
        root = open_buffer(self.buffer)
        cache: dict[str, np.ndarray] = {}
        state = self._matrix(root, lay.state, start, end, cache)
        action = self._matrix(root, lay.action, start, end, cache) if lay.action else None
        if lay.clock is not None:
            t = self._read(root, lay.clock, start, end, cache).astype(np.float64).reshape(-1)
            clock = CLOCK_SOURCE
        else:
            t, clock = np.arange(rows, dtype=np.float64) / self.fps, CLOCK_ROWS
        name = f"episode {ref.episode_index} ({', '.join(lay.state)})"
        check_stream(Stream(name=name, t=t, values=state, path=self.buffer))
        if action is not None:
            check_stream(Stream(name=f"episode {ref.episode_index} ({', '.join(lay.action)})", t=t, values=action))
        st = state[:steps]
        ac = action[:steps] if action is not None else np.concatenate([st[1:], st[-1:]])
        ts = np.arange(steps, dtype=np.float64) / self.fps
        digests = [f"{cam}:{file_digest(v[0])}:{steps}" for cam, v in videos.items()]
        for cam, src, kind in lay.cameras:
            if kind != "video":
                c0 = lay.array(src).chunks[0] or 1
                digest = _chunk_digest(os.path.join(self.buffer, *src.split("/")), start // c0, (end - 1) // c0)
                digests.append(f"{cam}:{digest}:{start}:{start + steps}")
        metadata: dict[str, Any] = {
            "buffer": self.buffer,
            "rows": [start, end],
            "layout": lay.name,
            "fps_source": lay.fps_source,
            "tasks": [lay.task] if lay.task else [],
            "videos": {cam: [os.path.relpath(v[0], self.root), v[1], v[2]] for cam, v in videos.items()},
        }
        if lay.action_from_state:
            metadata["action_from_state"] = True
        built = None
        if record:
            built = self._record(root, ref, t, clock, steps, set(videos), cache)
            metadata["record"] = built[1]
            notes += record_notes(built[0], self.buffer)
        if notes:
            metadata["notes"] = notes
        tasks = (lay.task,) if lay.task else ()
        task_index = np.zeros(steps, dtype=np.int32)
        return TabularEpisode.of(
            ref=ref,
            state=st,
            action=ac,
            timestamps=ts,
            task_index=task_index,
            tasks=tasks,
            fps=self.fps,
            media_digests=tuple(digests),
            metadata=metadata,
            record=built[0] if built is not None else None,
        )

    def _record(
        self,
        root: Any,
        ref: EpisodeRef,
        t: np.ndarray,
        clock: str,
        steps: int,
        videos: set[str],
        cache: dict[str, np.ndarray],
    ) -> tuple[Any, dict[str, Any]]:
        """The episode's record: every `data/` array in its own dtype at the clock; cameras' frame times."""
        lay = self.layout
        start, end = ref.get("rows")
        into = ColumnRecord(path=self.buffer, budget=self.limits.max_read_bytes, streams=self.options.streams)
        t_ns = seconds_to_ns(t)
        cams = {src: cam for cam, src, kind in lay.cameras if kind != "video"}
        mapped = {*lay.state, *lay.action, *(lay.clock and (lay.clock,) or ())}
        for a in lay.arrays:
            if a.key in cams:
                into.camera(cams[a.key], t_ns[:steps], clock=clock)
                continue
            kind = np.dtype(a.dtype).kind
            if len(a.shape) >= 3 and min(a.shape[1:3]) > 4:
                into.leave_out(a.key, "image-shaped: no camera reads it, and images are not record streams")
                continue
            if kind not in "fiub":
                into.leave_out(a.key, f"{a.dtype} values are neither numbers nor text")
                continue
            if not into.wanted(a.key, mapped=a.key in mapped):
                continue
            if a.shape[0] < end:
                into.leave_out(a.key, f"{a.shape[0]} rows: the buffer's array ends before this episode does")
                continue
            values = self._read(root, a.key, start, end, cache)
            into.numeric(a.key, t_ns, values, scalar=values.ndim == 1, clock=clock, msgtype=a.codec)
        for cam, _, how in lay.cameras:
            if how == "video" and cam in videos:
                into.camera(cam, t_ns[:steps], clock=clock, msgtype="video/mp4")
        built = into.build()
        return built, into.metadata(built)

    def read_frames(self, episode: TabularEpisode) -> Iterator[EncodedFrames]:
        """Each camera's frames at the episode's steps: an mp4's own packets, or buffer frames kept losslessly.

        Raises:
            SourceError: a video is missing, cannot be decoded or has another number of frames than
                the steps; buffer frames cannot be read (a codec not installed, a truncated chunk).
        """
        lay, ref, n = self.layout, episode.ref, episode.num_steps
        start, _ = ref.get("rows")
        videos = episode.metadata.get("videos", {})
        root = None
        for cam, src, kind in lay.cameras:
            if kind == "video":
                if cam not in videos:  # --state-only, and this episode has no video of it
                    continue
                rel, rate, first = videos[cam]
                path = os.path.join(self.root, rel)
                rec = read_record(
                    path,
                    start_s=first,
                    end_s=first + n / rate,
                    fps=rate,
                    source_path=rel,
                    digest=file_digest(path),
                )
                if rec.stream.num_steps != n:
                    raise SourceError(
                        "frame_count",
                        path,
                        f"camera {cam!r} gives {rec.stream.num_steps} frames for the {n} steps of episode "
                        f"{ref.episode_index}; its frame times are not one per row",
                    )
                yield dataclasses.replace(rec, camera=cam)
                continue
            root = root if root is not None else open_buffer(self.buffer)
            yield self._buffer_frames(root, cam, src, start, n)

    def _buffer_frames(self, root: Any, cam: str, key: str, start: int, n: int) -> EncodedFrames:
        """Frames of a camera kept in the buffer, read a chunk of rows at a time and encoded one by one."""
        from robolake.lake.media.codecs import encode_raw

        info = self.layout.array(key)
        frame_bytes = int(np.prod(info.shape[1:]))
        batch = max(1, min(info.chunks[0] or 1, self.limits.max_read_bytes // max(frame_bytes, 1)))
        images: list[bytes] = []
        encoding = ""
        arr = root[key]
        for lo in range(start, start + n, batch):
            hi = min(lo + batch, start + n)
            try:
                block = np.asarray(arr[lo:hi])
            except Exception as e:  # a codec that is not installed, a chunk cut short
                hint = " (install imagecodecs: pip install 'robolake[formats]')" if "jpegxl" in info.codec else ""
                raise SourceError(
                    "corrupt_file", self.buffer, f"camera {cam!r} ({key}) rows {lo}:{hi} cannot be read ({e}){hint}"
                ) from e
            for frame in block:
                data, encoding = encode_raw(_rgb(frame), self.options.video_frames)
                images.append(data)
        return EncodedFrames(
            camera=cam, images=tuple(images), encoding=encoding, height=int(info.shape[1]), width=int(info.shape[2])
        )

    def inspect(self) -> dict[str, Any]:
        """Every key (type, codec, count, rate, shape, span, role), videos, episodes, notes, the layout as a mapping."""
        return describe_reader(self)


def _rgb(frame: np.ndarray) -> np.ndarray:
    """uint8 [H, W, 3] of a stored frame: RGB as is, RGBA without alpha, grayscale repeated."""
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.shape[2] == 1:
        return np.ascontiguousarray(np.repeat(frame, 3, axis=2))
    return np.ascontiguousarray(frame[:, :, :3])


def inspect_zarr(path: str, options: SourceOptions | None = None) -> dict[str, Any]:
    """A buffer described whatever its layout (for `robolake inspect` of one the reader cannot open)."""
    return describe_unopened(os.path.abspath(path), options or SourceOptions())


def _open_zarr(path: str, options: SourceOptions) -> ZarrReader:
    return ZarrReader(path, options)


FORMAT = SourceFormat(
    name="zarr",
    description="Zarr replay buffers (Diffusion Policy, UMI): data/<key> + meta/episode_ends, JPEG-XL frames or "
    "videos/<episode>/<camera>.mp4",
    detect=is_zarr_unit,
    open=_open_zarr,
    unit="directory",
    inspect_unit=inspect_zarr,
)
