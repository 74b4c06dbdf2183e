"""`--where` expressions: what they select, against values computed here from the lake's own rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.where import WhereError, episode_columns, parse_where, select_episode_ids


def _steps_by_episode(lake: Lake) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, list]] = {}
    for r in lake.to_arrow("steps", columns=["episode_id", "state", "action", "timestamp"]).to_pylist():
        d = out.setdefault(r["episode_id"], {"state": [], "action": [], "timestamp": []})
        for k in d:
            d[k].append(r[k])
    return {e: {k: np.asarray(v, dtype=float) for k, v in d.items()} for e, d in out.items()}


def test_episode_columns_and_sql_habits(base_lake: Path):
    lake = Lake.open(str(base_lake))
    rows = lake.episodes().to_pylist()
    expect = sorted(r["episode_id"] for r in rows if r["embodiment"] == "single_arm_7dof" and r["num_steps"] > 20)
    got = select_episode_ids(lake, "embodiment = 'single_arm_7dof' AND num_steps > 20")
    assert sorted(got) == expect and len(expect) == 2
    assert sorted(select_episode_ids(lake, "embodiment in ('bimanual_14dof', 'humanoid_44dof')")) == sorted(
        r["episode_id"] for r in rows if r["embodiment"] != "single_arm_7dof"
    )
    assert select_episode_ids(lake, "embodiment <> 'single_arm_7dof' and not (length < 0)") == [
        r["episode_id"] for r in rows if r["embodiment"] != "single_arm_7dof"
    ]
    # derived names
    assert len(select_episode_ids(lake, "source = 'recorded' and quarantine_free and ingest_version = 2")) == len(rows)
    dur = {r["episode_id"]: r["num_steps"] / r["fps"] for r in rows}
    cut = float(np.median(list(dur.values())))
    assert sorted(select_episode_ids(lake, f"duration > {cut}")) == sorted(e for e, d in dur.items() if d > cut)
    assert select_episode_ids(lake, "success is null") == [r["episode_id"] for r in rows]
    key = sorted(json.loads(rows[0]["metadata"]))[0]
    value = json.loads(rows[0]["metadata"])[key]
    if isinstance(value, str):
        assert rows[0]["episode_id"] in select_episode_ids(lake, f"meta.{key} = '{value}'")


@pytest.mark.parametrize(
    ("expr", "columns"),
    [
        ("source_episode_index < 10", ["episode_id", "source_episode_index"]),
        ("length > 3 and duration < 2", ["episode_id", "fps", "num_steps"]),
        ("task = 'pick' and ingest_version = 2", ["episode_id", "task"]),
        ("source = 'rollout'", ["episode_id", "metadata"]),
        ("quarantine_free", ["episode_id", "metadata", "source_uri"]),
        ("meta.robot = 'a'", ["episode_id", "metadata"]),
        ("quality.idle_fraction > 0.4 and success", ["episode_id", "metadata", "success"]),
        ("stream('/imu').rate_hz > 100", ["episode_id", "metadata"]),
        ("any(event('/fault'))", ["episode_id", "metadata"]),
        ("max(abs(action)) > 3", ["episode_id"]),
    ],
)
def test_a_filter_reads_only_the_columns_it_names(expr: str, columns: list[str]):
    # the metadata JSON is most of the episodes table: a filter that does not need it must not read it
    assert episode_columns(parse_where(expr)) == columns


def test_a_projected_read_selects_what_the_full_read_did(base_lake: Path, monkeypatch):
    lake = Lake.open(str(base_lake))
    rows = lake.episodes().to_pylist()
    read: list[list[str] | None] = []
    real = Lake.episodes

    def spy(self, where=None, columns=None):
        read.append(columns)
        return real(self, where=where, columns=columns)

    monkeypatch.setattr(Lake, "episodes", spy)
    got = select_episode_ids(lake, "num_steps > 20 and source_path != ''")
    assert sorted(got) == sorted(r["episode_id"] for r in rows if r["num_steps"] > 20)
    assert read == [["episode_id", "metadata", "num_steps", "source_uri"]]


def test_step_aggregates_match_numpy(base_lake: Path):
    lake = Lake.open(str(base_lake))
    steps = _steps_by_episode(lake)
    peak = {e: float(np.abs(d["action"]).max()) for e, d in steps.items()}
    cut = float(np.median(list(peak.values())))
    assert sorted(select_episode_ids(lake, f"max(abs(action)) > {cut}")) == sorted(
        e for e, p in peak.items() if p > cut
    )
    m0 = {e: float(d["state"][:, 0].mean()) for e, d in steps.items()}
    cut0 = float(np.median(list(m0.values())))
    assert sorted(select_episode_ids(lake, f"mean(state[0]) >= {cut0}")) == sorted(
        e for e, v in m0.items() if v >= cut0
    )
    # element 13 exists only for the wider embodiments: shorter vectors give no value, not an error
    wide = {e for e, d in steps.items() if d["state"].shape[1] > 13 and (d["state"][:, 13] > 0).mean() > 0.2}
    assert set(select_episode_ids(lake, "mean(state[13] > 0) > 0.2")) == wide
    assert len(select_episode_ids(lake, "count(timestamp) = num_steps")) == len(steps)
    sd = {e: float(d["action"].std()) for e, d in steps.items()}
    c = float(np.median(list(sd.values())))
    assert sorted(select_episode_ids(lake, f"std(action) > {c}")) == sorted(e for e, v in sd.items() if v > c)


@pytest.mark.parametrize(
    "expr, match",
    [
        ("__import__('os').system('touch x')", "unknown function"),
        ("task.__class__", "only meta.KEY"),
        ("().__class__.__bases__", "only meta.KEY|not allowed"),
        ("foo > 1", "unknown name 'foo'"),
        ("action > 1", "step column"),
        ("max(task)", "only step columns"),
        ("max(max(action))", "cannot nest"),
        ("lambda: 1", "not allowed"),
        ("[x for x in task]", "not allowed"),
        ("x = 1; y", "not an expression"),
        ("", "needs an expression"),
    ],
)
def test_bad_or_hostile_expressions_are_refused(expr: str, match: str, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WhereError, match=match):
        parse_where(expr)
    assert not (tmp_path / "x").exists()
