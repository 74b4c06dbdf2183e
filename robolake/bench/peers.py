"""`robolake bench peers`: robolake's loader and packer against LeRobot's and TRL's own code.

`bench load` and `bench pack` compare with re-implementations written here, because LeRobot
cannot share robolake's environment (it pins its own torch and needs Python >= 3.12). This
benchmark measures the peers as themselves: it builds (once, cached) an isolated virtual
environment per peer from its release on PyPI and runs the peer's own code there, in a
subprocess (`_peer_lerobot.py`, `_peer_trl.py`) that stays up across the timed runs so that its
imports and DataLoader workers are warm, as robolake's are.

Peers (`PEERS`, versions pinned and recorded in the JSON):

- LeRobot: `lerobot[dataset]` on Python 3.12 from the machine's interpreters (pyenv), with the
  torch, torchcodec and PyAV it resolves itself. `LeRobotDataset` with `delta_timestamps` for an
  action chunk of 16 steps, both video backends (torchcodec, pyav), and a shuffled DataLoader as
  `lerobot_train.py` builds it, with robolake's `num_workers` (2) and batch size in samples
  (robolake's batches are whole packed sequences, about 32 samples or more: LeRobot's
  `batch_size` is robolake's mean samples per batch); LeRobot's own defaults otherwise
  (persistent workers, prefetch factor 4, spawn). No image transforms:
  LeRobot hands out frames at their stored size (a resize to the model's input would only add to
  its cost); robolake's loader hands out the model's 224 px.
- TRL: `trl` on Python 3.11 with the machine's torch 2.13.0 CPU wheel (TRL imports torch; the
  packing does not use it). `trl.data_utils.pack_dataset(strategy="bfd")` as SFTTrainer calls it,
  and TRL's BFD function itself on one Arrow table (`pack_table`).

Data, the same bytes for both sides:

- `real`: the GR00T PickNPlace dataset in ../shared (LeRobot v2.0, h264 256 px, a keyframe every
  250 frames). LeRobot 0.6 reads only v3.0, so it is converted by robolake: `robolake ingest`,
  then `robolake export --copy-video`, which copies the source h264 packets into v3.0's shared
  mp4 without re-encoding (the same frames, the same keyframes); LeRobot's own v2.1 -> v3.0
  converter would do the same, but there is no v2.0 -> v2.1 step in LeRobot 0.6. robolake's
  loader reads shards packed from the same lake with the frames at the model's input size
  (`robolake pack --image-size 224`, robolake's training rendition); the ingest and pack
  seconds, paid once per dataset, are reported (`conversion.*.robolake_offline_s`).
- `av1`: 640x480 AV1 written by LeRobot itself (`LeRobotDataset.create` ... `finalize`, its
  default libsvtav1 settings: a keyframe every 2 frames), the kind of dataset LeRobot records
  today and the encoding that makes its random reads cheapest. robolake ingests that dataset.

Protocol (`_common.py`): per dataset, a warm-up epoch of every arm, then rounds of robolake,
LeRobot torchcodec, LeRobot pyav (A B C A B C ...; 3 rounds with --quick, 5 otherwise).
robolake's loader reads every sample of its packed epoch; LeRobot reads every `step_stride`-th
step of each episode, like robolake, or a seeded random subset of them (`LEROBOT_SAMPLES`: pyav
on the real data needs seconds per batch). Both are rates (samples over seconds), and LeRobot's
reads are random whichever samples they are. Each epoch is timed on the wall clock from `iter()`
to the last batch, and on CPU time of the process tree that did the work (the peer's subprocess
and its workers; this process and its workers less the idle peers). `speedup.real` and
`speedup.av1` divide robolake's rate by the faster LeRobot backend's within each round; the
target (>= 20x) applies to the wall clock, what a trainer waits for. BFD: rounds of robolake's
`best_fit_decreasing` (plan only, and plan + the Arrow take that builds the packed rows, as TRL's
does), TRL `pack_dataset` and TRL `_pack_bfd`, on the same lengths (`bench pack`'s length
mixture, max_tokens 4096); `bfd_speedup` = TRL `pack_dataset` / robolake plan on CPU time (one
single-threaded process each side; the wall clock is beside it).

LeRobot-interface loaders (`--only adapter`; part of the default run), on the real GR00T data
exported to v3.0 as above, all at the stored 256 px, an action chunk of 16, the same samples
(a seeded random subset of `ADAPTER_SAMPLES`), batch size, 2 workers (forkserver: Lance is not
fork-safe) and prefetch, interleaved (robolake, lancedb, adapter, lerobot, ...): robolake's own
loader (shards packed at 256 px), lerobot-lancedb's `LanceDBDataset` on its own converter's output
(`lerobot_lancedb.convert`), robolake's LeRobot adapter (`robolake.integrations.lerobot`) on the
lake with its h264 access copy (`robolake optimize --access-copy h264`, what a lake read at random
frames is given: at most two decodes a frame, against a decode from the keyframe of a 250-frame GOP
for the record, LeRobot and lerobot-lancedb), and `LeRobotDataset` (torchcodec) on the v3.0
export. The items check reads the record (`exact_frames=True`) and must be bit-exact; the access
copy's largest pixel difference is reported beside it. They run in an overlay of the
lerobot-lancedb environment (`ensure_overlay`: + pylance and robolake's source) so that the
adapter and the peers share one interpreter and one torch. JSON: `lancedb.speedup_local`
(robolake loader over LanceDBDataset), `lerobot_adapter.speedup` (adapter over LeRobotDataset),
both wall-clock medians with CPU-time ratios and ranges beside them; peak RSS of each loader's
process tree; `lerobot_adapter.items_equal` (true only when every compared item, both episode
edges of every window included, equals LeRobot's); and a LeRobot ACT policy (LeRobot's own
factory) trained `TRAIN_STEPS` steps from the adapter and from `LeRobotDataset` with one seed:
both loss curves (`lerobot_training.png` beside the JSON) and each run's data-wait fraction.
`lancedb.speedup_s3` is null with the reason: the S3 arm is not built yet.

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
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robolake.bench._common import (
    Stopwatch,
    Timing,
    interleave,
    machine,
    print_table,
    two_clock_ratios,
    write_json,
)

__all__ = [
    "PEERS",
    "Peer",
    "PeerEnv",
    "PeerError",
    "assemble",
    "built_env",
    "lerobot_python",
    "ensure_env",
    "ffmpeg_missing",
    "find_python",
    "main",
    "run",
]

HERE = Path(__file__).resolve().parent
TARGETS = {"speedup": 20.0, "bfd_speedup": 300.0}
BACKENDS = ("torchcodec", "pyav")
# LeRobot samples per timed epoch, by (dataset, backend), quick and full; None: every sample.
LEROBOT_SAMPLES: dict[bool, dict[tuple[str, str], int | None]] = {
    True: {("real", "torchcodec"): None, ("real", "pyav"): 192, ("av1", "torchcodec"): None, ("av1", "pyav"): None},
    False: {("real", "torchcodec"): None, ("real", "pyav"): 512, ("av1", "torchcodec"): None, ("av1", "pyav"): None},
}
AV1_SHAPE = (480, 640)
AV1_LENGTHS = {True: [260, 200, 300, 240], False: [400, 300, 500, 360, 440, 320, 480, 400]}
BFD_SAMPLES = {True: 200_000, False: 1_000_000}
BFD_MAX_TOKENS = 4096
PLAN_LOOPS = 20
INSTALL_TIMEOUT_S = 3600
ADAPTER_SAMPLES = {True: 48, False: 256}  # samples per timed epoch of each LeRobot-interface loader
ADAPTER_IMAGE_SIZE = 256  # the GR00T frames' stored size: what LeRobot's loaders hand out
TRAIN_STEPS = {True: 10, False: 100}
OVERLAY_PACKAGES = ("crc32c", "simplejpeg")  # robolake.lake's imports the LeRobot env lacks (+ pylance)
REPO = HERE.parents[1]


class PeerError(RuntimeError):
    """A peer environment cannot be built or its subprocess failed; the message is one line."""


@dataclass(frozen=True)
class PeerEnv:
    """One peer's isolated environment: what to install, on which Python, and its script.

    Attributes:
        name: Directory prefix and JSON key ("lerobot", "trl").
        version: The peer's release (its PyPI version), recorded in the JSON.
        python: The interpreter's minor version ("3.12").
        requirements: `pip install` arguments.
        script: The peer-side script in robolake/bench.
        check: Python statement that must run in the environment once installed.
    """

    name: str
    version: str
    python: str
    requirements: tuple[str, ...]
    script: str
    check: str = ""

    def directory(self, cache: Path) -> Path:
        return cache / f"{self.name}-{self.version}"


PEERS: dict[str, PeerEnv] = {
    "lerobot": PeerEnv(
        name="lerobot",
        version="0.6.1",
        python="3.12",
        requirements=("lerobot[dataset]==0.6.1",),
        script="_peer_lerobot.py",
        check="import lerobot.datasets.lerobot_dataset, av",
    ),
    # LeRobot with lerobot-lancedb (its Lance layout and LanceDBDataset): the same LeRobot release
    "lerobot-lancedb": PeerEnv(
        name="lerobot-lancedb",
        version="0.3.1",
        python="3.12",
        requirements=("lerobot[dataset]==0.6.1", "lerobot-lancedb==0.3.1"),
        script="_peer_lancedb.py",
        check="import lerobot_lancedb.reader, lancedb",
    ),
    # torch pinned to the machine's CPU wheel on disk: TRL imports torch, its packing does not use it
    "trl": PeerEnv(
        name="trl",
        version="1.16.0",
        python="3.11",
        requirements=("torch==2.13.0", "trl==1.16.0"),
        script="_peer_trl.py",
        check="import trl.data_utils, datasets",
    ),
}


FFMPEG_SONAMES = tuple(f"libavutil.so.{v}" for v in (60, 59, 58, 57, 56))  # FFmpeg 8 .. 4, torchcodec's range


def ffmpeg_missing() -> str | None:
    """One line saying what to install when torchcodec could not load FFmpeg here, else None.

    It tries to load libavutil the way torchcodec does (dlopen by soname, each FFmpeg major it
    supports), so the answer is the one torchcodec would get, minutes before the LeRobot
    environment is built.
    """
    import ctypes
    import ctypes.util

    names = FFMPEG_SONAMES if sys.platform.startswith("linux") else (ctypes.util.find_library("avutil") or "",)
    for name in names:
        if not name:
            continue
        try:
            ctypes.CDLL(name)
            return None
        except OSError:
            continue
    return (
        "torchcodec (LeRobot's video decoder) needs FFmpeg's shared libraries (libavutil.so.56-60) and none "
        "loads here: run scripts/install_ffmpeg.sh (Debian/Ubuntu: apt-get install ffmpeg), then run this again"
    )


def default_cache() -> Path:
    return Path(os.environ.get("ROBOLAKE_PEERS_CACHE") or Path.home() / ".cache" / "robolake" / "peers")


def find_python(minor: str) -> Path:
    """The machine's Python `minor` ("3.12"): pyenv's versions first, then `python3.12` on PATH.

    Raises:
        PeerError: None is installed.
    """
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = sorted(glob.glob(str(root / "versions" / f"{minor}.*" / "bin" / "python")))
    if found:
        return Path(found[-1])
    on_path = shutil.which(f"python{minor}")
    if on_path:
        return Path(on_path)
    raise PeerError(
        f"no Python {minor} on this machine (looked in {root}/versions and PATH); "
        f"install one (e.g. `pyenv install {minor}`)"
    )


def built_env(peer: PeerEnv, cache: Path) -> Path | None:
    """The peer environment's Python when a finished build of it is under `cache`, else None
    (nothing is built: for tests that skip without it)."""
    env_dir = peer.directory(cache)
    python, marker = env_dir / "bin" / "python", _marker(env_dir)
    if not (marker.is_file() and python.exists()):
        return None
    return python if json.loads(marker.read_text()).get("requirements") == list(peer.requirements) else None


def lerobot_python(cache: Path) -> Path | None:
    """A built environment with LeRobot 0.6 in it (the LeRobot peer's, or lerobot-lancedb's), or None."""
    for name in ("lerobot", "lerobot-lancedb"):
        python = built_env(PEERS[name], cache)
        if python is not None:
            return python
    return None


def _marker(env_dir: Path) -> Path:
    return env_dir / "robolake-peer.json"


def ensure_env(peer: PeerEnv, cache: Path, *, log: Callable[[str], None] = print) -> Path:
    """The peer's environment under `cache`, built once: returns its Python.

    A finished build leaves `robolake-peer.json` (what was installed, on which Python); a
    directory without it (an interrupted build) is completed by running pip again.

    Raises:
        PeerError: No interpreter, venv creation, pip install or the import check failed.
    """
    env_dir = peer.directory(cache)
    python = env_dir / "bin" / "python"
    marker = _marker(env_dir)
    if marker.is_file() and python.exists():
        recorded = json.loads(marker.read_text())
        if recorded.get("requirements") == list(peer.requirements):
            return python
    base = find_python(peer.python)
    env_dir.mkdir(parents=True, exist_ok=True)
    install_log = env_dir / "install.log"
    steps: list[tuple[str, list[str]]] = []
    if not python.exists():
        steps.append(("create the venv", [str(base), "-m", "venv", str(env_dir)]))
    steps.append(
        (
            "pip install " + " ".join(peer.requirements),
            [str(python), "-m", "pip", "install", "--progress-bar", "off", *peer.requirements],
        )
    )
    if peer.check:
        steps.append(("import check", [str(python), "-c", peer.check]))
    log(f"building the {peer.name} {peer.version} environment in {env_dir} (once; log: {install_log})")
    with install_log.open("a") as out:
        for what, cmd in steps:
            out.write(f"\n$ {' '.join(cmd)}\n")
            out.flush()
            try:
                proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S)
            except subprocess.TimeoutExpired as e:
                raise PeerError(
                    f"cannot build the {peer.name} environment: {what} ran past {INSTALL_TIMEOUT_S} s; "
                    f"see {install_log}"
                ) from e
            if proc.returncode != 0:
                raise PeerError(
                    f"cannot build the {peer.name} environment: {what} failed ({_last_line(install_log)}); "
                    f"see {install_log}"
                )
    marker.write_text(
        json.dumps({"requirements": list(peer.requirements), "python": str(base), "version": peer.version})
    )
    return python


def ensure_overlay(cache: Path, *, log: Callable[[str], None] = print) -> Path:
    """lerobot-lancedb's environment plus what robolake's LeRobot adapter needs, built once.

    A small venv layered on the peer's (a `.pth` puts its site-packages on the path) with pylance
    at robolake's own version and robolake's source on the path: LeRobot, lerobot-lancedb and the
    adapter then run in one interpreter, with one torch. Returns its Python.

    Raises:
        PeerError: the base environment, the venv or the install failed.
    """
    import importlib.metadata as md

    base = PEERS["lerobot-lancedb"]
    ensure_env(base, cache, log=log)
    sites = sorted(base.directory(cache).glob("lib/python3.*/site-packages"))
    if not sites:
        raise PeerError(f"the {base.name} environment in {base.directory(cache)} has no site-packages; delete it")
    overlay = PeerEnv(
        name=f"{base.name}-{base.version}-robolake",
        version=md.version("pylance"),
        python=base.python,
        requirements=(f"pylance=={md.version('pylance')}", *OVERLAY_PACKAGES),
        script=base.script,
        check="import robolake.integrations.lerobot, lerobot_lancedb.reader, lerobot.datasets.lerobot_dataset",
    )
    env_dir = overlay.directory(cache)
    python = env_dir / "bin" / "python"
    if not python.exists():
        env_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [str(find_python(base.python)), "-m", "venv", str(env_dir)], capture_output=True, text=True
        )
        if proc.returncode:
            raise PeerError(f"cannot create the overlay venv {env_dir}: {proc.stderr.strip()[-300:]}")
    own = sorted(env_dir.glob("lib/python3.*/site-packages"))[0]
    (own / "zz-lerobot-peer.pth").write_text(str(sites[0]) + "\n")  # after the overlay's own packages
    (own / "robolake-source.pth").write_text(str(REPO) + "\n")
    return ensure_env(overlay, cache, log=log)


def _last_line(path: Path) -> str:
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:300]


class Peer:
    """A peer's script running in its environment: `request(op, ...)` sends one JSON line, reads one.

    Args:
        python: The environment's interpreter.
        script: The peer script (robolake/bench/_peer_*.py).
        log_path: Where the peer's stderr goes (its libraries' prints and tracebacks).
    """

    def __init__(self, python: Path, script: Path, log_path: Path) -> None:
        self.log_path = log_path
        self.name = script.name
        self._stderr = log_path.open("w")
        env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        self.proc = subprocess.Popen(
            [str(python), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
            cwd=str(log_path.parent),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send {"op": op, **fields}; the answer without its "ok".

        Raises:
            PeerError: The peer exited or answered an error (named, with its log).
        """
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            raise PeerError(f"the peer {self.name} exited during {op!r} (code {self.proc.poll()}); see {self.log_path}")
        answer = json.loads(line)
        if not answer.pop("ok", False):
            raise PeerError(f"{self.name} {op!r} failed: {answer.get('error')}; see {self.log_path}")
        return dict(answer)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_peer(name: str, cache: Path, work: Path, tag: str = "") -> Peer:
    """Build (once) the peer's environment and start its script."""
    peer = PEERS[name]
    python = ensure_env(peer, cache)
    return Peer(python, HERE / peer.script, work / f"{name}{tag}.log")


# ---------------------------------------------------------------------------- figures, pure


@dataclass(frozen=True)
class Arm:
    """One side's timed runs (same rounds as the other arms) and the work each did."""

    timings: list[Timing]
    work: list[float]
    info: dict[str, Any] = field(default_factory=dict)

    def rates(self, clock: str = "wall") -> list[float]:
        return [w / getattr(t, f"{clock}_s") for t, w in zip(self.timings, self.work, strict=True)]

    def summary(self, unit: str) -> dict[str, Any]:
        wall, cpu = self.rates("wall"), self.rates("cpu")
        return {
            f"{unit}_per_s": sorted(wall)[len(wall) // 2],
            f"{unit}_per_s_runs": wall,
            f"{unit}_per_cpu_s": sorted(cpu)[len(cpu) // 2],
            "runs": [t.as_dict() for t in self.timings],
            **self.info,
        }


def loader_figures(robolake: Arm, lerobot: Mapping[str, Arm]) -> dict[str, Any]:
    """One dataset's loader figures: robolake's rate, each backend's, and the speedups.

    `speedup` is against the backend with the higher median rate (LeRobot at its best).
    """
    by_backend = {
        b: two_clock_ratios(
            arm.timings, robolake.timings, target_applies_to="wall", slow_work=arm.work, fast_work=robolake.work
        )
        for b, arm in lerobot.items()
    }
    summaries = {b: arm.summary("samples") for b, arm in lerobot.items()}
    best = max(summaries, key=lambda b: summaries[b]["samples_per_s"])
    return {
        "robolake": robolake.summary("samples"),
        "lerobot": summaries,
        "best_backend": best,
        "speedup": by_backend[best],
        "speedup_by_backend": by_backend,
    }


def bfd_figures(arms: Mapping[str, Arm]) -> dict[str, Any]:
    """robolake's plan (and plan + take) against TRL's `pack_dataset` and `_pack_bfd`."""
    plan, take, trl, table = (
        arms[k] for k in ("robolake_plan", "robolake_plan_take", "trl_pack_dataset", "trl_pack_bfd_table")
    )

    def ratio(slow: Arm, fast: Arm) -> dict[str, Any]:
        return two_clock_ratios(
            slow.timings, fast.timings, target_applies_to="cpu", slow_work=slow.work, fast_work=fast.work
        )

    return {
        "robolake": {"plan": plan.summary("samples"), "plan_and_take": take.summary("samples")},
        "trl": {"pack_dataset": trl.summary("samples"), "pack_bfd_table": table.summary("samples")},
        "bfd_speedup": ratio(trl, plan),
        "bfd_speedup_with_take": ratio(trl, take),
        "bfd_speedup_vs_pack_bfd_table": ratio(table, plan),
    }


def assemble(
    loaders: Mapping[str, dict[str, Any]] | None,
    bfd: dict[str, Any] | None,
    *,
    versions: Mapping[str, Mapping[str, str]],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON: {"lerobot", "robolake", "speedup": {"real", "av1"}, "trl", "bfd_speedup", ...}.

    Args:
        loaders: `loader_figures` per dataset ("real", "av1"), or None when not run.
        bfd: `bfd_figures`, or None when not run.
        versions: Each peer environment's package versions.
        extra: More top-level keys (machine, quick, conversion, ...).
    """
    out: dict[str, Any] = dict(extra or {})
    out["targets"] = TARGETS
    out["target_applies_to"] = {"speedup": "wall", "bfd_speedup": "cpu"}
    if loaders:
        head = loaders.get("real") or next(iter(loaders.values()))
        best = head["best_backend"]
        out["lerobot"] = {
            "version": versions.get("lerobot", {}).get("lerobot"),
            "samples_per_s": head["lerobot"][best]["samples_per_s"],
            "backend": best,
            "versions": dict(versions.get("lerobot", {})),
        }
        out["robolake"] = {
            "samples_per_s": head["robolake"]["samples_per_s"],
            "image_size": head["robolake"].get("image_size"),
        }
        out["speedup"] = {name: d["speedup"]["median"] for name, d in loaders.items()}
        out["speedup_spread"] = {name: d["speedup"] for name, d in loaders.items()}
        out["datasets"] = dict(loaders)
    if bfd:
        out["trl"] = {
            "version": versions.get("trl", {}).get("trl"),
            "samples_per_s": bfd["trl"]["pack_dataset"]["samples_per_s"],
            "fill": bfd["trl"]["pack_dataset"].get("fill"),
            "versions": dict(versions.get("trl", {})),
            **bfd["trl"],
        }
        out.setdefault("robolake", {})["bfd"] = bfd["robolake"]
        out["bfd_speedup"] = bfd["bfd_speedup"]["median"]
        out["bfd_speedup_spread"] = bfd["bfd_speedup"]
        out["bfd_speedup_with_take"] = bfd["bfd_speedup_with_take"]
        out["bfd_speedup_vs_pack_bfd_table"] = bfd["bfd_speedup_vs_pack_bfd_table"]
    return out


# ---------------------------------------------------------------------------- measuring


def _drain(loader: Any) -> tuple[int, list[int]]:
    """Iterate one epoch of robolake's loader: (samples, the shape of one batch's pixels)."""
    samples, shape = 0, []
    for batch in loader:
        samples += batch.num_samples
        shape = list(batch.pixels.shape[1:])
    return samples, shape


def prepare(name: str, src: str, work: Path, step_stride: int) -> tuple[Any, dict[str, float]]:
    """Ingest `src` and pack it as robolake's loader is meant to be fed: frames in the shards at
    the model's input size (`PackSpec.image_size`, `robolake pack --image-size`), so the loader
    decodes small JPEGs and never resizes. Returns `bench load`'s Prepared and the seconds of
    each offline step (paid once per dataset, not per epoch)."""
    import time

    from robolake.bench.load import HORIZON, IMAGE_SIZE, MAX_TOKENS, Prepared
    from robolake.lake import Lake, ingest
    from robolake.loaders import open_shards
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.training import ModelConfig

    lake_dir, packed_dir = work / name / "lake", work / name / "packed"
    t0 = time.perf_counter()
    ingest(src, str(lake_dir))
    t1 = time.perf_counter()
    lake = Lake.open(str(lake_dir))
    tokens = TokenLengthConfig(tokens_per_view=ModelConfig.preset("tiny").tokens_per_view, state_tokens=0)
    spec = PackSpec(
        max_tokens=MAX_TOKENS, horizon=HORIZON, step_stride=step_stride, tokens=tokens, image_size=IMAGE_SIZE
    )
    pack(lake, spec, str(packed_dir))
    t2 = time.perf_counter()
    return Prepared(name, src, lake, spec, open_shards(str(packed_dir), lake=lake)), {
        "ingest_s": t1 - t0,
        "pack_s": t2 - t1,
    }


def _convert_real(src: str, work: Path, step_stride: int) -> tuple[Any, Path, dict[str, Any]]:
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


def _make_av1(peer: Peer, work: Path, quick: bool, step_stride: int) -> tuple[Any, Path, dict[str, Any]]:
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
            samples, shape = _drain(loader)
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


class PeakRss:
    """Peak resident memory of process trees, sampled every 0.2 s on a thread while in use.

    Args:
        roots: The trees' root pids (their children, e.g. DataLoader workers, are summed in).
        exclude: Pids left out with their trees (the peers this process started).
    """

    def __init__(self, roots: Sequence[int], exclude: Sequence[int] = ()) -> None:
        import threading

        self.roots = list(roots)
        self.exclude = set(exclude)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        import psutil

        total = 0
        for pid in self.roots:
            try:
                top = psutil.Process(pid)
                skip = {c.pid for x in self.exclude for c in psutil.Process(x).children(recursive=True)} | self.exclude
                for p in [top, *top.children(recursive=True)]:
                    if p.pid not in skip:
                        total += p.memory_info().rss
            except psutil.Error:
                continue
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self._sample())

    def __enter__(self) -> PeakRss:
        self.peak = self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _prepare_sized(src: str, work: Path, step_stride: int, image_size: int) -> tuple[Any, Path]:
    """The real data ingested, packed at `image_size` for robolake's loader, exported to v3.0 with
    its h264 packets copied, then given its h264 access copy (`robolake optimize --access-copy
    h264`: what a lake read at random frames is given; the export read the record)."""
    from robolake.bench.load import HORIZON, MAX_TOKENS, Prepared
    from robolake.lake import ExportConfig, Lake, build_access_copy, export_lerobot, ingest
    from robolake.loaders import open_shards
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.training import ModelConfig

    lake_dir, packed_dir, v3 = work / "lake", work / "packed", work / "lerobot-v3"
    ingest(src, str(lake_dir))
    lake = Lake.open(str(lake_dir))
    tokens = TokenLengthConfig(tokens_per_view=ModelConfig.preset("tiny").tokens_per_view, state_tokens=0)
    spec = PackSpec(
        max_tokens=MAX_TOKENS, horizon=HORIZON, step_stride=step_stride, tokens=tokens, image_size=image_size
    )
    pack(lake, spec, str(packed_dir))
    export_lerobot(lake, v3, config=ExportConfig(copy_video=True))
    shards = open_shards(str(packed_dir), lake=lake)
    build_access_copy(lake)
    return Prepared("real", src, lake, spec, shards), v3


def adapter_items_equal(lake: str, v3: Path, lerobot: Peer, work: Path) -> dict[str, Any]:
    """The adapter's items against `LeRobotDataset`'s (torchcodec), item by item: both edges of
    every episode and random frames, with state/action/image windows. Frames read from the record
    (`exact_frames`) must be bit-exact; the access copy's distance from them is reported beside."""
    import numpy as np

    from robolake.bench.load import HORIZON
    from robolake.integrations.lerobot import LakeLeRobotDataset
    from robolake.integrations.lerobot.compare import compare_items, saved_items

    probe = LakeLeRobotDataset(lake)
    fps, cams = probe.fps, probe.meta.camera_keys
    delta = {"action": [i / fps for i in range(HORIZON)], "observation.state": [-1 / fps, 0.0]}
    delta.update({c: [-1 / fps, 0.0] for c in cams})
    ds = LakeLeRobotDataset(lake, delta_timestamps=delta, exact_frames=True)
    starts = ds.table.starts
    idx = sorted(
        {int(x) for a, b in zip(starts[:-1], starts[1:], strict=True) for x in (a, a + 1, b - 2, b - 1)}
        | set(np.random.default_rng(0).integers(0, len(ds), 24).tolist())
    )
    out = work / "lerobot-items.npz"
    answer = lerobot.request(
        "items",
        root=str(v3),
        repo_id="local/real",
        delta_timestamps=delta,
        indices=idx,
        out=str(out),
        backend="torchcodec",
    )
    theirs = saved_items(str(out), answer["meta"], idx)
    ignore = ("next.done", "next.success", "annotation.human.action.task_description")
    report = compare_items(ds.items(idx), theirs, cams, ignore=ignore)
    copy = LakeLeRobotDataset(lake, delta_timestamps=delta)  # the access copy, as the timed adapter reads
    via_copy = compare_items(copy.items(idx), theirs, cams, max_abs_pixel=1.0, ignore=ignore)
    return report.as_dict() | {
        "indices": len(idx),
        "delta_timestamps": delta,
        "backend": "torchcodec",
        "frames_from": "the record (exact_frames=True)",
        "access_copy_max_abs_pixel": via_copy.max_abs_pixel,
        "access_copy_other_keys_equal": via_copy.equal,
    }


def measure_adapter(src: str, work: Path, cache: Path, *, quick: bool) -> dict[str, Any]:
    """robolake's loader, LanceDBDataset, the LeRobot adapter and LeRobotDataset, interleaved;
    the adapter's items against LeRobot's; ACT trained from the adapter and from LeRobotDataset."""
    import ray

    from robolake.bench.load import HORIZON, NUM_WORKERS, loader_config
    from robolake.loaders import PackedLoader
    from robolake.ray_tasks import ensure_ray

    python = ensure_overlay(cache)
    ours = not ray.is_initialized()
    ensure_ray(num_cpus=2)
    prepared, v3 = _prepare_sized(src, work / "adapter", 2 if quick else 1, ADAPTER_IMAGE_SIZE)
    if ours:
        ray.shutdown()  # its processes would be charged to robolake's CPU time
    lance_root = work / "adapter" / "lerobot-lancedb"
    lake_uri = str(prepared.lake.uri)
    import dataclasses

    # the frames at their stored size, as the LeRobot-interface loaders hand them out
    config = dataclasses.replace(loader_config(prepared.shards), image_size=ADAPTER_IMAGE_SIZE)
    loader = PackedLoader(prepared.shards, config)
    batch_size = max(1, round(prepared.shards.manifest.num_samples / len(loader)))
    kinds = {"lancedb": str(lance_root), "adapter": lake_uri, "lerobot": str(v3)}
    peers: dict[str, Peer] = {}
    try:
        for kind in kinds:
            peers[kind] = Peer(python, HERE / "_peer_lancedb.py", work / f"adapter-{kind}.log")
        converted = peers["lancedb"].request("convert", root=str(v3), out=str(lance_root))
        opened = {
            kind: peers[kind].request(
                "open",
                kind=kind,
                root=root,
                horizon=HORIZON,
                batch_size=batch_size,
                num_workers=NUM_WORKERS,
                max_samples=ADAPTER_SAMPLES[quick],
                seed=0,
            )
            for kind, root in kinds.items()
        }
        pids = [p.pid for p in peers.values()]
        rss: dict[str, int] = {k: 0 for k in ("robolake", *kinds)}
        shapes: dict[str, list[int]] = {}

        def robolake_epoch() -> tuple[Timing, int]:
            loader.set_epoch(0)
            with PeakRss([os.getpid()], exclude=pids) as mem, Stopwatch(exclude=pids) as sw:
                samples, shapes["robolake"] = _drain(loader)
            rss["robolake"] = max(rss["robolake"], mem.peak)
            return sw.timing, samples

        def peer_epoch(kind: str) -> Callable[[], tuple[Timing, int]]:
            def run() -> tuple[Timing, int]:
                peer = peers[kind]
                with PeakRss([peer.pid]) as mem, Stopwatch(peer.pid) as sw:
                    answer = peer.request("epoch")
                rss[kind] = max(rss[kind], mem.peak)
                shapes[kind] = answer["image_shape"]
                return Timing(wall_s=answer["wall_s"], cpu_s=sw.timing.cpu_s), int(answer["samples"])

            return run

        arms: dict[str, Callable[[], tuple[Timing, int]]] = {"robolake": robolake_epoch}
        arms.update({k: peer_epoch(k) for k in kinds})
        runs = interleave(arms, repeats=3 if quick else 5, warmup=1)
        built = {k: Arm([t for t, _ in v], [float(n) for _, n in v]) for k, v in runs.items()}

        def ratio(slow: str, fast: str) -> dict[str, Any]:
            a, b = built[slow], built[fast]
            return two_clock_ratios(a.timings, b.timings, target_applies_to="wall", slow_work=a.work, fast_work=b.work)

        versions = peers["lerobot"].request("versions")["versions"]
        for kind in ("lancedb", "adapter"):
            peers.pop(kind).close()  # free their workers before the training runs
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
    summaries = {
        k: a.summary("samples") | {"peak_rss_bytes": rss[k], "image_shape": shapes.get(k)} for k, a in built.items()
    }
    for k, o in opened.items():
        summaries[k].update(samples_per_epoch=o["samples"], dataset_frames=o["dataset_frames"])
    summaries["robolake"].update(samples_per_epoch=prepared.shards.manifest.num_samples, image_size=ADAPTER_IMAGE_SIZE)
    for run in training.values():  # the first batch waits for the workers to start; the rest is the steady state
        steady = run["total_s"] - run["first_batch_wait_s"]
        run["data_wait_fraction_after_first_batch"] = (run["data_wait_s"] - run["first_batch_wait_s"]) / max(
            steady, 1e-9
        )
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
        "items": equal,
        "training": training,
    }


def plot_training(training: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    """Both runs' loss curves, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = {"adapter": "robolake LeRobot adapter", "lerobot": "LeRobotDataset (torchcodec)"}
    for kind, run in training.items():
        ax.plot(
            range(1, len(run["losses"]) + 1),
            run["losses"],
            label=f"{names.get(kind, kind)}: data wait {run['data_wait_fraction']:.1%}",
            linestyle="-" if kind == "adapter" else "--",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("ACT training loss")
    ax.set_title("LeRobot ACT, same seed, from each dataset (GR00T PickNPlace)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def adapter_keys(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON keys the issue names, from `measure_adapter`'s figures."""
    return {
        "lancedb": {
            "speedup_local": figures["lancedb_speedup_local"]["median"],
            "speedup_local_spread": figures["lancedb_speedup_local"],
            "speedup_s3": None,
            "speedup_s3_reason": "not measured: the S3 arm (the local S3 server) is not built yet",
            "version": figures["versions"].get("lerobot-lancedb"),
        },
        "lerobot_adapter": {
            "speedup": figures["adapter_speedup"]["median"],
            "speedup_spread": figures["adapter_speedup"],
            "vs_lancedb": figures["adapter_vs_lancedb"],
            "items_equal": bool(figures["items"]["equal"]),
            "items": figures["items"],
        },
        "lerobot_training": {
            k: {kk: v for kk, v in run.items() if kk != "versions"} for k, run in figures["training"].items()
        },
        "adapter_loaders": figures["loaders"],
        "adapter_setup": {
            k: figures[k] for k in ("batch_size", "num_workers", "horizon", "lancedb_convert_s") if k in figures
        },
    }


def measure_bfd(peer: Peer, work: Path, *, quick: bool, samples: int | None = None) -> dict[str, Any]:
    """robolake's BFD against TRL's on the same lengths, interleaved (`samples` lengths, default BFD_SAMPLES)."""
    import numpy as np
    import pyarrow as pa

    from robolake.bench.pack_algorithms import mixture_lengths
    from robolake.packers.binpack import best_fit_decreasing

    n = samples or BFD_SAMPLES[quick]
    lengths, _, _ = mixture_lengths(n)
    path = work / "bfd-lengths.npy"
    np.save(path, lengths)
    loaded = peer.request("load", lengths=str(path))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    table = pa.table(
        {
            "input_ids": pa.ListArray.from_arrays(
                pa.array(offsets), pa.array(np.arange(offsets[-1], dtype=np.int64) % 50_000)
            )
        }
    )
    best_fit_decreasing(lengths[:10_000], BFD_MAX_TOKENS)  # warm imports
    fills: dict[str, float] = {}

    def plan() -> tuple[Timing, int]:
        # PLAN_LOOPS plans per timed run: one takes tens of milliseconds, short enough for a
        # scheduler tick to move its ratio; one untimed plan first pages back in what the peer's
        # gigabytes pushed out
        best_fit_decreasing(lengths, BFD_MAX_TOKENS)
        with Stopwatch(exclude=[peer.pid]) as sw:
            for _ in range(PLAN_LOOPS):
                p = best_fit_decreasing(lengths, BFD_MAX_TOKENS)
        fills["robolake_plan"] = p.fill
        return sw.timing, n * PLAN_LOOPS

    def plan_take() -> tuple[Timing, int]:
        # the plan, then the packed rows TRL's function also builds: samples taken in bin order
        # and re-cut at the bins' token offsets
        best_fit_decreasing(lengths, BFD_MAX_TOKENS)
        with Stopwatch(exclude=[peer.pid]) as sw:
            p = best_fit_decreasing(lengths, BFD_MAX_TOKENS)
            taken = table.take(pa.array(p.order)).combine_chunks()
            values = taken.column("input_ids").chunk(0).flatten()
            bins = np.concatenate([[0], np.cumsum(p.bin_tokens)]).astype(np.int32)
            pa.ListArray.from_arrays(pa.array(bins), values)
        fills["robolake_plan_take"] = p.fill
        return sw.timing, n

    def trl(op: str, key: str) -> Callable[[], tuple[Timing, int]]:
        def run() -> tuple[Timing, int]:
            with Stopwatch(peer.pid) as sw:
                answer = peer.request(op, seq_length=BFD_MAX_TOKENS)
            fills[key] = answer["fill"]
            fills[key + "_rows"] = answer["rows"]
            return Timing(wall_s=answer["wall_s"], cpu_s=sw.timing.cpu_s), int(answer["samples"])

        return run

    arms = {
        "robolake_plan": plan,
        "robolake_plan_take": plan_take,
        "trl_pack_dataset": trl("pack", "trl_pack_dataset"),
        "trl_pack_bfd_table": trl("pack_table", "trl_pack_bfd_table"),
    }
    runs = interleave(arms, repeats=3 if quick else 5, warmup=1)
    built = {k: Arm([t for t, _ in v], [float(s) for _, s in v], {"fill": fills.get(k)}) for k, v in runs.items()}
    figures = bfd_figures(built)
    figures["trl"]["pack_dataset"]["rows"] = fills.get("trl_pack_dataset_rows")
    figures.update(samples=n, max_tokens=BFD_MAX_TOKENS, tokens=loaded["tokens"])
    return figures


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
            real, real_root, conversion = _convert_real(src, work, stride)
            av1, av1_root, av1_info = _make_av1(first, work, quick, stride)
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


def print_result(res: dict[str, Any]) -> None:
    rows: list[tuple[Any, ...]] = []
    for name, d in res.get("datasets", {}).items():
        rows.append((f"{name}: robolake samples/s", d["robolake"]["samples_per_s"]))
        for b, s in d["lerobot"].items():
            rows.append((f"{name}: lerobot {b} samples/s", s["samples_per_s"]))
        rows.append((f"{name}: speedup vs lerobot {d['best_backend']}", d["speedup"], TARGETS["speedup"]))
    if "bfd_speedup_spread" in res:
        rows.append(("trl pack_dataset samples/s", res["trl"]["samples_per_s"]))
        rows.append(
            ("bfd_speedup (trl pack_dataset / robolake plan)", res["bfd_speedup_spread"], TARGETS["bfd_speedup"])
        )
        rows.append(("bfd_speedup with the Arrow take", res["bfd_speedup_with_take"]))
        rows.append(("bfd_speedup vs trl _pack_bfd on one table", res["bfd_speedup_vs_pack_bfd_table"]))
    if "lerobot_adapter" in res:
        for name, d in res["adapter_loaders"].items():
            mb = round(d["peak_rss_bytes"] / 2**20)
            rows.append((f"real 256px: {name} samples/s (peak RSS {mb} MB)", d["samples_per_s"]))
        rows.append(
            ("lancedb.speedup_local (robolake loader / LanceDBDataset)", res["lancedb"]["speedup_local_spread"], 2.0)
        )
        rows.append(
            ("lerobot_adapter.speedup (adapter / LeRobotDataset)", res["lerobot_adapter"]["speedup_spread"], 10.0)
        )
        rows.append(("lerobot_adapter.items_equal", res["lerobot_adapter"]["items_equal"]))
        for kind, t in res["lerobot_training"].items():
            rows.append((f"ACT from {kind}: data-wait fraction", round(t["data_wait_fraction"], 4)))
    lr, trl = res.get("lerobot", {}).get("version"), res.get("trl", {}).get("version")
    print_table(f"peers measured as themselves (lerobot {lr}, trl {trl}; {res['machine']['cpus']} CPUs)", rows)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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


if __name__ == "__main__":
    sys.exit(main())
