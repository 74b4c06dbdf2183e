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
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robolake.lake.stats.fingerprint import MATCH_LUMA, informative

__all__ = ["ACTION_TOLERANCE", "LENGTH_TOLERANCE", "DuplicatePair", "action_pairs", "close_pairs", "frame_pairs"]

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
    x = np.stack([np.asarray(signatures[k], dtype=np.float64) / np.maximum(scale, 1e-9) for k in idx])
    x = x.reshape(len(idx), -1)
    keep = np.asarray(idx)
    out: list[tuple[int, int]] = []
    for i, js in close_pairs(x, lengths[keep], ACTION_TOLERANCE):
        out += _pairs(i, js, keep)
    return sorted(out)


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
    for cam in cameras:
        by_k: dict[int, list[int]] = {}
        for e, fp in enumerate(fingerprints):
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
