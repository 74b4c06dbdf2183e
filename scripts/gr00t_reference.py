"""Run Isaac-GR00T's own `LeRobotSingleDataset` and save its samples, for the adapter's equality test.

Runs in the GR00T reference environment (`scripts/build_gr00t_reference.sh` builds it and
prints the command), never in robolake's: it imports `gr00t.data.dataset` from an Isaac-GR00T
source tree and nothing of robolake.

    python scripts/gr00t_reference.py REQUEST.json

REQUEST.json: {"root": dataset dir, "configs": {modality: {"delta_indices": [...],
"modality_keys": [...]}}, "indices": [global step indices], "out": .npz path, "backend":
"decord"}. The .npz holds each array sample as "<n>|<key>"; a JSON file beside it (same name,
.json) holds the string samples, the trajectory ids and lengths, and the array dtypes.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main(path: str) -> None:
    from gr00t.data.dataset import LeRobotSingleDataset, ModalityConfig

    req = json.loads(open(path).read())
    configs = {m: ModalityConfig(**c) for m, c in req["configs"].items()}
    ds = LeRobotSingleDataset(req["root"], configs, embodiment_tag="new_embodiment", video_backend=req["backend"])
    arrays: dict[str, np.ndarray] = {}
    strings: dict[str, list[str]] = {}
    for n, index in enumerate(req["indices"]):
        trajectory, base = ds.all_steps[index]
        for key, value in ds.get_step_data(trajectory, base).items():
            if isinstance(value, np.ndarray):
                arrays[f"{n}|{key}"] = value
            else:
                strings[f"{n}|{key}"] = [str(v) for v in value]
    np.savez(req["out"], **arrays)
    meta = {
        "strings": strings,
        "trajectory_ids": [int(t) for t in ds.trajectory_ids],
        "trajectory_lengths": [int(n) for n in ds.trajectory_lengths],
        "len": len(ds),
    }
    with open(req["out"][: -len(".npz")] + ".json", "w") as f:
        json.dump(meta, f)


if __name__ == "__main__":
    main(sys.argv[1])
