"""The lerobot-lancedb side of `robolake bench peers`, and LeRobot training from each loader.

Run by the LeRobot environment's own Python (Python 3.12, LeRobot 0.6.1, lerobot-lancedb 0.3.1),
never imported by robolake. In the overlay environment `robolake.bench.peers.env.ensure_overlay`
builds (the same packages plus pylance, s3fs and robolake's source on the path) it also drives
robolake's LeRobot adapter, so that the three loaders run in one interpreter with one torch.
`robolake.bench.peers` talks to it one JSON object per line on stdin/stdout (`_peer_serve.py`,
the loop the three peer scripts share). Each dataset kind also reads from an object store: `root`
an `s3://` URI and `storage_options` what reaches it (the S3 arm; `LeRobotDataset` has none).

Requests (`op`):

- `convert`: lerobot-lancedb's own converter (`lerobot_lancedb.convert.convert`) from a v3.0
  dataset to its Lance layout (frames / videos / meta tables).
- `open`: a dataset of `kind` "lerobot" (`LeRobotDataset`, torchcodec), "lancedb"
  (`LanceDBDataset`) or "adapter" (`robolake.integrations.lerobot.LakeLeRobotDataset` on a lake),
  with an action chunk of `horizon` steps, and a shuffled DataLoader over a seeded subset of
  `max_samples` indices: `batch_size`, `num_workers`, prefetch 4, persistent workers, forkserver
  (Lance is not fork-safe; lerobot-lancedb picks forkserver itself).
- `epoch`: iterate that DataLoader once, timed from `iter()` to the last batch.
- `train`: a LeRobot policy (`make_policy_config` / `make_policy` / `make_pre_post_processors`,
  LeRobot's own factory) trained `steps` steps from a dataset of `kind`, with a fixed seed;
  answers the loss of every step and the data-wait fraction (seconds waiting on the DataLoader
  over the run's seconds).
- `quit`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import _peer_serve  # first: the answers keep stdout to themselves (this directory is on the path)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

STATE: dict[str, Any] = {}


PACKAGES = ("lerobot", "lerobot-lancedb", "lancedb", "pylance", "torch", "torchcodec", "av")


def versions() -> dict[str, str]:
    return _peer_serve.versions(PACKAGES)


def convert(req: dict[str, Any]) -> dict[str, Any]:
    from pathlib import Path

    from lerobot_lancedb.convert import convert as lance_convert

    t0 = time.perf_counter()
    lance_convert(Path(req["out"]), root=Path(req["root"]))
    return {"seconds": time.perf_counter() - t0}


def _dataset(req: dict[str, Any], delta: dict[str, list[float]] | None) -> Any:
    kind = req["kind"]
    if kind == "lerobot":
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        return LeRobotDataset(req.get("repo_id", "local/bench"), root=req["root"], delta_timestamps=delta)
    if kind == "lancedb":
        from lerobot_lancedb.reader import LanceDBDataset

        return LanceDBDataset(root=req["root"], delta_timestamps=delta, storage_options=req.get("storage_options"))
    if kind == "adapter":
        from robolake.integrations.lerobot import LakeLeRobotDataset, LakeSource

        source = LakeSource(uri=req["root"], storage_options=req.get("storage_options"))
        return LakeLeRobotDataset(source, delta_timestamps=delta)
    raise ValueError(f"unknown dataset kind {kind!r}")


def _loader(ds: Any, req: dict[str, Any], indices: list[int]) -> Any:
    import torch

    workers = int(req["num_workers"])
    return torch.utils.data.DataLoader(
        torch.utils.data.Subset(ds, indices),
        batch_size=int(req["batch_size"]),
        shuffle=True,
        num_workers=workers,
        pin_memory=False,
        drop_last=bool(req.get("drop_last", False)),
        prefetch_factor=4 if workers else None,
        persistent_workers=workers > 0,
        multiprocessing_context="forkserver" if workers else None,
        generator=torch.Generator().manual_seed(int(req.get("seed", 0))),
    )


def _subset(n: int, req: dict[str, Any]) -> list[int]:
    import numpy as np

    cap = req.get("max_samples")
    if cap is None or int(cap) >= n:
        return list(range(n))
    return sorted(np.random.default_rng(int(req.get("seed", 0))).choice(n, int(cap), replace=False).tolist())


def open_loader(req: dict[str, Any]) -> dict[str, Any]:
    STATE.pop("loader", None)
    probe = _dataset(req, None)
    fps = probe.meta.fps
    delta = {"action": [i / fps for i in range(int(req["horizon"]))]}
    ds = _dataset(req, delta)
    indices = _subset(len(ds), req)
    STATE.update(loader=_loader(ds, req, indices), cameras=list(ds.meta.camera_keys), kind=req["kind"])
    return {"samples": len(indices), "dataset_frames": len(ds), "fps": fps, "cameras": STATE["cameras"]}


def epoch(req: dict[str, Any]) -> dict[str, Any]:
    loader, cameras = STATE["loader"], STATE["cameras"]
    samples, first = 0, None
    image_shape: list[int] = []
    t0 = time.perf_counter()
    for batch in loader:
        first = time.perf_counter() - t0 if first is None else first
        samples += int(batch["index"].shape[0])
        image_shape = list(batch[cameras[0]].shape[1:])
    return {
        "wall_s": time.perf_counter() - t0,
        "first_batch_s": first or 0.0,
        "samples": samples,
        "image_shape": image_shape,
    }


def train(req: dict[str, Any]) -> dict[str, Any]:
    import torch
    from lerobot.policies.factory import make_policy, make_policy_config, make_pre_post_processors

    STATE.pop("loader", None)
    seed, steps, policy_type = int(req.get("seed", 0)), int(req["steps"]), req.get("policy", "act")
    torch.manual_seed(seed)
    horizon = int(req.get("horizon", 16))
    if policy_type == "act":
        cfg = make_policy_config(
            "act",
            device="cpu",
            chunk_size=horizon,
            n_action_steps=horizon,
            dim_model=int(req.get("dim_model", 128)),
            dim_feedforward=4 * int(req.get("dim_model", 128)),
            n_encoder_layers=2,
            n_decoder_layers=1,
            pretrained_backbone_weights=None,  # no download: the same random backbone on both sides
        )
    else:
        cfg = make_policy_config(policy_type, device="cpu")
    probe = _dataset(req, None)
    fps = probe.meta.fps
    delta = {"action": [i / fps for i in cfg.action_delta_indices]} if cfg.action_delta_indices is not None else None
    ds = _dataset(req, delta)
    torch.manual_seed(seed)
    policy = make_policy(cfg, ds_meta=ds.meta)
    pre, _ = make_pre_post_processors(cfg, dataset_stats=ds.meta.stats)
    preset = cfg.get_optimizer_preset()
    optimizer = preset.build(policy.parameters())
    policy.train()
    loader = _loader(ds, {**req, "drop_last": True}, list(range(len(ds))))
    it = iter(loader)
    losses: list[float] = []
    waits: list[float] = []
    t_start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        waits.append(time.perf_counter() - t0)
        batch = pre(batch)
        loss, _ = policy.forward(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), preset.grad_clip_norm)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.item()))
    total = time.perf_counter() - t_start
    del it, loader
    return {
        "losses": losses,
        "data_wait_s": sum(waits),
        "total_s": total,
        "data_wait_fraction": sum(waits) / total,
        "first_batch_wait_s": waits[0] if waits else 0.0,
        "policy": policy_type,
        "params": sum(p.numel() for p in policy.parameters()),
        "versions": versions(),
    }


OPS = {"convert": convert, "open": open_loader, "epoch": epoch, "train": train}


def main() -> None:
    _peer_serve.serve(OPS, PACKAGES)


if __name__ == "__main__":
    main()
