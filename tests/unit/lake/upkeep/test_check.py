"""`robolake check`, `restore` and the damaged-lake messages of `info`, `pack` and `Lake.open`."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from robolake.cli import main
from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.protocol.transaction import restore_version
from robolake.lake.protocol.versions import DamagedManifestError, LakeVersion, write_version
from robolake.lake.upkeep.check import check_lake
from robolake.schemas.tables import schema_for_table
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """A lake at version 3: v1 created, v2 ingests source A, v3 source B (built once)."""
    root = tmp_path_factory.mktemp("checked")
    srcs = {}
    for i, name in enumerate("AB"):
        generate_synthetic(
            root / name,
            SyntheticConfig.tiny(
                embodiments=("single_arm_7dof",), seed=300 + i, min_length=10, max_length=12, image_size=16
            ),
        )
        srcs[name] = root / name
    uri = root / "lake"
    for name in "AB":
        ingest(str(srcs[name]), str(uri))
    return uri, srcs


@pytest.fixture()
def lake_copy(built, tmp_path) -> Path:
    dst = tmp_path / "lake"
    shutil.copytree(built[0], dst)
    return dst


def _newest_files(lake: Path, table: str) -> list[Path]:
    """Data files of `table` that version 3 references and version 2 does not."""
    l3, l2 = Lake.open(str(lake), version=3), Lake.open(str(lake), version=2)

    def files(lk: Lake) -> set[str]:
        return {df.path for f in lk.dataset(table).get_fragments() for df in f.metadata.files}

    return [lake / f"{table}.lance" / "data" / p for p in sorted(files(l3) - files(l2))]


def test_sound_lake_checks_ok(lake_copy, capsys):
    report = check_lake(str(lake_copy))
    assert report.ok and report.version == 3 and report.counts["episodes"] == 4
    assert all(check_lake(str(lake_copy), v).ok for v in (1, 2, 3))
    assert main(["check", str(lake_copy)]) == 0
    assert "version 3: OK" in capsys.readouterr().out


def test_missing_steps_file_is_reported_everywhere(lake_copy, capsys):
    victim = _newest_files(lake_copy, "steps")[0]
    victim.unlink()
    report = check_lake(str(lake_copy))
    assert not report.ok
    text = str(report.problems[0])
    assert "table steps of version 3 references 1 data file(s) that do not exist" in text and victim.name in text
    assert f"intact at version 2: `robolake restore {lake_copy} 2`" in text
    assert main(["check", str(lake_copy)]) == 1
    assert main(["info", str(lake_copy)]) == 1
    err = capsys.readouterr().err
    assert "do not exist" in err and "robolake check" in err
    from robolake.packers import pack

    with pytest.raises(FileNotFoundError, match="run `robolake check"):
        pack(str(lake_copy), out=str(lake_copy.parent / "packed"))
    # The way back: restore 2, then re-ingest what came after.
    assert main(["restore", str(lake_copy), "2"]) == 0
    assert check_lake(str(lake_copy)).ok and Lake.open(str(lake_copy)).version == 4


def test_truncated_media_file_is_named_by_its_size(lake_copy):
    victim = _newest_files(lake_copy, "media")[0]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    for quick in (False, True):  # the manifest records each file's size: no read needed
        report = check_lake(str(lake_copy), quick=quick)
        text = str(report.problems[0])
        assert not report.ok and "whose size is not the one its manifest records" in text and victim.name in text


def test_a_damaged_file_of_full_size_is_read_by_the_full_check_only(lake_copy):
    """--quick reads no data file of steps or media (issue 37: at 100k episodes it scanned the
    20M-row key column of steps and took 24x as long as at 1k); the full check reads them all."""
    victim = _newest_files(lake_copy, "steps")[0]
    size = victim.stat().st_size
    victim.write_bytes(b"\x00" * size)
    report = check_lake(str(lake_copy))
    assert not report.ok and "table steps of version 3 has an unreadable data file" in str(report.problems[0])
    assert check_lake(str(lake_copy), quick=True).ok


def _advised(report) -> int:
    import re

    m = re.search(r"intact at version (\d+)", str(report.problems[0]))
    assert m is not None, str(report.problems[0])
    return int(m.group(1))


def test_restore_advice_names_only_a_version_that_checks_clean(lake_copy, capsys):
    """The issue's case: a media file truncated that versions 2 and 3 both reference. `check`
    advised `restore ... 2`, and `check --version 2` failed on the same file."""
    l2 = Lake.open(str(lake_copy), version=2)
    shared = sorted({df.path for f in l2.dataset("media").get_fragments() for df in f.metadata.files})
    victim = lake_copy / "media.lance" / "data" / shared[0]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    for quick in (False, True):
        report = check_lake(str(lake_copy), quick=quick)
        assert not report.ok
        advised = _advised(report)
        assert advised == 1, str(report.problems[0])
        assert check_lake(str(lake_copy), advised, quick=quick).ok
        assert not check_lake(str(lake_copy), 2, quick=quick).ok
    assert main(["check", str(lake_copy)]) == 1
    assert f"`robolake restore {lake_copy} 1`" in capsys.readouterr().err
    assert main(["check", str(lake_copy), "--version", "1"]) == 0


def test_damaged_manifest_restore_and_resume(built, lake_copy, capsys):
    manifest = lake_copy / "_robolake/versions/00000003.json"
    manifest.write_text(manifest.read_text()[:50])
    with pytest.raises(DamagedManifestError, match="intact at version 2"):
        Lake.open(str(lake_copy))
    report = check_lake(str(lake_copy))
    assert str(report.problems[0]).startswith(f"version 3's manifest {manifest} is damaged")
    assert f"`robolake restore {lake_copy} 2`" in str(report.problems[0])
    assert main(["info", str(lake_copy)]) == 2
    assert "00000003.json is damaged" in capsys.readouterr().err
    lv = restore_version(str(lake_copy), 2)
    assert lv.version == 4
    lake = Lake.open(str(lake_copy))
    assert lake.count("episodes") == 2 and check_lake(str(lake_copy)).ok
    assert ingest(str(built[1]["B"]), str(lake_copy)).ingested == 2
    assert check_lake(str(lake_copy)).ok and Lake.open(str(lake_copy)).count("episodes") == 4


def test_foreign_rows_are_found(lake_copy):
    """The issue's mixed lake: a version whose steps hold rows of an episode it does not list."""
    lake = Lake.open(str(lake_copy))
    rows = lake.to_arrow("steps").slice(0, 3).to_pylist()
    for r in rows:
        r["episode_id"] = "someone-else/000000-abc"
    ds = lance.write_dataset(
        pa.Table.from_pylist(rows, schema=schema_for_table("steps")), lake.table_uri("steps"), mode="append"
    )
    tables = {**lake.version_info.tables, "steps": ds.version}
    write_version(lake.uri, LakeVersion(version=4, tables=tables, operation="bad", created_at=0.0))
    report = check_lake(lake.uri)
    assert any(
        "holds rows of 1 episodes the episodes table does not list (first: someone-else/000000-abc)" in str(p)
        for p in report.problems
    )


# --- [30] clones check clean; nothing a lake's files name leads outside it -----------------------------------


def test_a_clone_checks_clean_and_is_packable(lake_copy, tmp_path, capsys):
    from robolake import curate

    for verb, into in (("select", tmp_path / "sel"), ("merge", tmp_path / "merged")):
        if verb == "select":
            curate.select_into(str(lake_copy), "num_steps >= 1", str(into))
        else:
            curate.merge([str(tmp_path / "sel"), str(lake_copy)], str(into))
        report = check_lake(str(into))
        assert report.ok, report.problems  # before the fix: "references 1 data file(s) that do not exist"
        assert any("shallow clone" in n for n in report.notes)
        assert main(["check", str(into)]) == 0
        assert main(["info", str(into)]) == 0
    capsys.readouterr()


def test_a_table_folder_linked_outside_the_lake_is_damage(lake_copy, tmp_path, capsys):
    outside = tmp_path / "elsewhere"
    shutil.move(str(lake_copy / "quarantine.lance"), outside)
    (lake_copy / "quarantine.lance").symlink_to(outside, target_is_directory=True)
    report = check_lake(str(lake_copy))
    assert not report.ok and "outside the lake" in str(report.problems[0])
    with pytest.raises(ValueError, match="leads outside"):
        Lake.open(str(lake_copy)).dataset("quarantine")
    assert main(["info", str(lake_copy)]) != 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../../../../etc/passwd", "/tmp/other.lance", "not_a_table"])
def test_a_manifest_naming_a_path_as_a_table_is_damaged(lake_copy, name, capsys):
    import json

    manifest = lake_copy / "_robolake" / "versions" / "00000003.json"
    doc = json.loads(manifest.read_text())
    doc["tables"][name] = 1
    manifest.write_text(json.dumps(doc))
    with pytest.raises(DamagedManifestError):
        Lake.open(str(lake_copy))
    report = check_lake(str(lake_copy))
    assert not report.ok and "damaged" in str(report.problems[0])
    assert main(["info", str(lake_copy)]) != 0 and main(["pack", str(lake_copy), str(lake_copy) + "-packed"]) != 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_marker_of_another_format_is_not_a_lake(lake_copy, capsys):
    import json

    marker = lake_copy / "_robolake" / "lake.json"
    doc = json.loads(marker.read_text())
    doc["format"] = "someone-elses-store"
    marker.write_text(json.dumps(doc))
    report = check_lake(str(lake_copy))
    assert not report.ok and "not a robolake lake" in str(report.problems[0])  # before: checked OK
    assert main(["info", str(lake_copy)]) != 0
    assert "Traceback" not in capsys.readouterr().err
