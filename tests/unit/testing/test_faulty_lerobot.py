"""The planted-fault LeRobot writer: every fault in the manifest is really in the written data, and
the clean episodes carry none of them."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from robolake.testing.faulty_lerobot import CAMERA, FAULTS, GAP_S, FaultySpec, write_faulty_lerobot


def _columns(root: Path) -> dict[int, dict[str, np.ndarray]]:
    """Per episode_index: state, action and timestamp as read back from the parquet files."""
    out: dict[int, dict[str, np.ndarray]] = {}
    for f in sorted((root / "data").rglob("*.parquet")):
        t = pq.read_table(f)
        ep = t["episode_index"].to_numpy()
        for i in np.unique(ep):
            rows = t.filter(t["episode_index"] == i)
            out[int(i)] = {
                "state": np.stack(rows["observation.state"].to_numpy(zero_copy_only=False)),
                "action": np.stack(rows["action"].to_numpy(zero_copy_only=False)),
                "timestamp": rows["timestamp"].to_numpy(),
            }
    return out


def _frames(root: Path, lengths: list[int]) -> list[np.ndarray]:
    """Decoded camera frames per episode (v3.0: episodes follow each other in one mp4)."""
    decoded = []
    for f in sorted((root / "videos").rglob("*.mp4")):
        with av.open(str(f)) as c:
            decoded += [fr.to_ndarray(format="rgb24").astype(np.int16) for fr in c.decode(video=0)]
    out, at = [], 0
    for n in lengths:
        out.append(np.stack(decoded[at : at + n]))
        at += n
    assert at == len(decoded)
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    data = write_faulty_lerobot(tmp_path_factory.mktemp("faulty") / "v30", FaultySpec(version="v3.0"))
    cols = _columns(data.root)
    frames = _frames(data.root, [e.length for e in data.episodes])
    return {"data": data, "cols": cols, "frames": frames}


def test_every_fault_is_planted_once_after_the_clean_episodes(written):
    data = written["data"]
    assert [p.fault for p in data.planted] == list(FAULTS)
    assert data.clean == (0, 1, 2, 3)
    assert [p.episode_index for p in data.planted] == list(range(4, 4 + len(FAULTS)))
    info = json.loads((data.root / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["total_episodes"] == 4 + len(FAULTS)
    manifest = json.loads(Path(str(data.root) + ".faults.json").read_text())
    assert manifest == json.loads(json.dumps(data.manifest()))


def test_each_planted_fault_is_in_the_written_data(written):
    data, cols, frames = written["data"], written["cols"], written["frames"]
    where = {p.fault: p for p in data.planted}

    def ep(fault: str) -> dict[str, np.ndarray]:
        return cols[where[fault].episode_index]

    assert np.ptp(ep("frozen_state")["state"], axis=0).max() == 0  # every state column constant
    assert np.ptp(ep("frozen_action")["action"], axis=0).max() == 0
    z = where["zero_rows"]
    assert np.all(ep("zero_rows")["action"][z.start] == 0)
    dup = where["near_duplicate"]
    assert dup.of_episode == 0
    np.testing.assert_array_equal(cols[dup.episode_index]["action"], cols[0]["action"])
    np.testing.assert_array_equal(cols[dup.episode_index]["state"], cols[0]["state"])
    gap = where["timestamp_gap"]
    dt = np.diff(ep("timestamp_gap")["timestamp"])
    assert dt[gap.start - 1] == pytest.approx(1 / data.spec.fps + GAP_S, abs=1e-4)
    assert np.delete(dt, gap.start - 1) == pytest.approx(1 / data.spec.fps, abs=1e-4)
    a = ep("identical_dims")["action"]
    assert np.all(a == a[:, :1]) and np.ptp(a[:, 0]) > 0
    for fault in ("idle_head", "idle_tail"):
        p = where[fault]
        for stream in ("state", "action"):
            held = ep(fault)[stream][p.start : p.stop]
            assert np.ptp(held, axis=0).max() == 0 and p.stop - p.start >= 0.25 * data.spec.length
    j = where["action_jump"]
    steps = np.abs(np.diff(ep("action_jump")["action"], axis=0)).mean(axis=1)
    assert steps[j.start - 1] > 20 * np.median(steps)
    black = where["black_camera"]
    assert frames[black.episode_index][black.start : black.stop].mean() < 8  # black after h264
    assert frames[black.episode_index][: black.start].mean() > 60
    still = where["frozen_camera"]
    run = frames[still.episode_index][still.start : still.stop]
    assert np.abs(np.diff(run, axis=0)).mean() < 1.0 < np.abs(np.diff(frames[0], axis=0)).mean()
    assert black.stream == still.stream == CAMERA


def test_clean_episodes_carry_none_of_the_faults(written):
    data, cols = written["data"], written["cols"]
    for i in data.clean:
        for stream in ("state", "action"):
            x = cols[i][stream]
            assert np.all(np.any(x[1:] != x[:-1], axis=1))  # no two consecutive rows equal
            assert np.ptp(x, axis=0).min() > 0.1  # no constant dimension
            assert not np.any(np.all(x == 0, axis=1))
        assert len({tuple(cols[i]["action"][:, k]) for k in range(data.spec.dims)}) == data.spec.dims
        assert np.diff(cols[i]["timestamp"]) == pytest.approx(1 / data.spec.fps, abs=1e-4)


def test_v21_and_determinism(tmp_path):
    spec = FaultySpec(version="v2.1", clean=1, length=20, faults=("frozen_state", "near_duplicate"), image=16)
    a = write_faulty_lerobot(tmp_path / "a", spec)
    b = write_faulty_lerobot(tmp_path / "b", spec)
    assert json.loads((a.root / "meta" / "info.json").read_text())["codebase_version"] == "v2.1"
    ca, cb = _columns(a.root), _columns(b.root)
    for i in ca:
        np.testing.assert_array_equal(ca[i]["action"], cb[i]["action"])
    assert [p.fault for p in a.planted] == ["frozen_state", "near_duplicate"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"clean": 0}, "clean must be"),
        ({"length": 5}, "length must be"),
        ({"faults": ("bogus",)}, "unknown faults"),
        ({"image": 7}, "even side"),
    ],
)
def test_spec_says_what_is_wrong(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FaultySpec(**kwargs)
