"""Per-embodiment summaries and statistics kept through every writer: exact after each verb, read by
`info` without touching the episodes, counted from the episodes for lakes written before them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from robolake import curate
from robolake.lake import Lake, doctor, quality_counts, restore_version
from robolake.lake.intake.ingest import ingest
from robolake.lake.stats import embodiments as embodiments_module
from robolake.lake.stats import episode_summary as summary_module
from robolake.lake.stats.episode_summary import (
    SUMMARY_COLUMNS,
    SUMMARY_KEY,
    combine,
    quality_counts_of,
    stored_summary,
    streams_of,
    summarize,
)
from robolake.lake.stats.norm import StatsAccumulator, accumulate_norm_stats
from robolake.schemas.tables import schema_for_table
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

# --- the counts alone -------------------------------------------------------------------------


def _row(i: int, rate: float, *, gap: float | None = None, frozen: bool = False) -> dict[str, Any]:
    st: dict[str, Any] = {"kind": "numeric", "count": 10 + i, "rate_hz": rate}
    if gap is not None:
        st["gaps"] = {"count": 1, "longest_s": gap}
    meta = {"record": {"streams": {"joint": st}}, "quality": {"frozen_state": frozen, "state_min": [0, 0]}}
    return {
        "episode_id": f"e{i}",
        "embodiment": "arm",
        "task": "t",
        "num_steps": 30,
        "fps": 20.0,
        "metadata": json.dumps(meta),
    }


def test_subtracting_episodes_gives_the_counts_of_those_left() -> None:
    rows = [_row(0, 20.0), _row(1, 19.5, gap=0.4, frozen=True), _row(2, 21.0, gap=0.9), _row(3, 20.25)]
    whole, gone, left = summarize(rows)["arm"], summarize(rows[2:])["arm"], summarize(rows[:2])["arm"]
    assert combine(whole, gone, -1) == left
    assert combine(left, gone) == whole
    s = streams_of(whole)[0]
    assert s["rate_hz"] == float(np.median([20.0, 19.5, 21.0, 20.25])) and s["longest_gap_s"] == 0.9
    assert s["gaps"] == 2 and s["episodes"] == 4 and s["count"] == sum(10 + i for i in range(4))
    assert "gaps" not in streams_of(combine(whole, summarize([rows[1], rows[2]])["arm"], -1))[0]  # none left
    assert quality_counts_of(whole) == {"frozen_state": 1}
    assert combine(left, gone, -1) is None  # not part of it: recount


def test_stats_subtraction_is_exact_or_refused() -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(1e3, 1.0, (500, 4)), np.full((500, 1), 7.0)], axis=1)
    x[0, 0], x[-1, 1] = 990.0, 1010.0  # the extremes of dims 0 and 1 are in the first and last rows
    keep, drop = x[:400], x[400:]
    whole = StatsAccumulator.of(x)
    assert whole.subtract(StatsAccumulator.of(drop)) is None  # the max of dim 1 goes
    keep, drop = x[50:], x[1:50]  # the min of dim 0 stays; dim 4 is constant
    got = whole.subtract(StatsAccumulator.of(drop))
    assert got is not None
    want = StatsAccumulator.of(np.concatenate([x[:1], keep]))
    np.testing.assert_array_equal(got.sketch.counts, want.sketch.counts)
    np.testing.assert_array_equal(got.min, want.min)
    np.testing.assert_array_equal(got.max, want.max)
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-12)
    np.testing.assert_allclose(got.finish().std, want.finish().std, rtol=1e-9, atol=1e-12)
    assert got.count == want.count


# --- through the writers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("summary")
    generate_synthetic(root / "syn", SyntheticConfig.tiny(episodes_per_embodiment=8, image_size=16))
    ingest(str(root / "syn"), str(root / "lake"))
    return root / "syn", root / "lake"


@pytest.fixture()
def uri(base: tuple[Path, Path], tmp_path: Path) -> str:
    shutil.copytree(base[1], tmp_path / "lake")
    return str(tmp_path / "lake")


def _assert_kept_exactly(uri: str) -> None:
    """Every embodiment's stored summary equals a recount from its episodes, and its statistics
    equal those of its steps computed afresh (sketch, count, min, max exact; mean and std to 1e-9)."""
    lake = Lake.open(uri)
    rows = {r["embodiment"]: r for r in lake.to_arrow("embodiments").to_pylist()}
    media = lake.to_arrow("media", columns=["episode_id", "encoding"])
    recount = summarize(lake.episodes(columns=SUMMARY_COLUMNS).to_pylist(), media)
    assert set(rows) == set(recount)
    counts = {v["values"]: v["counts"] for v in pc.value_counts(media["encoding"]).to_pylist()}
    assert lake.summary()["media"]["encodings"] == dict(sorted(counts.items())) and counts
    for tag, row in rows.items():
        assert stored_summary(row["stats_json"]) == recount[tag], tag
        assert row["num_episodes"] == recount[tag]["episodes"]
        steps = lake.to_arrow("steps", columns=["state", "action"], where=f"embodiment = '{tag}'")
        fresh, got = accumulate_norm_stats(steps).finish(), lake.norm_stats(tag)
        for name in ("state", "action"):
            a, b = getattr(got, name), getattr(fresh, name)
            assert a.count == b.count == row["num_steps"]
            for k in ("min", "max", "q01", "q99"):
                np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
            np.testing.assert_allclose(a.mean, b.mean, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(a.std, b.std, rtol=1e-9, atol=1e-12)


def test_every_writer_keeps_summaries_and_statistics_exact(uri: str, tmp_path: Path) -> None:
    _assert_kept_exactly(uri)  # ingest
    lake = Lake.open(uri)
    ids = sorted(lake.episode_ids())
    curate.delete(uri, episodes=ids[:2], reason="test")
    _assert_kept_exactly(uri)
    curate.select(uri, "num_steps >= 25", reason="test")
    _assert_kept_exactly(uri)
    curate.restore_episodes(uri, ids[:2], reason="test")
    _assert_kept_exactly(uri)
    curate.trim(uri, curate.TrimSpec(where_steps="step < 3", where="embodiment = 'humanoid_44dof'"))
    _assert_kept_exactly(uri)
    curate.select(uri, "embodiment != 'bimanual_14dof'", reason="test")  # a whole embodiment goes
    _assert_kept_exactly(uri)
    restore_version(uri, lake.version)
    _assert_kept_exactly(uri)
    merged = str(tmp_path / "merged")
    curate.delete(uri, episodes=ids[-3:], reason="test")
    other = str(tmp_path / "other")
    shutil.copytree(uri, other)
    curate.delete(other, episodes=ids[3:6], reason="test")
    curate.merge([other, uri], merged)
    _assert_kept_exactly(merged)


def _inner_episode(lake: Lake) -> str:
    """An episode that holds no extreme of its embodiment's state or action (a min or max it
    reached could not be subtracted: that embodiment would be recomputed, rightly)."""
    steps = lake.to_arrow("steps", columns=["episode_id", "embodiment", "state", "action"]).to_pylist()
    by_tag: dict[str, dict[str, list[np.ndarray]]] = {}
    for r in steps:
        v = np.concatenate([r["state"], r["action"]])
        by_tag.setdefault(r["embodiment"], {}).setdefault(r["episode_id"], []).append(v)
    for eps in by_tag.values():
        every = np.concatenate([np.stack(v) for v in eps.values()])
        lo, hi = every.min(0), every.max(0)
        varies = lo < hi
        for e, v in sorted(eps.items()):
            x = np.stack(v)
            if not np.any(varies & ((x.min(0) <= lo) | (x.max(0) >= hi))):
                return e
    raise AssertionError("every episode holds an extreme")


def test_a_small_delete_and_restore_touch_only_their_episodes(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("recomputed from every step")

    monkeypatch.setattr(embodiments_module, "_recompute", refuse)
    monkeypatch.setattr(embodiments_module, "_summaries", refuse)
    victim = _inner_episode(Lake.open(uri))
    curate.delete(uri, episodes=[victim], reason="one goes")
    curate.restore_episodes(uri, [victim], reason="and comes back")  # merged back in, as an ingest would
    monkeypatch.undo()
    _assert_kept_exactly(uri)


def test_info_reads_the_stored_counts_not_the_episodes(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = Lake.open(uri)
    want_summary, want_quality = lake.summary(), quality_counts(lake)
    assert want_quality and all(s["streams"] for s in want_summary["embodiments"].values())

    def refuse(*_: object) -> None:
        raise AssertionError("parsed every episode's metadata")

    monkeypatch.setattr(summary_module, "summarize", refuse)
    lake = Lake.open(uri)
    assert lake.summary()["embodiments"] == want_summary["embodiments"] and quality_counts(lake) == want_quality


def test_a_lake_without_summaries_is_counted_then_stored_by_doctor_update(uri: str) -> None:
    lake = Lake.open(uri)
    want_summary, want_quality = lake.summary()["embodiments"], quality_counts(lake)
    rows = lake.to_arrow("embodiments").to_pylist()
    for r in rows:  # as a robolake from before the summaries wrote them
        r["stats_json"] = json.dumps({k: v for k, v in json.loads(r["stats_json"]).items() if k != SUMMARY_KEY})
    tx = lake.begin()
    tx.overwrite("embodiments", pa.Table.from_pylist(rows, schema=schema_for_table("embodiments")))
    tx.commit("test-legacy-summaries")
    old = Lake.open(uri)
    assert old.summary()["embodiments"] == want_summary and quality_counts(old) == want_quality
    curate.tag_selection(uri, "num_steps >= 30", "long")  # a tag's subset is counted from its episodes
    scoped = Lake.open(uri, tag="long")
    n = sum(len(scoped.episode_ids(f"embodiment = '{t}'")) for t in want_summary)
    assert sum(s["episodes"] for s in scoped.episode_summaries().values()) == n
    report = doctor(uri, update=True)
    assert report.version == old.version + 1 and report.updated == 0
    _assert_kept_exactly(uri)
    assert doctor(uri, update=True).version == report.version  # nothing left to store


def test_check_reports_wrong_counts_and_doctor_update_recounts_them(uri: str) -> None:
    from robolake.lake import check_lake

    lake = Lake.open(uri)
    rows = lake.to_arrow("embodiments").to_pylist()
    d = json.loads(rows[0]["stats_json"])
    d[SUMMARY_KEY]["quality"]["checks"]["zero_rows"] = 99  # a writer that forgot to subtract
    rows[0]["stats_json"] = json.dumps(d)
    tx = lake.begin()
    tx.overwrite("embodiments", pa.Table.from_pylist(rows, schema=schema_for_table("embodiments")))
    tx.commit("test-wrong-summary")
    report = check_lake(uri)
    assert [p.what for p in report.problems if "kept counts" in p.what] and check_lake(uri, quick=True).ok
    doctor(uri, update=True)
    _assert_kept_exactly(uri)
    assert check_lake(uri).ok
