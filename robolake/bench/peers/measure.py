"""`bench peers`' run: build the peer environments (once), measure the parts asked for, assemble the JSON."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from robolake.bench._common import machine
from robolake.bench.peers.adapter_arm import measure_adapter
from robolake.bench.peers.env import PEERS, PeerError, ffmpeg_missing
from robolake.bench.peers.figures import adapter_keys, assemble
from robolake.bench.peers.lerobot_arm import BACKENDS, convert_real, make_av1, measure_loaders
from robolake.bench.peers.process import start_peer
from robolake.bench.peers.table import plot_training
from robolake.bench.peers.trl_arm import measure_bfd

__all__ = ["run"]


def run(
    quick: bool, *, cache: Path, data: str | None = None, only: str | None = None, out_dir: Path | None = None
) -> dict[str, Any]:
    """Build the peer environments (once), measure, return the JSON-ready figures.

    Raises:
        PeerError: A peer environment cannot be built or a peer failed (one line).
        FileNotFoundError: `data` is not a directory.
    """
    from robolake.bench.load import REAL_DATA

    src = os.path.abspath(data or REAL_DATA)
    if only in (None, "loader", "adapter") and not os.path.isdir(src):
        raise FileNotFoundError(f"--data {src} is not a directory; pass the GR00T LeRobot dataset")
    work = Path(tempfile.mkdtemp(prefix="robolake-bench-peers-"))
    stride = 2 if quick else 1
    versions: dict[str, dict[str, str]] = {}
    loaders: dict[str, dict[str, Any]] = {}
    bfd = None
    extra: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "step_stride": stride,
        "peers": {
            k: {"version": p.version, "python": p.python, "requirements": list(p.requirements)}
            for k, p in PEERS.items()
        },
    }
    if only in (None, "bfd"):
        with start_peer("trl", cache, work) as trl:
            versions["trl"] = trl.request("versions")["versions"]
            bfd = measure_bfd(trl, work, quick=quick)
    if only in (None, "loader"):
        missing = ffmpeg_missing()  # before the minutes-long environment build, not after it
        if missing:
            raise PeerError(missing)
        import ray

        from robolake.ray_tasks import ensure_ray

        with (
            start_peer("lerobot", cache, work, "-torchcodec") as first,
            start_peer("lerobot", cache, work, "-pyav") as second,
        ):
            versions["lerobot"] = first.request("versions")["versions"]
            ours = not ray.is_initialized()  # a caller's Ray session is left running
            ensure_ray(num_cpus=2)
            real, real_root, conversion = convert_real(src, work, stride)
            av1, av1_root, av1_info = make_av1(first, work, quick, stride)
            if ours:
                # Ray's processes are this process's children: they would be charged to robolake's CPU time
                ray.shutdown()
            peers = dict(zip(BACKENDS, (first, second), strict=True))
            loaders["real"] = measure_loaders("real", real, real_root, peers, quick=quick, step_stride=stride)
            loaders["av1"] = measure_loaders("av1", av1, av1_root, peers, quick=quick, step_stride=stride)
            extra["conversion"] = {"real": conversion, "av1": av1_info}
    if only in (None, "adapter"):
        missing = ffmpeg_missing()
        if missing:
            raise PeerError(missing)
        figures = measure_adapter(src, work, cache, quick=quick)
        extra.update(adapter_keys(figures))
        versions["lerobot-lancedb"] = figures["versions"]
        if out_dir is not None:
            png = out_dir / "lerobot_training.png"
            plot_training(figures["training"], png)
            extra["lerobot_training_plot"] = str(png)
    return assemble(loaders, bfd, versions=versions, extra=extra)
