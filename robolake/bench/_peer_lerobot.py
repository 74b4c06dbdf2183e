"""LeRobot's side of `robolake bench peers`, run by the LeRobot environment's own Python.

Not imported by robolake (it needs `lerobot`, which lives only in the peer environment that
`robolake.bench.peers` builds): `robolake.bench.peers` starts it as `PYTHON _peer_lerobot.py` and
talks to it one JSON object per line, on stdin and stdout (`_peer_serve.py`), so that the
interpreter, LeRobot's imports and its DataLoader workers stay warm between the interleaved timed
epochs, as robolake's own loader does.

Requests (`op`):

- `make_av1`: write a 640x480 dataset with LeRobot's own writer and its default encoder settings
  (`LeRobotDataset.create`, `add_frame`, `save_episode`, `finalize`; libsvtav1), the kind of
  dataset LeRobot records today.
- `open`: a `LeRobotDataset` on a local v3.0 dataset, with the requested video backend and
  `delta_timestamps` for an action chunk of `horizon` steps, then a shuffled DataLoader as
  `lerobot_train.py` builds it (the same `num_workers` and `batch_size` as robolake's loader;
  LeRobot's defaults otherwise: persistent workers, prefetch factor 4, spawn).
- `epoch`: iterate that DataLoader once, timed here from `iter()` to the last batch.
- `items`: `LeRobotDataset.__getitem__` for given indices, with given `delta_timestamps` and
  video backend, saved to an `.npz` (tensors as arrays under "INDEX/KEY", task strings in the
  answer): what the adapter's items are compared with (`robolake.integrations.lerobot`).
- `quit`.

Answers are `{"ok": true, ...}` or `{"ok": false, "error": "..."}`. LeRobot's own prints go to
stderr; stdout carries only the answers.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import _peer_serve  # first: the answers keep stdout to themselves (this directory is on the path)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local datasets only: never reach for the hub

STATE: dict[str, Any] = {}


PACKAGES = ("lerobot", "torch", "torchcodec", "av", "datasets")


def versions() -> dict[str, str]:
    return _peer_serve.versions(PACKAGES)


def _frame(i: int, episode: int, height: int, width: int) -> Any:
    """A smooth synthetic scene (gradient, a moving block, faint noise) that codes like camera video."""
    import numpy as np

    rng = np.random.default_rng(episode * 100_000 + i)
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :]
    img = np.empty((height, width, 3), dtype=np.float32)
    img[..., 0] = 0.6 * y + 0.2 * x
    img[..., 1] = 0.3 * x + 40.0 * episode % 200
    img[..., 2] = 120.0 + 0.2 * (x - y)
    cx = int((width - 120) * (0.5 + 0.45 * np.sin(0.05 * i + episode)))
    cy = int((height - 120) * (0.5 + 0.45 * np.cos(0.04 * i)))
    img[cy : cy + 120, cx : cx + 120] = (230.0, 60.0 + episode * 20 % 180, 40.0)
    img += rng.normal(0.0, 2.0, size=img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def make_av1(req: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    height, width, dim = int(req["height"]), int(req["width"]), int(req.get("dim", 7))
    features = {
        "observation.images.front": {
            "dtype": "video",
            "shape": (height, width, 3),
            "names": ["height", "width", "channels"],
        },
        "observation.state": {"dtype": "float32", "shape": (dim,), "names": None},
        "action": {"dtype": "float32", "shape": (dim,), "names": None},
    }
    t0 = time.perf_counter()
    ds = LeRobotDataset.create(
        req["repo_id"], fps=int(req["fps"]), features=features, root=req["root"], use_videos=True
    )
    for episode, length in enumerate(req["lengths"]):
        for i in range(int(length)):
            q = np.sin(0.05 * i + np.arange(dim, dtype=np.float32) + episode).astype(np.float32)
            ds.add_frame(
                {
                    "observation.images.front": _frame(i, episode, height, width),
                    "observation.state": q,
                    "action": np.roll(q, 1),
                    "task": f"move the block, episode {episode % 3}",
                }
            )
        ds.save_episode()
    ds.finalize()
    info = json.load(open(os.path.join(req["root"], "meta", "info.json")))
    video = info["features"]["observation.images.front"].get("info", {})
    return {"seconds": time.perf_counter() - t0, "frames": int(sum(req["lengths"])), "video_info": video}


def open_loader(req: dict[str, Any]) -> dict[str, Any]:
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    STATE.pop("loader", None)  # the previous DataLoader's workers exit with it
    root, backend, horizon = req["root"], req["backend"], int(req["horizon"])
    probe = LeRobotDataset(req["repo_id"], root=root, video_backend=backend)
    fps = probe.fps
    delta = {"action": [i / fps for i in range(horizon)]}
    ds = LeRobotDataset(req["repo_id"], root=root, delta_timestamps=delta, video_backend=backend)
    data: Any = ds
    stride, cap = int(req.get("step_stride", 1)), req.get("max_samples")
    if stride > 1 or cap is not None:
        # every `stride`-th step of each episode (robolake's step_stride), then a seeded random
        # subset of at most `max_samples` of them: the per-sample cost of a random read does not
        # depend on which samples are read, and a slow backend need not read them all
        import numpy as np

        frames = np.asarray(ds.hf_dataset.data.column("frame_index").to_numpy())
        indices = np.flatnonzero(frames % stride == 0)
        if cap is not None and int(cap) < indices.size:
            indices = np.sort(np.random.default_rng(int(req.get("seed", 0))).choice(indices, int(cap), replace=False))
        data = torch.utils.data.Subset(ds, indices.tolist())
    workers = int(req["num_workers"])
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=int(req["batch_size"]),
        shuffle=True,
        num_workers=workers,
        pin_memory=False,
        drop_last=False,
        prefetch_factor=int(req.get("prefetch_factor", 4)) if workers else None,
        persistent_workers=workers > 0,
        multiprocessing_context=req.get("multiprocessing_context", "spawn") if workers else None,
        generator=torch.Generator().manual_seed(int(req.get("seed", 0))),
    )
    STATE.update(loader=loader, cameras=list(ds.meta.camera_keys), backend=backend)
    video = {k: ds.meta.features[k].get("info", {}) for k in ds.meta.camera_keys}
    return {
        "samples": len(data),
        "dataset_frames": len(ds),
        "fps": fps,
        "cameras": STATE["cameras"],
        "video_info": video,
        "delta_timestamps": delta,
        "versions": versions(),
    }


def epoch(req: dict[str, Any]) -> dict[str, Any]:
    loader, cameras = STATE["loader"], STATE["cameras"]
    samples = 0
    first = None
    image_shape: list[int] = []
    action_shape: list[int] = []
    t0 = time.perf_counter()
    for batch in loader:
        first = time.perf_counter() - t0 if first is None else first
        samples += int(batch["index"].shape[0])
        image_shape = list(batch[cameras[0]].shape[1:])
        action_shape = list(batch["action"].shape[1:])
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "first_batch_s": first or 0.0,
        "samples": samples,
        "image_shape": image_shape,
        "action_shape": action_shape,
        "backend": STATE["backend"],
    }


def items(req: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset(
        req["repo_id"],
        root=req["root"],
        delta_timestamps=req.get("delta_timestamps"),
        video_backend=req.get("backend", "pyav"),
    )
    arrays: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    t0 = time.perf_counter()
    for i in req["indices"]:
        item = ds[int(i)]
        for key, value in item.items():
            if isinstance(value, str):
                meta[f"{i}/{key}"] = value
            else:
                arrays[f"{i}/{key}"] = value.numpy()
                meta[f"{i}/{key}"] = {"dtype": str(value.dtype), "shape": list(value.shape)}
    seconds = time.perf_counter() - t0
    np.savez(req["out"], **arrays)
    m = ds.meta
    return {
        "seconds": seconds,
        "meta": meta,
        "len": len(ds),
        "fps": m.fps,
        "camera_keys": list(m.camera_keys),
        "features": {k: {"dtype": f["dtype"], "shape": list(f["shape"])} for k, f in m.features.items()},
        "stats": {k: {s: np.asarray(v).tolist() for s, v in d.items()} for k, d in m.stats.items()},
        "tasks": list(m.tasks.index),
        "versions": versions(),
    }


OPS = {"items": items, "make_av1": make_av1, "open": open_loader, "epoch": epoch}


def main() -> None:
    _peer_serve.serve(OPS, PACKAGES)


if __name__ == "__main__":
    main()
