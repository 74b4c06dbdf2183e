"""An HDF5 camera of a rank robolake does not read as frames is never dropped silently.

The issue's case: ALOHA files whose cameras were grayscale [T,H,W] or 5-D ingested as
"3 episodes, 0 frames" with nothing said. A grayscale camera now lands (as RGB); a 5-D one is
left out with a note naming the file, the dataset and its shape.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.testing.hdf5 import write_aloha


def test_grayscale_lands_and_a_5d_camera_is_a_note(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    path = write_aloha(src / "ep.hdf5", steps=12, cams=("cam_high",), size=(16, 16))
    with h5py.File(path, "a") as f:
        images = f["observations/images"]
        images.create_dataset("gray", data=np.full((12, 16, 16), 7, np.uint8))
        images.create_dataset("stereo", data=np.zeros((12, 2, 16, 16, 3), np.uint8))
    result = ingest(str(src), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (1, 0)
    assert any(
        "observations/images/stereo" in n and "5-D" in n and "not ingested as a camera" in n for n in result.notes
    ), result.notes
    lake = Lake.open(str(tmp_path / "lake"))
    media = lake.to_arrow("media", columns=["camera"]).to_pylist()
    assert {m["camera"] for m in media} == {"cam_high", "gray"} and len(media) == 2 * 12
