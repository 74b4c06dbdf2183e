"""The Lake handle: filters, Arrow and Ray access, indexes, statistics, `robolake info`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robolake.cli import main as cli_main
from robolake.lake import EpisodeFilter, Lake
from robolake.lake.intake.ingest import ingest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
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


def test_ray_dataset_is_pinned_to_the_version(lake, ray_session):
    ds = lake.to_ray("steps", columns=["episode_id", "state"], where=EpisodeFilter(embodiment="humanoid_44dof"))
    rows = ds.take_all()
    assert (
        len(rows)
        == lake.count(
            "steps",
        )
        - lake.to_arrow("steps", where=EpisodeFilter(embodiment=["single_arm_7dof", "bimanual_14dof"])).num_rows
    )
    assert len(rows[0]["state"]) == 44


def test_episode_id_indexes_exist(lake):
    for table in ("episodes", "steps", "media"):
        indices = (
            lake.dataset(table).describe_indices()
            if hasattr(lake.dataset(table), "describe_indices")
            else lake.dataset(table).list_indices()
        )
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
    np.testing.assert_allclose(
        stats.state.q99, np.quantile(state.astype(np.float64), 0.99, axis=0), rtol=5e-3, atol=1e-5
    )
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


def test_timestamps_start_at_zero_and_the_source_offset_is_kept(pick_n_place, tmp_path):
    import json

    from robolake.lake.intake.ingest import ingest

    ingest(str(pick_n_place), str(tmp_path / "lake"))
    lake = Lake.open(str(tmp_path / "lake"))
    ep = lake.episodes().to_pylist()[0]
    steps = lake.to_arrow("steps", where=EpisodeFilter(episode_ids=[ep["episode_id"]])).sort_by("step_index")
    assert steps["timestamp"][0].as_py() == 0.0
    assert json.loads(ep["metadata"])["source_time_offset_s"] == pytest.approx(0.05)  # the real data starts at 0.05 s


# --- concurrent creation: real processes racing to create one new lake -------------------------------


def _race_create(uris: list[str], barrier, results, exist_ok: bool) -> None:  # runs in a spawned process
    from robolake.lake import Lake

    for uri in uris:
        barrier.wait(timeout=120)
        try:
            lake = Lake.open_or_create(uri) if exist_ok else Lake.create(uri)
            results.put((uri, "created" if lake.version_info.operation == "create" else "joined", lake.version))
        except FileExistsError:
            results.put((uri, "exists", None))
        except Exception as e:  # what the race used to raise: Lance's "already exists" / retryable conflict
            results.put((uri, f"error {type(e).__name__}: {e}", None))


def _race(tmp_path, *, writers: int, rounds: int, exist_ok: bool) -> dict[str, list[tuple[str, int | None]]]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    uris = [str(tmp_path / f"lake{r}") for r in range(rounds)]
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_race_create, args=(uris, barrier, results, exist_ok)) for _ in range(writers)]
    for p in procs:
        p.start()
    out: dict[str, list[tuple[str, int | None]]] = {u: [] for u in uris}
    for _ in range(writers * rounds):
        uri, what, version = results.get(timeout=600)
        out[uri].append((what, version))
    for p in procs:
        p.join(timeout=60)
    return out


def test_writers_racing_to_create_a_lake_one_creates_the_others_are_told(tmp_path):
    outcomes = _race(tmp_path, writers=4, rounds=4, exist_ok=False)
    for uri, got in outcomes.items():
        kinds = sorted(what for what, _ in got)
        assert kinds == ["created", "exists", "exists", "exists"], (uri, got)
        lake = Lake.open(uri)
        assert lake.version == 1 and all(lake.count(t) == 0 for t in lake.version_info.tables)


def test_open_or_create_from_many_processes_always_joins_one_lake(tmp_path):
    outcomes = _race(tmp_path, writers=4, rounds=4, exist_ok=True)
    for uri, got in outcomes.items():
        assert all(what in ("created", "joined") and version == 1 for what, version in got), (uri, got)
        assert [v.version for v in Lake.open(uri).versions()] == [1]


def test_creating_over_a_lake_being_written_never_wipes_a_table(tmp_path):
    """A creator that lost the race (it read 'no version yet') reaches the tables after the winner
    wrote to them: it joins them, it does not overwrite them."""
    import lance
    import pyarrow as pa

    from robolake.lake.lake import _create_table
    from robolake.schemas.tables import schema_for_table

    uri = str(tmp_path / "lake")
    lake = Lake.create(uri)
    rows = pa.Table.from_pylist(
        [{"embodiment": "x", "spec_json": "{}", "stats_json": "", "num_episodes": 0, "num_steps": 0}],
        schema=schema_for_table("embodiments"),
    )
    ds = lance.write_dataset(rows, lake.table_uri("embodiments"), mode="append")
    assert _create_table(uri, "embodiments", None) == 1
    assert lance.dataset(lake.table_uri("embodiments")).version == ds.version
    assert lance.dataset(lake.table_uri("embodiments")).count_rows() == 1
