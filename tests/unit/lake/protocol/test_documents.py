"""The JSON documents the protocol writes keep their keys (lakes written before open unchanged),
and ingest's typed stage results survive the JSON round trip they make across Ray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_type_hints

from robolake.lake import Lake, record_dependent
from robolake.lake.intake.ingest import Checked, Loaded
from robolake.lake.protocol.dependents import DependentRecord, dependents
from robolake.lake.protocol.versions import FormatMarker, LakeVersion, LakeVersionJSON


def test_manifest_marker_and_dependents_keep_their_keys(tmp_path: Path):
    lake = Lake.create(str(tmp_path / "lake"))
    meta = tmp_path / "lake" / "_robolake"
    marker = json.loads((meta / "lake.json").read_text())
    assert sorted(marker) == sorted(get_type_hints(FormatMarker)) == ["created_at", "format", "format_version"]
    assert marker["format"] == "robolake-lake"
    manifest = json.loads((meta / "versions" / "00000001.json").read_text())
    assert sorted(manifest) == sorted(get_type_hints(LakeVersionJSON))
    assert sorted(manifest) == ["created_at", "operation", "summary", "tables", "version"]
    assert LakeVersion.from_json(manifest) == lake.version_info
    clone = Lake.create(str(tmp_path / "clone"))
    record_dependent(lake.uri, clone.uri, {"steps": 1}, created_by="me@here")
    (rec,) = dependents(lake.uri)
    assert sorted(rec) == sorted(get_type_hints(DependentRecord)) == ["created_at", "created_by", "tables", "uri"]
    assert (rec["uri"], rec["tables"]) == (clone.uri, {"steps": 1})


def test_stage_results_round_trip_through_json():
    passed = Checked(ref="/src#0", hash="ab" * 32, notes=("a note",))
    failed = Checked(ref="/src#1", quarantine={"source_path": "/src/x", "reason": "bad"})
    for c in (passed, failed):
        assert Checked.from_json(json.loads(json.dumps(c.to_json()))) == c
    assert passed.ok and not failed.ok
    loaded = Loaded(
        episodes=[{"episode_id": "e", "embodiment": "arm", "content_hash": "h"}],
        quarantine=[{"source_path": "/src/y", "reason": "frames"}],
        fragments={"steps": ['{"id": 0}'], "media": []},
        num_steps=5,
        num_frames=10,
        stats={"arm": "{}"},
    )
    assert Loaded.from_json(json.loads(json.dumps(loaded.to_json()))) == loaded
    emptied = loaded.without_rows()
    assert (emptied.episodes, emptied.fragments_of("steps"), emptied.num_steps, emptied.stats) == ([], [], 0, {})
    assert emptied.quarantine == loaded.quarantine
