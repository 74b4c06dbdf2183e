"""RLDS / Open-X datasets as prepared TFDS directories, written without TensorFlow.

These write real recordings with the format's own framing (TFRecord records of serialized
tf.train.Example protos, TFDS's dataset_info.json and features.json), for tests, benchmarks and
demos. `FEATURES` is a Bridge-like feature tree: a 7-dim action, an 8-dim state, a JPEG main
camera, a PNG wrist camera, the RLDS step flags and a language instruction per step.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robolake.testing.images import frames, jpeg, png

__all__ = ["FEATURES", "episode_example", "write_tfds"]


def _tensor(dims: list[int], dtype: str = "float32") -> dict:
    return {
        "pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
        "tensor": {"shape": {"dimensions": [str(d) for d in dims]}, "dtype": dtype, "encoding": "none"},
    }


def _image(h: int, w: int, fmt: str) -> dict:
    return {
        "pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
        "image": {"shape": {"dimensions": [str(h), str(w), "3"]}, "dtype": "uint8", "encodingFormat": fmt},
    }


def _dict(features: dict) -> dict:
    return {
        "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
        "featuresDict": {"features": features},
    }


FEATURES = _dict(
    {
        "steps": {
            "pythonClassName": "tensorflow_datasets.core.features.dataset_feature.Dataset",
            "sequence": {
                "feature": _dict(
                    {
                        "action": _tensor([7]),
                        "discount": _tensor([]),
                        "reward": _tensor([]),
                        "is_first": _tensor([], "bool"),
                        "is_last": _tensor([], "bool"),
                        "is_terminal": _tensor([], "bool"),
                        "language_instruction": {
                            "pythonClassName": "tensorflow_datasets.core.features.text_feature.Text",
                            "text": {},
                        },
                        "observation": _dict(
                            {
                                "image": _image(32, 40, "jpeg"),
                                "wrist_image": _image(16, 16, "png"),
                                "state": _tensor([8]),
                            }
                        ),
                    }
                ),
                "length": "-1",
            },
        },
        "episode_metadata": _dict(
            {"file_path": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}}}
        ),
    }
)


def episode_example(
    n: int, seed: int, task: str = "put the carrot in the pot", first_flags: list[int] | None = None
) -> dict:
    """One Open-X episode of `n` steps as the flat feature dict of its tf.train.Example.

    `first_flags` overrides `steps/is_first` (a second 1 marks two episodes in one record).
    """
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
        "steps/observation/wrist_image": [png(f) for f in wrist],
        "steps/observation/state": rng.normal(size=(n, 8)).astype(np.float32),
        "episode_metadata/file_path": [f"/data/raw/ep{seed}.npy"],
    }


def write_tfds(root: Path, name: str = "bridge_mini", splits: dict[str, list[list[dict]]] | None = None) -> Path:
    """A prepared TFDS directory: dataset_info.json, features.json, <name>-<split>.tfrecord-XXXXX-of-YYYYY.

    `splits` maps each split to its shards, each a list of `episode_example` dicts.
    """
    from robolake.lake import encode_example, write_records

    root.mkdir(parents=True)
    splits = splits or {
        "train": [[episode_example(12, 0), episode_example(9, 1)], [episode_example(10, 2, "wipe the table")]],
        "val": [[episode_example(11, 3)]],
    }
    info_splits = []
    for split, shards in splits.items():
        for i, shard in enumerate(shards):
            write_records(
                str(root / f"{name}-{split}.tfrecord-{i:05d}-of-{len(shards):05d}"), [encode_example(e) for e in shard]
            )
        info_splits.append(
            {
                "name": split,
                "shardLengths": [str(len(s)) for s in shards],
                "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
            }
        )
    (root / "dataset_info.json").write_text(
        json.dumps({"name": name, "version": "1.0.0", "fileFormat": "tfrecord", "splits": info_splits})
    )
    (root / "features.json").write_text(json.dumps(FEATURES))
    return root
