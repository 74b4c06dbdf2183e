"""The lake's version protocol: format marker, manifests, conflicts, killed writers, damaged manifests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from robolake.lake import CommitConflictError, Lake
from robolake.lake.protocol.transaction import write_table_fragments
from robolake.lake.protocol.versions import DamagedManifestError
from robolake.schemas import UnsupportedLakeVersionError, schema_for_table

REPO = Path(__file__).resolve().parents[3]


def _quarantine_rows(n: int, tag: str = "x") -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "source_uri": tag,
                "source_path": f"{tag}/{i}",
                "source_format": "test",
                "source_episode_index": i,
                "reason_code": "test",
                "reason": "made by a test",
                "quarantined_at": 0,
            }
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


_KILLED_WRITER = """
import sys
import pyarrow as pa
from robolake.lake import Lake
from robolake.schemas import schema_for_table
rows = [{"source_uri": "orphan", "source_path": f"orphan/{i}", "source_format": "test", "source_episode_index": i,
         "reason_code": "test", "reason": "made by a test", "quarantined_at": 0} for i in range(5)]
tx = Lake.open(sys.argv[1]).begin()
tx.append_table("quarantine", pa.Table.from_pylist(rows, schema=schema_for_table("quarantine")))
"""


def test_killed_writer_is_invisible_and_rolled_back(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    # The writer is SIGKILLed right after its table commit, before any manifest (faults hook).
    env = {**os.environ, "ROBOLAKE_FAULT": "after_commit:quarantine:kill", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, lake.uri], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    reader = Lake.open(lake.uri)
    assert reader.version == 1 and reader.count("quarantine") == 0
    assert lance.dataset(reader.table_uri("quarantine")).count_rows() == 5  # committed, never published
    tx2 = reader.begin()
    tx2.append_table("quarantine", _quarantine_rows(2, "good"))
    tx2.commit("after-crash")
    after = Lake.open(lake.uri)
    assert after.to_arrow("quarantine")["source_uri"].to_pylist() == ["good", "good"]
    assert lance.dataset(after.table_uri("quarantine")).count_rows() == 2
    # the dead writer's presence record is gone, and the lease is free
    assert not list((tmp_path / "lake/_robolake/writers").glob("*.json"))


def test_damaged_latest_manifest_names_file_and_last_good(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    tx = lake.begin()
    tx.append_table("quarantine", _quarantine_rows(1))
    tx.commit("test")
    path = tmp_path / "lake/_robolake/versions/00000002.json"
    path.write_text(path.read_text()[:40])
    with pytest.raises(
        DamagedManifestError,
        match=r"version 2's manifest .*00000002.json is damaged.*intact at version 1.*robolake restore",
    ) as e:
        Lake.open(lake.uri)
    assert e.value.last_good == 1 and e.value.version == 2
    assert Lake.open(lake.uri, version=1).version == 1


def test_fragment_schema_mismatch_is_a_clear_error(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    with pytest.raises(ValueError, match="do not match its schema"):
        write_table_fragments(lake.uri, "quarantine", pa.table({"nope": [1]}))
