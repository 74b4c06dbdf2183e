"""Export packed shards to WebDataset tar files, for training stacks that read tars.

Each packed sequence becomes one WebDataset sample keyed `seq<NNNNNNNN>`:

- `<key>.json`: sample ids, lengths, cu_seqlens, per-sample counts and dims, embodiment ids,
  horizon, and the lineage (lake URI and version) of the pack;
- `<key>.text_ids.npy`, `<key>.state.npy`, `<key>.action.npy`, `<key>.action_valid.npy`: the
  flat arrays of the shard row, split with the counts in the JSON;
- `<key>.view000.jpg`, `<key>.view001.jpg`, ...: the camera views in sample order.

Tars are written with webdataset's `ShardWriter`, `sequences_per_tar` sequences each, in plan order.
"""

from __future__ import annotations

import os
from typing import Any

import lance
import numpy as np

from robolake.packers.manifest import SHARDS_NAME, read_manifest
from robolake.storage import join_uri, normalize_uri

__all__ = ["export_webdataset"]

_LIST_KEYS = (
    "episode_id",
    "step_index",
    "embodiment",
    "embodiment_id",
    "lengths",
    "cu_seqlens",
    "num_views",
    "cameras",
    "text_lengths",
    "state_dims",
    "action_dims",
)


def export_webdataset(packed: str, out_dir: str, *, sequences_per_tar: int = 256) -> list[str]:
    """Write the packed shards at `packed` as WebDataset tars in `out_dir`.

    Returns:
        Paths of the tar files written.

    Raises:
        FileNotFoundError: `packed` is not a finished pack output.
    """
    import webdataset as wds

    if sequences_per_tar < 1:
        raise ValueError(f"sequences_per_tar must be >= 1, got {sequences_per_tar}")
    packed = normalize_uri(packed)
    manifest = read_manifest(packed)
    ds = lance.dataset(join_uri(packed, SHARDS_NAME), version=manifest.shards_version)
    os.makedirs(out_dir, exist_ok=True)
    pattern = os.path.join(out_dir, "packed-%06d.tar")
    written: list[str] = []
    with wds.ShardWriter(pattern, maxcount=sequences_per_tar, verbose=0) as sink:
        for batch in ds.to_batches():
            for row in batch.to_pylist():
                sample: dict[str, Any] = {
                    "__key__": f"seq{row['seq_index']:08d}",
                    "json": {
                        **{k: row[k] for k in _LIST_KEYS},
                        "seq_index": row["seq_index"],
                        "horizon": row["horizon"],
                        "total_tokens": row["total_tokens"],
                        "lake_uri": manifest.lake_uri,
                        "lake_version": manifest.lake_version,
                    },
                    "text_ids.npy": np.asarray(row["text_ids"], dtype=np.int32),
                    "state.npy": np.asarray(row["state"], dtype=np.float32),
                    "action.npy": np.asarray(row["action"], dtype=np.float32),
                    "action_valid.npy": np.asarray(row["action_valid"], dtype=np.int32),
                }
                for v, img in enumerate(row["frames"]):
                    sample[f"view{v:03d}.jpg"] = img
                sink.write(sample)
    written = sorted(
        os.path.join(out_dir, f) for f in os.listdir(out_dir) if f.startswith("packed-") and f.endswith(".tar")
    )
    return written
