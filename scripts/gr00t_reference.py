"""Run Isaac-GR00T's own `LeRobotSingleDataset` and save its samples, for the adapter's equality test.

Runs in the GR00T reference environment (`scripts/build_gr00t_reference.sh` builds it and
prints the command), never in robolake's: it imports `gr00t.data.dataset` from an Isaac-GR00T
source tree and nothing of robolake.

    python scripts/gr00t_reference.py REQUEST.json

REQUEST.json: {"root": dataset dir, "configs": {modality: {"delta_indices": [...],
"modality_keys": [...]}}, "indices": [global step indices], "out": .npz path, "backend":
"decord", "ours": optional {"npz": ..., "json": ..., "metadata": ...}}. The .npz holds each
array sample as "<n>|<key>"; a JSON file beside it (same name, .json) holds the string samples,
the trajectory ids and lengths and GR00T's `DatasetMetadata` of the dataset.

With "ours" (samples saved the same way by robolake's adapter, and its `metadata()`), the
deterministic part of Isaac-GR00T's fourier_gr1_arms_only data config transform (video to
tensor, centre crop 0.95, resize 224, state sin/cos, action min-max normalisation, concat; in
eval mode, without colour jitter and the model's own transform) is applied to GR00T's samples
with GR00T's metadata and to robolake's with robolake's metadata, saved as "t|<n>|<key>" and
"o|<n>|<key>".
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def main(path: str) -> None:
    from gr00t.data.dataset import LeRobotSingleDataset, ModalityConfig

    req = json.loads(open(path).read())
    configs = {m: ModalityConfig(**c) for m, c in req["configs"].items()}
    ds = LeRobotSingleDataset(req["root"], configs, embodiment_tag="new_embodiment", video_backend=req["backend"])
    if req.get("time"):  # {"time": true}: only time ds[i] over the indices (scripts/bench_gr00t_adapter.py)
        cpu, wall = time.process_time(), time.perf_counter()
        for index in req["indices"]:
            ds[index]
        times = {
            "cpu_s": time.process_time() - cpu,
            "wall_s": time.perf_counter() - wall,
            "samples": len(req["indices"]),
        }
        with open(req["out"], "w") as f:
            json.dump(times, f)
        return
    arrays: dict[str, np.ndarray] = {}
    strings: dict[str, list[str]] = {}
    for n, index in enumerate(req["indices"]):
        trajectory, base = ds.all_steps[index]
        for key, value in ds.get_step_data(trajectory, base).items():
            if isinstance(value, np.ndarray):
                arrays[f"{n}|{key}"] = value
            else:
                strings[f"{n}|{key}"] = [str(v) for v in value]
    if req.get("ours"):
        arrays.update(_transformed(ds, req, configs))
    np.savez(req["out"], **arrays)
    meta = {
        "metadata": ds.metadata.model_dump(mode="json"),
        "strings": strings,
        "trajectory_ids": [int(t) for t in ds.trajectory_ids],
        "trajectory_lengths": [int(n) for n in ds.trajectory_lengths],
        "len": len(ds),
    }
    with open(req["out"][: -len(".npz")] + ".json", "w") as f:
        json.dump(meta, f)


def _chain(configs: dict) -> object:
    from gr00t.data.transform.base import ComposedModalityTransform
    from gr00t.data.transform.concat import ConcatTransform
    from gr00t.data.transform.state_action import StateActionSinCosTransform, StateActionToTensor, StateActionTransform
    from gr00t.data.transform.video import VideoCrop, VideoResize, VideoToNumpy, VideoToTensor

    video, state, action = (list(configs[m].modality_keys) for m in ("video", "state", "action"))
    chain = ComposedModalityTransform(
        transforms=[
            VideoToTensor(apply_to=video),
            VideoCrop(apply_to=video, scale=0.95),
            VideoResize(apply_to=video, height=224, width=224, interpolation="linear"),
            VideoToNumpy(apply_to=video),
            StateActionToTensor(apply_to=state),
            StateActionSinCosTransform(apply_to=state),
            StateActionToTensor(apply_to=action),
            StateActionTransform(apply_to=action, normalization_modes={k: "min_max" for k in action}),
            ConcatTransform(video_concat_order=video, state_concat_order=state, action_concat_order=action),
        ]
    )
    chain.eval()
    return chain


def _numpy(value: object) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def _transformed(ds, req: dict, configs: dict) -> dict[str, np.ndarray]:
    from gr00t.data.schema import DatasetMetadata

    ours = req["ours"]
    with np.load(ours["npz"]) as z:
        saved = {k: z[k] for k in z.files}
    strings = json.loads(open(ours["json"]).read())
    theirs_chain, ours_chain = _chain(configs), _chain(configs)
    theirs_chain.set_metadata(ds.metadata)
    ours_chain.set_metadata(DatasetMetadata.model_validate(json.loads(open(ours["metadata"]).read())))
    out: dict[str, np.ndarray] = {}
    for n, index in enumerate(req["indices"]):
        trajectory, base = ds.all_steps[index]
        for key, value in theirs_chain(ds.get_step_data(trajectory, base)).items():
            if not isinstance(value, list):
                out[f"t|{n}|{key}"] = _numpy(value)
        sample = {k.split("|", 1)[1]: v for k, v in saved.items() if k.startswith(f"{n}|")}
        sample.update({k.split("|", 1)[1]: v for k, v in strings.items() if k.startswith(f"{n}|")})
        for key, value in ours_chain(sample).items():
            if not isinstance(value, list):
                out[f"o|{n}|{key}"] = _numpy(value)
    return out


if __name__ == "__main__":
    main(sys.argv[1])
