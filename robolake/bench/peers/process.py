"""A peer script running in its environment's interpreter, spoken to one JSON line at a time; and
the peak memory of process trees.

The peer stays up across the timed runs, so that its imports and DataLoader workers are warm, as
robolake's are; its stderr (its libraries' prints, tracebacks) goes to a log the errors name.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from robolake.bench.peers.env import PEERS, PeerError, ensure_env

__all__ = ["HERE", "PeakRss", "Peer", "start_peer"]

HERE = Path(__file__).resolve().parents[1]  # robolake/bench: the peer scripts and the loop they share


class Peer:
    """A peer's script running in its environment: `request(op, ...)` sends one JSON line, reads one.

    Args:
        python: The environment's interpreter.
        script: The peer script (robolake/bench/_peer_*.py).
        log_path: Where the peer's stderr goes (its libraries' prints and tracebacks).
        env: Environment variables set for the peer on top of this process's.
    """

    def __init__(self, python: Path, script: Path, log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.log_path = log_path
        self.name = script.name
        self._stderr = log_path.open("w")
        environ = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", **(env or {}))
        self.proc = subprocess.Popen(
            [str(python), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=environ,
            cwd=str(log_path.parent),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        if self.proc.stdin is None or self.proc.stdout is None:  # Popen above always gives both
            raise PeerError(f"the peer {self.name} has no pipes; start it with Peer(...)")
        return self.proc.stdin, self.proc.stdout

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send {"op": op, **fields}; the answer without its "ok".

        Raises:
            PeerError: The peer exited or answered an error (named, with its log).
        """
        stdin, stdout = self._pipes()
        try:
            stdin.write(json.dumps({"op": op, **fields}) + "\n")
            stdin.flush()
            line = stdout.readline()
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
                stdin, _ = self._pipes()
                stdin.write(json.dumps({"op": "quit"}) + "\n")
                stdin.close()
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


class PeakRss:
    """Peak resident memory of process trees, sampled every 0.2 s on a thread while in use.

    Args:
        roots: The trees' root pids (their children, e.g. DataLoader workers, are summed in).
        exclude: Pids left out with their trees (the peers and servers this process started).
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
