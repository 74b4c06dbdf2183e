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
