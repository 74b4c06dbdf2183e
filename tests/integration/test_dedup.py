"""`robolake dedup` on a lake with a planted near-duplicate, `restore` bringing it back,
`robolake resample` = `robolake align --fps`, and `robolake info` printing quality counts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from robolake import curate
from robolake.cli import main
from robolake.lake import IngestConfig, Lake, ingest, quality_counts
from robolake.testing.ros import Layout, write_ros2
from robolake.writers.lerobot import EpisodeArrays, write_lerobot_dataset
from robolake.writers.synthetic import SyntheticConfig, synthetic_episodes

ROBOT = "single_arm_7dof"


def _index(episode_id: str) -> int:
    return int(episode_id.split("/")[-1].split("-")[0])


@pytest.fixture(scope="module")
def dup_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Four episodes of 40 steps: 2 is a near-duplicate of 0 (ingested after it), 3 a frozen state."""
    root = tmp_path_factory.mktemp("dedup")
    eps = synthetic_episodes(SyntheticConfig.tiny(min_length=40, max_length=40, episodes_per_embodiment=4), ROBOT)
    out = []
    for i, e in enumerate(eps):
        state, action, frames = e.state.copy(), e.action.copy(), {k: v.copy() for k, v in e.frames.items()}
        if i == 2:  # the copy, as long as 0 and ingested after it: the one dedup removes
            state, action = eps[0].state + np.float32(1e-4), eps[0].action + np.float32(1e-4)
            frames = {k: v.copy() for k, v in eps[0].frames.items()}
        if i == 3:
            state[:] = state[0]
        out.append(EpisodeArrays(state=state, action=action, task=e.task, frames=frames))
    src = write_lerobot_dataset(root / "src", episodes=out, fps=20, robot_type=ROBOT)
    uri = str(root / "lake")
    ingest(str(src), uri, IngestConfig(execution="local"))
    return uri


def _copy(uri: str, dest: Path) -> str:
    shutil.copytree(uri, dest)
    return str(dest)


def test_dedup_keeps_the_earliest_ingested_and_restore_brings_the_rest_back(
    dup_lake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _copy(dup_lake, tmp_path / "lake")
    before = Lake.open(uri)
    dry = curate.dedup(uri, dry_run=True)
    assert dry.dry_run and dry.version == before.version
    assert [(_index(g["kept"]), [_index(e) for e in g["removed"]]) for g in dry.groups] == [(0, [2])]
    assert Lake.open(uri).version == before.version  # a dry run writes nothing

    assert main(["dedup", uri, "--reason", "teleop logged twice", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["version"] == before.version + 1 and [_index(e) for e in r["removed"]] == [2]
    assert "longest" in r["rule"]
    after = Lake.open(uri)
    assert sorted(_index(e) for e in after.episode_ids()) == [0, 1, 3]
    assert after.count("steps") == before.count("steps") - 40

    assert main(["diff", uri, str(before.version), str(after.version), "--json"]) == 0
    assert r["removed"][0] in capsys.readouterr().out

    assert main(["dedup", uri]) == 0  # nothing left to remove
    assert "no near-duplicate" in capsys.readouterr().out
    assert Lake.open(uri).version == after.version

    assert main(["restore", uri, "--episodes", r["removed"][0]]) == 0
    assert sorted(_index(e) for e in Lake.open(uri).episode_ids()) == [0, 1, 2, 3]


def test_dedup_needs_a_reason(dup_lake: str) -> None:
    with pytest.raises(ValueError, match="say why"):
        curate.dedup(dup_lake, reason=" ")


@pytest.fixture(scope="module")
def bag_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ROS 2 recording: its lake keeps the record every stream's messages, which align reads."""
    root = tmp_path_factory.mktemp("resample")
    write_ros2(root / "src" / "rig", Layout(seconds=1.0))
    ingest(str(root / "src" / "rig"), str(root / "lake"), IngestConfig(execution="local"))
    return str(root / "lake")


def test_resample_is_align_with_a_rate(bag_lake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _copy(bag_lake, tmp_path / "a"), _copy(bag_lake, tmp_path / "b")
    assert main(["resample", a, "--fps", "10", "--json"]) == 0
    ra = json.loads(capsys.readouterr().out)
    assert main(["align", b, "--fps", "10", "--json"]) == 0
    rb = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in ra.items() if k != "lake"} == {k: v for k, v in rb.items() if k != "lake"}
    assert ra["steps_after"] < ra["steps_before"]
    cols = ["episode_id", "step_index", "timestamp", "state", "action"]
    assert (
        Lake.open(a)
        .to_arrow("steps", columns=cols)
        .sort_by([("episode_id", "ascending"), ("step_index", "ascending")])
        .equals(
            Lake.open(b)
            .to_arrow("steps", columns=cols)
            .sort_by([("episode_id", "ascending"), ("step_index", "ascending")])
        )
    )


def test_info_prints_how_many_episodes_each_check_flags(dup_lake: str, capsys: pytest.CaptureFixture[str]) -> None:
    counts = quality_counts(Lake.open(dup_lake))
    assert counts[ROBOT]["frozen_state"] == 1
    assert "near_duplicate" not in counts[ROBOT]  # a cross-episode check: the doctor's
    assert main(["info", dup_lake]) == 0
    out = capsys.readouterr().out
    assert "frozen_state=1" in out and f"robolake doctor {dup_lake}" in out
    assert main(["info", dup_lake, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["embodiments"][ROBOT]["quality"]["frozen_state"] == 1
