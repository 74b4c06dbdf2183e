"""The Lake handle: filters, Arrow and Ray access, indexes, statistics, `robolake info`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robolake.cli import main as cli_main
from robolake.lake import EpisodeFilter, Lake
from robolake.lake.ingest import ingest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture(scope="module")
def lake(tmp_path_factory, ray_session) -> Lake:
    root = tmp_path_factory.mktemp("lake")
    generate_synthetic(root / "syn", SyntheticConfig.tiny())
    ingest(str(root / "syn"), str(root / "lake"))
    return Lake.open(str(root / "lake"))


def test_filters(lake):
    assert lake.count("episodes") == 6
    arms = lake.episodes(EpisodeFilter(embodiment="single_arm_7dof"))
    assert arms.num_rows == 2 and set(arms["embodiment"].to_pylist()) == {"single_arm_7dof"}
    two = lake.episodes(EpisodeFilter(embodiment=["single_arm_7dof", "humanoid_44dof"]))
    assert two.num_rows == 4
    task = arms["task"][0].as_py()
    assert lake.episodes(EpisodeFilter(task=task)).num_rows >= 1
    assert lake.episodes(EpisodeFilter(task_contains=task[3:12])).num_rows >= 1
    steps = lake.to_arrow("steps", where=EpisodeFilter(embodiment="single_arm_7dof"))
    assert steps.num_rows == sum(arms["num_steps"].to_pylist())
    assert set(steps["embodiment"].to_pylist()) == {"single_arm_7dof"}
    ids = arms["episode_id"].to_pylist()[:1]
    assert lake.to_arrow("media", where=EpisodeFilter(episode_ids=ids)).num_rows == arms["num_steps"][0].as_py()
    assert lake.episodes(EpisodeFilter(task_contains="it's")).num_rows == 0  # quotes are escaped
    with pytest.raises(ValueError, match="sequence of ids"):
        EpisodeFilter(episode_ids="abc")


def test_ray_dataset_is_pinned_to_the_version(lake):
    ds = lake.to_ray("steps", columns=["episode_id", "state"], where=EpisodeFilter(embodiment="humanoid_44dof"))
    rows = ds.take_all()
    assert len(rows) == lake.count("steps", ) - lake.to_arrow("steps", where=EpisodeFilter(embodiment=["single_arm_7dof", "bimanual_14dof"])).num_rows
    assert len(rows[0]["state"]) == 44


def test_episode_id_indexes_exist(lake):
    for table in ("episodes", "steps", "media"):
        indices = lake.dataset(table).describe_indices() if hasattr(lake.dataset(table), "describe_indices") else lake.dataset(table).list_indices()
        names = json.dumps([str(i) for i in indices])
        assert "episode_id" in names, f"{table} has no episode_id index"


def test_embodiments_and_stats(lake):
    specs = lake.embodiments()
    assert set(specs) == {"single_arm_7dof", "bimanual_14dof", "humanoid_44dof"}
    assert specs["bimanual_14dof"].cameras == ("cam_high", "cam_left_wrist", "cam_right_wrist")
    stats = lake.norm_stats("single_arm_7dof")
    steps = lake.to_arrow("steps", where=EpisodeFilter(embodiment="single_arm_7dof"))
    state = np.stack(steps["state"].to_numpy(zero_copy_only=False))
    np.testing.assert_allclose(stats.state.mean, state.mean(0), rtol=1e-5, atol=1e-6)
    # q99 comes from a mergeable sketch: within 0.5% of the value (lake/sketch.py's bound).
    np.testing.assert_allclose(stats.state.q99, np.quantile(state.astype(np.float64), 0.99, axis=0), rtol=5e-3, atol=1e-5)
    x = stats.action.normalize(np.asarray(steps["action"][0].as_py()))
    np.testing.assert_allclose(stats.action.unnormalize(x), steps["action"][0].as_py(), rtol=1e-5, atol=1e-5)
    with pytest.raises(KeyError, match="no embodiment 'nope'"):
        lake.norm_stats("nope")


def test_info_cli(lake, capsys):
    assert cli_main(["info", lake.uri]) == 0
    out = capsys.readouterr().out
    assert "bimanual_14dof" in out and "quarantine: empty" in out and "version 2" in out
    assert cli_main(["info", lake.uri, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["tables"]["episodes"]["rows"] == 6 and [v["operation"] for v in d["versions"]] == ["create", "ingest"]
    assert cli_main(["info", lake.uri + "-missing"]) == 2


def test_timestamps_start_at_zero_and_the_source_offset_is_kept(pick_n_place, tmp_path, ray_session):
    import json

    from robolake.lake.ingest import ingest

    ingest(str(pick_n_place), str(tmp_path / "lake"))
    lake = Lake.open(str(tmp_path / "lake"))
    ep = lake.episodes().to_pylist()[0]
    steps = lake.to_arrow("steps", where=EpisodeFilter(episode_ids=[ep["episode_id"]])).sort_by("step_index")
    assert steps["timestamp"][0].as_py() == 0.0
    assert json.loads(ep["metadata"])["source_time_offset_s"] == pytest.approx(0.05)  # the real data starts at 0.05 s
