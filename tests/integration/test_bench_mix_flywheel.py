"""Smoke tests of `bench mix` and `bench flywheel` (opt in: -m slow): they run and report what their
docstrings promise. No timing is asserted."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_bench_mix_reports_shares_ranks_fill_and_plan_time():
    from robolake.bench import mix

    res = mix.run(quick=True, samples=5000)
    assert res["lake_samples"] >= 5000 and len(res["cases"]) == 2 * len(mix.MIXTURES)
    for c in res["cases"]:
        for e in ("epoch0", "epoch1"):
            assert c[e]["max_abs_error"] < 0.01
            ranks = c[e]["per_rank_max_abs_error"]
            assert set(ranks) == {"lake_stream", "shard_loader", "random"} and all(
                set(v) == {"2", "4", "8"} for v in ranks.values()
            )
        assert 0 < c["fill"] <= 1 and 0 < c["fill_unweighted"] <= 1
        assert c["plan_time_vs_unweighted"]["repeats"] == 3
    s = res["summary"]
    assert s["max_abs_error"] < 0.01 and s["lake_stream_per_rank_max_abs_error"] < 0.05
    assert s["per_rank_max_abs_error_shard_loader"] < s["per_rank_max_abs_error_random"]
    json.dumps(res)


def test_bench_flywheel_runs_end_to_end(tmp_path, ray_session):
    pytest.importorskip("metaworld")
    from robolake.bench import flywheel

    out = tmp_path / "fly.json"
    flywheel.main(
        [
            "--quick",
            "--work",
            str(tmp_path / "work"),
            "--json",
            str(out),
            "--rollouts",
            "2",
            "--workers",
            "1",
            "--envs-per-worker",
            "2",
        ]
    )
    res = json.loads(out.read_text())
    for arm in ("before", "after", "more_demos"):
        a = res[arm]
        assert a["episodes"] == 2 and 0.0 <= a["ci95"][0] <= a["success_rate"] <= a["ci95"][1] <= 1.0
    assert res["after"]["data"]["episodes"] == res["more_demos"]["data"]["episodes"] == 2  # the same budget
    assert res["more_demos"]["train"]["mixture"]["max_abs_error"] < 0.01
    assert res["config"]["mixture"] == "tag=flywheel-base:0.7,*:0.3"
