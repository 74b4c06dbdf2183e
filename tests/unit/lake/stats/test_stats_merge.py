"""Statistics merge per ingest: exact mean/std/min/max, sketched q01/q99, no rescan of old steps."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from robolake.lake import EpisodeFilter, Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.stats.norm import (
    NormStats,
    NormStatsAccumulator,
    StatsAccumulator,
    compute_norm_stats,
)
from robolake.lake.stats.sketch import ALPHA, MIN_VALUE
from robolake.schemas.tables import schema_for_table
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


def _assert_close_to_exact(stats: NormStats, exact: NormStats, values: dict[str, np.ndarray]) -> None:
    for name in ("state", "action"):
        got, want, x = getattr(stats, name), getattr(exact, name), values[name]
        assert got.count == want.count
        np.testing.assert_allclose(got.mean, want.mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got.std, want.std, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(got.min, want.min)
        np.testing.assert_array_equal(got.max, want.max)
        for q, est in ((0.01, got.q01), (0.99, got.q99)):
            lo = np.quantile(x, q, axis=0, method="lower")
            hi = np.quantile(x, q, axis=0, method="higher")
            bound = ALPHA * np.maximum(np.abs(lo), np.abs(hi)) + MIN_VALUE
            assert np.all(np.abs(est - np.quantile(x, q, axis=0)) <= bound * (1 + 1e-9))


def test_chan_merge_matches_numpy() -> None:
    rng = np.random.default_rng(1)
    # Offset data with a small spread: where a naive sum-of-squares loses digits.
    parts = [rng.normal(1e4, 1e-2, (n, 5)) for n in (1, 7, 300, 2, 1000)]
    acc = StatsAccumulator.of(parts[0])
    for p in parts[1:]:
        acc = acc.merge(StatsAccumulator.of(p))
    x = np.concatenate(parts)
    done = acc.finish()
    np.testing.assert_allclose(done.mean, x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(done.std, x.std(0), rtol=1e-8)
    np.testing.assert_array_equal(done.min, x.min(0))
    assert done.count == x.shape[0]
    back = StatsAccumulator.from_dict(json.loads(json.dumps(acc.to_dict())))
    np.testing.assert_array_equal(back.m2, acc.m2)
    with pytest.raises(ValueError, match="5 and 3"):
        acc.merge(StatsAccumulator.of(np.zeros((2, 3))))


def _steps(lake: Lake, tag: str) -> tuple[pa.Table, dict[str, np.ndarray]]:
    steps = lake.to_arrow("steps", columns=["state", "action"], where=EpisodeFilter(embodiment=tag))
    vals = {c: np.stack(steps[c].to_numpy(zero_copy_only=False)).astype(np.float64) for c in ("state", "action")}
    return steps, vals


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("stats")
    out = []
    for seed in range(3):
        generate_synthetic(root / f"syn{seed}", SyntheticConfig.tiny(seed=seed))
        out.append(root / f"syn{seed}")
    return root, out


def test_successive_ingests_merge(sources) -> None:
    root, srcs = sources
    uri = str(root / "lake")
    for s in srcs:
        ingest(str(s), uri)
    lake = Lake.open(uri)
    emb = {r["embodiment"]: r for r in lake.to_arrow("embodiments").to_pylist()}
    for tag in ("single_arm_7dof", "humanoid_44dof"):
        steps, vals = _steps(lake, tag)
        _assert_close_to_exact(lake.norm_stats(tag), compute_norm_stats(steps), vals)
        assert emb[tag]["num_steps"] == steps.num_rows
        assert emb[tag]["num_episodes"] == lake.episodes(EpisodeFilter(embodiment=tag)).num_rows == 6
        assert NormStatsAccumulator.from_json(emb[tag]["stats_json"]) is not None


def test_lake_without_accumulators_is_upgraded_once(sources) -> None:
    root, srcs = sources
    uri = str(root / "legacy")
    ingest(str(srcs[0]), uri)
    lake = Lake.open(uri)
    # Rewrite the statistics as a lake from before the accumulators held them.
    rows = lake.to_arrow("embodiments").to_pylist()
    for r in rows:
        r["stats_json"] = json.dumps({k: v for k, v in json.loads(r["stats_json"]).items() if k != "accumulator"})
    tx = lake.begin()
    tx.overwrite("embodiments", pa.Table.from_pylist(rows, schema=schema_for_table("embodiments")))
    tx.commit("test-legacy-stats")
    ingest(str(srcs[1]), uri)
    lake = Lake.open(uri)
    steps, vals = _steps(lake, "bimanual_14dof")
    _assert_close_to_exact(lake.norm_stats("bimanual_14dof"), compute_norm_stats(steps), vals)
    emb = {r["embodiment"]: r for r in lake.to_arrow("embodiments").to_pylist()}
    assert emb["bimanual_14dof"]["num_episodes"] == 4


def test_index_segments_cover_new_fragments(sources) -> None:
    root, srcs = sources
    lake = Lake.open(str(root / "lake"))
    for table in ("episodes", "steps", "media"):
        ds = lake.dataset(table)
        (idx,) = [d for d in ds.describe_indices() if list(d.field_names) == ["episode_id"]]
        assert idx.num_rows_indexed == ds.count_rows()  # every fragment is indexed, none rebuilt
        assert len(idx.segments) == 3  # one segment per ingest (merged every INDEX_MAX_SEGMENTS)
    ids = lake.episode_ids()
    frames = lake.frames()
    assert (
        frames.read(ids[-1], lake.episodes(EpisodeFilter(episode_ids=ids[-1:]))["cameras"][0][0].as_py(), 0).ndim == 3
    )
