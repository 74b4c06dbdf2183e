"""`robolake lineage RUN`: from a checkpoint back to every episode's source file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from robolake.cli import main
from robolake.lake import Lake
from robolake.training.checkpoint import read_checkpoint
from robolake.training.lineage import redact_uri, trace_lineage


def _train(capsys, *source: str, out: Path, record: bool = False) -> None:
    argv = ["train", *source, "--out", str(out), "--steps", "2", "--workers", "0", "--device", "cpu", "--no-progress"]
    assert main(argv + (["--record-samples"] if record else [])) == 0, capsys.readouterr().err
    capsys.readouterr()


def test_a_run_on_shards_traces_to_every_source_file(packed_data, tmp_path: Path, capsys) -> None:
    packed = tmp_path / "packed"
    shutil.copytree(packed_data.packed, packed)
    run = tmp_path / "run"
    _train(capsys, "--shards", str(packed), out=run, record=True)
    lineage = read_checkpoint(run).lineage
    assert lineage is not None and lineage["source"] == "pack" and lineage["pack_uri"] == str(packed)
    assert (
        lineage["lake_uri"] == str(packed_data.lake)
        and lineage["lake_version"] == Lake.open(str(packed_data.lake)).version
    )
    assert len(lineage["pack_manifest_sha256"]) == 64 and lineage["pack_spec"]["max_tokens"] == 1024
    ledger = lineage["samples"]["0"]
    assert ledger["file"] == "rank0.jsonl" and ledger["lines"] == 2

    assert main(["lineage", str(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    lake = Lake.open(str(packed_data.lake))
    assert report["pack_matches"] is True and not report["notes"] and not report["missing"]
    assert sorted(e["episode_id"] for e in report["episodes"]) == sorted(lake.episode_ids())
    for e in report["episodes"]:
        assert Path(e["source_path"]).exists() and str(packed_data.syn) in e["source_path"], e
    assert main(["lineage", str(run)]) == 0
    text = capsys.readouterr().out
    assert (
        f"trained on packed shards {packed}" in text
        and "matches" in text
        and f"{lake.count('episodes')} episodes:" in text
    )

    # The pack re-made since: the chain says so and falls back to the lake version it named.
    manifest = packed / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"seconds"', '"seconds_"'))
    again = trace_lineage(run)
    assert again.pack_matches is False and "re-made" in again.notes[0]
    assert sorted(e.episode_id for e in again.episodes) == sorted(lake.episode_ids())


def test_a_run_on_a_split_traces_to_the_split(packed_data, tmp_path: Path, capsys) -> None:
    lake_dir = tmp_path / "lake"
    shutil.copytree(packed_data.lake, lake_dir)
    assert main(["split", str(lake_dir), "--val", "0.34"]) == 0
    capsys.readouterr()
    train_ids = Lake.open(str(lake_dir), tag="split:train").episode_ids()
    assert 0 < len(train_ids) < Lake.open(str(lake_dir)).count("episodes")
    run = tmp_path / "run"
    _train(capsys, "--lake", str(lake_dir), "--split", "train", "--max-tokens", "1024", out=run)
    report = trace_lineage(run)
    assert report.lineage["source"] == "lake" and report.lineage["lake_tag"] == "split:train"
    assert sorted(e.episode_id for e in report.episodes) == sorted(train_ids) and not report.notes


def test_a_checkpoint_without_lineage_says_so(tmp_path: Path) -> None:
    from robolake.training.checkpoint import write_checkpoint

    write_checkpoint(tmp_path, step=1, tensors={}, meta={"extra": {}})
    with pytest.raises(ValueError, match="records no lineage"):
        trace_lineage(tmp_path)


def test_uris_are_recorded_without_credentials() -> None:
    assert redact_uri("s3://AKIAFAKE:s3cr3t@bucket/lake") == "s3://bucket/lake"
    assert redact_uri("/data/lake") == "/data/lake" and redact_uri("s3://bucket/a@b") == "s3://bucket/a@b"
