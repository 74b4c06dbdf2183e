"""robolake's loader against LeRobot's own `LeRobotDataset`, on the real GR00T data and on AV1
written by LeRobot itself.

Data, the same bytes for both sides:

- `real`: the GR00T PickNPlace dataset in ../shared (LeRobot v2.0, h264 256 px, a keyframe every
  250 frames). LeRobot 0.6 reads only v3.0, so it is converted by robolake: `robolake ingest`,
  then `robolake export --copy-video`, which copies the source h264 packets into v3.0's shared
  mp4 without re-encoding; LeRobot's own v2.1 -> v3.0 converter would do the same, but there is
  no v2.0 -> v2.1 step in LeRobot 0.6. robolake's loader reads shards packed from the same lake
  at the model's input size (`robolake pack --image-size 224`); the ingest and pack seconds are
  reported (`conversion.*.robolake_offline_s`).
- `av1`: 640x480 AV1 written by LeRobot itself (`LeRobotDataset.create` ... `finalize`, its
  default libsvtav1 settings: a keyframe every 2 frames), the kind of dataset LeRobot records
  today and the encoding that makes its random reads cheapest. robolake ingests that dataset.

Protocol: per dataset, a warm-up epoch of every arm, then rounds of robolake, LeRobot
torchcodec, LeRobot pyav (A B C A B C ...; 3 rounds with --quick, 5 otherwise). robolake's
loader reads every sample of its packed epoch; LeRobot reads every `step_stride`-th step of each
episode, like robolake, or a seeded random subset of them (`LEROBOT_SAMPLES`: pyav on the real
data needs seconds per batch). Both are rates, and LeRobot's reads are random whichever samples
they are. LeRobot's DataLoader is built as `lerobot_train.py` builds it: shuffled, robolake's
`num_workers` (2) and batch size in samples (robolake's mean samples per batch), persistent
workers, prefetch factor 4, spawn; no image transforms (LeRobot hands out frames at their stored
size; robolake's loader hands out the model's 224 px). `speedup.real` and `speedup.av1` divide
robolake's rate by the faster LeRobot backend's within each round; the target (>= 20x) applies
to the wall clock, what a trainer waits for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from robolake.bench._common import Stopwatch, Timing, interleave
from robolake.bench.peers.figures import Arm, loader_figures
from robolake.bench.peers.process import Peer
from robolake.bench.peers.robolake_side import drain, prepare

__all__ = ["AV1_SHAPE", "BACKENDS", "LEROBOT_SAMPLES", "convert_real", "make_av1", "measure_loaders"]

BACKENDS = ("torchcodec", "pyav")
# LeRobot samples per timed epoch, by (dataset, backend), quick and full; None: every sample.
LEROBOT_SAMPLES: dict[bool, dict[tuple[str, str], int | None]] = {
    True: {("real", "torchcodec"): None, ("real", "pyav"): 192, ("av1", "torchcodec"): None, ("av1", "pyav"): None},
    False: {("real", "torchcodec"): None, ("real", "pyav"): 512, ("av1", "torchcodec"): None, ("av1", "pyav"): None},
}
AV1_SHAPE = (480, 640)
AV1_LENGTHS = {True: [260, 200, 300, 240], False: [400, 300, 500, 360, 440, 320, 480, 400]}


def convert_real(src: str, work: Path, step_stride: int) -> tuple[Any, Path, dict[str, Any]]:
    """robolake's shards of the GR00T data, and its LeRobot v3.0 copy (source packets copied)."""
    from robolake.lake import ExportConfig, export_lerobot

    prepared, offline = prepare("real", src, work, step_stride)
    out = work / "real" / "lerobot-v3"
    result = export_lerobot(prepared.lake, out, config=ExportConfig(copy_video=True))[0]
    conversion = {
        "source": src,
        "source_layout": "LeRobot v2.0 (GR00T), h264 256x256",
        "to": "LeRobot v3.0 (LeRobot 0.6 reads only v3.0)",
        "how": (
            "robolake ingest, then robolake export --copy-video: "
            "the source h264 packets copied into v3.0's mp4, not re-encoded"
        ),
        "episodes": result.episodes,
        "frames": result.frames,
        "robolake_offline_s": offline,
    }
    return prepared, out, conversion


def make_av1(peer: Peer, work: Path, quick: bool, step_stride: int) -> tuple[Any, Path, dict[str, Any]]:
    """A 640x480 AV1 dataset written by LeRobot itself, and robolake's shards of it."""
    root = work / "av1" / "lerobot"
    made = peer.request(
        "make_av1",
        root=str(root),
        repo_id="local/robolake_bench_av1",
        fps=20,
        height=AV1_SHAPE[0],
        width=AV1_SHAPE[1],
        lengths=AV1_LENGTHS[quick],
    )
    prepared, offline = prepare("av1", str(root), work / "av1-robolake", step_stride)
    return (
        prepared,
        root,
        {
            "written_by": "LeRobotDataset.create/add_frame/save_episode/finalize, LeRobot's default encoder",
            "frames": made["frames"],
            "video_info": made["video_info"],
            "write_seconds": made["seconds"],
            "robolake_offline_s": offline,
        },
    )


def measure_loaders(
    name: str, prepared: Any, lerobot_root: Path, peers: Mapping[str, Peer], *, quick: bool, step_stride: int
) -> dict[str, Any]:
    """Interleaved epochs of robolake's loader and LeRobot's, one LeRobot peer per backend."""
    from robolake.bench.load import HORIZON, IMAGE_SIZE, NUM_WORKERS, loader_config
    from robolake.loaders import PackedLoader

    loader = PackedLoader(prepared.shards, loader_config(prepared.shards))
    # LeRobot's batches hold as many samples as robolake's do on average (whole packed
    # sequences, about BATCH_SAMPLES): the same batch size, in samples
    batch_size = max(1, round(prepared.shards.manifest.num_samples / len(loader)))
    opened = {
        b: p.request(
            "open",
            root=str(lerobot_root),
            repo_id=f"local/{name}",
            backend=b,
            horizon=HORIZON,
            batch_size=batch_size,
            num_workers=NUM_WORKERS,
            step_stride=step_stride,
            max_samples=LEROBOT_SAMPLES[quick][(name, b)],
            seed=0,
        )
        for b, p in peers.items()
    }
    pids = [p.pid for p in peers.values()]
    info: dict[str, dict[str, Any]] = {b: {} for b in peers}
    shape: list[int] = []

    def robolake_epoch() -> tuple[Timing, int]:
        nonlocal shape
        loader.set_epoch(0)
        with Stopwatch(exclude=pids) as sw:
            samples, shape = drain(loader)
        return sw.timing, samples

    def lerobot_epoch(backend: str) -> Callable[[], tuple[Timing, int]]:
        def run() -> tuple[Timing, int]:
            peer = peers[backend]
            with Stopwatch(peer.pid) as sw:
                answer = peer.request("epoch")
            info[backend] = {k: answer[k] for k in ("image_shape", "action_shape")}
            # the peer's own wall clock (iter() to the last batch); CPU time of its whole tree
            return Timing(wall_s=answer["wall_s"], cpu_s=sw.timing.cpu_s), int(answer["samples"])

        return run

    arms: dict[str, Callable[[], tuple[Timing, int]]] = {"robolake": robolake_epoch}
    arms.update({b: lerobot_epoch(b) for b in peers})
    runs = interleave(arms, repeats=3 if quick else 5, warmup=1)

    def arm(key: str, extra: dict[str, Any]) -> Arm:
        return Arm([t for t, _ in runs[key]], [float(n) for _, n in runs[key]], extra)

    robolake = arm(
        "robolake",
        {
            "image_size": IMAGE_SIZE,
            "image_shape": shape,
            "samples": prepared.shards.manifest.num_samples,
            "num_workers": NUM_WORKERS,
            "sequences_per_batch": loader.config.sequences_per_batch,
            "batches": len(loader),
            "batch_samples": batch_size,
        },
    )
    lerobot = {
        b: arm(
            b,
            {
                **info[b],
                "samples": opened[b]["samples"],
                "batch_size": batch_size,
                "dataset_frames": opened[b]["dataset_frames"],
                "video_info": opened[b]["video_info"],
                "delta_timestamps": opened[b]["delta_timestamps"],
            },
        )
        for b in peers
    }
    return loader_figures(robolake, lerobot) | {
        "lerobot_open": {b: {"versions": o["versions"]} for b, o in opened.items()}
    }
