"""RLDS / Open-X: TFRecord framing and Example decoding without TensorFlow, TFDS directories end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.ingest import ingest
from robolake.lake.sources import SourceError, discover_readers
from robolake.lake.sources.tfrecord import (
    crc32c,
    encode_example,
    iter_records,
    parse_example,
    read_record,
    scan_records,
    write_records,
)

from .h5_layouts import frames, jpeg


def _png(frame: np.ndarray) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="PNG")
    return buf.getvalue()


def _tensor(dims: list[int], dtype: str = "float32") -> dict:
    return {"pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
            "tensor": {"shape": {"dimensions": [str(d) for d in dims]}, "dtype": dtype, "encoding": "none"}}


def _image(h: int, w: int, fmt: str) -> dict:
    return {"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
            "image": {"shape": {"dimensions": [str(h), str(w), "3"]}, "dtype": "uint8", "encodingFormat": fmt}}


def _dict(features: dict) -> dict:
    return {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict", "featuresDict": {"features": features}}


FEATURES = _dict({
    "steps": {"pythonClassName": "tensorflow_datasets.core.features.dataset_feature.Dataset", "sequence": {"feature": _dict({
        "action": _tensor([7]),
        "discount": _tensor([]),
        "reward": _tensor([]),
        "is_first": _tensor([], "bool"),
        "is_last": _tensor([], "bool"),
        "is_terminal": _tensor([], "bool"),
        "language_instruction": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}},
        "observation": _dict({"image": _image(32, 40, "jpeg"), "wrist_image": _image(16, 16, "png"), "state": _tensor([8])}),
    }), "length": "-1"}},
    "episode_metadata": _dict({"file_path": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}}}),
})


def episode_example(n: int, seed: int, task: str = "put the carrot in the pot", first_flags: list[int] | None = None) -> dict:
    rng = np.random.default_rng(seed)
    img = frames(n, 32, 40, seed=seed)
    wrist = frames(n, 16, 16, seed=seed + 9)
    flags = first_flags or [1] + [0] * (n - 1)
    return {
        "steps/action": rng.uniform(-1, 1, (n, 7)).astype(np.float32),
        "steps/discount": np.ones(n, np.float32),
        "steps/reward": np.r_[np.zeros(n - 1), 1.0].astype(np.float32),
        "steps/is_first": np.array(flags, np.int64),
        "steps/is_last": np.array([0] * (n - 1) + [1], np.int64),
        "steps/is_terminal": np.array([0] * (n - 1) + [1], np.int64),
        "steps/language_instruction": [task] * n,
        "steps/observation/image": [jpeg(f) for f in img],
        "steps/observation/wrist_image": [_png(f) for f in wrist],
        "steps/observation/state": rng.normal(size=(n, 8)).astype(np.float32),
        "episode_metadata/file_path": [f"/data/raw/ep{seed}.npy"],
    }


def write_tfds(root: Path, name: str = "bridge_mini", splits: dict[str, list[list[dict]]] | None = None) -> Path:
    """A prepared TFDS directory: dataset_info.json, features.json, <name>-<split>.tfrecord-XXXXX-of-YYYYY."""
    root.mkdir(parents=True)
    splits = splits or {
        "train": [[episode_example(12, 0), episode_example(9, 1)], [episode_example(10, 2, "wipe the table")]],
        "val": [[episode_example(11, 3)]],
    }
    info_splits = []
    for split, shards in splits.items():
        for i, shard in enumerate(shards):
            write_records(str(root / f"{name}-{split}.tfrecord-{i:05d}-of-{len(shards):05d}"), [encode_example(e) for e in shard])
        info_splits.append({"name": split, "shardLengths": [str(len(s)) for s in shards], "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"})
    (root / "dataset_info.json").write_text(json.dumps({"name": name, "version": "1.0.0", "fileFormat": "tfrecord", "splits": info_splits}))
    (root / "features.json").write_text(json.dumps(FEATURES))
    return root


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
    assert cams["wrist_image"].images == tuple(src["steps/observation/wrist_image"]) and cams["wrist_image"].encoding == "png"
    assert (cams["image"].height, cams["image"].width) == (32, 40)
    info = r.inspect()
    assert info["episodes"] == 4 and info["keys"]["steps/observation/state"]["shape"] == [8]
    assert root.is_dir()


def test_rlds_ingest_quarantines_bad_records(tmp_path: Path, ray_session):
    bad = episode_example(10, 5)
    bad["steps/observation/state"][4, 2] = np.inf
    two = episode_example(10, 6, first_flags=[1, 0, 0, 0, 0, 1, 0, 0, 0, 0])
    resized = episode_example(10, 7)
    resized["steps/observation/image"][6] = jpeg(frames(1, 24, 40)[0])
    root = write_tfds(tmp_path / "src" / "oxe_mini" / "1.0.0", name="oxe_mini", splits={
        "train": [[episode_example(8, 0), bad, two], [resized, episode_example(9, 8), episode_example(7, 9)]],
    })
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
    m = mapping_from_dict({"embodiment": "widowx", "task": "tidy up", "fps": 5, "action_from_state": True,
                           "state": ["steps/observation/state", "steps/reward"], "cameras": {"main": "steps/observation/image"}}, "w.yaml")
    (r,) = discover_readers(str(tmp_path), options=SourceOptions(mapping=m))
    assert (r.tag, r.cameras, r.spec().state_dim, r.spec().action_dim) == ("widowx", ("main",), 9, 9)
    ep = r.read_tabular(r.discover()[0])
    assert ep.task == "tidy up" and ep.fps == 5 and ep.metadata["action_from_state"] is True
    np.testing.assert_allclose(ep.action[:-1], ep.state[1:])
    np.testing.assert_allclose(ep.timestamps[:3], [0, 0.2, 0.4])
    bad = mapping_from_dict({"state": ["steps/observation/joints"], "action": ["steps/action"]}, "w.yaml")
    with pytest.raises(ValueError, match=r"names 'steps/observation/joints'.*steps/observation/state"):
        discover_readers(str(tmp_path), options=SourceOptions(mapping=bad))
