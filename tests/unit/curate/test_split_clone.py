"""split (tags), select --into and merge (new lakes referencing files), diff, optimize, gc pins."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from robolake import curate
from robolake.lake import Lake
from robolake.lake.protocol.tags import TagExistsError, list_tags
from robolake.lake.upkeep.gc import gc


def test_split_is_deterministic_disjoint_and_stratified(lake_dir: Path):
    cfg = curate.SplitConfig(val=0.5, stratify=("embodiment",), seed=7)
    a = curate.split(str(lake_dir), cfg)
    parts = {p: set(v) for p, v in a.parts.items()}
    assert parts["train"].isdisjoint(parts["val"])
    assert parts["train"] | parts["val"] == set(Lake.open(str(lake_dir)).episode_ids())
    assert all(c == {"val": 1, "test": 0, "train": 1} for c in a.strata.values())
    val = Lake.open(str(lake_dir), tag="split:val")
    assert set(val.episode_ids()) == parts["val"]
    assert set(val.to_arrow("media", columns=["episode_id"]).column("episode_id").to_pylist()) <= parts["val"]
    with pytest.raises(TagExistsError, match="already split"):
        curate.split(str(lake_dir), cfg)
    b = curate.split(str(lake_dir), cfg, replace=True)
    assert b.parts == a.parts  # same seed, same split
    c = curate.split(str(lake_dir), curate.SplitConfig(val=0.5, stratify=("embodiment",), seed=8), replace=True)
    assert set(c.parts["val"]) | set(c.parts["train"]) == parts["val"] | parts["train"]


def test_split_refuses_a_stratum_without_validation(lake_dir: Path):
    with pytest.raises(ValueError, match="rounds to none for val"):
        curate.split(str(lake_dir), curate.SplitConfig(val=0.1, stratify=("embodiment",)))
    assert not list_tags(str(lake_dir))


def test_select_into_references_the_source_files_and_gc_keeps_them(lake_dir: Path, tmp_path: Path):
    out = tmp_path / "long"
    r = curate.select_into(str(lake_dir), "num_steps >= 37", str(out), reason="long")
    new = Lake.open(str(out))
    assert set(new.episode_ids()) == set(r.episodes) and new.version == 1
    data_files = [p for p in (out / "media.lance").rglob("*.lance") if "data" in p.parts]
    assert not data_files  # nothing copied: the clone's media reference the source's files
    cam = new.episodes()["cameras"][0][0].as_py()
    frame = new.frames().read(r.episodes[0], cam, 2)
    assert frame.shape[-1] == 3
    # the source deletes those episodes and collects garbage: the clone still reads them
    curate.delete(str(lake_dir), episodes=list(r.episodes), reason="moved to their own lake")
    gc(str(lake_dir), dt.timedelta(0))
    assert Lake.open(str(out)).frames().read(r.episodes[0], cam, 2).shape == frame.shape
    assert Lake.open(str(out)).to_arrow("steps").num_rows == sum(new.episodes()["num_steps"].to_pylist())


def test_merge_lands_duplicates_once_and_refuses_conflicting_embodiments(
    lake_dir: Path, tmp_path: Path, base_lake: Path
):
    part = tmp_path / "part"
    curate.select_into(str(lake_dir), "embodiment = 'single_arm_7dof'", str(part))
    merged = tmp_path / "merged"
    r = curate.merge([str(part), str(base_lake)], str(merged))
    m = Lake.open(str(merged))
    assert set(m.episode_ids()) == set(Lake.open(str(base_lake)).episode_ids())
    assert len(r.summary["duplicates"]) == 2 and r.summary["episodes_added"] == 4
    assert m.count("steps") == Lake.open(str(base_lake)).count("steps")
    assert set(m.embodiments()) == set(Lake.open(str(base_lake)).embodiments())
    with pytest.raises(FileExistsError):
        curate.merge([str(part), str(base_lake)], str(merged))


def test_diff_and_optimize(lake_dir: Path):
    lake = Lake.open(str(lake_dir))
    gone = sorted(lake.episode_ids())[:1]
    curate.delete(str(lake_dir), episodes=gone, reason="test")
    curate.restore_episodes(str(lake_dir), gone)
    head = Lake.open(str(lake_dir))
    d = curate.diff(lake, head.checkout(lake.version + 1))
    assert d.removed == tuple(gone) and not d.added
    assert [o["operation"] for o in d.operations] == ["delete"]
    steps = head.to_arrow("steps").sort_by([("episode_id", "ascending"), ("step_index", "ascending")])
    report = curate.optimize(str(lake_dir))
    assert report.version == head.version + 1
    assert all(after <= before for before, after in report.fragments.values())
    assert report.fragments["steps"][1] == 1
    after = Lake.open(str(lake_dir))
    assert after.to_arrow("steps").sort_by([("episode_id", "ascending"), ("step_index", "ascending")]).equals(steps)
    assert after.checkout(head.version).count("steps") == steps.num_rows


def test_gc_keeps_a_tagged_version(lake_dir: Path):
    from robolake.lake.protocol.tags import create_tag

    lake = Lake.open(str(lake_dir))
    create_tag(str(lake_dir), "release-1", lake.version)
    curate.delete(str(lake_dir), episodes=lake.episode_ids()[:2], reason="x")
    report = gc(str(lake_dir), dt.timedelta(0))
    assert lake.version in report.retained
    assert Lake.open(str(lake_dir), tag="release-1").count("steps") == lake.count("steps")
    assert os.path.exists(lake_dir / "_robolake" / "tags" / "release-1.json")
