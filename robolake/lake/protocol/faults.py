"""Fault injection: named hooks at each phase of a lake write, inert unless a test arms them.

The writer protocol (`lease.py`, `transaction.py`, `ingest.py`) calls `hook(phase)` at every
point where a crash or a competing writer could matter. In production nothing is installed and
a hook is one environment lookup. Tests arm hooks in two ways:

- `ROBOLAKE_FAULT="<phase>:<action>[,<phase>:<action>...]"` in a subprocess's environment, with
  `<phase>` a phase name or an fnmatch pattern (`after_commit:*`) and `<action>` one of
  `kill` (SIGKILL this process, as the OOM killer or `kill -9` would), `interrupt` (raise
  KeyboardInterrupt, as Ctrl-C would), `error` (raise RuntimeError) or `pause=<dir>` (create
  `<dir>/<phase>.reached`, then wait until `<dir>/<phase>.go` exists: another process
  decides when this writer continues).
- `install(phase, callback)` in-process, for interleaving writers on threads: the callback
  runs on the writer's thread at that phase (it can block until another writer has moved on).

Phases (in the order a write reaches them):

    fragments_written          a writer's workers wrote their uncommitted data files
    lease_wait                 the lease is held by another live writer; this one waits
    lease_acquired             this writer holds the lease
    rolled_back                it restored tables a dead writer left unpublished
    before_commit:<table>      fenced, about to commit a table
    after_commit:<table>       the table's new Lance version exists (not yet published)
    after_index:<table>        a scalar index was (re)built
    before_publish             every table committed, fenced, manifest not yet written
    manifest_written           the new lake version is published (lease still held)
    lease_released             done
"""

from __future__ import annotations

import fnmatch
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["ENV_VAR", "INGEST_PHASES", "hook", "install", "installed", "clear"]

ENV_VAR = "ROBOLAKE_FAULT"

# Every phase a plain ingest of new episodes passes, in order (what kill tests and `bench faults` walk).
INGEST_PHASES = (
    "fragments_written",
    "lease_acquired",
    "before_commit:media",
    "after_commit:media",
    "after_commit:steps",
    "after_commit:episodes",
    "after_commit:embodiments",
    "after_index:episodes",
    "after_index:media",
    "before_publish",
    "manifest_written",
    "lease_released",
)

Callback = Callable[[str], None]

_lock = threading.Lock()
_callbacks: list[tuple[str, Callback]] = []


def hook(phase: str) -> None:
    """Mark `phase` of a write: run whatever a test installed for it (nothing otherwise)."""
    spec = os.environ.get(ENV_VAR)
    if spec:
        for item in spec.split(","):
            # a phase name itself holds ':' (after_commit:steps); the action follows the last one
            pattern, _, action = item.strip().rpartition(":")
            if pattern and fnmatch.fnmatchcase(phase, pattern):
                _act(phase, action)
    if _callbacks:
        with _lock:
            todo = [cb for pattern, cb in _callbacks if fnmatch.fnmatchcase(phase, pattern)]
        for cb in todo:
            cb(phase)


def _act(phase: str, action: str) -> None:
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # SIGKILL is delivered asynchronously; never run past the hook
    elif action == "interrupt":
        raise KeyboardInterrupt(f"fault injected at {phase}")
    elif action == "error":
        raise RuntimeError(f"fault injected at {phase}")
    elif action.startswith("pause="):
        folder = action[len("pause=") :]
        name = phase.replace(":", "_")
        open(os.path.join(folder, f"{name}.reached"), "w").close()
        while not os.path.exists(os.path.join(folder, f"{name}.go")):
            time.sleep(0.02)
    else:
        raise ValueError(
            f"{ENV_VAR}: unknown action {action!r} for phase {phase!r}; use kill, interrupt, error or pause=DIR"
        )


def install(phase: str, callback: Callback) -> Callback:
    """Run `callback(phase)` whenever a write reaches a phase matching `phase` (fnmatch)."""
    with _lock:
        _callbacks.append((phase, callback))
    return callback


def clear() -> None:
    """Remove every installed callback."""
    with _lock:
        _callbacks.clear()


@contextmanager
def installed(phase: str, callback: Callback) -> Iterator[None]:
    """`install` for the duration of a `with` block."""
    install(phase, callback)
    try:
        yield
    finally:
        with _lock:
            _callbacks[:] = [(p, c) for p, c in _callbacks if c is not callback]
