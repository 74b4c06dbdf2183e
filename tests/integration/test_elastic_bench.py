"""The `elastic` measure of `robolake bench scale`: its ledgers are checked, and it says so."""

from __future__ import annotations

import pytest

from robolake.bench._elastic import elastic_section


@pytest.mark.slow  # builds and packs a 2,000-sample lake and reads its epoch several times
def test_the_elastic_measure_checks_exactly_once_and_the_order(tmp_path):
    out = elastic_section(str(tmp_path), quick=True, cases=((3, 2), (2, 5)), repeats=1)
    assert out["cases"] == [[3, 2], [2, 5]]
    assert out["exactly_once"] is True and out["order_unchanged"] is True
    assert all(c["exactly_once"] for c in out["per_case"])
    assert out["resize_first_batch_over_same_size"]["median"] > 0
    assert out["mixture_rank_error"] < 0.1  # ~30 sequences per rank and side: a few sequences of noise
    assert out["samples"] > out["sequences"] > 0
