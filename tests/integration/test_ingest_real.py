"""Ingest the shared, real GR00T PickNPlace dataset and check it against the source files."""

from __future__ import annotations

import json

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from robolake.lake import EpisodeFilter, Lake
from robolake.lake.intake.ingest import ingest
from tests.conftest import copy_pick_n_place


@pytest.fixture(scope="module")
def real_lake(tmp_path_factory, ray_session):
    root = tmp_path_factory.mktemp("real")
    src = copy_pick_n_place(root)
    result = ingest(str(src), str(root / "lake"))
    return result, Lake.open(str(root / "lake")), src


def test_counts_match_source(real_lake):
    result, lake, _ = real_lake
    assert (result.ingested, result.quarantined, result.skipped) == (5, 0, 0)
    assert lake.count("episodes") == 5
    assert lake.count("steps") == 2096
    assert lake.count("media") == 2096
    eps = lake.episodes().to_pylist()
    assert sorted(e["num_steps"] for e in eps) == sorted([416, 470, 470, 412, 328])
    assert {e["embodiment"] for e in eps} == {"gr1_arms_only"}
    assert all(e["cameras"] == ["ego_view"] for e in eps)  # the stale 'egoview' feature is ignored
    assert all(e["source_format"] == "lerobot-v2.0" for e in eps)


def test_values_match_source(real_lake):
    _, lake, src = real_lake
    ep = lake.episodes(EpisodeFilter(task_contains="ketchup")).to_pylist()
    assert len(ep) == 1 and ep[0]["source_episode_index"] == 1
    source = pq.read_table(src / "data/chunk-000/episode_000001.parquet")
    steps = lake.to_arrow("steps", where=EpisodeFilter(episode_ids=[ep[0]["episode_id"]])).sort_by("step_index")
    np.testing.assert_allclose(
        np.stack(steps["state"].to_numpy(zero_copy_only=False)),
        np.stack(source["observation.state"].to_numpy(zero_copy_only=False)).astype(np.float32),
    )
    np.testing.assert_allclose(
        np.stack(steps["action"].to_numpy(zero_copy_only=False)),
        np.stack(source["action"].to_numpy(zero_copy_only=False)).astype(np.float32),
    )
    ts = source["timestamp"].to_numpy()
    np.testing.assert_allclose(steps["timestamp"].to_numpy(), ts - ts[0], atol=1e-6)  # source starts at 0.05
    assert steps["timestamp"][0].as_py() == 0.0


def test_frames_match_decoded_video(real_lake):
    _, lake, src = real_lake
    eid = lake.episodes(EpisodeFilter(task_contains="candle"), columns=["episode_id"])["episode_id"][0].as_py()
    with av.open(str(src / "videos/chunk-000/observation.images.ego_view/episode_000002.mp4")) as c:
        decoded = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    assert len(decoded) == 470
    frames = lake.frames()
    for step in (0, 1, 233, 469):
        got = frames.read(eid, "ego_view", step)
        assert got.shape == (256, 256, 3)
        # JPEG is lossy: close on average, exact in layout.
        assert np.abs(got.astype(np.int16) - decoded[step].astype(np.int16)).mean() < 3.0
    # A different step is a different picture: the mapping is positional, not off by one.
    assert np.abs(frames.read(eid, "ego_view", 0).astype(np.int16) - decoded[200].astype(np.int16)).mean() > 3.0


def test_embodiment_spec_and_stats(real_lake):
    _, lake, src = real_lake
    spec = lake.embodiments()["gr1_arms_only"]
    modality = json.loads((src / "meta/modality.json").read_text())
    assert spec.to_modality_json() == modality
    stats = lake.norm_stats("gr1_arms_only")
    src_stats = json.loads((src / "meta/stats.json").read_text())
    np.testing.assert_allclose(stats.state.mean, src_stats["observation.state"]["mean"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats.action.max, src_stats["action"]["max"], rtol=1e-5, atol=1e-6)
    assert stats.state.count == 2096
    assert np.all(stats.action.q01 <= stats.action.q99)


def test_second_ingest_is_a_no_op(real_lake):
    _, lake, src = real_lake
    again = ingest(str(src), lake.uri)
    assert (again.ingested, again.skipped) == (0, 5)
    assert Lake.open(lake.uri).version == lake.version
    assert lake.refresh().count("steps") == 2096


def test_older_version_stays_readable(real_lake):
    _, lake, _ = real_lake
    first = lake.checkout(1)
    assert first.count("episodes") == 0
    assert [v.operation for v in lake.versions()] == ["create", "ingest"]
