"""The lake's version protocol: format marker, manifests, conflicts, interrupted writers."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from robolake.lake import CommitConflictError, Lake
from robolake.lake.transaction import write_table_fragments
from robolake.schemas import UnsupportedLakeVersionError, schema_for_table


def _quarantine_rows(n: int, tag: str = "x") -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"source_uri": tag, "source_path": f"{tag}/{i}", "source_format": "test", "source_episode_index": i,
             "reason_code": "test", "reason": "made by a test", "quarantined_at": 0}
            for i in range(n)
        ],
        schema=schema_for_table("quarantine"),
    )


def test_create_open_and_versions(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    assert lake.version == 1
    tx = lake.begin()
    tx.append_table("quarantine", _quarantine_rows(3))
    v2 = tx.commit("test")
    assert v2.version == 2
    reopened = Lake.open(str(tmp_path / "lake"))
    assert reopened.version == 2 and reopened.count("quarantine") == 3
    assert reopened.checkout(1).count("quarantine") == 0
    assert [v.version for v in reopened.versions()] == [1, 2]
    with pytest.raises(FileExistsError, match="already exists"):
        Lake.create(str(tmp_path / "lake"))
    with pytest.raises(ValueError, match="no version 7"):
        reopened.checkout(7)


def test_not_a_lake_and_unknown_format(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a robolake lake"):
        Lake.open(str(tmp_path / "nothing"))
    Lake.create(str(tmp_path / "lake"))
    marker = tmp_path / "lake/_robolake/lake.json"
    d = json.loads(marker.read_text())
    d["format_version"] = 99
    marker.write_text(json.dumps(d))
    with pytest.raises(UnsupportedLakeVersionError, match="format version 99"):
        Lake.open(str(tmp_path / "lake"))


def test_concurrent_writers_conflict(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    a, b = lake.begin(), lake.begin()
    a.append_table("quarantine", _quarantine_rows(1, "a"))
    a.commit("a")
    with pytest.raises(CommitConflictError, match="re-run"):
        b.append_table("quarantine", _quarantine_rows(1, "b"))
        b.commit("b")
    assert Lake.open(str(tmp_path / "lake")).to_arrow("quarantine")["source_uri"].to_pylist() == ["a"]


def test_interrupted_writer_is_invisible_and_rolled_back(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    tx = lake.begin()
    tx.append_table("quarantine", _quarantine_rows(5, "orphan"))
    # ... the process dies here: table committed, no lake manifest.
    reader = Lake.open(str(tmp_path / "lake"))
    assert reader.version == 1 and reader.count("quarantine") == 0
    tx2 = reader.begin()
    tx2.append_table("quarantine", _quarantine_rows(2, "good"))
    tx2.commit("after-crash")
    after = Lake.open(str(tmp_path / "lake"))
    assert after.to_arrow("quarantine")["source_uri"].to_pylist() == ["good", "good"]


def test_fragment_schema_mismatch_is_a_clear_error(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    with pytest.raises(ValueError, match="do not match its schema"):
        write_table_fragments(lake.uri, "quarantine", pa.table({"nope": [1]}))
