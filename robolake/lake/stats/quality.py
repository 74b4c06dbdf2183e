"""Per-episode quality, measured at ingest from what the load stage already holds in memory.

A dataset can be perfectly readable and still teach a policy nothing: joints that were never
read (a state frozen over the whole episode), six action columns that are one column copied,
a placeholder row of zeros, a robot idling for half the episode, a camera that stopped updating.
The load stage has every episode's state, action and timestamps as arrays and every camera's
encoded frames as bytes, so the checks here are pure numpy over those: no second read of the
media, nothing decoded, memory bounded by the episode that is already in memory.

Each check is one function returning a few JSON-able numbers; `episode_quality` gathers them into
the dict ingest stores under the episode metadata's `"quality"` key, which `--where`
(`quality.idle_fraction > 0.4`) and `robolake doctor` read. Thresholds come from the data's own
scale, never from units: a step is idle when no state or action dimension moves more than
`IDLE_MOTION` of that dimension's robust spread (2nd-98th percentile over the episode); an action
jump is a step difference beyond `JUMP_SIGMAS` robust sigmas (MAD) of the episode's own
differences *and* beyond `JUMP_SPREAD` of the dimension's full range (so a smooth trajectory's largest
step and a gripper that snaps shut are not jumps; dims with at most three distinct values, the
binary grippers, are left out).

Cameras: an image camera's frames are hashed (blake2b of the encoded bytes): identical consecutive
hashes are a frozen run. A recorded video's packets cannot be compared byte for byte (each
carries its own frame number), but a frame that repeats its reference is coded as an all-skip
slice of a few bytes whatever the resolution; `TINY_PACKET` bytes or less marks such a step and
a run of them (tolerating one ordinary packet in between, the B-frame pyramid's anchors) is a
frozen run. Black or overexposed frames, and each camera's frame fingerprint (`lake.stats.fingerprint`:
8x8 luma thumbnails of up to 8 frames, for the doctor's near-duplicates), come from the few frames
that decode cheaply: JPEGs at 1/8 scale (up to 32 sampled), a video's keyframes (intra pictures,
no reference chain; up to 32), other images' 8 fingerprint frames in full; the dark count is
scaled from that sample. What this trades: a perfectly static scene reads as a frozen camera,
which is why doctor reports runs, not single frames.

Cross-episode checks (near-duplicates, length outliers, out-of-range against the embodiment,
constant dims across an embodiment) need the whole lake and live in `robolake.lake.doctor`; this
module stores what they need per episode: the per-dimension min/max, the constant dims and a
small action signature with its coarse fingerprint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from robolake.lake.media.record import StreamIndex
from robolake.lake.stats.fingerprint import fingerprint_json, sample_cells, sample_steps

__all__ = [
    "QUALITY_NAMES",
    "QUALITY_VERSION",
    "action_jumps",
    "action_signature",
    "camera_quality",
    "constant_dims",
    "episode_quality",
    "frozen",
    "identical_dims",
    "idle",
    "idle_steps",
    "step_motion",
    "timestamp_gaps",
    "zero_rows",
]

QUALITY_VERSION = 2  # 2: per-camera frame fingerprints; dark frames from videos and every image codec
IDLE_MOTION = 0.005  # a step is idle when every dim moves less than this fraction of its spread
JUMP_SIGMAS = 12.0  # a jump: beyond this many robust sigmas of the episode's own differences ...
JUMP_SPREAD = 0.3  # ... and beyond this fraction of the dimension's spread, in one step
GAP_FACTOR = 2.0  # a timestamp gap: an interval longer than this many nominal intervals
TINY_PACKET = 24  # bytes: a video packet this small repeats its reference (an all-skip slice)
SIGNATURE_POINTS = 8  # time points of the action signature
DARK, BRIGHT = 8.0, 247.0  # mean 8-bit luma of a black / overexposed frame

# The numbers `--where` can name as quality.NAME (what each means, for the error that lists them).
QUALITY_NAMES = {
    "frozen_state": "every state dimension constant over the episode (true/false)",
    "frozen_action": "every action dimension constant over the episode (true/false)",
    "identical_dims": "state or action columns that duplicate another column",
    "zero_rows": "isolated all-zero state or action rows (runs of at most 2)",
    "idle_head": "idle steps at the start",
    "idle_tail": "idle steps at the end",
    "idle_fraction": "fraction of steps where nothing moves",
    "action_jumps": "action steps beyond the episode's robust jump threshold",
    "frozen_camera": "longest run of repeated frames over the cameras, in steps",
    "dark_frames": "black or overexposed frames, estimated from a sample of cheaply decoded frames",
    "timestamp_gaps": "intervals longer than 2 nominal intervals",
    "timestamp_jitter": "std of the step interval (gaps left out) over the nominal interval",
    "success_missing": "the source records no success (true/false)",
}
# check names (doctor, --fail-on) that --where also takes, for the quality number behind them
QUALITY_ALIASES = {"action_jump": "action_jumps", "timestamp_gap": "timestamp_gaps"}


def _spread(x: np.ndarray) -> np.ndarray:
    """float64 [D]: each column's robust spread (2nd-98th percentile), 0 for a constant column."""
    if len(x) == 0:
        return np.zeros(x.shape[1] if x.ndim == 2 else 0)
    lo, hi = np.percentile(x, [2.0, 98.0], axis=0)
    out = np.asarray(hi - lo, dtype=np.float64)
    flat = out <= 0  # a column constant on 96% of steps can still move: fall back to its full range
    if flat.any():
        out[flat] = (x.max(axis=0) - x.min(axis=0))[flat]
    return out


def constant_dims(x: np.ndarray) -> list[int]:
    """The columns of `x` [T, D] that never change (all of them for an episode of one step)."""
    if len(x) == 0:
        return []
    return [int(i) for i in np.flatnonzero((x == x[0]).all(axis=0))]


def frozen(x: np.ndarray) -> bool:
    """Every column of `x` [T, D] constant over at least two steps: a sensor that was not being read."""
    return len(x) > 1 and x.shape[1] > 0 and len(constant_dims(x)) == x.shape[1]


def identical_dims(x: np.ndarray) -> list[list[int]]:
    """Pairs [i, j] (i < j) of non-constant columns of `x` [T, D] equal at every step."""
    if len(x) < 2 or x.shape[1] < 2:
        return []
    moving = [i for i in range(x.shape[1]) if not (x[:, i] == x[0, i]).all()]
    first: dict[bytes, int] = {}
    pairs = []
    for i in moving:
        key = np.ascontiguousarray(x[:, i]).tobytes()
        if key in first:
            pairs.append([first[key], i])
        else:
            first[key] = i
    return pairs


def zero_rows(x: np.ndarray) -> list[int]:
    """Steps whose row of `x` [T, D>=2] is all zeros in a run of at most 2 (a placeholder row, e.g. the
    first action of a replay buffer); longer runs are a robot commanded to rest, not a fault."""
    if len(x) == 0 or x.shape[1] < 2:
        return []
    z = (x == 0).all(axis=1)
    if z.all():
        return []
    out: list[int] = []
    for start, end in _runs(z):
        if end - start <= 2:
            out += range(start, end)
    return out


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True in `mask`."""
    m = np.concatenate([[False], np.asarray(mask, bool), [False]])
    edges = np.flatnonzero(m[1:] != m[:-1])
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _motion(x: np.ndarray) -> np.ndarray:
    """float64 [T-1]: each step's largest move over the columns, in units of the column's spread."""
    if len(x) < 2 or x.shape[1] == 0:
        return np.zeros(max(len(x) - 1, 0))
    spread = _spread(x)
    moving = spread > 0
    if not moving.any():
        return np.zeros(len(x) - 1)
    d = np.abs(np.diff(x[:, moving].astype(np.float64), axis=0)) / spread[moving]
    return np.asarray(d.max(axis=1))


def step_motion(state: np.ndarray, action: np.ndarray) -> np.ndarray:
    """float64 [T]: each step's largest move of state or action, in units of the dimension's spread."""
    if len(state) < 2:
        return np.zeros(len(state))
    moved = np.maximum(_motion(state), _motion(action))  # [T-1]: step t -> t+1
    # step 0 counts its move to step 1 (the robot did not leave it); each later step how it arrived
    return np.concatenate([moved[:1], moved])


def idle_steps(state: np.ndarray, action: np.ndarray) -> np.ndarray:
    """bool [T]: the steps where state and action both move less than `IDLE_MOTION` of their spread."""
    if len(state) < 2:
        return np.zeros(len(state), dtype=bool)
    return step_motion(state, action) < IDLE_MOTION


def idle(state: np.ndarray, action: np.ndarray) -> dict[str, Any]:
    """Idle steps (`idle_steps`): how many lead and trail the episode, and their share.

    Returns:
        `idle_head` and `idle_tail` (steps), `idle_fraction` (of all steps).
    """
    n = len(state)
    if n < 2:
        return {"idle_head": 0, "idle_tail": 0, "idle_fraction": 0.0}
    steps = idle_steps(state, action)
    head = n if steps.all() else int(np.argmin(steps))
    tail = n if steps.all() else int(np.argmin(steps[::-1]))
    return {"idle_head": head, "idle_tail": tail, "idle_fraction": round(float(steps.mean()), 4)}


def action_jumps(action: np.ndarray) -> dict[str, Any]:
    """Action steps beyond `JUMP_SIGMAS` robust sigmas of the episode's own differences and beyond
    `JUMP_SPREAD` of the dim's full range (dims with at most 3 distinct values are left out).

    Returns:
        `action_jumps` (steps with a jump), `first_jump` (the step arrived at, or None), `jump_dim`.
    """
    none: dict[str, Any] = {"action_jumps": 0, "first_jump": None, "jump_dim": None}
    if len(action) < 4 or action.shape[1] == 0:
        return none
    a = action.astype(np.float64)
    spread = a.max(axis=0) - a.min(axis=0)  # the full range: a spike, or a fast start, is part of it
    d = np.diff(a, axis=0)
    med = np.median(d, axis=0)
    sigma = 1.4826 * np.median(np.abs(d - med), axis=0)
    sigma = np.maximum(sigma, 1e-3 * spread)
    discrete = np.array([len(np.unique(a[:, i])) <= 3 for i in range(a.shape[1])])
    big = (np.abs(d - med) > JUMP_SIGMAS * sigma) & (np.abs(d) > JUMP_SPREAD * spread) & ~discrete & (spread > 0)
    rows = big.any(axis=1)
    if not rows.any():
        return none
    first = int(np.argmax(rows))
    return {"action_jumps": int(rows.sum()), "first_jump": first + 1, "jump_dim": int(np.argmax(big[first]))}


def timestamp_gaps(timestamps: np.ndarray, fps: float) -> dict[str, Any]:
    """Intervals longer than `GAP_FACTOR` nominal intervals (1/fps, else the median), and the jitter.

    Returns:
        `timestamp_gaps`, `longest_gap_s`, `first_gap` (the step after it, or None) and
        `timestamp_jitter` (std of the intervals that are not gaps over the nominal one: one
        dropped-frame gap is a gap, not jitter).
    """
    ts = np.asarray(timestamps, dtype=np.float64)
    if len(ts) < 3:
        return {"timestamp_gaps": 0, "longest_gap_s": 0.0, "first_gap": None, "timestamp_jitter": 0.0}
    dt = np.diff(ts)
    nominal = 1.0 / fps if fps > 0 else float(np.median(dt))
    if nominal <= 0:
        nominal = float(np.median(dt[dt > 0])) if (dt > 0).any() else 1.0
    gap = dt > GAP_FACTOR * nominal
    return {
        "timestamp_gaps": int(gap.sum()),
        "longest_gap_s": round(float(dt.max()), 6) if gap.any() else 0.0,
        "first_gap": int(np.argmax(gap)) + 1 if gap.any() else None,
        "timestamp_jitter": round(float(np.std(dt[~gap]) / nominal), 4) if (~gap).sum() > 1 else 0.0,
    }


def _frozen_run(repeat: np.ndarray, tolerate: int) -> tuple[int, int]:
    """(length, start) of the longest run of steps that repeat their predecessor, allowing `tolerate`
    non-repeating steps inside a run (the first step of the run is the frame that is repeated)."""
    best, best_start = 0, 0
    runs = _runs(repeat)
    i = 0
    while i < len(runs):
        start, end = runs[i]
        j = i
        while j + 1 < len(runs) and runs[j + 1][0] - end <= tolerate:
            j += 1
            end = runs[j][1]
        if end - start + 1 > best:
            best, best_start = end - start + 1, max(start - 1, 0)
        i = j + 1
    return best, best_start


def _dark_bright(sampled: dict[int, np.ndarray], num_steps: int) -> tuple[int, int]:
    """(dark, bright) frames of the camera, estimated from the decoded sample's mean luma."""
    if not sampled:
        return 0, 0
    means = np.stack(list(sampled.values())).reshape(len(sampled), -1).mean(axis=1)
    scale = num_steps / len(means)
    return round(int((means <= DARK).sum()) * scale), round(int((means >= BRIGHT).sum()) * scale)


def camera_quality(
    images: Sequence[bytes], *, encoding: str, video: bool, stream: StreamIndex | None = None
) -> dict[str, Any]:
    """One camera's frozen runs, dark/bright frames and frame fingerprint from its encoded frames.

    Args:
        images: Per step, the encoded frame (an image) or the packet carrying it (a video).
        encoding: The frames' media-row encoding.
        video: The frames are a recorded video's packets (frozen = tiny all-skip packets).
        stream: A recorded video's stream, to decode its keyframes (without it a video gets no
            dark count and no fingerprint).

    Returns:
        `frozen_run` (steps), `frozen_start` (step), `dark_frames`, `bright_frames`, and
        `fingerprint` (`lake.stats.fingerprint`; absent where fewer than two frames decode).
    """
    n = len(images)
    if n < 2:
        repeat = np.zeros(n, dtype=bool)
    elif video:
        repeat = np.array([len(p) <= TINY_PACKET for p in images], dtype=bool)
        repeat[0] = False
    else:
        digests = [hashlib.blake2b(b, digest_size=16).digest() for b in images]
        repeat = np.array([False] + [digests[i] == digests[i - 1] for i in range(1, n)], dtype=bool)
    run, start = _frozen_run(repeat, tolerate=1 if video else 0)
    sampled: dict[int, np.ndarray] = {}
    fp_steps = np.zeros(0, dtype=np.int64)
    if n and (stream is not None or not video):
        fp_steps, luma_steps = sample_steps(n, encoding, stream if video else None)
        sampled = sample_cells(images, encoding=encoding, stream=stream if video else None, steps=luma_steps)
    dark, bright = _dark_bright(sampled, n)
    out: dict[str, Any] = {
        "frozen_run": run if run > 1 else 0,
        "frozen_start": start,
        "dark_frames": dark,
        "bright_frames": bright,
    }
    fp = fingerprint_json(sampled, fp_steps)
    if fp is not None:
        out["fingerprint"] = fp
    return out


def action_signature(action: np.ndarray) -> list[list[float]]:
    """The action at `SIGNATURE_POINTS` evenly spaced steps [P, Da], 4 significant digits: two
    episodes with the same actions (within tolerance) have close signatures."""
    if len(action) == 0:
        return []
    idx = np.linspace(0, len(action) - 1, SIGNATURE_POINTS).round().astype(int)
    return [list(row) for row in _sig(action[idx]).tolist()]


def _sig(x: np.ndarray, digits: int = 4) -> np.ndarray:
    """float64 array of `x` rounded to `digits` significant digits (0 for 0 and non-finite values).

    Vectorised: the scale is an exact power of ten, divided by (or multiplied with) as an integer
    so that the result is the double nearest the decimal, which JSON writes in its short form.
    """
    v = np.asarray(x, dtype=np.float64)
    ok = np.isfinite(v) & (v != 0)
    out = np.zeros_like(v)
    if not ok.any():
        return out
    vals = v[ok]
    k = (digits - 1 - np.floor(np.log10(np.abs(vals)))).astype(np.int64)  # decimals to keep
    up = k >= 0
    res = np.empty_like(vals)
    p = 10.0 ** np.abs(k)  # exact up to 1e22
    res[up] = np.round(vals[up] * p[up]) / p[up]
    res[~up] = np.round(vals[~up] / p[~up]) * p[~up]
    out[ok] = res
    return out


def _fingerprint(signature: list[list[float]], num_steps: int) -> str:
    coarse = np.round(np.asarray(signature, dtype=np.float64), 2) + 0.0  # -0.0 -> 0.0
    h = hashlib.blake2b(coarse.tobytes() + num_steps.to_bytes(8, "little"), digest_size=8)
    return h.hexdigest()


def episode_quality(
    *,
    state: np.ndarray,
    action: np.ndarray,
    timestamps: np.ndarray,
    fps: float,
    success: bool | None,
    cameras: Sequence[tuple[str, Sequence[bytes], str, StreamIndex | bool]] = (),
) -> dict[str, Any]:
    """The quality of one episode, JSON-able (stored as the metadata's `"quality"`).

    Args:
        state: [T, Ds].
        action: [T, Da].
        timestamps: [T] seconds.
        fps: The episode's nominal rate.
        success: The episode's success, None when the source records none.
        cameras: Per camera: (name, encoded frames or packets per step, encoding, video), where
            video is a recorded video's `StreamIndex` (its keyframes are decoded for the dark count
            and the fingerprint), True for a video's packets without it, False for images.

    Returns:
        The numbers of `QUALITY_NAMES`, plus what the cross-episode checks and the findings'
        reasons need: `constant_state`/`constant_action` (dims), `identical_pairs`,
        `zero_row_steps`, `first_jump`, `jump_dim`, `first_gap`, `longest_gap_s`, `cameras`
        (per camera, with its frame `fingerprint`), `state_min`/`state_max`/`action_min`/`action_max`, `signature`,
        `fingerprint` and `v` (this module's `QUALITY_VERSION`).
    """
    state = np.asarray(state)
    action = np.asarray(action)
    pairs = [["state", *p] for p in identical_dims(state)] + [["action", *p] for p in identical_dims(action)]
    zeros = sorted(set(zero_rows(state)) | set(zero_rows(action)))
    cams = {
        name: camera_quality(
            images,
            encoding=enc,
            video=video is not False,
            stream=video if isinstance(video, StreamIndex) else None,
        )
        for name, images, enc, video in cameras
    }
    signature = action_signature(action)
    out: dict[str, Any] = {
        "v": QUALITY_VERSION,
        "frozen_state": frozen(state),
        "frozen_action": frozen(action),
        "constant_state": constant_dims(state),
        "constant_action": constant_dims(action),
        "identical_dims": len(pairs),
        "identical_pairs": pairs[:16],
        "zero_rows": len(zeros),
        "zero_row_steps": zeros[:16],
        **idle(state, action),
        **action_jumps(action),
        **timestamp_gaps(timestamps, fps),
        "frozen_camera": max((c["frozen_run"] for c in cams.values()), default=0),
        "dark_frames": sum(c["dark_frames"] + c["bright_frames"] for c in cams.values()),
        "cameras": cams,
        "success_missing": success is None,
        "signature": signature,
        "fingerprint": _fingerprint(signature, len(action)),
    }
    for name, x in (("state", state), ("action", action)):
        out[f"{name}_min"] = _sig(x.min(axis=0)).tolist() if len(x) else []
        out[f"{name}_max"] = _sig(x.max(axis=0)).tolist() if len(x) else []
    return out
