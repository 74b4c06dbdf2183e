"""bench media --pack-pairs: record and JPEG lakes packed alternately, every pair kept and summarised."""

from __future__ import annotations

import pytest

from robolake.bench.media import main, pack_pair_rows, pack_pairs
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.mark.slow  # two ingests, five packs: ~20-30 s here
def test_pairs_are_kept_and_their_ratio_summarised(tmp_path) -> None:
    src = tmp_path / "src"
    generate_synthetic(src, SyntheticConfig.tiny())
    got = pack_pairs(str(src), str(tmp_path / "work"), pairs=2, image_size=32)
    rec, jpg = got["record_pack_seconds"], got["jpeg_pack_seconds"]
    assert len(rec["runs"]) == len(jpg["runs"]) == 2 and all(s > 0 for s in rec["runs"] + jpg["runs"])
    assert rec["min"] <= rec["median"] <= rec["max"]
    ratios = [r / j for r, j in zip(rec["runs"], jpg["runs"], strict=True)]
    assert got["record_over_jpeg"]["min"] == pytest.approx(min(ratios))
    ((name, row),) = pack_pair_rows({"tiny": got})
    assert name == "tiny" and row.startswith("record ") and "record/jpeg" in row


def test_pack_pairs_needs_a_pair(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--json", str(tmp_path / "out.json"), "--pack-pairs", "0", "--work", str(tmp_path)])
    assert "--pack-pairs 0: give at least 1" in capsys.readouterr().err
