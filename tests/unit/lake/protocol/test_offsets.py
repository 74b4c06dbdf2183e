"""Row addresses to offsets and to rows, across fragments with deletion files.

`take_offsets` exists because `LanceDataset.take` of scattered offsets cost 19 ms for 50 rows of a
100k-row fragment with a deletion file (the viewer's deep page, issue 37)."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

from robolake.lake import row_offsets, take_offsets


def take_rows(ds: lance.LanceDataset, addresses: np.ndarray, columns: list[str]) -> pa.Table:
    """Rows by address, as the viewer reads a page: offsets of the addresses, then the take."""
    return take_offsets(ds, row_offsets(ds, addresses), columns)


def _table(tmp_path: Path) -> lance.LanceDataset:
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"k": np.arange(0, 50), "v": [f"a{i}" for i in range(50)]}), uri)
    lance.write_dataset(pa.table({"k": np.arange(50, 120), "v": [f"b{i}" for i in range(70)]}), uri, mode="append")
    ds = lance.dataset(uri)
    ds.delete("k % 7 = 3 OR (k >= 60 AND k < 64)")
    return lance.dataset(uri)


def test_rows_by_address_come_in_the_order_given(tmp_path: Path):
    ds = _table(tmp_path)
    full = ds.to_table(columns=["k", "v"], with_row_address=True)
    addr = full["_rowaddr"].to_numpy()
    rng = np.random.default_rng(0)
    for _ in range(5):
        pick = rng.choice(len(addr), 17, replace=False)
        got = take_rows(ds, addr[pick], ["k", "v"])
        assert got["k"].to_pylist() == full["k"].to_numpy()[pick].tolist()
        assert got["v"].to_pylist() == [full["v"][int(i)].as_py() for i in pick]
    assert take_rows(ds, addr[:0], ["k"]).num_rows == 0


def test_row_offsets_then_take_offsets_is_the_datasets_take(tmp_path: Path):
    ds = _table(tmp_path)
    addr = ds.to_table(columns=[], with_row_address=True)["_rowaddr"].to_numpy()
    pick = addr[::3]
    offsets = row_offsets(ds, pick)
    assert ds.take(offsets.tolist(), columns=["k"])["k"].to_pylist() == take_rows(ds, pick, ["k"])["k"].to_pylist()


def test_a_deleted_or_unknown_row_is_refused(tmp_path: Path):
    import pytest

    ds = _table(tmp_path)
    deleted = np.array([3], dtype=np.uint64)  # k = 3 of fragment 0 was deleted
    with pytest.raises(KeyError, match="deleted row"):
        take_rows(ds, deleted, ["k"])
    with pytest.raises(KeyError, match="does not hold"):
        take_rows(ds, np.array([9 << 32], dtype=np.uint64), ["k"])


def test_take_offsets_is_the_datasets_take(tmp_path: Path):
    """Any order, repeats, several fragments, deletion files: the rows `LanceDataset.take` gives."""
    import pytest

    ds = _table(tmp_path)
    n = ds.count_rows()
    rng = np.random.default_rng(3)
    cases = [
        rng.integers(0, n, 40),  # any order, repeats
        np.sort(rng.choice(n, 30, replace=False)),
        np.arange(n),
        np.array([n - 1, 0, n - 1]),
        np.array([5]),
    ]
    for offs in cases:
        want = ds.take(offs.tolist(), columns=["k", "v"])
        assert take_offsets(ds, offs, ["k", "v"]).equals(want)
    assert take_offsets(ds, [], ["k"]).num_rows == 0
    with pytest.raises(IndexError, match="outside the table"):
        take_offsets(ds, [n], ["k"])


def test_a_table_written_again_at_the_same_path_is_read_anew(tmp_path: Path):
    """The fragments are kept per dataset handle: a table overwritten from scratch starts its
    version numbers over, and a (path, version) key handed back the old table's fragments."""

    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"k": np.arange(10)}), uri)
    assert take_offsets(lance.dataset(uri), [3], ["k"])["k"].to_pylist() == [3]
    import shutil

    shutil.rmtree(uri)
    lance.write_dataset(pa.table({"k": np.arange(100, 120)}), uri)
    assert take_offsets(lance.dataset(uri), [3, 15], ["k"])["k"].to_pylist() == [103, 115]
