"""QuantileSketch: the stated error bound against exact quantiles, exact merges, serialisation."""

from __future__ import annotations

import numpy as np
import pytest

from robolake.lake.stats.sketch import ALPHA, MIN_VALUE, QuantileSketch


def _distributions(n: int = 20_000) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    t = np.linspace(0, 20, n)
    return {
        # joint angles: slow sinusoids plus noise, both signs, through zero
        "joints": np.stack([np.sin(t * (k + 1) / 3) * (0.5 + k) + rng.normal(0, 0.01, n) for k in range(4)], 1),
        # a gripper: mostly two plateaus (0 and 0.08 m) with transitions
        "gripper": np.where(rng.random((n, 1)) < 0.6, 0.0, 0.08) + rng.normal(0, 1e-4, (n, 1)),
        # heavy tails and scale spread
        "lognormal": rng.lognormal(0, 2, (n, 2)) * np.array([1e-3, 1e3]),
        "cauchy": np.clip(rng.standard_cauchy((n, 1)), -1e6, 1e6),
        "constant": np.full((n, 1), -1.25),
    }


@pytest.mark.parametrize("name", list(_distributions()))
@pytest.mark.parametrize("q", [0.0, 0.01, 0.5, 0.99, 1.0])
def test_error_bound_against_exact(name: str, q: float) -> None:
    x = _distributions()[name]
    est = QuantileSketch.of(x).quantile(q)
    exact = np.quantile(x, q, axis=0)
    lo, hi = np.quantile(x, q, axis=0, method="lower"), np.quantile(x, q, axis=0, method="higher")
    bound = ALPHA * np.maximum(np.abs(lo), np.abs(hi)) + MIN_VALUE
    assert np.all(np.abs(est - exact) <= bound * (1 + 1e-9)), (est, exact, bound)


def test_merge_equals_sketch_of_union_in_any_order() -> None:
    x = _distributions()["joints"]
    parts = np.array_split(x, 7)
    a = QuantileSketch.of(parts[0])
    for p in parts[1:]:
        a = a.merge(QuantileSketch.of(p))
    b = QuantileSketch.of(parts[-1])
    for p in reversed(parts[:-1]):
        b = QuantileSketch.of(p).merge(b)
    whole = QuantileSketch.of(x)
    np.testing.assert_array_equal(a.counts, whole.counts)
    np.testing.assert_array_equal(b.counts, whole.counts)
    assert whole.count == x.shape[0]


def test_json_round_trip_and_size() -> None:
    x = _distributions()["joints"]
    s = QuantileSketch.of(x)
    d = s.to_json()
    back = QuantileSketch.from_json(d)
    np.testing.assert_array_equal(back.counts, s.counts)
    assert len(d["counts"]) < 20_000  # mostly-zero counts compress: a few KB per dimension
    d["alpha"] = 0.01
    with pytest.raises(ValueError, match="recomputes its statistics"):
        QuantileSketch.from_json(d)


def test_validation() -> None:
    s = QuantileSketch(3)
    with pytest.raises(ValueError, match="empty"):
        s.quantile(0.5)
    with pytest.raises(ValueError, match=r"\[n, 3\]"):
        s.add(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="q must be"):
        QuantileSketch.of(np.zeros((2, 3))).quantile(1.5)
    with pytest.raises(ValueError, match="merge"):
        s.merge(QuantileSketch(2))
    assert QuantileSketch.of(np.zeros((5, 0))).quantile(0.5).shape == (0,)
