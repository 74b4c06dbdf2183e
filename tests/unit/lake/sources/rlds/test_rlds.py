"""RLDS / Open-X: TFRecord framing and Example decoding without TensorFlow, TFDS directories end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.sources import SourceError, discover_readers
from robolake.lake.sources.rlds.tfrecord import (
    crc32c,
    encode_example,
    iter_records,
    parse_example,
    read_record,
    scan_records,
    write_records,
)
from robolake.testing.images import frames, jpeg
from robolake.testing.rlds import episode_example, write_tfds


def test_crc_and_example_roundtrip(tmp_path: Path):
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    ex = {"a": np.array([1.5, -2.25], np.float32), "b": np.array([3, -1, 1 << 40], np.int64), "c": [b"\xff\x00", "txt"]}
    path = tmp_path / "x.tfrecord"
    write_records(str(path), [encode_example(ex), encode_example({"d": []})])
    got = [parse_example(r) for r in iter_records(str(path))]
    np.testing.assert_array_equal(got[0]["a"], ex["a"])
    np.testing.assert_array_equal(got[0]["b"], ex["b"])
    assert got[0]["c"] == [b"\xff\x00", b"txt"] and got[1]["d"] == []
    data = bytearray(path.read_bytes())
    data[20] ^= 0x01  # inside the first record's data
    path.write_bytes(bytes(data))
    with pytest.raises(SourceError, match="data checksum"):
        read_record(str(path), 0)
    path.write_bytes(bytes(data[:-7]))
    offsets = scan_records(str(path))
    assert len(offsets) == 2
    with pytest.raises(SourceError, match="truncated"):
        read_record(str(path), offsets[1][0])


def test_tfds_directory_defaults(tmp_path: Path):
    root = write_tfds(tmp_path / "bridge_mini" / "1.0.0")
    (r,) = discover_readers(str(tmp_path))
    assert (r.format_name, r.tag, r.cameras) == ("rlds", "bridge_mini", ("image", "wrist_image"))
    assert (r.spec().state_dim, r.spec().action_dim) == (8, 7)
    refs = r.discover()
    assert [x.get("split") for x in refs] == ["train", "train", "train", "val"]
    ep = r.read_tabular(refs[2])
    src = episode_example(10, 2, "wipe the table")
    np.testing.assert_array_equal(ep.state, src["steps/observation/state"])
    np.testing.assert_array_equal(ep.action, src["steps/action"])
    assert ep.task == "wipe the table" and ep.success is True and ep.metadata["split"] == "train"
    assert ep.metadata["episode_metadata/file_path"] == "/data/raw/ep2.npy" and ep.metadata["fps_assumed"] == 10.0
    cams = {c.camera: c for c in r.read_frames(ep)}
    assert cams["image"].images == tuple(src["steps/observation/image"]) and cams["image"].encoding == "jpeg"
    assert (
        cams["wrist_image"].images == tuple(src["steps/observation/wrist_image"])
        and cams["wrist_image"].encoding == "png"
    )
    assert (cams["image"].height, cams["image"].width) == (32, 40)
    info = r.inspect()
    assert info["episodes"] == 4 and info["keys"]["steps/observation/state"]["shape"] == [8]
    assert root.is_dir()


def test_rlds_ingest_quarantines_bad_records(tmp_path: Path):
    bad = episode_example(10, 5)
    bad["steps/observation/state"][4, 2] = np.inf
    two = episode_example(10, 6, first_flags=[1, 0, 0, 0, 0, 1, 0, 0, 0, 0])
    resized = episode_example(10, 7)
    resized["steps/observation/image"][6] = jpeg(frames(1, 24, 40)[0])
    root = write_tfds(
        tmp_path / "src" / "oxe_mini" / "1.0.0",
        name="oxe_mini",
        splits={
            "train": [[episode_example(8, 0), bad, two], [resized, episode_example(9, 8), episode_example(7, 9)]],
        },
    )
    shard = root / "oxe_mini-train.tfrecord-00001-of-00002"
    shard.write_bytes(shard.read_bytes()[:-40])  # the last record is cut short
    result = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert result.ingested == 2
    q = Lake.open(str(tmp_path / "lake")).to_arrow("quarantine").to_pylist()
    codes = sorted((r["source_episode_index"], r["reason_code"]) for r in q)
    assert codes == [(1, "non_finite"), (2, "shape"), (3, "shape"), (5, "corrupt_file")], q
    reasons = {r["source_episode_index"]: r["reason"] for r in q}
    assert "steps/observation/state" in reasons[1] and "2 episodes" in reasons[2]
    assert "frame 6" in reasons[3] and "truncated" in reasons[5]
    eps = Lake.open(str(tmp_path / "lake")).episodes().to_pylist()
    assert sorted(e["num_steps"] for e in eps) == [8, 9] and {e["task"] for e in eps} == {"put the carrot in the pot"}
    # Regression: ids named the version directory alone ("1.0.0/..."), the same for every TFDS dataset.
    assert all(e["episode_id"].startswith("oxe_mini/1.0.0/") for e in eps), [e["episode_id"] for e in eps]
    assert all(e["cameras"] == ["image", "wrist_image"] for e in eps)


def test_rlds_mapping_selects_features(tmp_path: Path):
    from robolake.lake.sources import SourceOptions
    from robolake.lake.sources.mapping import mapping_from_dict

    write_tfds(tmp_path / "ds")
    m = mapping_from_dict(
        {
            "embodiment": "widowx",
            "task": "tidy up",
            "fps": 5,
            "action_from_state": True,
            "state": ["steps/observation/state", "steps/reward"],
            "cameras": {"main": "steps/observation/image"},
        },
        "w.yaml",
    )
    (r,) = discover_readers(str(tmp_path), options=SourceOptions(mapping=m))
    assert (r.tag, r.cameras, r.spec().state_dim, r.spec().action_dim) == ("widowx", ("main",), 9, 9)
    ep = r.read_tabular(r.discover()[0])
    assert ep.task == "tidy up" and ep.fps == 5 and ep.metadata["action_from_state"] is True
    np.testing.assert_allclose(ep.action[:-1], ep.state[1:])
    np.testing.assert_allclose(ep.timestamps[:3], [0, 0.2, 0.4])
    bad = mapping_from_dict({"state": ["steps/observation/joints"], "action": ["steps/action"]}, "w.yaml")
    with pytest.raises(ValueError, match=r"names 'steps/observation/joints'.*steps/observation/state"):
        discover_readers(str(tmp_path), options=SourceOptions(mapping=bad))
