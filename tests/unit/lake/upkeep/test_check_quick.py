"""`check --quick` on the tables' agreement: trimmed episodes pass, wrong row counts are named.

The quick check reads the trim maps only of episodes whose media rows disagree with their steps
(the full check reads them all), so a trimmed episode must still pass it and a damaged one fail."""

from __future__ import annotations

from pathlib import Path

import lance
import pytest

from robolake import curate
from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.protocol.versions import LakeVersion, write_version
from robolake.lake.upkeep.check import check_lake
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture()
def trimmed(tmp_path: Path) -> tuple[str, str, str]:
    """(lake uri, an episode trimmed of its first 3 steps, an episode left whole)."""
    generate_synthetic(
        tmp_path / "src",
        SyntheticConfig.tiny(embodiments=("single_arm_7dof",), seed=7, min_length=10, max_length=12, image_size=16),
    )
    uri = str(tmp_path / "lake")
    ingest(str(tmp_path / "src"), uri)
    first, whole = sorted(Lake.open(uri).episode_ids())[:2]
    curate.trim(uri, curate.TrimSpec(where_steps="step < 3", where=f"episode_id = '{first}'", reason="t"))
    assert list(Lake.open(uri).trimmed()) == [first]
    return uri, first, whole


def _drop_media_row(uri: str, eid: str) -> None:
    """Delete one of `eid`'s media rows with Lance and publish it as the lake's next version."""
    lake = Lake.open(uri)
    ds = lance.dataset(lake.table_uri("media"))
    ds.delete(f"episode_id = '{eid}' AND step_index = 5")
    tables = {**lake.version_info.tables, "media": lance.dataset(lake.table_uri("media")).version}
    write_version(uri, LakeVersion(version=lake.version + 1, tables=tables, operation="bad", created_at=0.0))


def test_a_trimmed_lake_passes_both_checks(trimmed: tuple[str, str, str]):
    uri, _, _ = trimmed
    for quick in (False, True):
        report = check_lake(uri, quick=quick)
        assert report.ok, (quick, report.problems)


@pytest.mark.parametrize("which", [1, 2])
def test_a_missing_frame_is_named_by_both_checks(trimmed: tuple[str, str, str], which: int):
    uri, first, whole = trimmed
    victim = first if which == 1 else whole
    _drop_media_row(uri, victim)
    for quick in (False, True):
        problems = [str(p) for p in check_lake(uri, quick=quick).problems]
        assert any(
            "1 episodes have the wrong number of media rows" in p and f"first: {victim} has" in p for p in problems
        ), (quick, problems)


def test_quick_counts_per_episode_only_when_the_totals_disagree(tmp_path: Path):
    """An untrimmed lake's totals agree and --quick stops there (reading no key column); a steps row
    gone makes the totals disagree, and the episode is named as the full check names it."""
    generate_synthetic(
        tmp_path / "src",
        SyntheticConfig.tiny(embodiments=("single_arm_7dof",), seed=3, min_length=10, max_length=12, image_size=16),
    )
    uri = str(tmp_path / "lake")
    ingest(str(tmp_path / "src"), uri)
    assert check_lake(uri, quick=True).ok
    victim = sorted(Lake.open(uri).episode_ids())[1]
    lake = Lake.open(uri)
    lance.dataset(lake.table_uri("steps")).delete(f"episode_id = '{victim}' AND step_index = 4")
    tables = {**lake.version_info.tables, "steps": lance.dataset(lake.table_uri("steps")).version}
    write_version(uri, LakeVersion(version=lake.version + 1, tables=tables, operation="bad", created_at=0.0))
    for quick in (False, True):
        problems = [str(p) for p in check_lake(uri, quick=quick).problems]
        assert any(
            "1 episodes have the wrong number of steps rows" in p and f"first: {victim} has" in p for p in problems
        ), (quick, problems)
