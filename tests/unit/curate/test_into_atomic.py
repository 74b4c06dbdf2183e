"""[30] `select --into` and `merge` publish their target whole or leave debris the next run clears.

Before: a killed run left a target that re-running refused ("exists and is not empty"), that
`check` said to re-ingest, and that `ingest` failed on with Lance's "manifest was not found".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from robolake import curate
from robolake.cli import main
from robolake.lake import Lake, faults
from robolake.lake.upkeep.check import check_lake

REPO = Path(__file__).resolve().parents[3]
VERBS = {
    "select": "curate.select_into(sys.argv[1], \"embodiment != 'single_arm_7dof'\", sys.argv[2])",
    "merge": "curate.merge([sys.argv[3], sys.argv[1]], sys.argv[2])",
}
PHASES = ["creating:marked", "after_commit:episodes", "after_commit:media", "before_publish"]


def _killed(verb: str, phase: str, src: Path, into: Path, other: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO), faults.ENV_VAR: f"{phase}:kill"}
    code = f"import sys\nfrom robolake import curate\n{VERBS[verb]}\n"
    return subprocess.run(
        [sys.executable, "-c", code, str(src), str(into), str(other)], env=env, timeout=300
    ).returncode


@pytest.fixture()
def other(lake_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "other"
    curate.select_into(str(lake_dir), "embodiment = 'single_arm_7dof'", str(out))
    return out


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("phase", PHASES)
def test_a_killed_into_is_cleared_by_the_next_run(lake_dir: Path, other: Path, tmp_path: Path, verb, phase, capsys):
    into = tmp_path / "into"
    assert _killed(verb, phase, lake_dir, into, other) == -9
    assert into.exists()  # debris: tables cloned, nothing published
    report = check_lake(str(into))
    assert not report.ok and "half-created" in str(report.problems[0]), report.problems
    assert "ingest" not in report.problems[0].fix  # the old advice that could not work
    src = Lake.open(str(lake_dir))
    if verb == "select":
        curate.select_into(str(lake_dir), "embodiment != 'single_arm_7dof'", str(into))  # re-running works
        want = set(src.episode_ids()) - set(Lake.open(str(other)).episode_ids())
    else:
        curate.merge([str(other), str(lake_dir)], str(into))
        want = set(src.episode_ids())
    assert check_lake(str(into)).ok
    assert set(Lake.open(str(into)).episode_ids()) == want
    capsys.readouterr()


def test_gc_and_ingest_clear_a_half_created_target(lake_dir: Path, other: Path, tmp_path: Path, capsys) -> None:
    into = tmp_path / "into"
    assert _killed("select", "before_publish", lake_dir, into, other) == -9
    assert main(["gc", str(into), "--dry-run"]) == 0 and into.exists()
    assert "half-created" in capsys.readouterr().out
    assert main(["gc", str(into)]) == 0 and not into.exists()
    assert _killed("merge", "after_commit:media", lake_dir, into, other) == -9
    Lake.create(str(into))  # what ingest does first: the next writer clears the debris
    assert Lake.open(str(into)).version == 1 and check_lake(str(into)).ok


def test_a_live_maker_is_not_disturbed(lake_dir: Path, tmp_path: Path) -> None:
    from robolake.lake import clear_half_created, mark_creating

    into = tmp_path / "busy"
    into.mkdir()
    mark_creating(str(into), "merge")  # this process: alive
    with pytest.raises(FileExistsError, match="being created"):
        clear_half_created(str(into))
    with pytest.raises(FileExistsError):
        curate.select_into(str(lake_dir), "num_steps >= 1", str(into))
