"""The line protocol every peer script serves: one JSON request per line on stdin, one answer per line on stdout.

Not imported by robolake: the peer scripts (`_peer_lerobot.py`, `_peer_lancedb.py`, `_peer_trl.py`)
run as files in their own environments' interpreters, with this directory first on their path,
and import it as the top-level module `_peer_serve`. Importing it moves `sys.stdout` to stderr,
so that whatever the peer's libraries print lands in its log and stdout carries only the
answers; the scripts import it before anything that might print.

Answers are `{"ok": true, ...}` or `{"ok": false, "error": "TYPE: message"}` (the traceback goes
to stderr); `{"op": "quit"}` or the end of stdin stops the loop.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

ANSWERS = sys.stdout
sys.stdout = sys.stderr

Op = Callable[[dict[str, Any]], dict[str, Any]]


def versions(names: Iterable[str]) -> dict[str, str]:
    """Each distribution's installed version, or "not installed"."""
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def serve(ops: Mapping[str, Op], packages: Sequence[str]) -> None:
    """Answer requests until "quit"; `versions` (of `packages`) is always served."""
    table: dict[str, Op] = {"versions": lambda req: {"versions": versions(packages)}, **ops}
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        try:
            answer = {"ok": True, **table[req["op"]](req)}
        except Exception as e:  # the parent reports it as one line; the trace goes to stderr
            traceback.print_exc()
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        ANSWERS.write(json.dumps(answer) + "\n")
        ANSWERS.flush()
