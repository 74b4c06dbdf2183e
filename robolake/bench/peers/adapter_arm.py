"""The LeRobot-interface loaders (`--only adapter`): robolake's own loader, lerobot-lancedb's
`LanceDBDataset`, robolake's LeRobot adapter and `LeRobotDataset`, from local disk and from a
local S3 server; the adapter's items against LeRobot's; a LeRobot policy trained from each.

On the real GR00T data exported to v3.0 (h264 packets copied), all at the stored 256 px, an
action chunk of 16, the same samples (a seeded random subset of `ADAPTER_SAMPLES`), batch size,
2 workers (forkserver: Lance is not fork-safe) and prefetch, interleaved (robolake, lancedb,
adapter, lerobot, then the same loaders from S3, round after round): robolake's own loader
(shards packed at 256 px), `LanceDBDataset` on lerobot-lancedb's own converter's output
(`lerobot_lancedb.convert`), the adapter (`robolake.integrations.lerobot`) on the lake with its
h264 access copy (`robolake optimize --access-copy h264`: at most two decodes a frame, against a
decode from the keyframe of a 250-frame GOP for the record, LeRobot and lerobot-lancedb), and
`LeRobotDataset` (torchcodec) on the v3.0 export. The peers run in the overlay of lerobot-lancedb's
environment (`env.ensure_overlay`), so the adapter and the peers share one interpreter and one
torch. Each epoch is timed on the wall clock from `iter()` to the last batch and on the CPU time
of the process tree that did the work (a peer's subprocess and its workers; this process and its
workers less the peers and the S3 server); peak RSS is sampled over the same trees.

The S3 arm (`s3_arm`) reads each loader's own files from a bucket of a local moto server; a
machine without moto gets `lancedb.speedup_s3` null with the reason.

Then a LeRobot ACT policy (LeRobot's own factory) is trained `TRAIN_STEPS` steps from the adapter
and from `LeRobotDataset` with one seed: both loss curves and each run's data-wait fraction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robolake.bench._common import Stopwatch, Timing, cpu_seconds, interleave, two_clock_ratios
from robolake.bench.peers.env import PeerError, ensure_overlay
from robolake.bench.peers.figures import Arm
from robolake.bench.peers.items import adapter_items_equal
from robolake.bench.peers.process import HERE, PeakRss, Peer
from robolake.bench.peers.robolake_side import drain, prepare_sized
from robolake.bench.peers.s3_arm import LEROBOT_S3, S3Copies, open_s3_loader, s3_copies, s3_unavailable

__all__ = ["ADAPTER_IMAGE_SIZE", "ADAPTER_SAMPLES", "TRAIN_STEPS", "measure_adapter"]

ADAPTER_SAMPLES = {True: 48, False: 256}  # samples per timed epoch of each LeRobot-interface loader
ADAPTER_IMAGE_SIZE = 256  # the GR00T frames' stored size: what LeRobot's loaders hand out
TRAIN_STEPS = {True: 10, False: 100}
# which peer kind reads which of the uploaded copies (s3_arm's prefixes)
S3_PREFIX = {"lancedb": "lerobot-lancedb", "adapter": "lake"}


def measure_adapter(src: str, work: Path, cache: Path, *, quick: bool) -> dict[str, Any]:
    """All the figures of the adapter section (see the module's docstring)."""
    import ray

    from robolake.bench._s3_loader import CAVEAT
    from robolake.bench.load import HORIZON, NUM_WORKERS, loader_config
    from robolake.loaders import PackedLoader
    from robolake.ray_tasks import ensure_ray

    python = ensure_overlay(cache)
    ours = not ray.is_initialized()
    ensure_ray(num_cpus=2)
    prepared, v3, packed_dir = prepare_sized(src, work / "adapter", 2 if quick else 1, ADAPTER_IMAGE_SIZE)
    if ours:
        ray.shutdown()  # its processes would be charged to robolake's CPU time
    lance_root = work / "adapter" / "lerobot-lancedb"
    lake_uri = str(prepared.lake.uri)
    # the frames at their stored size, as the LeRobot-interface loaders hand them out
    config = dataclasses.replace(loader_config(prepared.shards), image_size=ADAPTER_IMAGE_SIZE)
    loader = PackedLoader(prepared.shards, config)
    batch_size = max(1, round(prepared.shards.manifest.num_samples / len(loader)))
    kinds = {"lancedb": str(lance_root), "adapter": lake_uri, "lerobot": str(v3)}
    # LanceDBDataset caches an S3 dataset's meta/ under HF_LEROBOT_HOME by URI: one per run, never a stale one
    peer_env = {"HF_LEROBOT_HOME": str(work / "hf-lerobot-home")}
    skipped = s3_unavailable()
    s3_failed: dict[str, str] = {}
    peers: dict[str, Peer] = {}

    def start(name: str) -> Peer:
        peers[name] = Peer(python, HERE / "_peer_lancedb.py", work / f"adapter-{name}.log", env=peer_env)
        return peers[name]

    def open_request(kind: str, root: str, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            "kind": kind,
            "root": root,
            "storage_options": storage_options,
            "horizon": HORIZON,
            "batch_size": batch_size,
            "num_workers": NUM_WORKERS,
            "max_samples": ADAPTER_SAMPLES[quick],
            "seed": 0,
        }

    try:
        for kind in kinds:
            start(kind)
        converted = peers["lancedb"].request("convert", root=str(v3), out=str(lance_root))
        uploads = {"packed": packed_dir, "lake": Path(lake_uri), "lerobot-lancedb": lance_root}
        with s3_copies(uploads) if skipped is None else contextlib.nullcontext() as remote:
            opened = {kind: peers[kind].request("open", **open_request(kind, root)) for kind, root in kinds.items()}
            s3_loader = None
            if remote is not None:
                # an S3 arm that cannot open is one line in the JSON; the other arms still run
                try:
                    s3_loader = open_s3_loader(remote.uris["packed"], remote.storage_options, config)
                except Exception as e:
                    s3_failed["robolake_s3"] = f"robolake's loader could not open {remote.uris['packed']}: {e}"
                for kind, prefix in S3_PREFIX.items():
                    name = f"{kind}_s3"
                    try:
                        req = open_request(kind, remote.uris[prefix], remote.storage_options)
                        opened[name] = start(name).request("open", **req)
                    except PeerError as e:
                        s3_failed[name] = str(e)
                        peers.pop(name).close()
            timed = _interleaved(loader, s3_loader, peers, remote, quick=quick)
            for name in [n for n in peers if n != "lerobot"]:
                peers.pop(name).close()  # free their workers before the items check and the training runs
        versions = peers["lerobot"].request("versions")["versions"]
        with Peer(python, HERE / "_peer_lerobot.py", work / "adapter-items.log") as items_peer:
            equal = adapter_items_equal(lake_uri, v3, items_peer, work)
        training = {
            kind: peers["lerobot"].request(
                "train",
                kind=kind,
                root=root,
                steps=TRAIN_STEPS[quick],
                seed=0,
                batch_size=8,
                num_workers=NUM_WORKERS,
                policy="act",
                horizon=HORIZON,
            )
            for kind, root in (("adapter", lake_uri), ("lerobot", str(v3)))
        }
    finally:
        for p in peers.values():
            p.close()
    built: dict[str, Arm] = timed["arms"]

    def ratio(slow: str, fast: str) -> dict[str, Any]:
        a, b = built[slow], built[fast]
        return two_clock_ratios(a.timings, b.timings, target_applies_to="wall", slow_work=a.work, fast_work=b.work)

    summaries = {
        k: a.summary("samples") | {"peak_rss_bytes": timed["rss"][k], "image_shape": timed["shapes"].get(k)}
        for k, a in built.items()
    }
    for k, o in opened.items():
        summaries[k].update(samples_per_epoch=o["samples"], dataset_frames=o["dataset_frames"])
    for k in ("robolake", "robolake_s3"):
        if k in summaries:
            summaries[k].update(samples_per_epoch=prepared.shards.manifest.num_samples, image_size=ADAPTER_IMAGE_SIZE)
    for run in training.values():  # the first batch waits for the workers to start; the rest is the steady state
        steady = run["total_s"] - run["first_batch_wait_s"]
        run["data_wait_fraction_after_first_batch"] = (run["data_wait_s"] - run["first_batch_wait_s"]) / max(
            steady, 1e-9
        )
    if remote is None:
        s3: dict[str, Any] = {"skipped": skipped, "lerobot": LEROBOT_S3}
    else:
        s3 = {
            "server": "moto (a local S3 server: one Python process on the same cores as the loaders)",
            "caveat": CAVEAT,
            "uris": remote.uris,
            "bytes_copied": remote.bytes_copied,
            "s3_over_local": {k: ratio(k, f"{k}_s3") for k in ("robolake", "lancedb", "adapter") if f"{k}_s3" in built},
            "server_cpu_s": timed["server_cpu_s"],
            "server_requests_per_epoch": timed["server_requests"],
            "lerobot": LEROBOT_S3,
            "failed": s3_failed,
        }
        for key, (slow, fast) in {
            "lancedb_speedup": ("lancedb_s3", "robolake_s3"),
            "adapter_vs_lancedb": ("lancedb_s3", "adapter_s3"),
        }.items():
            if slow in built and fast in built:
                s3[key] = ratio(slow, fast)
        if "lancedb_speedup" not in s3:
            s3["skipped"] = "not measured: " + "; ".join(s3_failed.values())
    return {
        "loaders": summaries,
        "batch_size": batch_size,
        "num_workers": NUM_WORKERS,
        "horizon": HORIZON,
        "versions": versions,
        "lancedb_convert_s": converted["seconds"],
        "lancedb_speedup_local": ratio("lancedb", "robolake"),
        "adapter_speedup": ratio("lerobot", "adapter"),
        "adapter_vs_lancedb": ratio("lancedb", "adapter"),
        "s3": s3,
        "items": equal,
        "training": training,
    }


def _interleaved(
    loader: Any, s3_loader: Any, peers: dict[str, Peer], remote: S3Copies | None, *, quick: bool
) -> dict[str, Any]:
    """Rounds of every arm (robolake's loader here, local and S3; each peer's epoch): per arm its
    `Arm`, peak RSS and image shape, and the S3 server's CPU seconds during each S3 arm's epochs."""
    server = [remote.server_pid] if remote is not None else []
    others = [p.pid for p in peers.values()] + server  # never charged to robolake's loader
    rss: dict[str, int] = {k: 0 for k in ("robolake", *peers)}
    shapes: dict[str, list[int]] = {}
    server_cpu: dict[str, list[float]] = {}
    server_requests: dict[str, list[int]] = {}

    def on_server(name: str, fn: Callable[[], tuple[Timing, int]]) -> Callable[[], tuple[Timing, int]]:
        if remote is None or not name.endswith("_s3"):
            return fn

        def run() -> tuple[Timing, int]:
            cpu, requests = cpu_seconds(remote.server_pid), remote.requests()
            out = fn()
            server_cpu.setdefault(name, []).append(cpu_seconds(remote.server_pid) - cpu)
            server_requests.setdefault(name, []).append(remote.requests() - requests)
            return out

        return run

    def robolake_epoch(name: str, source: Any) -> Callable[[], tuple[Timing, int]]:
        def run() -> tuple[Timing, int]:
            source.set_epoch(0)
            with PeakRss([os.getpid()], exclude=others) as mem, Stopwatch(exclude=others) as sw:
                samples, shapes[name] = drain(source)
            rss[name] = max(rss.get(name, 0), mem.peak)
            return sw.timing, samples

        return run

    def peer_epoch(name: str) -> Callable[[], tuple[Timing, int]]:
        def run() -> tuple[Timing, int]:
            peer = peers[name]
            with PeakRss([peer.pid]) as mem, Stopwatch(peer.pid) as sw:
                answer = peer.request("epoch")
            rss[name] = max(rss[name], mem.peak)
            shapes[name] = answer["image_shape"]
            # the peer's own wall clock (iter() to the last batch); CPU time of its whole tree
            return Timing(wall_s=answer["wall_s"], cpu_s=sw.timing.cpu_s), int(answer["samples"])

        return run

    arms: dict[str, Callable[[], tuple[Timing, int]]] = {"robolake": robolake_epoch("robolake", loader)}
    arms.update({k: peer_epoch(k) for k in ("lancedb", "adapter", "lerobot")})
    if s3_loader is not None:
        arms["robolake_s3"] = robolake_epoch("robolake_s3", s3_loader)
        arms.update({k: peer_epoch(k) for k in peers if k.endswith("_s3")})
    runs = interleave({k: on_server(k, fn) for k, fn in arms.items()}, repeats=3 if quick else 5, warmup=1)
    built = {k: Arm([t for t, _ in v], [float(n) for _, n in v]) for k, v in runs.items()}
    # interleave's warm-up round is not counted: neither is its server time
    return {
        "arms": built,
        "rss": rss,
        "shapes": shapes,
        "server_cpu_s": {k: v[1:] for k, v in server_cpu.items()},
        "server_requests": {k: v[1:] for k, v in server_requests.items()},
    }
