"""`align`: new steps from the record, by the function ingest used, as one new version."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robolake.lake import AlignSpec, IngestConfig, Lake, align_lake, check_lake, ingest
from robolake.lake.protocol import faults
from robolake.testing.ros import Layout, write_ros2

REPO = Path(__file__).resolve().parents[3]


def _steps(lake: Lake) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = lake.to_arrow("steps", columns=["step_index", "timestamp", "state", "action"]).sort_by("step_index")
    return (
        t["timestamp"].to_numpy(),
        np.stack(t["state"].to_numpy(zero_copy_only=False)),
        np.stack(t["action"].to_numpy(zero_copy_only=False)),
    )


@pytest.fixture(scope="module")
def bag_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("align")
    t_imu = np.arange(200) / 200.0
    extra = {"/imu": ("imu", [(t, np.arange(10) * 0.1 + t) for t in t_imu])}
    write_ros2(root / "src" / "rig", Layout(seconds=1.0, extra=extra))
    ingest(str(root / "src" / "rig"), str(root / "lake"), IngestConfig(execution="local"))
    return root / "lake"


@pytest.fixture()
def lake_copy(bag_lake: Path, tmp_path: Path) -> Path:
    shutil.copytree(bag_lake, tmp_path / "lake")
    return tmp_path / "lake"


def test_align_at_the_ingest_rate_gives_the_same_steps(lake_copy: Path):
    before = Lake.open(str(lake_copy))
    r = align_lake(str(lake_copy), AlignSpec())
    after = Lake.open(str(lake_copy))
    assert r.realigned and after.version == before.version + 1
    for x, y in zip(_steps(before), _steps(after), strict=True):
        assert np.array_equal(x, y)  # the one alignment function: ingest's steps came from the record too


def test_align_to_another_rate_rebuilds_steps_and_frames(lake_copy: Path):
    before = Lake.open(str(lake_copy))
    n0 = before.count("steps")
    r = align_lake(str(lake_copy), AlignSpec(fps=30.0))
    after = Lake.open(str(lake_copy))
    n1 = after.count("steps")
    assert abs(n1 - n0 * 30 / 100) <= 2 and r.steps_after == n1
    assert after.count("media") == n1  # one frame per step and camera
    t, _, _ = _steps(after)
    assert np.allclose(np.diff(t), 1 / 30)
    ep = after.episodes().to_pylist()[0]
    assert ep["fps"] == 30.0 and ep["num_steps"] == n1
    meta = json.loads(ep["metadata"])
    assert meta["alignment"]["fps"] == 30.0 and meta["alignment"]["rules"]["/joint_states"] == "linear"
    assert after.version_info.summary["rendition"] == {"fps": 30.0, "rules": {}}
    keys = [(ep["episode_id"], ep["cameras"][0], s) for s in range(n1)]
    assert len(after.frames().read_many(keys)) == n1
    assert after.embodiments()[ep["embodiment"]].fps == 30.0
    assert check_lake(str(lake_copy)).ok
    assert after.count("signals") == before.count("signals")  # the record is never rewritten


def test_a_rule_changes_what_a_step_holds(lake_copy: Path):
    _, linear, _ = _steps(Lake.open(str(lake_copy)))
    align_lake(str(lake_copy), AlignSpec(rules=(("/joint_states", "hold"),)))
    _, held, _ = _steps(Lake.open(str(lake_copy)))
    assert linear.shape == held.shape and not np.array_equal(linear, held)
    with pytest.raises(ValueError, match="unknown alignment rule"):
        AlignSpec(rules=(("/joint_states", "cubic"),))


def test_kill_during_align_leaves_the_last_version(lake_copy: Path):
    before = Lake.open(str(lake_copy))
    env = {**os.environ, "PYTHONPATH": str(REPO), faults.ENV_VAR: "after_commit:steps:kill"}
    code = "import sys\nfrom robolake.lake import AlignSpec, align_lake\nalign_lake(sys.argv[1], AlignSpec(fps=20.0))\n"
    p = subprocess.run([sys.executable, "-c", code, str(lake_copy)], env=env, capture_output=True, timeout=300)
    assert p.returncode == -9
    after = Lake.open(str(lake_copy))
    assert after.version == before.version and after.count("steps") == before.count("steps")
    r = align_lake(str(lake_copy), AlignSpec(fps=20.0))  # the next writer rolls back what the dead one left
    assert r.version == before.version + 1 and check_lake(str(lake_copy)).ok
