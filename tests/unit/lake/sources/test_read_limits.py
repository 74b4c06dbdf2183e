"""A source that declares more than the read budget, or points outside itself, is one quarantine
row naming the file and the field, before anything is allocated or read; the rest lands."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources import ReadLimits, SourceError, SourceOptions, discover_readers
from robolake.lake.sources.limits import bounded_decompress
from robolake.testing.hdf5 import write_aloha, write_custom
from robolake.testing.ros import Layout, write_mcap_json, write_ros1, write_ros2


def _rows(lake_dir: Path) -> dict[str, dict]:
    return {Path(r["source_path"]).name: r for r in Lake.open(str(lake_dir)).to_arrow("quarantine").to_pylist()}


def test_a_sparse_giant_camera_is_refused_before_reading(tmp_path: Path):
    """(50, 20000, 20000, 3) in a few hundred KB once took ingest to 5.7 GB and no answer in 600 s."""
    src = tmp_path / "src"
    src.mkdir()
    write_aloha(src / "good.hdf5")
    bomb = write_aloha(src / "bomb.hdf5", cams=("cam_high",))
    with h5py.File(bomb, "a") as f:
        f["observations/images"].create_dataset(
            "top", shape=(50, 20000, 20000, 3), dtype="uint8", chunks=(1, 256, 256, 3), compression="gzip"
        )
    assert bomb.stat().st_size < 1_000_000
    res = ingest(str(src), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined) == (1, 1)
    row = _rows(tmp_path / "lake")["bomb.hdf5"]
    assert (
        row["reason_code"] == "too_large"
        and "observations/images/top" in row["reason"]
        and "20000x20000" in row["reason"]
    )
    assert "--max-read-gb" in row["reason"]


def test_a_dataset_over_the_budget_is_refused_and_the_budget_is_configurable(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    write_custom(src / "rec.h5", seconds=2.0)
    from robolake.lake.sources.mapping import mapping_from_dict
    from robolake.testing.hdf5 import CUSTOM_MAPPING

    m = mapping_from_dict(CUSTOM_MAPPING, "arm.yaml")
    res = ingest(str(src), str(tmp_path / "small"), IngestConfig(mapping=m, max_read_bytes=4_000))
    (row,) = _rows(tmp_path / "small").values()
    assert (
        res.ingested == 0 and row["reason_code"] == "too_large" and "robot/joints" in row["reason"]
    )  # 200 x 6 float64 = 9.6 KB
    assert ingest(str(src), str(tmp_path / "big"), IngestConfig(mapping=m)).ingested == 1
    with pytest.raises(ValueError, match="max_read_bytes must be a positive"):
        IngestConfig(max_read_bytes=0)


@pytest.mark.parametrize("compression", ["bz2", "lz4"])
def test_a_bag_chunk_that_expands_past_the_budget_is_refused_while_decompressing(tmp_path: Path, compression: str):
    zeros = {"/big/image_raw": ("rgb8", [(0.25, np.zeros((600, 600, 3), np.uint8))])}  # 1 MB of zeros: tiny compressed
    bag = tmp_path / "src" / "bomb.bag"
    bag.parent.mkdir()
    write_ros1(bag, Layout(seconds=0.5, extra=zeros), compression=compression)
    write_ros1(bag.parent / "good.bag", Layout(seconds=0.5, seed=1), compression=compression)
    assert bag.stat().st_size < 200_000
    res = ingest(str(bag.parent), str(tmp_path / "lake"), IngestConfig(max_read_bytes=500_000))
    row = _rows(tmp_path / "lake")["bomb.bag"]
    assert res.ingested == 1 and row["reason_code"] == "too_large"
    assert f"a {compression} chunk expands past the read budget of 500 KB" in row["reason"]
    assert ingest(str(bag.parent), str(tmp_path / "lake2"), IngestConfig(max_read_bytes=5_000_000)).ingested == 2


def test_bounded_decompress_stops_at_the_limit():
    import bz2

    import lz4.frame

    data = b"\0" * 1_000_000
    for kind, packed in (("bz2", bz2.compress(data)), ("lz4", lz4.frame.compress(data))):
        assert bounded_decompress(kind, 2_000_000, "f", "chunk")(packed) == data
        with pytest.raises(SourceError, match="expands past the read budget") as err:
            bounded_decompress(kind, 999_999, "f", "chunk")(packed)
        assert err.value.reason_code == "too_large"
        with pytest.raises(SourceError, match="truncated"):
            bounded_decompress(kind, 2_000_000, "f", "chunk")(packed[: len(packed) // 2])


def test_an_mcap_chunk_declaring_more_than_the_budget_is_refused(tmp_path: Path):
    path = tmp_path / "rec.mcap"
    write_mcap_json(path, Layout(seconds=0.5))
    opts = SourceOptions(limits=ReadLimits(max_read_bytes=10_000))
    with pytest.raises(ValueError, match=r"chunk at byte \d+: .*chunk declares .* refused before reading it"):
        discover_readers(str(path), options=opts)
    assert discover_readers(str(path)).readers


def test_hdf5_data_outside_the_files_folder_is_refused(tmp_path: Path):
    src, elsewhere = tmp_path / "src", tmp_path / "elsewhere"
    src.mkdir()
    elsewhere.mkdir()
    write_aloha(elsewhere / "secret.hdf5")
    write_aloha(src / "beside.hdf5", seed=3)
    linked = write_aloha(src / "linked.hdf5", seed=1)
    with h5py.File(linked, "a") as f:
        f["extra"] = h5py.ExternalLink(str(elsewhere / "secret.hdf5"), "/observations/qpos")
    inside = write_aloha(src / "inside.hdf5", seed=2)
    with h5py.File(inside, "a") as f:
        f["extra"] = h5py.ExternalLink("beside.hdf5", "/observations/qpos")  # in the same folder: fine
    raw = src / "raw.hdf5"
    with h5py.File(raw, "w") as f:  # a dataset whose bytes live in an outside file
        f.create_dataset(
            "observations/qpos", shape=(4, 2), dtype="uint8", external=[(str(elsewhere / "secret.hdf5"), 0, 8)]
        )
        f["action"] = np.zeros((4, 2))
    res = ingest(str(src), str(tmp_path / "lake"))
    rows = _rows(tmp_path / "lake")
    assert set(rows) == {"linked.hdf5", "raw.hdf5"} and res.ingested == 2
    assert (
        rows["linked.hdf5"]["reason_code"] == "outside_source"
        and "extra: is an external link to" in rows["linked.hdf5"]["reason"]
    )
    assert rows["raw.hdf5"]["reason_code"] == "outside_source" and "stores its data in" in rows["raw.hdf5"]["reason"]


def test_a_ros2_metadata_naming_files_outside_the_bag_is_refused(tmp_path: Path):
    bag = tmp_path / "bag"
    write_ros2(bag, Layout(seconds=0.3), storage="sqlite3")
    shutil.copy(bag / "bag.db3", tmp_path / "outside.db3")
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    meta["rosbag2_bagfile_information"]["relative_file_paths"] = ["../outside.db3"]
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(ValueError, match=r"relative_file_paths: '../outside.db3' points outside the bag directory"):
        discover_readers(str(bag))


def test_a_tfrecord_declaring_a_huge_record_is_refused_before_reading(tmp_path: Path):
    import struct

    from robolake.lake.sources.rlds.tfrecord import masked_crc, read_record

    path = tmp_path / "x.tfrecord"
    length = struct.pack("<Q", 10**12)  # a consistent header (its checksum is right) for 1 TB of data
    path.write_bytes(length + struct.pack("<I", masked_crc(length)) + b"\0" * 64)
    with pytest.raises(SourceError, match="TFRecord at byte 0: declares 1 TB") as err:
        read_record(str(path), 0)
    assert err.value.reason_code == "too_large"
    with pytest.raises(SourceError, match="past the end of the file"):
        read_record(str(path), 0, ReadLimits(max_read_bytes=2 * 10**12))
