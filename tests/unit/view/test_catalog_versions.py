"""Ingest versions on a lake of many versions: right, and read from the rows each version brought."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from robolake.lake import Lake
from robolake.view.catalog import LakeCatalog


def _every_version(catalog: LakeCatalog, ids: pa.Array) -> np.ndarray:
    """The definition: the first version whose episodes table holds the id (one scan per version)."""
    first = np.zeros(len(ids), dtype=np.int64)
    for v in catalog.versions():
        held = pc.is_in(ids, value_set=catalog.ids_at(v)).to_numpy(zero_copy_only=False)
        first = np.where((first == 0) & held, v.version, first)
    return first


@pytest.fixture(scope="module")
def many_versions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ingests, six single-episode deletes, and a restore of the first deleted episode."""
    from robolake.curate import delete, restore_episodes
    from robolake.lake.intake.ingest import ingest
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    root = tmp_path_factory.mktemp("versions")
    generate_synthetic(root / "a", SyntheticConfig.tiny(episodes_per_embodiment=4, embodiments=("single_arm_7dof",)))
    generate_synthetic(root / "b", SyntheticConfig.tiny(episodes_per_embodiment=4, embodiments=("bimanual_14dof",)))
    ingest(str(root / "a"), str(root / "lake"))
    ingest(str(root / "b"), str(root / "lake"))
    ids = sorted(Lake.open(str(root / "lake")).episode_ids())
    for e in ids[:6]:
        delete(str(root / "lake"), episodes=[e], reason="test: many versions")
    restore_episodes(str(root / "lake"), [ids[0]], reason="test: back again")
    return root / "lake"


def test_first_versions_read_only_the_fragments_each_version_brought(
    many_versions: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake.open(str(many_versions))
    versions = LakeCatalog(lake).versions()
    assert len(versions) >= 9
    ids = pa.array(sorted(lake.episode_ids()) + ["never-held"])
    expected = _every_version(LakeCatalog(lake), ids)
    assert expected[-1] == 0 and len(set(expected[:-1].tolist())) >= 2  # two ingests (and a restore)

    scans = []
    real = lance.LanceDataset.scanner

    def counted(self: lance.LanceDataset, *args: object, **kwargs: object) -> object:
        scans.append(kwargs.get("fragments"))
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lance.LanceDataset, "scanner", counted)
    got = LakeCatalog(lake).first_versions(ids)
    np.testing.assert_array_equal(got, expected)
    # Deletes bring no fragment: scans only where a version wrote rows (two ingests, a restore),
    # not one per version.
    assert 1 <= len(scans) <= 3 < len(versions)


def test_first_versions_stop_at_the_handle_version(many_versions: Path) -> None:
    lake = Lake.open(str(many_versions))
    ids = pa.array(sorted(lake.episode_ids()))
    newest = LakeCatalog(lake).first_versions(ids)
    first_ingest = LakeCatalog(Lake.open(str(many_versions), version=1)).first_versions(ids)
    assert set(first_ingest.tolist()) <= {0, 1}
    np.testing.assert_array_equal(first_ingest, np.where(newest == 1, 1, 0))
