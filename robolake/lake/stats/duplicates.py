"""Near-duplicate episodes across a lake: pairs whose actions, or whose frames, agree within tolerance.

Ingest keys episodes by content hash, so the same bytes never land twice; what lands twice is
the same take written differently: actions re-labelled or offset, frames re-encoded, a copy cut a
step shorter. Two signals find it, and either one is enough:

- actions: the action signature (the actions at 8 evenly spaced steps, `lake.stats.quality`),
  divided by each dimension's typical range in the embodiment, within `ACTION_TOLERANCE` in every
  value;
- frames: every camera the two share has a fingerprint (`lake.stats.fingerprint`), the frames
  were taken at aligned steps, at least one camera's pictures change over the episode (a still
  view tells nothing apart), and every cell of every aligned thumbnail is within `MATCH_LUMA`.

Both are at lengths within `LENGTH_TOLERANCE` (and one step).

Why not all pairs: a 10,000-episode embodiment has 50 million. Both tests bound the largest
difference of any coordinate (a max-norm ball), so a pair within tolerance is within it in every
single coordinate. `close_pairs` sorts the episodes by the coordinate that varies most across them
and compares each episode only with the run of later ones whose value there is within tolerance,
screening that run on the next most varied coordinates before the full comparison. It finds every
pair the all-pairs scan finds (no hashing, no bucket edges) in about n log n plus the pairs near
each episode on that coordinate; a lake of true duplicates is quadratic in its duplicate groups
only.

That is still quadratic where many episodes are the very same: 1,250 copies of one take, as a
lake that ingested one folder over and over has, are 780k pairs, and the 100k-episode benchmark
lake (its videos copied from a few clips) took 327 s in `doctor` against 0.2 s for 1k. So episodes
whose inputs are identical (the same length and the same signature, or the same fingerprints of
every camera) are searched once, as one representative: the pairs returned connect every group
the all-pairs scan connects, with each copy paired with the first of its copies instead of with
every other copy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robolake.lake.stats.fingerprint import MATCH_LUMA, informative

__all__ = [
    "ACTION_TOLERANCE",
    "LENGTH_TOLERANCE",
    "DuplicatePair",
    "action_pairs",
    "actions_match",
    "close_pairs",
    "frame_pairs",
    "frames_match",
]

ACTION_TOLERANCE = 0.01  # of each action dim's typical range in the embodiment
LENGTH_TOLERANCE = 0.02  # of the shorter episode's length (plus one step)
_SCREEN = 8  # coordinates compared before the full vector


@dataclass(frozen=True)
class DuplicatePair:
    """Episodes `a` and `b` (indices into the caller's list, a < b by length then position) agree.

    Attributes:
        a: The first episode.
        b: The second.
        by: "actions" or "frames".
        camera: For frames, the camera that matched (the first in name order).
    """

    a: int
    b: int
    by: str
    camera: str | None = None


def _lengths_close(n: np.ndarray, i: int, cand: np.ndarray) -> np.ndarray:
    lo = np.minimum(n[cand], n[i])
    return np.abs(n[cand] - n[i]) <= LENGTH_TOLERANCE * lo + 1


def close_pairs(x: np.ndarray, lengths: np.ndarray, tol: float) -> Iterator[tuple[int, np.ndarray]]:
    """Every pair of rows within `tol` of each other in every coordinate, at lengths within
    `LENGTH_TOLERANCE`: per row i, the rows j it pairs with (each pair given once, from one side).

    Args:
        x: float [N, F], one row per episode.
        lengths: int [N], steps per episode.
        tol: The largest difference allowed in any coordinate.

    Yields:
        (i, js): js int64 [M] >= 1, the rows paired with i that were not given before.
    """
    n = len(x)
    if n < 2 or x.shape[1] == 0:
        return
    spread = x.std(axis=0)
    cols = np.argsort(-spread, kind="stable")[:_SCREEN]
    order = np.argsort(x[:, cols[0]], kind="stable")
    keys = x[order, cols[0]]
    his = np.searchsorted(keys, keys + tol, side="right")
    screen = x[:, cols]
    for p in range(n - 1):
        hi = int(his[p])
        if hi <= p + 1:
            continue
        i = int(order[p])
        cand = order[p + 1 : hi]
        cand = cand[_lengths_close(lengths, i, cand)]
        if len(cand):
            cand = cand[(np.abs(screen[cand] - screen[i]) <= tol).all(axis=1)]
        if len(cand):
            cand = cand[(np.abs(x[cand] - x[i]) <= tol).all(axis=1)]
        if len(cand):
            yield i, cand


def _pairs(i: int, js: np.ndarray, keep: np.ndarray) -> list[tuple[int, int]]:
    a = int(keep[i])
    return [(a, b) if a < b else (b, a) for b in keep[js].tolist()]


def action_pairs(
    signatures: Sequence[np.ndarray | None], scale: np.ndarray, lengths: np.ndarray
) -> list[tuple[int, int]]:
    """Pairs (a, b), a < b, of episodes whose action signatures [P, D] agree within
    `ACTION_TOLERANCE` of `scale` [D]. Episodes without a signature of the common shape are left out.
    """
    shapes = [s.shape for s in signatures if s is not None and s.ndim == 2 and s.size]
    if not shapes:
        return []
    shape = max(set(shapes), key=shapes.count)
    idx = [k for k, s in enumerate(signatures) if s is not None and s.shape == shape]
    if len(idx) < 2 or len(scale) != shape[1]:
        return []
    reps, copies = _copies([_key(int(lengths[k]), np.asarray(signatures[k], dtype=np.float64)) for k in idx])
    x = np.stack([np.asarray(signatures[idx[r]], dtype=np.float64) / np.maximum(scale, 1e-9) for r in reps])
    x = x.reshape(len(reps), -1)
    keep = np.asarray([idx[r] for r in reps])
    out: list[tuple[int, int]] = [(idx[a], idx[b]) for a, b in copies]
    for i, js in close_pairs(x, lengths[keep], ACTION_TOLERANCE):
        out += _pairs(i, js, keep)
    return sorted(out)


def _key(length: int, *arrays: np.ndarray) -> bytes:
    return b"".join([length.to_bytes(8, "little", signed=True)] + [a.tobytes() + str(a.shape).encode() for a in arrays])


def _copies(keys: Sequence[bytes]) -> tuple[list[int], list[tuple[int, int]]]:
    """(the first position of each distinct key, (first, position) of every later copy of it)."""
    first: dict[bytes, int] = {}
    copies: list[tuple[int, int]] = []
    for i, k in enumerate(keys):
        j = first.setdefault(k, i)
        if j != i:
            copies.append((j, i))
    return sorted(first.values()), copies


def frame_pairs(
    fingerprints: Sequence[Mapping[str, tuple[np.ndarray, np.ndarray]]], lengths: np.ndarray
) -> list[tuple[int, int, str]]:
    """Pairs (a, b, the camera that matched), a < b, of episodes whose frames agree.

    Args:
        fingerprints: Per episode, camera -> (steps [K], luma [K, 64]) (`parse_fingerprint`).
        lengths: Steps per episode.
    """
    found: dict[tuple[int, int], str] = {}
    cameras = sorted({c for fp in fingerprints for c in fp})
    reps, copies = _copies(
        [
            _key(int(lengths[e]), *(a for cam in sorted(fp) for a in (np.frombuffer(cam.encode(), np.uint8), *fp[cam])))
            for e, fp in enumerate(fingerprints)
        ]
    )
    for a, b in copies:  # the same fingerprints: a pair by the first camera whose pictures change
        cam = next((c for c in sorted(fingerprints[a]) if informative(fingerprints[a][c][1])), None)
        if cam is not None:
            found[(a, b)] = cam
    for cam in cameras:
        by_k: dict[int, list[int]] = {}
        for e in reps:
            fp = fingerprints[e]
            if cam in fp and informative(fp[cam][1]):
                by_k.setdefault(len(fp[cam][0]), []).append(e)
        for members in by_k.values():
            if len(members) < 2:
                continue
            keep = np.asarray(members)
            x = np.stack([fingerprints[e][cam][1].ravel() for e in members]).astype(np.float64)
            steps = np.stack([fingerprints[e][cam][0] for e in members])
            n = lengths[keep]
            for i, js in close_pairs(x, n, MATCH_LUMA):
                slack = LENGTH_TOLERANCE * np.maximum(n[js], n[i]) + 2
                js = js[(np.abs(steps[js] - steps[i]) <= slack[:, None]).all(axis=1)]
                for a, b in _pairs(i, js, keep):
                    if (a, b) in found:
                        continue
                    alone = len(fingerprints[a]) == 1 and len(fingerprints[b]) == 1
                    if alone or _agree(fingerprints[a], fingerprints[b], lengths[a], lengths[b]):
                        found[(a, b)] = cam
    return [(a, b, cam) for (a, b), cam in sorted(found.items())]


def _agree(
    fa: Mapping[str, tuple[np.ndarray, np.ndarray]], fb: Mapping[str, tuple[np.ndarray, np.ndarray]], na: int, nb: int
) -> bool:
    """Every camera both have: frames at aligned steps, and within `MATCH_LUMA` where both say anything."""
    slack = LENGTH_TOLERANCE * max(na, nb) + 2
    for cam in set(fa) & set(fb):
        (sa, la), (sb, lb) = fa[cam], fb[cam]
        if len(sa) != len(sb) or np.abs(sa - sb).max() > slack:
            return False
        if np.abs(la.astype(np.int16) - lb.astype(np.int16)).max() > MATCH_LUMA:
            return False
    return True


def _close(na: int, nb: int) -> bool:
    return abs(na - nb) <= LENGTH_TOLERANCE * min(na, nb) + 1


def actions_match(a: np.ndarray | None, b: np.ndarray | None, scale: np.ndarray, na: int, nb: int) -> bool:
    """Whether two episodes' action signatures agree as `action_pairs` pairs them (one pair)."""
    if a is None or b is None or a.ndim != 2 or a.shape != b.shape or len(scale) != a.shape[1] or not _close(na, nb):
        return False
    return bool((np.abs(a - b) / np.maximum(scale, 1e-9) <= ACTION_TOLERANCE).all())


def frames_match(
    fa: Mapping[str, tuple[np.ndarray, np.ndarray]], fb: Mapping[str, tuple[np.ndarray, np.ndarray]], na: int, nb: int
) -> str | None:
    """The camera by which `frame_pairs` pairs two episodes (the first in name order), or None."""
    if not _close(na, nb):
        return None
    for cam in sorted(set(fa) & set(fb)):
        (sa, la), (sb, lb) = fa[cam], fb[cam]
        if len(sa) != len(sb) or not (informative(la) and informative(lb)):
            continue
        if np.abs(la.astype(np.float64) - lb.astype(np.float64)).max() > MATCH_LUMA:
            continue
        if np.abs(sa - sb).max() > LENGTH_TOLERANCE * max(na, nb) + 2:
            continue
        if (len(fa) == 1 and len(fb) == 1) or _agree(fa, fb, na, nb):
            return cam
    return None
