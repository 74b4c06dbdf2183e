"""Bounded driver memory: a per-episode sample index and per-range planning on Ray tasks."""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.packers import PackSpec, TokenLengthConfig, pack, read_manifest
from robolake.packers.pipeline import plan_ranges
from robolake.packers.samples import SampleIndex
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

TOKENS = TokenLengthConfig(tokens_per_view=16, state_tokens=0)


def simulated(num_episodes: int, steps: int = 100, stride: int = 1) -> SampleIndex:
    rng = np.random.default_rng(0)
    per_ep = np.full(num_episodes, (steps + stride - 1) // stride, dtype=np.int64)
    return SampleIndex(
        episodes=pa.table({"episode_id": [f"e{i:08d}" for i in range(num_episodes)]}),
        sample_start=np.concatenate([[0], np.cumsum(per_ep)]),
        step_stride=stride,
        episode_length=rng.integers(40, 400, num_episodes),
        step_offset=np.arange(num_episodes, dtype=np.int64) * steps,
        media_offset=np.zeros((num_episodes, 1), dtype=np.int64),
        embodiments=("x",),
    )


def test_index_is_per_episode() -> None:
    idx = simulated(100_000)  # 10M samples
    assert idx.num_samples == 10_000_000
    shipped = len(pickle.dumps(idx))
    assert shipped < 0.05 * 20 * idx.num_samples  # per-sample arrays would be ~20 bytes a sample
    ids = np.array([0, 99, 100, 5_000_123, 9_999_999])
    np.testing.assert_array_equal(idx.episode_of(ids), [0, 0, 1, 50_001, 99_999])
    np.testing.assert_array_equal(idx.step_of(ids), [0, 99, 0, 23, 99])
    small = simulated(7, steps=10, stride=3)
    np.testing.assert_array_equal(small.step[:5], [0, 3, 6, 9, 0])
    np.testing.assert_array_equal(small.samples_of_episodes(np.array([2, 0])), [8, 9, 10, 11, 0, 1, 2, 3])
    assert "episode" in small.__dict__ and "episode" not in pickle.loads(pickle.dumps(small)).__dict__


def test_plan_ranges_partition_episodes() -> None:
    idx = simulated(1000, steps=37)
    spec = PackSpec(max_tokens=4096, tokens=TOKENS)
    ranges = plan_ranges(idx, spec, max_samples=5000)
    assert len(ranges) == -(-idx.num_samples // 5000)
    assert sorted(np.concatenate(ranges).tolist()) == list(range(1000))
    assert max(int(np.diff(idx.sample_start)[r].sum()) for r in ranges) <= 5000 + 37
    assert len(plan_ranges(idx, spec, max_samples=idx.num_samples)) == 1


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    root = tmp_path_factory.mktemp("plan")
    generate_synthetic(root / "syn", SyntheticConfig.tiny())
    ingest(str(root / "syn"), str(root / "lake"))
    return Lake.open(str(root / "lake"))


def _rows(out: Path) -> list[dict]:
    m = read_manifest(str(out))
    return lance.dataset(str(out / "shards.lance"), version=m.shards_version).to_table().to_pylist()


def test_ranged_pack_holds_every_sample_once(lake, tmp_path) -> None:
    spec = PackSpec(max_tokens=512, horizon=4, tokens=TOKENS, seed=3)
    m = pack(lake, spec, str(tmp_path / "r1"), plan_range_samples=60)
    rows = _rows(tmp_path / "r1")
    keys = Counter((e, s) for r in rows for e, s in zip(r["episode_id"], r["step_index"], strict=True))
    expected = {(e["episode_id"], t) for e in lake.episodes().to_pylist() for t in range(e["num_steps"])}
    assert set(keys) == expected and max(keys.values()) == 1
    assert m.num_samples == len(expected) and m.num_sequences == len(rows)
    assert [r["seq_index"] for r in rows] == list(range(len(rows)))
    assert all(r["total_tokens"] <= 512 for r in rows) and 0 < m.padded_fill < m.fill <= 1
    assert not (tmp_path / "r1" / "_plan").exists()
    again = pack(lake, spec, str(tmp_path / "r2"), plan_range_samples=60)
    assert again.num_sequences == m.num_sequences and _rows(tmp_path / "r2") == rows
    # a range-planned run packs about as tightly as one global plan
    whole = pack(lake, spec, str(tmp_path / "g"))
    assert m.num_sequences <= whole.num_sequences + len(
        plan_ranges(__import__("robolake.packers.samples", fromlist=["x"]).build_sample_index(lake, spec), spec, 60)
    )
