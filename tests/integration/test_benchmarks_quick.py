"""Smoke tests of the loader and end-to-end benchmarks on tiny synthetic data (opt in: -m slow).

They check that the per-sample baseline hands the model the same samples as the packed shards,
and that the benchmarks run and report what their docstrings promise. No timing is asserted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake.bench import _baseline  # noqa: E402
from robolake.bench import e2e as bench_e2e  # noqa: E402
from robolake.bench import load as bench_load  # noqa: E402
from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.loaders import collate_rows, open_shards
from robolake.loaders.config import LoaderConfig
from robolake.packers import PackSpec, TokenLengthConfig, pack
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_source(tmp_path_factory, ray_session) -> Path:
    src = tmp_path_factory.mktemp("bench") / "src"
    generate_synthetic(
        str(src), SyntheticConfig(seed=0, episodes_per_embodiment=1, min_length=20, max_length=30, image_size=32)
    )
    return src


@pytest.fixture(scope="module")
def tiny_packed(tiny_source, tmp_path_factory):
    work = tmp_path_factory.mktemp("packed")
    ingest(str(tiny_source), str(work / "lake"))
    lake = Lake.open(str(work / "lake"))
    tokens = TokenLengthConfig(tokens_per_view=16, state_tokens=0)
    spec = PackSpec(max_tokens=512, horizon=16, tokens=tokens)
    pack(lake, spec, str(work / "packed"))
    return lake, spec, open_shards(str(work / "packed"), lake=lake)


def test_baseline_gives_the_packed_samples(tiny_source, tiny_packed):
    lake, spec, shards = tiny_packed
    row = shards.read_rows([0])
    packed = collate_rows(row, LoaderConfig(image_size=32).collate_config(shards))
    bspec = _baseline.baseline_spec(lake, shards, spec.tokens, image_size=32)
    dataset = _baseline.PerSampleDataset(
        _baseline.source_episodes(str(tiny_source), lake), list(packed.sample_keys), bspec
    )
    naive = _baseline.PaddedCollate(bspec, pad=False)([dataset[i] for i in range(len(dataset))])

    assert naive.sample_keys == packed.sample_keys
    assert naive.cu_seqlens.tolist() == packed.cu_seqlens.tolist()
    assert naive.text_ids.tolist() == packed.text_ids.tolist()
    assert naive.embodiment_id.tolist() == packed.embodiment_id.tolist()
    assert naive.action_mask.tolist() == packed.action_mask.tolist()
    np.testing.assert_allclose(naive.state.numpy(), packed.state.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(naive.action.numpy(), packed.action.numpy(), rtol=1e-4, atol=1e-4)
    assert naive.pixels.shape == packed.pixels.shape
    # the shards hold JPEGs of the decoded video frames: close to the frames, not bit-equal
    assert (naive.pixels.float() - packed.pixels.float()).abs().mean() < 12.0


def test_baseline_pads_batches(tiny_source, tiny_packed):
    lake, spec, shards = tiny_packed
    keys = _baseline.shard_keys(shards)
    assert len(keys) == shards.manifest.num_samples
    bspec = _baseline.baseline_spec(lake, shards, spec.tokens, image_size=32)
    dataset = _baseline.PerSampleDataset(_baseline.source_episodes(str(tiny_source), lake), keys, bspec)
    batches = list(_baseline.baseline_loader(dataset, batch_size=8, num_workers=0))
    seen = [k for b in batches for k in b.packed.sample_keys]
    assert sorted(seen) == sorted(keys)
    assert all(b.key_padding_mask.shape[0] == b.packed.num_samples for b in batches)


def test_bench_load_measures_one_dataset(tiny_source, tmp_path, monkeypatch):
    monkeypatch.setattr(bench_load, "IMAGE_SIZE", 32)
    data = bench_load.prepare("tiny", str(tiny_source), str(tmp_path), step_stride=2)
    res = bench_load.measure_dataset(data)
    for name in ("packed_dataloader", "ray_stream", "per_sample_baseline"):
        assert res[name]["samples"] == res["samples"]
        assert res[name]["samples_per_s"] > 0
    assert res["per_sample_baseline"]["same_samples"]
    assert res["speedup_vs_baseline"] > 0


def test_bench_e2e_quick_reports_the_split(ray_session):
    res = bench_e2e.run(quick=True)
    for name in ("naive", "robolake_data_padded", "robolake", "compute_limit"):
        assert res[name]["samples"] == res["samples"]
        assert res[name]["same_samples"]
    assert res["robolake"]["padding_fraction"] == 0.0
    assert (
        res["compute_limit"]["data_wait_fraction"] <= res["robolake"]["data_wait_fraction"]
    )  # nothing to wait for in memory
    assert 0.0 <= res["data_wait_fraction"] <= 1.0 and res["ratio_to_compute_limit"] > 0
    assert res["target_applies_to"] == "cpu" and set(res["spread"]["ratio_to_compute_limit"]) >= {"wall", "cpu"}
    # medians of per-round ratios: their product is near, not equal to, the median of the products
    assert res["speedup"] == pytest.approx(res["data_path_gain"] * res["packing_gain"], rel=0.2)
    assert "40x" in res["note"]
