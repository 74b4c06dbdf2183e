"""Curation fixtures: one small synthetic lake per session, copied per test (the verbs change it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def base_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from robolake.lake.intake.ingest import ingest
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    root = tmp_path_factory.mktemp("curate")
    generate_synthetic(root / "syn", SyntheticConfig.tiny())  # 3 embodiments x 2 episodes
    ingest(str(root / "syn"), str(root / "lake"))
    return root / "lake"


@pytest.fixture()
def lake_dir(base_lake: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "lake"
    shutil.copytree(base_lake, dst)
    return dst
