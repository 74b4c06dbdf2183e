"""The episodes table's sort orders: the radix path for numeric columns against Arrow's sort.

Issue 37: a page deep into a new sort (by steps) on 100k episodes sorted every row with the id
strings as tie-breaker; numeric columns now sort rows already in id order, stably."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from robolake.view.episodes import _numeric_order


def _reference(col: pa.Array, ids: pa.Array, descending: bool) -> np.ndarray:
    keys = pa.table({"m": pc.is_null(col, nan_is_null=True), "k": col, "id": ids})
    return pc.sort_indices(
        keys, sort_keys=[("m", "ascending"), ("k", "descending" if descending else "ascending"), ("id", "ascending")]
    ).to_numpy()


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("kind", ["small_int", "wide_int", "float_nan", "int_null", "bool_null"])
def test_numeric_order_is_arrows_sort_with_ties_by_id(kind: str, descending: bool):
    rng = np.random.default_rng(hash(kind) % 2**32)
    n = 3000
    ids = pa.array([f"e{i:05d}" for i in rng.permutation(n)])
    if kind == "small_int":
        col = pa.array(rng.integers(180, 222, n))
    elif kind == "wide_int":
        col = pa.array(rng.integers(-(2**40), 2**40, n) // 2**30)
    elif kind == "float_nan":
        v = rng.normal(size=n).round(1)
        v[rng.random(n) < 0.1] = np.nan
        col = pa.array(v)
    elif kind == "int_null":
        col = pa.array([None if rng.random() < 0.2 else int(x) for x in rng.integers(0, 9, n)], pa.int64())
    else:
        col = pa.array([None if rng.random() < 0.3 else bool(x) for x in rng.integers(0, 2, n)], pa.bool_())
    by_id = pc.array_sort_indices(ids).to_numpy()
    got = _numeric_order(col.take(pa.array(by_id)), by_id, descending)
    assert (got == _reference(col, ids, descending)).all()
