"""`robolake gc`: removes what no retained version needs, never what one does."""

from __future__ import annotations

import datetime as dt

import lance
import pyarrow as pa
import pytest

from robolake.cli import main
from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.protocol.transaction import write_table_fragments
from robolake.lake.protocol.versions import list_versions
from robolake.lake.upkeep.check import check_lake
from robolake.lake.upkeep.gc import gc, parse_age
from robolake.schemas.tables import TABLES, schema_for_table
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


def _orphans(uri: str) -> int:
    n = 0
    for t in TABLES:
        ds = lance.dataset(f"{uri}/{t}.lance")
        tracked = set(ds.tracked_files().read_all().column("path").to_pylist())
        n += sum(
            1
            for p in ds.all_files().read_all().column("path").to_pylist()
            if p.startswith("data/") and p not in tracked
        )
    return n


def _lance_versions(uri: str, table: str) -> list[int]:
    return [v["version"] for v in lance.dataset(f"{uri}/{table}.lance").versions()]


@pytest.fixture()
def messy_lake(tmp_path) -> str:
    """Two ingests, a rolled-back commit of a dead writer, and a dead writer's orphan fragments."""
    for i in range(2):
        generate_synthetic(
            tmp_path / f"s{i}",
            SyntheticConfig.tiny(
                embodiments=("single_arm_7dof",), seed=400 + i, min_length=10, max_length=12, image_size=16
            ),
        )
    uri = str(tmp_path / "lake")
    ingest(str(tmp_path / "s0"), uri)
    ingest(str(tmp_path / "s1"), uri)
    lake = Lake.open(uri)
    # an unpublished commit (rolled back by the next writer) and an uncommitted fragment
    steps = lake.to_arrow("steps").slice(0, 2)
    lance.write_dataset(steps, lake.table_uri("steps"), mode="append")
    write_table_fragments(uri, "media", lake.to_arrow("media").slice(0, 2))
    tx = lake.begin()
    tx.append_table("quarantine", pa.Table.from_pylist([], schema=schema_for_table("quarantine")))
    tx.commit("touch")  # takes the lease: rolls back the stray steps commit
    return uri


def test_parse_age():
    assert parse_age("7d") == dt.timedelta(days=7) and parse_age("90") == dt.timedelta(seconds=90)
    with pytest.raises(ValueError, match="like 7d"):
        parse_age("soon")


def test_dry_run_removes_nothing(messy_lake):
    before = (list_versions(messy_lake), _lance_versions(messy_lake, "steps"), _orphans(messy_lake))
    r = gc(messy_lake, dt.timedelta(0), dry_run=True)
    assert r.orphan_files == 1 and r.lance_versions["steps"] and r.removed_versions == [1, 2, 3]
    assert (list_versions(messy_lake), _lance_versions(messy_lake, "steps"), _orphans(messy_lake)) == before


def test_gc_keeps_what_retained_versions_need(messy_lake, capsys):
    head = Lake.open(messy_lake)
    counts = {t: head.count(t) for t in TABLES}
    assert main(["gc", messy_lake, "--older-than", "0s"]) == 0
    assert "removed 3 older lake versions" in capsys.readouterr().out
    assert list_versions(messy_lake) == [4]
    assert _orphans(messy_lake) == 0
    # the newest version names every table's latest version, some untouched since creation: all stay
    lake = Lake.open(messy_lake)
    assert {t: lake.count(t) for t in TABLES} == counts
    assert check_lake(messy_lake).ok
    for t in TABLES:
        assert _lance_versions(messy_lake, t) == [lake.version_info.tables[t]]


def test_gc_with_retention_keeps_recent_versions(messy_lake):
    r = gc(messy_lake, dt.timedelta(days=7))
    assert r.removed_versions == [] and list_versions(messy_lake) == [1, 2, 3, 4]
    assert all(check_lake(messy_lake, v).ok for v in (1, 2, 3, 4))
    assert r.orphan_files == 0  # the orphan is recent: inside the window it stays
