"""Loader fixtures: one tiny synthetic lake and its packed shards, built once per session."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class PackedData:
    syn: Path
    lake: Path
    packed: Path
    num_samples: int
    num_sequences: int


def build_packed(root: Path) -> PackedData:
    from robolake.lake.ingest import ingest
    from robolake.packers.lengths import TokenLengthConfig
    from robolake.packers.pipeline import pack
    from robolake.packers.spec import PackSpec
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    generate_synthetic(root / "syn", SyntheticConfig.tiny())
    ingest(str(root / "syn"), str(root / "lake"))
    spec = PackSpec(max_tokens=1024, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
    m = pack(str(root / "lake"), spec, str(root / "packed"))
    return PackedData(root / "syn", root / "lake", root / "packed", m.num_samples, m.num_sequences)


@pytest.fixture(scope="session")
def packed_data(ray_session, tmp_path_factory: pytest.TempPathFactory) -> PackedData:
    return build_packed(tmp_path_factory.mktemp("loaders"))


@pytest.fixture()
def packed_copy(packed_data: PackedData, tmp_path: Path) -> Path:
    """A private copy of the pack output, to break."""
    dst = tmp_path / "packed"
    shutil.copytree(packed_data.packed, dst)
    return dst
