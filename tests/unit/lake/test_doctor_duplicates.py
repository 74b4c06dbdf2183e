"""The doctor's near-duplicate groups from stored quality alone: by actions, by frames or both, each
group led by its shortest episode, and the finding naming the episode it matched."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from robolake.lake.doctor import _near_duplicates


def _episode(i: int, n: int, actions: np.ndarray, frames: np.ndarray | None) -> dict[str, Any]:
    cams = {}
    if frames is not None:
        cams["front"] = {
            "fingerprint": {"steps": [0, n // 2, n - 1], "luma": base64.b64encode(frames.tobytes()).decode()}
        }
    return {
        "episode_id": f"e{i}",
        "embodiment": "arm",
        "task": "t",
        "num_steps": n,
        "quality": {
            "signature": actions.tolist(),
            "action_min": [-1.0, -1.0],
            "action_max": [1.0, 1.0],
            "cameras": cams,
        },
    }


def test_groups_by_actions_or_frames_led_by_the_shortest() -> None:
    rng = np.random.default_rng(0)
    acts = [rng.uniform(-1, 1, (8, 2)) for _ in range(6)]
    frames = [rng.integers(0, 255, (3, 64), dtype=np.uint8) for _ in range(6)]
    eps = [
        _episode(0, 100, acts[0], frames[0]),
        _episode(1, 99, acts[0] + 1e-4, frames[1]),  # e0's actions, other frames
        _episode(2, 100, acts[2], frames[0]),  # e0's frames, other actions
        _episode(3, 100, acts[0], frames[0]),  # both
        _episode(4, 100, acts[4], frames[4]),  # nothing in common
        _episode(5, 100, acts[5], None),  # no camera
    ]
    found = {f.episode_id: f for f in _near_duplicates(eps)}
    assert set(found) == {"e0", "e2", "e3"}  # e1 is the shortest: the group's lead
    assert {f.duplicate_of for f in found.values()} == {"e1"}
    assert found["e0"].detail.startswith("same actions as e1")
    assert found["e2"].detail.startswith("same frames (camera front) as e0") and "led by e1" in found["e2"].detail
    # e3 matches e0 by both and e1 by actions: it names the lead, which it matched directly
    assert found["e3"].detail.startswith("same actions as e1") and "led by" not in found["e3"].detail


def test_a_still_camera_makes_no_duplicates() -> None:
    rng = np.random.default_rng(1)
    still = np.full((3, 64), 90, np.uint8)
    eps = [_episode(i, 100, rng.uniform(-1, 1, (8, 2)), still) for i in range(4)]
    assert _near_duplicates(eps) == []


def _components(n: int, pairs) -> list[frozenset[int]]:
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for p in pairs:
        a, b = p[0], p[1]
        parent[root(a)] = root(b)
    groups: dict[int, set[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), set()).add(i)
    return sorted((frozenset(g) for g in groups.values() if len(g) > 1), key=min)


def test_copies_of_one_episode_are_searched_once() -> None:
    """Issue 37: 1,250 copies of a take made 780k pairs and `doctor` on the 100k benchmark lake took
    327 s (0.2 s on 1k). Copies are now paired with their first copy only, and the groups are
    those of every pair: here against a brute-force scan of all pairs."""
    from robolake.lake.stats.duplicates import action_pairs, actions_match, frame_pairs, frames_match

    rng = np.random.default_rng(2)
    takes = [rng.uniform(-1, 1, (8, 2)) for _ in range(5)]
    lumas = [rng.integers(0, 255, (3, 64), dtype=np.uint8) for _ in range(5)]
    n = 400
    which = rng.integers(0, 5, n)
    lengths = np.where(which == 4, rng.integers(90, 110, n), 100)  # take 4: copies at varied lengths
    sigs = [takes[w] + (1e-4 if i % 7 == 0 else 0.0) for i, w in enumerate(which)]
    fps = [{"front": (np.array([0, 50, 99]), lumas[w])} for w in which]
    scale = np.full(2, 2.0)
    pairs = action_pairs(sigs, scale, lengths)
    assert len(pairs) < 2 * n  # not the ~16k pairs among copies
    brute = [
        (a, b)
        for a in range(n)
        for b in range(a + 1, n)
        if actions_match(sigs[a], sigs[b], scale, lengths[a], lengths[b])
    ]
    assert len(brute) > 10_000 and _components(n, pairs) == _components(n, brute)
    assert all(actions_match(sigs[a], sigs[b], scale, lengths[a], lengths[b]) for a, b in pairs)
    fpairs = frame_pairs(fps, lengths)
    fbrute = [(a, b) for a in range(n) for b in range(a + 1, n) if frames_match(fps[a], fps[b], lengths[a], lengths[b])]
    assert len(fpairs) < 2 * n and _components(n, fpairs) == _components(n, fbrute)
