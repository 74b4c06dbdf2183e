"""[30] `check` reports the lake's own records (`_robolake/`, its versions and tags folders, a version
manifest or tag file) linked outside the lake: found by `robolake bench faults`, where a versions
folder linked to another lake's checked OK while every command listed the other lake's versions."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from robolake.cli import main
from robolake.lake import check_lake, ingest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture(scope="module")
def two_lakes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("meta_links")
    for name, seed in (("ours", 1), ("theirs", 2)):
        cfg = SyntheticConfig.tiny(embodiments=("single_arm_7dof",), seed=seed, image_size=16)
        generate_synthetic(root / f"src-{name}", cfg)
        ingest(str(root / f"src-{name}"), str(root / name))
    return root / "ours", root / "theirs"


@pytest.mark.parametrize(
    "linked", ["_robolake", "_robolake/versions", "_robolake/tags", "_robolake/versions/00000002.json"]
)
def test_a_record_linked_outside_the_lake_is_damage(two_lakes, tmp_path: Path, capsys, linked: str) -> None:
    ours, theirs = tmp_path / "ours", two_lakes[1]
    shutil.copytree(two_lakes[0], ours)
    (ours / "_robolake" / "tags").mkdir(exist_ok=True)
    (theirs / "_robolake" / "tags").mkdir(exist_ok=True)
    target = ours / linked
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    os.symlink(theirs / linked, target)
    report = check_lake(str(ours))
    assert not report.ok and "linked outside" in str(report.problems[0])
    assert main(["check", str(ours)]) != 0
    assert "linked outside" in capsys.readouterr().err


def test_a_sound_lake_has_no_linked_records(two_lakes) -> None:
    assert check_lake(str(two_lakes[0])).ok
