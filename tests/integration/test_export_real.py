"""Export the real GR00T PickNPlace lake to LeRobot v3.0 and ingest it again.

Same state, action, timestamps and tasks exactly; every one of the 2,096 frames within
MIN_PSNR_DB = 33 dB of the lake's frame (h264 crf 23 of 256x256 frames; measured worst frame: 35.8 dB,
printed by the test with -s); the v3.0 files laid out as LeRobot reads them; GR00T's
modality.json kept, less the `human.validity` annotation the lake does not hold.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from robolake.lake import Lake
from robolake.lake.export import export_lerobot
from robolake.lake.intake.ingest import ingest
from tests.conftest import copy_pick_n_place
from tests.unit.lake.test_export import assert_round_trip, check_layout

MIN_PSNR_DB = 33.0


@pytest.fixture(scope="module")
def real_export(tmp_path_factory, ray_session):
    root = tmp_path_factory.mktemp("real_export")
    src = copy_pick_n_place(root)
    ingest(str(src), str(root / "lake"))
    lake = Lake.open(str(root / "lake"))
    (result,) = export_lerobot(lake, root / "out")
    back = ingest(str(root / "out"), str(root / "lake2"))
    return src, lake, result, back, Lake.open(str(root / "lake2"))


def test_real_round_trip(real_export):
    _, lake, result, back, lake2 = real_export
    assert (result.embodiment, result.episodes, result.frames, result.tasks) == ("gr1_arms_only", 5, 2096, 5)
    assert (back.ingested, back.quarantined) == (5, 0)
    assert {e["source_format"] for e in lake2.episodes().to_pylist()} == {"lerobot-v3.0"}
    worst = assert_round_trip(lake, lake2, result.path, min_psnr=MIN_PSNR_DB)
    print(f"worst frame PSNR over 2096 frames: {worst:.1f} dB")


def test_real_layout_and_gr00t_metadata(real_export):
    src, lake, result, _, lake2 = real_export
    info = check_layout(result.path, lake, min_psnr=MIN_PSNR_DB)
    assert info["robot_type"] == "GR1ArmsOnly" and info["fps"] == 20
    assert info["features"]["observation.images.ego_view"]["shape"] == [256, 256, 3]
    assert "observation.images.egoview" not in info["features"]  # the stale source feature stays behind
    modality = json.loads((result.path / "meta" / "modality.json").read_text())
    source = json.loads((src / "meta" / "modality.json").read_text())
    assert modality["state"] == source["state"] and modality["action"] == source["action"]
    assert modality["video"] == source["video"]
    assert modality["annotation"] == {"human.action.task_description": {}}
    # GR00T reads the language annotation column as an index into tasks.parquet.
    data = pq.read_table(next((result.path / "data").glob("*/*.parquet")))
    tasks = pq.read_table(result.path / "meta" / "tasks.parquet").to_pandas()
    text = dict(zip(tasks["task_index"], tasks.index, strict=True))
    first = data.slice(0, 1).to_pylist()[0]
    assert text[first["annotation.human.action.task_description"]] == text[first["task_index"]]
    assert lake2.embodiments()["gr1_arms_only"].state == lake.embodiments()["gr1_arms_only"].state
    stats = json.loads((result.path / "meta" / "stats.json").read_text())
    np.testing.assert_allclose(
        stats["observation.state"]["mean"], lake.norm_stats("gr1_arms_only").state.mean, rtol=1e-6, atol=1e-9
    )
