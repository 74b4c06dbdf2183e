"""bench media's per-layout figures on tiny AV1 v3.0 data: what each layout holds, and that its
fidelity figures tell the record (bit-exact) from the lossy layouts (finite PSNR)."""

from __future__ import annotations

import math

import pytest

from robolake.bench.media import LAYOUTS, dataset_layouts, table_rows
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.mark.slow  # four ingests, an access copy, five packs: ~20-35 s here
def test_every_layout_is_measured_and_only_the_record_is_exact(tmp_path, ray_session) -> None:
    src = tmp_path / "src"
    generate_synthetic(src, SyntheticConfig.tiny(codec="av1", version="v3.0", embodiments=("single_arm_7dof",)))
    got = dataset_layouts(str(src), str(tmp_path / "work"), reads=8, repeats=1, image_size=32)
    assert tuple(got) == LAYOUTS
    record, copy, jpeg, h264 = (got[k] for k in LAYOUTS)
    assert record["bit_exact"] and record["psnr_db"] == math.inf and record["max_abs_diff"] == 0
    assert record["encodings"] == ["video;codec=av1"]
    assert jpeg["encodings"] == ["jpeg;q=80"] and h264["encodings"][0].startswith("h264;gop=")
    for lossy in (copy, jpeg, h264):
        assert not lossy["bit_exact"] and 20 < lossy["psnr_db"] < math.inf and lossy["psnr_db_min"] <= lossy["psnr_db"]
    frames = record["frames"]
    assert all(m["frames_compared"] == frames for m in got.values())  # every frame of every episode
    assert copy["frames"] == frames and copy["with_record_over_source"] > record["lake_bytes_over_source"]
    assert jpeg["lake_bytes_over_source"] > record["lake_bytes_over_source"]
    for m in got.values():
        assert m["speedup_64_per_call"]["repeats"] == 1 and m["pack_seconds"] > 0
    rows = table_rows({k: {"tiny": v} for k, v in got.items()})
    assert [r[0] for r in rows] == [f"tiny | {k}" for k in LAYOUTS] and "exact" in rows[0][1]
