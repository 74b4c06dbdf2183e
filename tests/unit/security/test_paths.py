"""Paths from a dataset never make ingest read outside its root, nor a run write outside OUT.

tests/unit/lake/test_lerobot_layouts.py covers `../` and absolute `data_path` / `video_path`
templates and a feature key climbing out; these add a NUL byte, symlinks out of the root (a data
file, a video file, a metadata file), the Hugging Face cache's blob links (which stay allowed),
and the run files `train --record-samples` appends to.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.sources.lerobot.meta import resolves_inside
from robolake.training.metrics import SampleRecords, StepMetrics
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


def _source(tmp_path: Path) -> tuple[Path, Path]:
    """(a source of two LeRobot v2.1 datasets, the one of them to damage)."""
    src = tmp_path / "src"
    generate_synthetic(src, SyntheticConfig.tiny(version="v2.1", episodes_per_embodiment=2, image_size=16))
    return src, src / "single_arm_7dof"


def _info(ds: Path) -> dict:
    return json.loads((ds / "meta" / "info.json").read_text())


def _one_reason(result) -> str:
    reasons = {reason for _, reason in result.quarantine}
    assert len(reasons) == 1, reasons
    return reasons.pop()


def test_a_template_with_a_nul_byte_is_refused_naming_the_field(tmp_path: Path) -> None:
    src, bad = _source(tmp_path)
    info = _info(bad)
    info["data_path"] = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}\0.parquet"
    (bad / "meta" / "info.json").write_text(json.dumps(info))
    result = ingest(str(src), str(tmp_path / "lake"))
    assert result.quarantined == 2 and result.ingested == result.discovered - 2 > 0
    reason = _one_reason(result)
    assert "data_path" in reason and "points outside the dataset" in reason and "\n" not in reason


@pytest.mark.parametrize("which", ["data", "video"])
def test_a_file_that_is_a_symlink_out_of_the_dataset_is_never_read(tmp_path: Path, which: str) -> None:
    """The link's target is a valid copy of the episode: following it would land it silently."""
    src, bad = _source(tmp_path)
    info = _info(bad)
    outside = tmp_path / "outside"
    outside.mkdir()
    if which == "data":
        rel = info["data_path"].format(episode_chunk=0, episode_index=0)
    else:
        key = next(k for k, v in info["features"].items() if v["dtype"] == "video")
        rel = info["video_path"].format(episode_chunk=0, video_key=key, episode_index=0)
    os.replace(bad / rel, outside / "stolen")
    (bad / rel).symlink_to(outside / "stolen")
    result = ingest(str(src), str(tmp_path / "lake"))
    assert result.quarantined == 1 and result.ingested == result.discovered - 1 > 0
    reason = _one_reason(result)
    assert f"{which}_path" in reason and "symlink out of it" in reason
    lake = Lake.open(str(tmp_path / "lake"))
    assert {r["reason_code"] for r in lake.to_arrow("quarantine").to_pylist()} == {"bad_metadata"}


def test_a_metadata_file_that_is_a_symlink_out_is_refused(tmp_path: Path) -> None:
    src, bad = _source(tmp_path)
    secret = tmp_path / "credentials"
    secret.write_text('{"codebase_version": "v2.1"}')
    (bad / "meta" / "tasks.jsonl").unlink()
    (bad / "meta" / "tasks.jsonl").symlink_to(secret)
    result = ingest(str(src), str(tmp_path / "lake"))
    assert result.ingested == result.discovered - result.quarantined > 0 and result.quarantined >= 1
    reason = _one_reason(result)
    assert "meta/tasks.jsonl is a symlink out of the dataset" in reason


def test_hugging_face_cache_blob_links_stay_readable(tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "datasets--org--name"
    snap = repo / "snapshots" / "0123abcd"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "f00d").write_text("x")
    (snap / "data").mkdir(parents=True)
    (snap / "data" / "episode_000000.parquet").symlink_to(Path("../../../blobs/f00d"))
    (snap / "data" / "elsewhere.parquet").symlink_to(tmp_path / "hub")
    assert resolves_inside(str(snap), "data/episode_000000.parquet")
    assert not resolves_inside(str(snap), "data/elsewhere.parquet")
    assert not resolves_inside(str(snap), "../../blobs/f00d")  # lexically out: refused whatever it names


def test_run_files_that_are_symlinks_out_are_refused(tmp_path: Path) -> None:
    """A run directory handed over to resume must not make training append to another file."""
    victim = tmp_path / "bashrc"
    victim.write_text("original\n")
    run = tmp_path / "run"
    (run / "samples").mkdir(parents=True)
    (run / "samples" / "rank0.jsonl").symlink_to(victim)
    with pytest.raises(ValueError, match=r"rank0.jsonl is a symlink"):
        SampleRecords(str(run / "samples"), 0)
    (run / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(ValueError, match=r"metrics.jsonl is a symlink"):
        StepMetrics(str(run / "metrics.jsonl"), write=True)
    (tmp_path / "run2").mkdir()
    (tmp_path / "run2" / "samples").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(ValueError, match=r"samples is a symlink"):
        SampleRecords(str(tmp_path / "run2" / "samples"), 0)
    assert victim.read_text() == "original\n" and not (tmp_path / "elsewhere").exists()
    records = SampleRecords(str(tmp_path / "ok" / "samples"), 0)  # a plain run directory still works
    records.write(0, 1, (("ep", 3),))
    records.close()
    assert json.loads((tmp_path / "ok" / "samples" / "rank0.jsonl").read_text())["keys"] == [["ep", 3]]


def _tree(root: Path, skip: tuple[Path, ...]) -> set[str]:
    return {str(p) for p in root.rglob("*") if not any(p == s or s in p.parents for s in skip)}


@pytest.mark.slow
def test_pack_view_and_record_samples_write_only_inside_out(tmp_path: Path) -> None:
    """Task texts that look like paths travel as data: pack, the rerun export and the sample
    records write only names robolake chooses, inside OUT."""
    pytest.importorskip("rerun")
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.training.run import RunConfig, train_on
    from robolake.view.rerun_export import export_rerun

    src, ds = _source(tmp_path)
    tasks = [json.loads(line) for line in (ds / "meta" / "tasks.jsonl").read_text().splitlines()]
    for i, t in enumerate(tasks):
        t["task"] = ["../../../../escaped_task", "/tmp/escaped_abs", "x/../../escaped\0nul"][i % 3]
    (ds / "meta" / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    lake = ingest(str(src), str(tmp_path / "lake"))
    assert lake.ingested == lake.discovered
    out = tmp_path / "deep" / "out"
    before = _tree(tmp_path, (tmp_path / "lake", tmp_path / "deep"))
    opened = Lake.open(str(tmp_path / "lake"))
    pack(
        opened,
        PackSpec(max_tokens=512, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0)),
        str(out / "packed"),
    )
    export_rerun(opened, str(out / "view.rrd"))
    train_on(
        str(out / "packed"),
        RunConfig(out=str(out / "run"), steps=2, warmup_steps=0, num_workers=0, device="cpu", record_samples=True),
    )
    assert _tree(tmp_path, (tmp_path / "lake", tmp_path / "deep")) == before
    assert {p.name for p in (tmp_path / "deep").iterdir()} == {"out"}
    assert not [p for p in tmp_path.rglob("escaped*")] and not Path("/tmp/escaped_abs").exists()
    assert (out / "run" / "samples" / "rank0.jsonl").is_file()
