"""Width checks across datasets of one embodiment use only episodes that passed their own checks.

The issue's case: beside a good dataset, a copy of the same robot whose `info.json` declares a
state width of 10^12 (or any width its files do not have). Every episode of the bad one fails
its own check; it must not set the embodiment's width, so the good one lands. Before the fix the
bad dataset (first in path order) set the width and quarantined the good one: 0 landed, rc 1.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from robolake.cli import main
from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

ROBOT = "single_arm_7dof"
EPISODES = 2


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("widths")
    out = {}
    for seed in (11, 12):
        generate_synthetic(
            root / str(seed), SyntheticConfig.tiny(embodiments=(ROBOT,), episodes_per_embodiment=EPISODES, seed=seed)
        )
        out[seed] = root / str(seed) / ROBOT
    return out


def _declare_state_width(ds: Path, width: int) -> None:
    p = ds / "meta/info.json"
    info = json.loads(p.read_text())
    info["features"]["observation.state"]["shape"] = [width]
    info["features"]["observation.state"].pop("names", None)
    p.write_text(json.dumps(info))


@pytest.mark.parametrize("width", [10**12, 9])
def test_a_dataset_whose_every_episode_failed_never_blocks_a_good_one(pristine, tmp_path, width, capsys):
    bad = tmp_path / "src" / "a_bad"  # first in path order: the one that used to set the width
    shutil.copytree(pristine[11], bad)
    shutil.copytree(pristine[12], tmp_path / "src" / "b_good")
    _declare_state_width(bad, width)
    result = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (EPISODES, EPISODES), result.quarantine
    assert all("a_bad" in path and str(width) in reason for path, reason in result.quarantine), result.quarantine
    lake = Lake.open(str(tmp_path / "lake"))
    assert lake.embodiments()[ROBOT].state_dim == 7
    assert {e.split("/")[0] for e in lake.episode_ids()} == {"b_good"}


def test_the_cli_lands_the_good_dataset(pristine, tmp_path, capsys):
    for h in list(logging.getLogger("robolake").handlers):  # earlier in-process main() calls left handlers
        logging.getLogger("robolake").removeHandler(h)
    bad = tmp_path / "src" / "a_bad"
    shutil.copytree(pristine[11], bad)
    shutil.copytree(pristine[12], tmp_path / "src" / "b_good")
    _declare_state_width(bad, 10**12)
    rc = main(["ingest", str(tmp_path / "src"), str(tmp_path / "lake"), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert Lake.open(str(tmp_path / "lake")).count("episodes") == EPISODES


def test_a_good_dataset_still_refuses_another_width_of_its_tag(pristine, tmp_path):
    """Both datasets' episodes pass their own checks but their widths differ: the first sets the
    width, the second is quarantined (the rule the width check exists for)."""
    first = tmp_path / "src" / "a_first"
    shutil.copytree(pristine[11], first)
    other = tmp_path / "other"
    generate_synthetic(
        other, SyntheticConfig.tiny(embodiments=("bimanual_14dof",), episodes_per_embodiment=EPISODES, seed=13)
    )
    second = tmp_path / "src" / "b_second"
    shutil.copytree(other / "bimanual_14dof", second)
    p = second / "meta/info.json"
    info = json.loads(p.read_text())
    info["robot_type"] = ROBOT
    p.write_text(json.dumps(info))
    result = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (EPISODES, EPISODES)
    assert all("--embodiment" in reason and "a_first" in reason for _, reason in result.quarantine)
