"""Frame fingerprints (lake.stats.fingerprint) and the near-duplicate search (lake.stats.duplicates):
what each camera codec yields, that a re-encode still matches and another take does not, and that
the sorted search finds exactly the pairs an all-pairs scan finds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake.lake.stats.duplicates import (
    ACTION_TOLERANCE,
    action_pairs,
    close_pairs,
    frame_pairs,
)
from robolake.lake.stats.fingerprint import FRAMES, GRID, MATCH_LUMA, informative, parse_fingerprint, thumbnail
from robolake.lake.stats.quality import camera_quality
from robolake.testing.images import jpeg, png


def _scene(n: int, seed: int, size: int = 64) -> np.ndarray:
    """uint8 [n, size, size, 3]: a textured background with a bright square that moves across it."""
    rng = np.random.default_rng(seed)
    bg = rng.integers(40, 120, (size // 8, size // 8, 3), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    out = np.repeat(bg[None], n, axis=0)
    for t in range(n):
        x = int((size - 16) * t / max(n - 1, 1))
        y = int(rng.integers(0, size - 16))
        out[t, y : y + 16, x : x + 16] = 230
    return out


def _fp(q: dict) -> tuple[np.ndarray, np.ndarray]:
    parsed = parse_fingerprint(q["fingerprint"])
    assert parsed is not None
    return parsed


def test_thumbnail_is_the_mean_of_each_cell() -> None:
    img = np.zeros((64, 48), np.uint8)
    img[:32] = 200  # the top half
    t = thumbnail(img)
    assert t.shape == (GRID, GRID) and t[: GRID // 2].min() == 200 and t[GRID // 2 :].max() == 0
    assert thumbnail(np.full((3, 5), 7, np.uint8)).tolist() == [[7] * GRID] * GRID  # smaller than the grid
    assert thumbnail(np.full((61, 70), 9.0)).max() == 9  # not a multiple of the grid: cropped, not resampled


def test_jpeg_fingerprint_survives_a_reencode_and_tells_takes_apart() -> None:
    a = _scene(40, seed=1)
    qa = camera_quality([jpeg(f, quality=90) for f in a], encoding="jpeg", video=False)
    qa_low = camera_quality([jpeg(f, quality=40) for f in a], encoding="jpeg", video=False)
    qb = camera_quality([jpeg(f, quality=90) for f in _scene(40, seed=2)], encoding="jpeg", video=False)
    (sa, la), (sl, ll), (_, lb) = _fp(qa), _fp(qa_low), _fp(qb)
    assert len(sa) == FRAMES and sa[0] == 0 and sa[-1] == 39 and (sa == sl).all()
    assert np.abs(la.astype(int) - ll.astype(int)).max() <= MATCH_LUMA
    assert np.abs(la.astype(int) - lb.astype(int)).max() > MATCH_LUMA
    assert informative(la)


def test_png_frames_fingerprint_and_dark_count() -> None:
    frames = _scene(20, seed=3)
    frames[5:15] = 0  # half the frames black
    q = camera_quality([png(f) for f in frames], encoding="png", video=False)
    assert len(_fp(q)[0]) == FRAMES
    assert 6 <= q["dark_frames"] <= 14  # estimated from the fingerprint's frames
    clean = camera_quality([png(f) for f in _scene(20, seed=3)], encoding="png", video=False)
    assert clean["dark_frames"] == 0


def test_undecodable_frames_give_no_fingerprint() -> None:
    q = camera_quality([bytes([i]) * 50 for i in range(30)], encoding="png", video=False)
    assert "fingerprint" not in q and q["dark_frames"] == 0


def test_video_fingerprint_from_keyframes_only(tmp_path: Path) -> None:
    from robolake.lake.sources.video import file_digest, read_record
    from robolake.writers.video import VideoOptions, encode_video

    frames = _scene(48, seed=4)
    frames[30:40] = 0
    path = tmp_path / "cam.mp4"
    encode_video(path, [frames], fps=10, options=VideoOptions(gop=4))
    rec = read_record(str(path), start_s=None, end_s=None, fps=10, source_path=str(path), digest=file_digest(str(path)))
    q = camera_quality(rec.images, encoding=rec.encoding, video=True, stream=rec.stream)
    steps, luma = _fp(q)
    keys = set(np.flatnonzero(rec.stream.packet_key[rec.stream.step_packet]).tolist())
    assert len(steps) == FRAMES and set(steps.tolist()) <= keys  # intra pictures only
    assert q["dark_frames"] > 0  # the black run, seen on its keyframes
    as_jpeg = _fp(camera_quality([jpeg(f, quality=90) for f in frames], encoding="jpeg", video=False))
    # the same pictures through another codec give the same thumbnails at the same steps
    at = {int(s): row for s, row in zip(as_jpeg[0], as_jpeg[1], strict=True)}
    common = [k for k, s in enumerate(steps.tolist()) if s in at]
    assert common and all(
        np.abs(luma[k].astype(int) - at[int(steps[k])].astype(int)).max() <= MATCH_LUMA for k in common
    )
    # without its stream a video's packets give no fingerprint (nothing decoded)
    assert "fingerprint" not in camera_quality(rec.images, encoding=rec.encoding, video=True)


def _brute(x: np.ndarray, lengths: np.ndarray, tol: float) -> set[tuple[int, int]]:
    out = set()
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            lo = min(lengths[i], lengths[j])
            if abs(lengths[i] - lengths[j]) <= 0.02 * lo + 1 and np.abs(x[i] - x[j]).max() <= tol:
                out.add((i, j))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_close_pairs_finds_what_all_pairs_finds(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(300, 24))
    lengths = rng.integers(50, 60, 300)
    for a, b in rng.integers(0, 300, (25, 2)):  # plant near copies, some at a length too far apart
        x[b] = x[a] + rng.uniform(-0.04, 0.04, 24)
        lengths[b] = lengths[a] + int(rng.integers(0, 3))
    given = [(min(i, j), max(i, j)) for i, js in close_pairs(x, lengths, 0.05) for j in js.tolist()]
    got = set(given)
    assert got == _brute(x, lengths, 0.05) and len(got) >= 10 and len(given) == len(got)  # each pair once


def test_action_pairs_scale_by_the_dims_range() -> None:
    rng = np.random.default_rng(0)
    sigs = [rng.normal(size=(8, 3)) * [1.0, 10.0, 100.0] for _ in range(6)]
    sigs[4] = sigs[1] + np.array([0.5, 5.0, 50.0]) * ACTION_TOLERANCE  # half the tolerance on each dim
    sigs[5] = sigs[2] + np.array([0.0, 0.0, 3.0]) * ACTION_TOLERANCE * 100  # 3x the tolerance on one dim
    scale = np.array([1.0, 10.0, 100.0])
    assert action_pairs([*sigs, None], scale, np.full(7, 40)) == [(1, 4)]


def _cam(seed: int, n: int = 40, still: bool = False) -> tuple[np.ndarray, np.ndarray]:
    frames = _scene(n, seed)
    if still:
        frames[:] = frames[0]
    return _fp(camera_quality([jpeg(f, quality=90) for f in frames], encoding="jpeg", video=False))


def test_frame_pairs_need_a_changing_view_and_aligned_steps() -> None:
    a = {"front": _cam(1), "wrist": _cam(7)}
    dup = {"front": _cam(1), "wrist": _cam(7)}
    other = {"front": _cam(2), "wrist": _cam(8)}
    half = {"front": _cam(1), "wrist": _cam(9)}  # one camera the same, the other not: a different take
    still_a, still_b = {"front": _cam(3, still=True)}, {"front": _cam(3, still=True)}
    steps, luma = _cam(1)
    shifted = {"front": (steps + 10, luma), "wrist": _cam(7)}  # the same pictures, at other steps
    eps = [a, dup, other, half, still_a, still_b, shifted]
    assert frame_pairs(eps, np.full(len(eps), 40)) == [(0, 1, "front")]
    assert frame_pairs([a, dup], np.array([40, 60])) == []  # lengths too far apart
