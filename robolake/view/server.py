"""Serving the viewer: uvicorn on a socket this module binds, in the foreground or on a thread.

`robolake view` runs the server in the foreground until Ctrl-C. Notebooks and tests want it
beside them instead: `ViewServer(app).start()` binds the socket first (port 0 picks a free one,
and the URL is known before the first request), runs uvicorn on a daemon thread, and returns
once uvicorn accepts connections; `stop()` asks it to finish and joins the thread. uvicorn only
installs signal handlers on the main thread, so a background server leaves the host's Ctrl-C
alone.

Binding anywhere but the loopback interface makes the lake readable by anyone who can reach
the machine: the viewer has no authentication. `warn_if_exposed` says so, once, where the
command starts.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from robolake.view.app import LOOPBACK_HOSTS

__all__ = ["ViewServer", "is_loopback", "warn_if_exposed"]

logger = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host == "::1" or host.startswith("127.")


def warn_if_exposed(host: str) -> str | None:
    """The warning for serving on a non-loopback `host` (logged and returned), or None."""
    if is_loopback(host):
        return None
    text = (
        f"serving on {host}: anyone who can reach this machine can read the lake (the viewer has no "
        "authentication); use the default --host 127.0.0.1 and an SSH tunnel to view a remote lake"
    )
    logger.warning(text)
    return text


class ViewServer:
    """uvicorn serving `app` on `host:port` (port 0: a free port, read back from `url`)."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 8765, log_level: str = "warning"):
        try:
            import uvicorn
        except ImportError as e:
            raise ImportError("robolake view needs starlette and uvicorn: pip install 'robolake[view]'") from e

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY only on sockets that say so, and
        # without it each keep-alive response waits ~40 ms on Nagle's algorithm (a 10x slower scrub).
        self._sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
        except OSError as e:
            self._sock.close()
            raise OSError(
                f"cannot serve on {host}:{port} ({e.strerror}); pass another --port, or --port 0 for a free one"
            ) from e
        self.host, self.port = host, int(self._sock.getsockname()[1])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off"))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C)."""
        self._server.run(sockets=[self._sock])

    def start(self, timeout_s: float = 30.0) -> ViewServer:
        """Serve on a daemon thread; returns once the server accepts connections.

        Raises:
            RuntimeError: the server did not start within `timeout_s`.
        """
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True, name="robolake-view"
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the viewer did not start on {self.url} within {timeout_s:.0f} s")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop a server started with `start` and wait for its thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> ViewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
