"""Rollouts as episodes: rows like a recording's, metadata `where` reads, idempotent, one version, packable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.rollouts import (
    RolloutEpisode,
    RolloutOrigin,
    RolloutTarget,
    decode_chunks,
    write_rollouts,
)
from robolake.lake.media.frames import decode_row
from robolake.lake.where import select_episode_ids
from robolake.schemas.embodiment import EmbodimentSpec

SPEC = EmbodimentSpec(tag="arm3", state_dim=3, action_dim=2, cameras=("front",), fps=10.0)
ORIGIN = RolloutOrigin(
    producer="eval",
    run="test",
    checkpoint="/ckpt/step_00000010",
    checkpoint_sha256="ab" * 32,
    trained_on={"lake_uri": "/lake", "lake_version": 4, "lake_tag": "split:train"},
    policy={"replan": 2},
)


def _episode(seed: int, steps: int = 6, success: bool = True) -> RolloutEpisode:
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 255, (steps, 16, 16, 3), dtype=np.uint8)
    chunk_steps = np.arange(0, steps, 2)
    return RolloutEpisode(
        embodiment="arm3",
        task="reach the goal",
        seed=seed,
        states=rng.normal(size=(steps, 3)).astype(np.float32),
        actions=rng.uniform(-1, 1, (steps, 2)).astype(np.float32),
        frames=(("front", frames),),
        rewards=rng.uniform(size=steps).astype(np.float32),
        success=success,
        chunks=rng.uniform(-1, 1, (len(chunk_steps), 4, 2)).astype(np.float32),
        chunk_steps=chunk_steps,
        fps=10.0,
        info={"sim_task": "reach"},
    )


def test_rollouts_land_as_episodes_with_their_origin(tmp_path):
    eps = [_episode(1), _episode(2, success=False), _episode(3, steps=4)]
    r = write_rollouts(str(tmp_path / "lake"), eps, ORIGIN, spec=SPEC)
    lake = Lake.open(str(tmp_path / "lake"))
    assert (r.written, r.skipped, r.successes, r.steps) == (3, 0, 2, 16) and r.lake_version == lake.version
    assert lake.versions()[-1].operation == "rollouts"
    rows = {e["episode_id"]: e for e in lake.episodes().to_pylist()}
    assert set(rows) == set(r.episode_ids) and all(e.startswith("rollout-abababababab/") for e in rows)
    steps = lake.to_arrow("steps").to_pylist()
    media = {(m["episode_id"], m["step_index"]): (m["data"], m["encoding"]) for m in lake.to_arrow("media").to_pylist()}
    for eid, e in zip(r.episode_ids, eps, strict=True):
        meta = json.loads(rows[eid]["metadata"])
        assert meta["source"] == "rollout" and meta["seed"] == e.seed and meta["checkpoint_sha256"] == "ab" * 32
        assert meta["trained_on"] == {"lake_uri": "/lake", "lake_version": 4, "lake_tag": "split:train"}
        assert meta["policy"] == {"replan": 2} and meta["sim_task"] == "reach" and meta["producer"] == "eval"
        assert meta["rewards"] == pytest.approx(e.rewards.tolist()) and meta["reward"] == pytest.approx(
            float(e.rewards.sum())
        )
        chunks, at = decode_chunks(meta)
        np.testing.assert_array_equal(chunks, e.chunks)
        np.testing.assert_array_equal(at, e.chunk_steps)
        assert (
            rows[eid]["success"] == e.success
            and rows[eid]["num_steps"] == len(e.actions)
            and rows[eid]["source_format"] == "rollout"
        )
        mine = sorted((s for s in steps if s["episode_id"] == eid), key=lambda s: s["step_index"])
        np.testing.assert_array_equal(np.asarray([s["state"] for s in mine], np.float32), e.states)
        np.testing.assert_array_equal(np.asarray([s["action"] for s in mine], np.float32), e.actions)
        for t in range(len(e.actions)):  # kept as ingest keeps raw pixels: losslessly
            np.testing.assert_array_equal(decode_row(*media[(eid, t)]), e.frames[0][1][t])
    spec = lake.embodiments()["arm3"]
    assert (spec.state_dim, spec.action_dim, spec.cameras) == (3, 2, ("front",))
    assert lake.norm_stats("arm3").state.mean.shape == (3,)


def test_where_selects_successful_rollouts(tmp_path):
    lake_uri = str(tmp_path / "lake")
    r = write_rollouts(lake_uri, [_episode(1), _episode(2, success=False)], ORIGIN, spec=SPEC)
    lake = Lake.open(lake_uri)
    assert select_episode_ids(lake, "success and source='rollout'") == [r.episode_ids[0]]
    assert sorted(select_episode_ids(lake, "source = 'rollout' and meta.sim_task = 'reach'")) == sorted(r.episode_ids)
    assert select_episode_ids(lake, "source = 'recorded'") == []


def test_writing_the_same_rollouts_again_lands_nothing(tmp_path):
    lake_uri = str(tmp_path / "lake")
    first = write_rollouts(lake_uri, [_episode(1), _episode(2)], ORIGIN, spec=SPEC)
    again = write_rollouts(lake_uri, [_episode(1), _episode(2), _episode(3)], ORIGIN, spec=SPEC)
    assert (again.written, again.skipped) == (1, 2) and again.lake_version == first.lake_version + 1
    assert Lake.open(lake_uri).count("episodes") == 3
    other = RolloutOrigin(producer="eval", run="test", checkpoint="/other", checkpoint_sha256="cd" * 32)
    assert write_rollouts(lake_uri, [_episode(1)], other).written == 1  # other weights: another rollout
    target = RolloutTarget(lake=lake_uri, spec=SPEC, origin=ORIGIN)
    assert target.write([_episode(1)]).skipped == 1


def test_mismatched_rollouts_are_refused(tmp_path):
    lake_uri = str(tmp_path / "lake")
    with pytest.raises(ValueError, match="no embodiment 'arm3' and no spec"):
        write_rollouts(lake_uri, [_episode(1)], ORIGIN)
    write_rollouts(lake_uri, [_episode(1)], ORIGIN, spec=SPEC)
    wide = EmbodimentSpec(tag="arm3", state_dim=4, action_dim=2, cameras=("front",), fps=10.0)
    e = _episode(5)
    bad = RolloutEpisode(
        embodiment="arm3",
        task=e.task,
        seed=5,
        states=np.zeros((6, 4), np.float32),
        actions=e.actions,
        frames=e.frames,
        rewards=e.rewards,
        success=True,
        chunks=e.chunks,
        chunk_steps=e.chunk_steps,
        fps=10.0,
    )
    with pytest.raises(ValueError, match="widths 4/2 .* has 3/2"):
        write_rollouts(lake_uri, [bad], ORIGIN, spec=wide)
    with pytest.raises(ValueError, match="frames must be uint8"):
        RolloutEpisode(
            embodiment="arm3",
            task="t",
            seed=0,
            states=e.states,
            actions=e.actions,
            frames=(("front", e.frames[0][1][:2]),),
            rewards=e.rewards,
            success=True,
            chunks=e.chunks,
            chunk_steps=e.chunk_steps,
            fps=10.0,
        )
    with pytest.raises(ValueError, match="chunk_steps"):
        RolloutEpisode(
            embodiment="arm3",
            task="t",
            seed=0,
            states=e.states,
            actions=e.actions,
            frames=e.frames,
            rewards=e.rewards,
            success=True,
            chunks=e.chunks,
            chunk_steps=np.array([1, 2, 3]),
            fps=10.0,
        )
    with pytest.raises(ValueError, match="no policy_chunks"):
        decode_chunks({"source": "recorded"})


def test_a_rollout_lake_packs_like_any_other(tmp_path):
    from robolake.loaders import LoaderConfig, open_batches
    from robolake.packers import PackSpec, TokenLengthConfig, pack

    lake_uri = str(tmp_path / "lake")
    write_rollouts(lake_uri, [_episode(s) for s in range(4)], ORIGIN, spec=SPEC)
    spec = PackSpec(max_tokens=256, horizon=4, tokens=TokenLengthConfig(tokens_per_view=8, state_tokens=0))
    m = pack(lake_uri, spec, str(tmp_path / "packed"))
    assert m.num_samples == 24
    batch = next(
        iter(open_batches(str(tmp_path / "packed"), LoaderConfig(image_size=16, num_workers=0, sequences_per_batch=4)))
    )
    assert batch.state.shape[1] >= 3 and batch.num_samples > 0
