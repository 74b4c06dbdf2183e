"""The viewer's catalogs: joint names, version changes, lineage, ingest versions, the paged table."""

from __future__ import annotations

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.where import WhereError
from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec
from robolake.view.catalog import LakeCatalog, joint_groups, joint_names
from robolake.view.episodes import EpisodeCatalog, EpisodeQuery


def test_joint_names_and_groups_follow_the_modality_slices() -> None:
    spec = EmbodimentSpec(
        tag="arm",
        state_dim=10,
        action_dim=3,
        state=(SliceSpec(name="arm", start=0, end=6), SliceSpec(name="gripper", start=6, end=7)),
    )
    assert joint_names(spec, "state") == [f"arm[{i}]" for i in range(6)] + [
        "gripper[0]",
        "state[7]",
        "state[8]",
        "state[9]",
    ]
    assert joint_groups(spec, "state") == [
        {"name": "arm", "dims": [0, 1, 2, 3, 4, 5]},
        {"name": "gripper", "dims": [6]},
        {"name": "state[7:10]", "dims": [7, 8, 9]},
    ]
    assert joint_groups(spec, "action") == [{"name": "action[0:3]", "dims": [0, 1, 2]}]
    # Every dimension is plotted exactly once, however the slices fall.
    assert sorted(d for g in joint_groups(spec, "state") for d in g["dims"]) == list(range(10))


@pytest.fixture(scope="module")
def catalog(view_lakes) -> LakeCatalog:
    return LakeCatalog(Lake.open(str(view_lakes.jpeg)))


def test_changes_say_what_each_version_added_and_removed(catalog, view_lakes) -> None:
    changes = {c["version"]: c for c in catalog.changes()}
    assert sorted(changes) == [1, 2, 3]
    assert changes[1]["added"] == changes[1]["removed"] == 0
    assert changes[2]["added"] == 3 and changes[2]["removed"] == 0
    assert changes[3]["added"] == 0 and changes[3]["removed"] == 1
    # counts only: no version lists its episode ids inline (100,000 of them for a DROID-sized ingest)
    assert all(set(c) == {"version", "added", "removed"} for c in changes.values())
    assert catalog.changes() is catalog.changes()  # computed once per process


def test_lineage_lists_the_versions_that_hold_an_episode(catalog, view_lakes) -> None:
    assert [(r["version"], r["holds"]) for r in catalog.lineage(view_lakes.deleted)] == [
        (1, False),
        (2, True),
        (3, False),
    ]
    kept = view_lakes.tagged[0]
    assert [r["holds"] for r in catalog.lineage(kept)] == [False, True, True]
    assert [r["holds"] for r in catalog.lineage("no/such-episode")] == [False, False, False]


def test_overview_holds_versions_tags_embodiments_and_quarantine(catalog) -> None:
    o = catalog.overview()
    assert o["version"] == 3 and o["counts"]["episodes"] == 2 and o["counts"]["quarantine"] == 1
    assert [v["operation"] for v in o["versions"]] == ["create", "ingest", "delete"]
    assert o["versions"][2]["reason"] == "operator saw a dropped gripper" and o["versions"][2]["who"]
    assert [t["name"] for t in o["tags"]] == ["picked"]
    assert (o["tags"][0]["episodes"], o["tags"][0]["version_episodes"]) == (1, 2)
    assert o["versions"][2]["tags"] == ["picked"]
    assert o["quarantine"] == {"missing_video": 1}
    emb = {e["embodiment"]: e for e in o["embodiments"]}
    assert set(emb) == {"single_arm_7dof", "bimanual_14dof"}
    for e in emb.values():
        assert len(e["state_names"]) == e["state_dim"] and len(e["stats"]["state"]["q99"]) == e["state_dim"]
    page = catalog.quarantine_page("missing_video", 0, 10)
    assert page["total"] == 1 and page["rows"][0]["source_path"].endswith("episode_000001.mp4")
    assert catalog.quarantine_page("corrupt_file", 0, 10) == {"total": 0, "offset": 0, "limit": 10, "rows": []}


def test_ingest_versions_of_the_index(view_lakes) -> None:
    eps = EpisodeCatalog(LakeCatalog(Lake.open(str(view_lakes.jpeg), version=2)))
    index = eps.index()
    assert index.num_rows == 3 and set(index["ingest_version"].to_pylist()) == {2}
    np.testing.assert_allclose(index["duration_s"].to_numpy(), index["num_steps"].to_numpy() / index["fps"].to_numpy())


def test_pages_filter_sort_and_slice_on_the_server(view_lakes) -> None:
    eps = EpisodeCatalog(LakeCatalog(Lake.open(str(view_lakes.jpeg), version=2)))
    everything = eps.page(EpisodeQuery(sort="num_steps", descending=True))
    steps = [r["num_steps"] for r in everything["rows"]]
    assert everything["total"] == 3 and steps == sorted(steps, reverse=True)
    assert all(r["source_file"].endswith(".parquet") for r in everything["rows"])
    one = eps.page(EpisodeQuery(sort="num_steps", descending=True, offset=1, limit=1))
    assert one["total"] == 3 and [r["episode_id"] for r in one["rows"]] == [everything["rows"][1]["episode_id"]]
    assert eps.page(EpisodeQuery(embodiment="single_arm_7dof"))["total"] == 1
    assert eps.page(EpisodeQuery(text="BIMANUAL"))["total"] == 2  # case-insensitive, ids too
    assert (
        eps.page(EpisodeQuery(success="none"))["total"]
        + eps.page(EpisodeQuery(success="true"))["total"]
        + eps.page(EpisodeQuery(success="false"))["total"]
        == 3
    )
    longest = max(steps)
    assert [r["num_steps"] for r in eps.page(EpisodeQuery(where=f"num_steps >= {longest}"))["rows"]] == [longest]
    with pytest.raises(WhereError, match="unknown"):
        eps.page(EpisodeQuery(where="wibble > 3"))
    with pytest.raises(ValueError, match="sort by one of"):
        EpisodeQuery(sort="metadata")
    with pytest.raises(ValueError, match="limit"):
        EpisodeQuery(limit=0)


def test_a_tag_scopes_the_index_and_unknown_ids_are_none(view_lakes) -> None:
    eps = EpisodeCatalog(LakeCatalog(Lake.open(str(view_lakes.jpeg), tag="picked")))
    assert eps.index()["episode_id"].to_pylist() == list(view_lakes.tagged)
    assert eps.detail(view_lakes.deleted) is None and eps.series(view_lakes.deleted) is None
    assert eps.detail("../../etc/passwd") is None and eps.series_bytes("../../etc/passwd") is None


def test_series_are_the_lake_steps_in_step_order(view_lakes) -> None:
    lake = Lake.open(str(view_lakes.jpeg))
    eps = EpisodeCatalog(LakeCatalog(lake))
    for eid in lake.episode_ids():
        ts, state, action = eps.series(eid)
        steps = lake.to_arrow("steps", where=f"episode_id = '{eid}'").sort_by("step_index")
        np.testing.assert_array_equal(ts, steps["timestamp"].to_numpy())
        np.testing.assert_array_equal(state, np.array(steps["state"].to_pylist(), dtype=np.float32))
        np.testing.assert_array_equal(action, np.array(steps["action"].to_pylist(), dtype=np.float32))
        blob = eps.series_bytes(eid)
        n, s, a, _ = np.frombuffer(blob[:16], "<u4")
        assert (n, s, a) == (len(ts), state.shape[1], action.shape[1])
        np.testing.assert_array_equal(np.frombuffer(blob[16 + 8 * n + 4 * n * s :], "<f4").reshape(n, a), action)
        d = eps.detail(eid)
        assert d["num_steps"] == n and len(d["state_names"]) == s and d["source_time_offset_s"] is not None
        assert {c["name"] for c in d["cameras"]} == set(
            lake.episodes(columns=["episode_id", "cameras"]).to_pydict()["cameras"][lake.episode_ids().index(eid)]
        )
