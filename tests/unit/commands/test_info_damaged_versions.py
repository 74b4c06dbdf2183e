"""[30] A damaged older version manifest does not break `info --json` of an intact newest version:
the damaged one is listed as such, in one line (found by `robolake bench faults`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from robolake.cli import main


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from robolake import curate
    from robolake.lake import Lake
    from robolake.lake.intake.ingest import ingest
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    root = tmp_path_factory.mktemp("info_damaged")
    generate_synthetic(root / "syn", SyntheticConfig.tiny(embodiments=("single_arm_7dof",), image_size=16))
    ingest(str(root / "syn"), str(root / "lake"))
    curate.delete(str(root / "lake"), episodes=Lake.open(str(root / "lake")).episode_ids()[:1], reason="v3")
    return root / "lake"


@pytest.mark.parametrize("damage", ["empty", "not_json"])
def test_info_json_lists_a_damaged_older_version(two_versions: Path, tmp_path: Path, capsys, damage: str) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(two_versions, lake)
    manifest = lake / "_robolake" / "versions" / "00000001.json"
    manifest.write_bytes(b"" if damage == "empty" else b"\xff{{")
    assert main(["info", str(lake), "--json"]) == 0
    versions = json.loads(capsys.readouterr().out)["versions"]
    assert [v["version"] for v in versions] == [1, 2, 3]
    assert "damaged" in versions[0] and "\n" not in versions[0]["damaged"]
    assert versions[-1]["tables"]
