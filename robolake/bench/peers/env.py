"""The peers' isolated environments: each peer's release on its own Python, built once under a cache.

LeRobot cannot share robolake's environment (it pins its own torch and needs Python >= 3.12),
so each peer gets a virtual environment of its own, from its release on PyPI, with the
interpreter the machine has for it (pyenv's first, then PATH). A finished build leaves a
marker (`robolake-peer.json`: what was installed, on which Python); a directory without one (an
interrupted build) is completed by running pip again. A build that fails is one line naming
the peer, the step and its log.

The overlay (`ensure_overlay`) layers pylance and robolake's source on lerobot-lancedb's
environment, so that LeRobot, lerobot-lancedb and robolake's LeRobot adapter run in one
interpreter with one torch.

torchcodec (LeRobot's default video decoder) loads FFmpeg's shared libraries at run time and
pip does not install them: `ffmpeg_missing` says so in one line, before the minutes-long build.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FFMPEG_SONAMES",
    "PEERS",
    "REPO",
    "PeerEnv",
    "PeerError",
    "built_env",
    "default_cache",
    "ensure_env",
    "ensure_overlay",
    "ffmpeg_missing",
    "find_python",
    "lerobot_python",
]

REPO = Path(__file__).resolve().parents[3]
INSTALL_TIMEOUT_S = 3600
OVERLAY_PACKAGES = ("crc32c", "simplejpeg")  # robolake.lake's imports the LeRobot env lacks (+ pylance)
FFMPEG_SONAMES = tuple(f"libavutil.so.{v}" for v in (60, 59, 58, 57, 56))  # FFmpeg 8 .. 4, torchcodec's range


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
    at robolake's own version, s3fs, and robolake's source on the path. Returns its Python.

    Raises:
        PeerError: the base environment, the venv or the install failed.
    """
    import importlib.metadata as md

    base = PEERS["lerobot-lancedb"]
    ensure_env(base, cache, log=log)
    sites = sorted(base.directory(cache).glob("lib/python3.*/site-packages"))
    if not sites:
        raise PeerError(f"the {base.name} environment in {base.directory(cache)} has no site-packages; delete it")
    # s3fs (robolake's object-store extra: the adapter reads a lake from S3) at the base's fsspec
    # release: s3fs pins fsspec to its own version, and LeRobot's `datasets` pins fsspec
    fsspec = sorted(sites[0].glob("fsspec-*.dist-info"))
    s3fs = (f"s3fs=={fsspec[-1].name.removeprefix('fsspec-').removesuffix('.dist-info')}",) if fsspec else ()
    overlay = PeerEnv(
        name=f"{base.name}-{base.version}-robolake",
        version=md.version("pylance"),
        python=base.python,
        requirements=(f"pylance=={md.version('pylance')}", *OVERLAY_PACKAGES, *s3fs),
        script=base.script,
        check="import robolake.integrations.lerobot, lerobot_lancedb.reader, lerobot.datasets.lerobot_dataset, s3fs",
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
