"""The record layout of a source video: its own packets, untouched, and the index that decodes them.

A camera's video (h264, hevc, AV1: whatever PyAV demuxes and decodes) is kept as the source
encoded it. Each step's media row holds the one packet that carries that step's frame; the
episode's `streams` row holds what decoding needs besides the packets: the decoder the source
decode uses, the container's codec parameters (extradata) and colour settings, and, per packet
in decode order, its step, pts, dts and keyframe flag. Nothing is re-encoded, so the lake holds
the source's bytes (plus a few bytes a frame of index) and decodes to exactly the pixels that
decoding the source file with PyAV gives.

Decoding frame t. Packets are stored in step (presentation) order but decode in decode order,
which differs when the source has B-frames. Frame t decodes from `start_of[t]`, the latest
keyframe at or before its packet in decode order whose pts is not after t's (a keyframe of an
open GOP does not restore the pictures shown before it, so those start one keyframe earlier),
feeding every packet from there through t's own packet, then draining the decoder. That is the
source decode restarted at a keyframe, which gives the same pixels (checked at ingest and in
the tests on h264 and AV1). Frames are matched to steps by pts, so B-frame reordering never
shifts a frame to the wrong step.

Many frames at once (`runs`): the wanted steps are grouped by their start, each group becomes a
run [start, last packet needed], and runs that overlap or touch are merged, so each packet is
fed at most once per call however many of its GOP's frames are wanted. Packets before the last
wanted one that carry no wanted frame are decoded only as far as needed: with h264 and hevc the
decoder skips non-reference pictures (`skip_frame=NONREF`), which nothing else depends on, so
the output of every wanted frame is unchanged; other decoders decode every packet.

Episodes that share a file (LeRobot v3.0). Each packet belongs to the episode whose time span
holds its pts, so a shared file is kept once. An episode whose first frame is not a keyframe
needs packets of the episode before it (from the preceding keyframe); those few packets (at
most a GOP) are kept in its `streams` row as extra packets (step -1), so that every episode
decodes alone and deleting, selecting or merging episodes never breaks another's frames. It is
the one place a packet is held twice, and files whose episodes start on keyframes (LeRobot's
and robolake's writers force one) have none.

Steps that repeat a frame (topic logs). A camera logged as video messages (`CompressedVideo`
in a bag or MCAP file) is sampled onto the steps' ticks: a step shows the latest frame at or
before it, so a camera slower than the ticks shows one frame on several steps, and a faster one
has frames no step shows. The latter are extra packets (step -1, kept once in the `streams`
row: later frames need them). The former are *repeat* entries: an entry right after the packet
whose frame it repeats, with that packet's pts; it is never fed to the decoder, its media row
holds no bytes, and its step gets the frame its packet decodes to. Real packets never share a
pts (frames are matched to steps by it), so the pts alone marks a repeat.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any, cast

import numpy as np

__all__ = [
    "NOPTS",
    "RECORD_PREFIX",
    "Run",
    "StreamIndex",
    "decode_runs",
    "is_record",
    "record_encoding",
    "rgb",
]

NOPTS = int(np.iinfo(np.int64).min)  # a packet without a decode time stamp (pts is always present)
RECORD_PREFIX = "video"  # media rows `video;codec=<codec>`: one packet of a recorded stream
_SKIP_SAFE = frozenset({"h264", "hevc"})  # decoders that honour skip_frame=NONREF per packet, exactly
_COLOR_PARAMS = ("color_range", "colorspace", "color_primaries", "color_trc")


def record_encoding(codec: str) -> str:
    """The media-row encoding of a packet of a recorded `codec` stream."""
    return f"{RECORD_PREFIX};codec={codec}"


def is_record(encoding: str) -> bool:
    """Whether a media row holds a packet of a recorded stream (its `streams` row decodes it)."""
    return encoding.split(";", 1)[0] == RECORD_PREFIX


@dataclass(frozen=True)
class Run:
    """Packets [start, end] (decode order) fed in one pass, and the steps whose frames it yields."""

    start: int
    end: int
    steps: tuple[int, ...]


@dataclass(frozen=True, kw_only=True, eq=False)
class StreamIndex:
    """One camera's recorded stream of one episode (a `streams` row), ready to decode.

    Attributes:
        codec: Codec name (h264, hevc, av1).
        decoder: FFmpeg decoder the source decode uses.
        extradata: Codec parameters from the container (may be empty).
        width: Coded width.
        height: Coded height.
        time_base: Unit of `packet_pts` / `packet_dts`.
        params: Container-level settings: the colour settings the decoder is given
            (`_COLOR_PARAMS`) and the decoded pixel format (`pix_fmt`).
        packet_step: int32 [P], decode order: the step each packet carries, -1 for an extra.
        packet_pts: int64 [P].
        packet_dts: int64 [P].
        packet_key: bool [P].
        extra: Bytes of the extra packets (step -1), in decode order.
        source_path: The video file, relative to the episode's source root.
        source_digest: sha256 of the file.
    """

    codec: str
    decoder: str
    extradata: bytes
    width: int
    height: int
    time_base: Fraction
    params: Mapping[str, Any] = field(default_factory=dict)
    packet_step: np.ndarray
    packet_pts: np.ndarray
    packet_dts: np.ndarray
    packet_key: np.ndarray
    extra: tuple[bytes, ...] = ()
    source_path: str = ""
    source_digest: str = ""

    def __post_init__(self) -> None:
        for name, dtype in (
            ("packet_step", np.int32),
            ("packet_pts", np.int64),
            ("packet_dts", np.int64),
            ("packet_key", np.bool_),
        ):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype))
        n = len(self.packet_step)
        if not (len(self.packet_pts) == len(self.packet_dts) == len(self.packet_key) == n):
            raise ValueError(
                f"stream index lists differ in length ({n} steps, {len(self.packet_pts)} pts, "
                f"{len(self.packet_dts)} dts, {len(self.packet_key)} keys); the streams row is damaged"
            )
        owned = self.packet_step[self.packet_step >= 0]
        if int((self.packet_step < 0).sum()) != len(self.extra):
            raise ValueError(
                f"stream index has {int((self.packet_step < 0).sum())} extra packets but holds "
                f"{len(self.extra)}; the streams row is damaged"
            )
        if not np.array_equal(np.sort(owned), np.arange(len(owned))):
            raise ValueError("stream index does not give every step exactly one packet; the streams row is damaged")
        rep = self.repeats
        if rep.any() and (bool((self.packet_key & rep).any()) or bool((self.packet_step[rep] < 0).any())):
            raise ValueError(
                "stream index has a repeat entry that is a keyframe or an extra; the streams row is damaged"
            )

    @cached_property
    def repeats(self) -> np.ndarray:
        """bool [P]: entries that repeat the frame of the entry before them (same pts; see the essay)."""
        out = np.zeros(len(self.packet_pts), dtype=bool)
        if len(out) > 1:
            out[1:] = self.packet_pts[1:] == self.packet_pts[:-1]
        return out

    @property
    def num_steps(self) -> int:
        return int((self.packet_step >= 0).sum())

    @property
    def index_bytes(self) -> int:
        """Bytes of index this stream adds to the packets (lists, extradata, extra packets)."""
        return int(
            self.packet_step.nbytes
            + self.packet_pts.nbytes
            + self.packet_dts.nbytes
            + self.packet_key.nbytes
            + len(self.extradata)
            + sum(map(len, self.extra))
        )

    @cached_property
    def step_packet(self) -> np.ndarray:
        """int64 [T]: decode index of each step's packet."""
        out = np.empty(self.num_steps, dtype=np.int64)
        mine = np.flatnonzero(self.packet_step >= 0)
        out[self.packet_step[mine]] = mine
        return out

    @cached_property
    def extra_of(self) -> np.ndarray:
        """int64 [P]: for an extra packet its position in `extra`, else -1."""
        out = np.full(len(self.packet_step), -1, dtype=np.int64)
        ex = np.flatnonzero(self.packet_step < 0)
        out[ex] = np.arange(len(ex))
        return out

    @cached_property
    def start_of(self) -> np.ndarray:
        """int64 [T]: decode index each step's decode starts at (see the essay)."""
        keys = np.flatnonzero(self.packet_key)
        d = self.step_packet
        if not len(keys):
            return np.zeros(len(d), dtype=np.int64)
        j = np.searchsorted(keys, d, side="right") - 1
        out = np.where(j >= 0, keys[np.maximum(j, 0)], 0).astype(np.int64)
        pts = self.packet_pts
        for t in np.flatnonzero((j >= 0) & (pts[out] > pts[d])).tolist():  # open-GOP leading pictures
            k = int(j[t])
            while k > 0 and pts[keys[k]] > pts[d[t]]:
                k -= 1
            out[t] = keys[k]
        return out

    def runs(self, steps: Sequence[int]) -> list[Run]:
        """The runs that yield `steps` (each step once), merged so no packet is fed twice."""
        if not len(steps):
            return []
        want = np.unique(np.asarray(steps, dtype=np.int64))
        if want[0] < 0 or want[-1] >= self.num_steps:
            raise KeyError(
                f"step {int(want[-1] if want[-1] >= 0 else want[0])} is outside the stream's {self.num_steps} steps"
            )
        starts, ends = self.start_of[want], self.step_packet[want]
        order = np.argsort(starts, kind="stable")
        runs: list[Run] = []
        cur_s, cur_e, cur_steps = int(starts[order[0]]), int(ends[order[0]]), [int(want[order[0]])]
        for i in order[1:].tolist():
            s, e = int(starts[i]), int(ends[i])
            if s <= cur_e + 1:
                cur_e = max(cur_e, e)
                cur_steps.append(int(want[i]))
            else:
                runs.append(Run(cur_s, cur_e, tuple(sorted(cur_steps))))
                cur_s, cur_e, cur_steps = s, e, [int(want[i])]
        runs.append(Run(cur_s, cur_e, tuple(sorted(cur_steps))))
        return runs

    def trimmed(self) -> StreamIndex:
        """This stream cut to the packets its frames need: from the first one's start to the last
        packet that carries a frame (packets outside it are dropped, extras inside it kept)."""
        lo, hi = int(self.start_of.min()), int(self.step_packet.max())
        keep = np.arange(lo, hi + 1)
        ex = self.extra_of[keep]
        return StreamIndex(
            codec=self.codec,
            decoder=self.decoder,
            extradata=self.extradata,
            width=self.width,
            height=self.height,
            time_base=self.time_base,
            params=self.params,
            packet_step=self.packet_step[keep],
            packet_pts=self.packet_pts[keep],
            packet_dts=self.packet_dts[keep],
            packet_key=self.packet_key[keep],
            extra=tuple(self.extra[int(j)] for j in ex[ex >= 0]),
            source_path=self.source_path,
            source_digest=self.source_digest,
        )

    def owned_steps(self, runs: Sequence[Run]) -> list[int]:
        """Steps whose media rows the runs feed (their packets; repeats feed none), ascending."""
        if not runs:
            return []
        idx = np.concatenate([np.arange(r.start, r.end + 1) for r in runs])
        idx = idx[~self.repeats[idx]]
        st = self.packet_step[idx]
        return np.unique(st[st >= 0]).tolist()

    # --- the streams row -------------------------------------------------------------------

    def to_row(self, episode_id: str, camera: str) -> dict[str, Any]:
        return {
            "episode_id": episode_id,
            "camera": camera,
            "codec": self.codec,
            "decoder": self.decoder,
            "extradata": bytes(self.extradata),
            "width": int(self.width),
            "height": int(self.height),
            "time_base_num": int(self.time_base.numerator),
            "time_base_den": int(self.time_base.denominator),
            "params": json.dumps(dict(self.params), sort_keys=True),
            "packet_step": self.packet_step.tolist(),
            "packet_pts": self.packet_pts.tolist(),
            "packet_dts": self.packet_dts.tolist(),
            "packet_key": self.packet_key.tolist(),
            "extra_packets": list(self.extra),
            "source_path": self.source_path,
            "source_digest": self.source_digest,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StreamIndex:
        return cls(
            codec=str(row["codec"]),
            decoder=str(row["decoder"]),
            extradata=bytes(row["extradata"] or b""),
            width=int(row["width"]),
            height=int(row["height"]),
            time_base=Fraction(int(row["time_base_num"]), int(row["time_base_den"])),
            params=dict(json.loads(row["params"] or "{}")),
            packet_step=row["packet_step"],
            packet_pts=row["packet_pts"],
            packet_dts=row["packet_dts"],
            packet_key=row["packet_key"],
            extra=tuple(bytes(b) for b in row["extra_packets"] or ()),
            source_path=str(row["source_path"]),
            source_digest=str(row["source_digest"]),
        )


# ------------------------------------------------------------------------------------- decoding

_local = threading.local()
_MAX_DECODERS = 8  # per thread: one per distinct stream configuration seen recently


def _decoder(index: StreamIndex) -> Any:
    """A decoder context for `index`'s configuration (one per thread, reused across runs)."""
    import av

    cache: dict[tuple[Any, ...], Any] = getattr(_local, "decoders", None) or {}
    _local.decoders = cache
    key = (
        index.decoder,
        bytes(index.extradata),
        index.width,
        index.height,
        json.dumps(dict(index.params), sort_keys=True),
    )
    ctx = cache.pop(key, None)
    if ctx is None:
        try:
            ctx = cast("av.VideoCodecContext", av.CodecContext.create(index.decoder, "r"))
        except (av.error.FFmpegError, ValueError) as e:
            raise RuntimeError(
                f"this PyAV has no {index.decoder!r} decoder, which the source decode used; install a "
                f"PyAV build with it (pip install av) to read these {index.codec} frames"
            ) from e
        if index.extradata:
            ctx.extradata = bytes(index.extradata)
        # One thread: readers run one per loader worker or Ray task, and PyAV's default (slice
        # threads, as many as cores) only adds synchronisation on single-slice camera streams:
        # 0.35 against 0.26 ms of CPU a 256 px GR00T frame, and no faster in wall time.
        ctx.thread_count, ctx.thread_type = 1, "NONE"
        ctx.width, ctx.height = index.width, index.height
        for name, value in index.params.items():
            if name in _COLOR_PARAMS:
                setattr(ctx, name, int(value))
        if len(cache) >= _MAX_DECODERS:
            cache.pop(next(iter(cache)))
    cache[key] = ctx  # most recently used last
    return ctx


def rgb(frame: Any, size: tuple[int, int] | None = None) -> np.ndarray:
    """RGB uint8 [H, W, 3] of a decoded `av.VideoFrame`: exactly `frame.to_ndarray(format="rgb24")`,
    or at `size` = (height, width) converted and scaled in one swscale pass (area averaging).

    Through one reformatter per thread: `VideoFrame.to_ndarray` builds a fresh swscale context
    for every frame, which costs more than decoding a small frame (measured on the GR00T data:
    decode plus conversion 0.65 ms a frame this way, 1.6 ms the other). Scaling in the same pass
    works on the decoder's YUV planes (chroma at a quarter of the pixels): 0.12 ms a 256 px GR00T
    frame to 64 px, against 0.41 ms for conversion then a PIL bilinear resize of the RGB, and
    closer to the 4 x 4 box average of the exact frame (39.7 dB against PIL's 31.0 dB).
    """
    rf = getattr(_local, "reformatter", None)
    if rf is None:
        from av.video.reformatter import VideoReformatter

        rf = _local.reformatter = VideoReformatter()
    if size is None or (frame.height, frame.width) == tuple(size):
        return np.asarray(rf.reformat(frame, format="rgb24").to_ndarray())
    return np.asarray(
        rf.reformat(frame, width=int(size[1]), height=int(size[0]), format="rgb24", interpolation="AREA").to_ndarray()
    )


def decode_runs(index: StreamIndex, runs: Sequence[Run], packet: Callable[[int], bytes]) -> Iterator[tuple[int, Any]]:
    """(step, av.VideoFrame) of every step the runs yield, run by run.

    Args:
        index: The stream.
        runs: From `index.runs`.
        packet: The bytes of the packet of a step (its media row's data).

    Raises:
        ValueError: the packets did not give a wanted frame (a damaged row or stream).
    """
    import av

    ctx = _decoder(index)
    skippable = index.decoder in _SKIP_SAFE
    pts, dts, key, step_of = index.packet_pts, index.packet_dts, index.packet_key, index.packet_step
    repeat = index.repeats
    for run in runs:
        want: dict[int, list[int]] = {}
        for s in run.steps:
            want.setdefault(int(pts[index.step_packet[s]]), []).append(s)
        ctx.flush_buffers()
        for i in range(run.start, run.end + 1):
            if repeat[i]:
                continue  # its frame is the one of the packet before it
            st = int(step_of[i])
            data = packet(st) if st >= 0 else index.extra[int(index.extra_of[i])]
            p = av.Packet(data)
            p.pts, p.dts = int(pts[i]), None if dts[i] == NOPTS else int(dts[i])
            if key[i]:
                p.is_keyframe = True
            if skippable:
                ctx.skip_frame = "DEFAULT" if int(pts[i]) in want else "NONREF"
            for frame in ctx.decode(p):
                for s in want.pop(frame.pts, ()) if frame.pts is not None else ():
                    yield s, frame
            if not want:
                break
        if want:
            if skippable:
                ctx.skip_frame = "DEFAULT"
            for frame in ctx.decode(None):
                for s in want.pop(frame.pts, ()) if frame.pts is not None else ():
                    yield s, frame
        if want:
            missing = sorted(s for steps in want.values() for s in steps)
            raise ValueError(
                f"{index.codec} packets {run.start}..{run.end} did not decode to the frames of steps {missing[:5]}; "
                "the media rows or the streams row are damaged: run `robolake check` and re-ingest the episode"
            )
