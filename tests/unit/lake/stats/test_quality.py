"""Each per-episode quality check on an episode with its fault planted, and on one without."""

from __future__ import annotations

import numpy as np
import pytest

from robolake.lake.stats.quality import (
    QUALITY_NAMES,
    action_jumps,
    camera_quality,
    episode_quality,
    frozen,
    identical_dims,
    idle,
    timestamp_gaps,
    zero_rows,
)


def _clean(n: int = 120, d: int = 7, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, n)[:, None]
    phase = rng.uniform(0, np.pi, d)[None, :]
    state = (np.sin(t + phase) + 0.1 * np.sin(3 * t + phase)).astype(np.float32)
    return state, np.roll(state, -1, axis=0) + np.float32(0.01)


def test_clean_episode_has_no_faults() -> None:
    state, action = _clean()
    q = episode_quality(state=state[:-1], action=action[:-1], timestamps=np.arange(119) / 20, fps=20, success=True)
    assert not q["frozen_state"] and not q["frozen_action"]
    assert q["identical_dims"] == q["zero_rows"] == q["action_jumps"] == q["timestamp_gaps"] == 0
    assert q["idle_head"] == q["idle_tail"] == 0 and q["idle_fraction"] < 0.05
    assert not q["success_missing"] and q["frozen_camera"] == 0
    assert set(QUALITY_NAMES) <= set(q)


def test_frozen() -> None:
    state, _ = _clean()
    assert not frozen(state)
    assert frozen(np.repeat(state[:1], len(state), axis=0))


def test_identical_dims() -> None:
    _, action = _clean()
    assert identical_dims(action) == []
    dup = action.copy()
    dup[:, 3] = dup[:, 1]
    assert identical_dims(dup) == [[1, 3]]


def test_zero_rows() -> None:
    _, action = _clean()
    assert zero_rows(action) == []
    bad = action.copy()
    bad[0] = 0
    assert zero_rows(bad) == [0]
    rest = action.copy()
    rest[10:40] = 0  # a long rest is a command, not a placeholder row
    assert zero_rows(rest) == []


def test_idle_head_and_tail() -> None:
    state, action = _clean()
    s = np.concatenate([np.repeat(state[:1], 30, 0), state, np.repeat(state[-1:], 20, 0)])
    a = np.concatenate([np.repeat(action[:1], 30, 0), action, np.repeat(action[-1:], 20, 0)])
    q = idle(s, a)
    assert 29 <= q["idle_head"] <= 31 and 19 <= q["idle_tail"] <= 21
    assert q["idle_fraction"] == pytest.approx(50 / len(s), abs=0.02)
    assert idle(state, action)["idle_head"] == 0


def test_action_jump() -> None:
    _, action = _clean()
    assert action_jumps(action)["action_jumps"] == 0
    bad = action.copy()
    bad[60, 2] += 5.0
    q = action_jumps(bad)
    assert q["action_jumps"] >= 1 and q["first_jump"] == 60 and q["jump_dim"] == 2


def test_timestamp_gap() -> None:
    ts = np.arange(100) / 20.0
    assert timestamp_gaps(ts, 20.0)["timestamp_gaps"] == 0
    gap = ts.copy()
    gap[50:] += 1.0
    q = timestamp_gaps(gap, 20.0)
    assert q["timestamp_gaps"] == 1 and q["first_gap"] == 50 and q["longest_gap_s"] == pytest.approx(1.05)


def test_one_gap_is_not_jitter() -> None:
    ts = np.arange(100) / 20.0
    ts[50:] += 0.5  # ten frames dropped once
    assert timestamp_gaps(ts, 20.0)["timestamp_jitter"] < 0.01
    shaky = np.arange(100) / 20.0 + np.random.default_rng(0).uniform(-0.015, 0.015, 100)  # std of dt ~ 0.245 / 20
    assert 0.2 < timestamp_gaps(shaky, 20.0)["timestamp_jitter"] < 0.3


def test_frozen_camera_images_and_video_packets() -> None:
    frames = [bytes([i % 256]) * 50 for i in range(40)]
    assert camera_quality(frames, encoding="png", video=False)["frozen_run"] == 0
    stuck = frames[:10] + [frames[10]] * 15 + frames[25:]
    q = camera_quality(stuck, encoding="png", video=False)
    assert q["frozen_run"] == 15 and q["frozen_start"] == 10
    packets = [b"x" * 80] * 10 + [b"x" * 12, b"x" * 12, b"x" * 90, b"x" * 12] * 5 + [b"x" * 80] * 10
    assert camera_quality(packets, encoding="h264", video=True)["frozen_run"] >= 20
    assert camera_quality([b"x" * 80] * 40, encoding="h264", video=True)["frozen_run"] == 0


def test_black_jpeg_frames() -> None:
    import io

    from PIL import Image

    def jpeg(value: int) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(np.full((64, 64, 3), value, np.uint8)).save(buf, format="JPEG")
        return buf.getvalue()

    assert camera_quality([jpeg(120)] * 4, encoding="jpeg", video=False)["dark_frames"] == 0
    assert camera_quality([jpeg(0)] * 4, encoding="jpeg", video=False)["dark_frames"] == 4


def test_success_missing_and_signature() -> None:
    state, action = _clean()
    ts = np.arange(len(state)) / 20
    a = episode_quality(state=state, action=action, timestamps=ts, fps=20, success=None)
    b = episode_quality(state=state, action=action + np.float32(1e-5), timestamps=ts, fps=20, success=True)
    assert a["success_missing"] and not b["success_missing"]
    assert np.allclose(a["signature"], b["signature"], atol=1e-3)
