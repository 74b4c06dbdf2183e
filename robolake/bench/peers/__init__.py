"""`robolake bench peers`: robolake's loader and packer against LeRobot's, lerobot-lancedb's and TRL's own code.

`bench load` and `bench pack` compare with re-implementations written here, because LeRobot
cannot share robolake's environment (it pins its own torch and needs Python >= 3.12). This
benchmark measures the peers as themselves: it builds (once, cached) an isolated virtual
environment per peer from its release on PyPI (`env`) and runs the peer's own code there, in a
subprocess (robolake/bench/_peer_*.py) that stays up across the timed runs so that its imports
and DataLoader workers are warm, as robolake's are (`process`).

Parts (`--only`; all three by default):

- `loader` (`lerobot_arm`): robolake's loader against `LeRobotDataset` (torchcodec and pyav) on
  the real GR00T data and on 640x480 AV1 written by LeRobot itself; `speedup.real`,
  `speedup.av1` (goal >= 20x on the wall clock).
- `bfd` (`trl_arm`): robolake's best-fit-decreasing packer against TRL's `pack_dataset`;
  `bfd_speedup` (goal >= 300x on CPU time).
- `adapter` (`adapter_arm`, `s3_arm`, `items`): robolake's own loader, lerobot-lancedb's
  `LanceDBDataset`, robolake's LeRobot adapter and `LeRobotDataset` on the real GR00T data at its
  stored 256 px, from local disk and from a local S3 server (moto): `lancedb.speedup_local`,
  `lancedb.speedup_s3` (robolake's loader over `LanceDBDataset`, goal >= 2x),
  `lerobot_adapter.speedup` (the adapter over `LeRobotDataset`, goal >= 10x),
  `lerobot_adapter.items_equal` (true only when every compared item equals LeRobot's), peak RSS
  of each loader's process tree, and a LeRobot ACT policy trained from the adapter and from
  `LeRobotDataset` with one seed (`lerobot_training.png` beside the JSON).

Every comparison is interleaved (A B C, A B C, ...; one warm-up round, then 3 rounds with
--quick, 5 otherwise) and divides rates within each round, on the wall clock and on the CPU time
of the process tree that did the work, median with its range (`figures`).

System libraries: torchcodec (LeRobot's default video decoder) loads FFmpeg's shared libraries
(libavutil.so.56-60, FFmpeg 4-8) at run time, and pip does not install them. The command checks
for them before building anything and stops with one line if none loads: install them with
`scripts/install_ffmpeg.sh` (Debian/Ubuntu: `apt-get install ffmpeg`).

The environments live under `--cache` (default ~/.cache/robolake/peers, or
$ROBOLAKE_PEERS_CACHE); a broken one is rebuilt by deleting its directory. If a peer cannot be
installed the command stops with one line naming the peer, the step and its log.

Usage: robolake bench peers --json out.json [--quick] [--cache DIR] [--data PATH] [--only loader|bfd|adapter]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from robolake.bench._common import write_json
from robolake.bench.peers.adapter_arm import measure_adapter
from robolake.bench.peers.env import (
    PEERS,
    PeerEnv,
    PeerError,
    built_env,
    default_cache,
    ensure_env,
    ensure_overlay,
    ffmpeg_missing,
    find_python,
    lerobot_python,
)
from robolake.bench.peers.figures import TARGETS, Arm, adapter_keys, assemble, bfd_figures, loader_figures
from robolake.bench.peers.measure import run
from robolake.bench.peers.process import HERE, PeakRss, Peer, start_peer
from robolake.bench.peers.table import plot_training, print_result
from robolake.bench.peers.trl_arm import measure_bfd

__all__ = [
    "HERE",
    "PEERS",
    "TARGETS",
    "Arm",
    "PeakRss",
    "Peer",
    "PeerEnv",
    "PeerError",
    "adapter_keys",
    "assemble",
    "bfd_figures",
    "built_env",
    "default_cache",
    "ensure_env",
    "ensure_overlay",
    "ffmpeg_missing",
    "find_python",
    "lerobot_python",
    "loader_figures",
    "main",
    "measure_adapter",
    "measure_bfd",
    "plot_training",
    "print_result",
    "run",
    "start_peer",
]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="robolake bench peers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument(
        "--quick", action="store_true", help="every 2nd step, fewer LeRobot samples, 3 rounds (several minutes)"
    )
    p.add_argument(
        "--cache", default=None, help="where the peer environments are built (default ~/.cache/robolake/peers)"
    )
    p.add_argument(
        "--data", default=None, help="the GR00T LeRobot dataset (default: ../shared/data/gr00t_pick_n_place)"
    )
    p.add_argument("--only", choices=("loader", "bfd", "adapter"), default=None, help="run one part")
    p.add_argument("--build-only", action="store_true", help="build the peer environments and stop")
    p.epilog = (
        "System requirement: FFmpeg's shared libraries for torchcodec (LeRobot's video decoder); "
        "scripts/install_ffmpeg.sh installs them (Debian/Ubuntu: apt-get install ffmpeg)."
    )
    args = p.parse_args(argv)
    cache = Path(args.cache) if args.cache else default_cache()
    try:
        missing = ffmpeg_missing() if args.only != "bfd" else None
        if missing:  # one line before the minutes-long LeRobot environment build
            raise PeerError(missing)
        if args.build_only:
            for peer in PEERS.values():
                print(f"{peer.name} {peer.version}: {ensure_env(peer, cache)}")
            return 0
        res = run(args.quick, cache=cache, data=args.data, only=args.only, out_dir=Path(args.json).resolve().parent)
    except PeerError as e:
        print(f"robolake bench peers: {e}", file=sys.stderr)
        return 1
    print_result(res)
    write_json(args.json, res)
    return 0
