"""bench scale's `s3` section on a tiny lake: both loaders read the same epoch from S3 and from disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from robolake.bench._s3_loader import s3_section
from robolake.bench.scale import _rows


def test_the_s3_section_reads_the_same_samples_from_both_sides(tmp_path: Path) -> None:
    pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    res = s3_section(str(tmp_path), episodes=4, repeats=1)
    assert set(res["loaders"]) == {"shards", "lake_stream"}
    for v in res["loaders"].values():
        assert v["samples_local"][0] > 0
        assert v["samples_local"] == v["samples_s3"]  # an epoch is an epoch, wherever it is read from
        for clock in ("wall", "cpu"):
            assert v["s3_over_local"][clock]["repeats"] == 1 and v["s3_over_local"][clock]["median"] > 0
    assert res["s3_over_local"] == min(v["s3_over_local"]["median"] for v in res["loaders"].values())
    assert res["bytes_copied"] > 0 and "lower bound" in res["caveat"]
    rows = dict((r[0], r[1]) for r in _rows({"layout": "record", "s3": res}))
    assert rows["s3: s3_over_local (lowest wall median; moto on the same cores)"] == res["s3_over_local"]


def test_without_moto_the_section_says_so_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "moto.server", None)  # importing it now raises ImportError
    res = s3_section(str(tmp_path), episodes=4, repeats=1)
    assert res["s3_over_local"] is None and "moto" in res["skipped"] and "\n" not in res["skipped"]
    assert _rows({"layout": "record", "s3": res})[-1][1] == res["skipped"]
