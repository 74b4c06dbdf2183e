"""delete / select / restore: new versions through the lease, earlier versions intact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake import curate
from robolake.lake import Lake


def test_delete_removes_steps_media_and_stats_and_keeps_history(lake_dir: Path):
    before = Lake.open(str(lake_dir))
    gone = sorted(e for e in before.episode_ids() if e.startswith("bimanual"))
    r = curate.delete(str(lake_dir), where="embodiment = 'bimanual_14dof'", reason="rig 2 miscalibrated")
    assert r.episodes == tuple(gone) and r.version == before.version + 1
    after = Lake.open(str(lake_dir))
    assert set(after.episode_ids()) == set(before.episode_ids()) - set(gone)
    for t in ("steps", "media"):
        left = set(after.to_arrow(t, columns=["episode_id"]).column("episode_id").to_pylist())
        assert not left & set(gone)
    assert "bimanual_14dof" not in after.embodiments()
    info = after.version_info
    assert info.operation == "delete" and info.summary["reason"] == "rig 2 miscalibrated" and info.summary["who"]
    assert sorted(info.summary["removed"]) == gone
    # the version before still reads every row
    old = after.checkout(before.version)
    assert old.count("steps") == before.count("steps") and old.count("media") == before.count("media")


def test_delete_updates_statistics_of_the_touched_embodiment_only(lake_dir: Path):
    lake = Lake.open(str(lake_dir))
    victim = sorted(e for e in lake.episode_ids() if e.startswith("humanoid"))[0]
    keep_arm = lake.norm_stats("single_arm_7dof")
    curate.delete(str(lake_dir), episodes=[victim], reason="dropped frames")
    after = Lake.open(str(lake_dir))
    left = after.to_arrow("steps", columns=["state"], where="embodiment = 'humanoid_44dof'").column("state").to_pylist()
    stats = after.norm_stats("humanoid_44dof")
    np.testing.assert_allclose(stats.state.mean, np.asarray(left, dtype=np.float64).mean(axis=0), rtol=1e-6, atol=1e-6)
    assert stats.state.count == len(left)
    np.testing.assert_array_equal(after.norm_stats("single_arm_7dof").state.mean, keep_arm.state.mean)


def test_bad_deletes_publish_nothing(lake_dir: Path):
    v = Lake.open(str(lake_dir)).version
    with pytest.raises(ValueError, match="has no episode 'nope'"):
        curate.delete(str(lake_dir), episodes=["nope"], reason="x")
    with pytest.raises(ValueError, match="selects no episode"):
        curate.delete(str(lake_dir), where="num_steps > 100000", reason="x")
    with pytest.raises(ValueError, match="say why"):
        curate.delete(str(lake_dir), where="num_steps > 0", reason=" ")
    with pytest.raises(ValueError, match="keeps every episode"):
        curate.select(str(lake_dir), "num_steps > 0")
    assert Lake.open(str(lake_dir)).version == v


def test_select_then_restore_round_trip(lake_dir: Path):
    lake = Lake.open(str(lake_dir))
    all_ids = set(lake.episode_ids())
    steps_before = lake.to_arrow("steps").sort_by([("episode_id", "ascending"), ("step_index", "ascending")])
    r = curate.select(str(lake_dir), "num_steps >= 38", reason="long demos only")
    kept = set(Lake.open(str(lake_dir)).episode_ids())
    assert kept == set(r.episodes) and kept < all_ids
    back = curate.restore_episodes(str(lake_dir), sorted(all_ids - kept), reason="need them after all")
    lake = Lake.open(str(lake_dir))
    assert set(lake.episode_ids()) == all_ids and back.version == lake.version
    steps_after = lake.to_arrow("steps").sort_by([("episode_id", "ascending"), ("step_index", "ascending")])
    assert steps_after.equals(steps_before)
    assert set(lake.embodiments()) == {"bimanual_14dof", "humanoid_44dof", "single_arm_7dof"}
    with pytest.raises(ValueError, match="already"):
        curate.restore_episodes(str(lake_dir), sorted(all_ids)[:1])


def test_tag_selection_scopes_every_read(lake_dir: Path):
    r = curate.tag_selection(str(lake_dir), "embodiment = 'humanoid_44dof'", "humanoids")
    assert r.version is None
    lake = Lake.open(str(lake_dir), tag="humanoids")
    assert lake.tag is not None and set(lake.episode_ids()) == set(r.episodes)
    for t in ("steps", "media"):
        assert set(lake.to_arrow(t, columns=["episode_id"]).column("episode_id").to_pylist()) == set(r.episodes)
    assert (
        lake.count("steps")
        == Lake.open(str(lake_dir)).count(
            "steps",
        )
        - Lake.open(str(lake_dir))
        .to_arrow("steps", columns=["episode_id"], where="embodiment <> 'humanoid_44dof'")
        .num_rows
    )
    with pytest.raises(FileExistsError, match="already names"):
        curate.tag_selection(str(lake_dir), "num_steps > 0", "humanoids")
    with pytest.raises(ValueError, match="opened at tag"):
        curate.delete(lake, episodes=list(r.episodes), reason="x")


def test_frames_and_packing_after_deleting_episodes_in_the_middle(lake_dir: Path, tmp_path: Path):
    """A deletion file shifts row offsets: reads must still return each episode's own rows."""
    from robolake.packers import PackSpec, TokenLengthConfig, build_sample_index

    lake = Lake.open(str(lake_dir))
    media = lake.to_arrow("media", columns=["episode_id", "camera", "step_index", "data"])
    by_key = {
        (e, c, s): d
        for e, c, s, d in zip(
            *(media[k].to_pylist() for k in ("episode_id", "camera", "step_index", "data")), strict=True
        )
    }
    ids = lake.episode_ids()  # table order: delete every other one, so survivors sit after deleted rows
    curate.delete(str(lake_dir), episodes=ids[::2], reason="test offsets")
    after = Lake.open(str(lake_dir))
    keys = sorted(k for k in by_key if k[0] in set(ids[1::2]))
    got = after.frames().read_encoded(keys)
    assert got == [by_key[k] for k in keys]
    spec = PackSpec(max_tokens=1024, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
    index = build_sample_index(after, spec)
    steps = after.dataset("steps")
    for e, eid in enumerate(index.episodes["episode_id"].to_pylist()):
        row = steps.take([int(index.step_offset[e])], columns=["episode_id", "step_index"]).to_pylist()[0]
        assert row == {"episode_id": eid, "step_index": 0}


def test_a_split_packs_only_its_episodes(lake_dir: Path, tmp_path: Path):
    from robolake.packers import PackSpec, TokenLengthConfig, build_sample_index

    s = curate.split(str(lake_dir), curate.SplitConfig(val=0.5, stratify=("embodiment",), seed=1))
    spec = PackSpec(max_tokens=1024, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
    index = build_sample_index(Lake.open(str(lake_dir), tag="split:val"), spec)
    assert set(index.episodes["episode_id"].to_pylist()) == set(s.parts["val"])


def test_shards_of_deleted_episodes_are_refused_unless_allowed(lake_dir: Path, tmp_path: Path):
    from robolake.loaders import LoaderConfig, open_batches
    from robolake.packers import LineageError, PackSpec, TokenLengthConfig, pack

    spec = PackSpec(max_tokens=1024, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
    pack(str(lake_dir), spec, str(tmp_path / "packed"))
    config = LoaderConfig(image_size=16, num_workers=0)
    open_batches(str(tmp_path / "packed"), config)  # fresh: fine
    victim = Lake.open(str(lake_dir)).episode_ids()[0]
    curate.delete(str(lake_dir), episodes=[victim], reason="operator error in demo 0")
    with pytest.raises(LineageError, match="operator error in demo 0.*--allow-stale"):
        open_batches(str(tmp_path / "packed"), config)
    from dataclasses import replace

    assert open_batches(str(tmp_path / "packed"), replace(config, allow_stale=True)).layout.num_embodiments >= 1
