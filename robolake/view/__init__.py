"""`robolake view`: a read-only local web viewer of a lake, and a Rerun export of its episodes.

    from robolake.lake import Lake
    from robolake.view import ViewServer, create_app

    server = ViewServer(create_app(Lake.open("lake/")), port=0).start()   # beside a notebook
    print(server.url)                                                     # open it in a browser
    server.stop()

Pages: the lake (versions and tags with what each changed, embodiments, statistics, quarantine
summary), the episodes table (filtered, sorted and paged by the server), one episode (frames,
play/pause and a scrubber, state/action plots with a cursor at the frame shown, every recorded
stream at its own rate with the step ticks over it and events as markers (`record`), task,
source, lineage) and the quarantine. Everything is read through `robolake.lake.Lake`; nothing is written.
Needs the `view` extra (starlette, uvicorn; rerun-sdk for the export).
"""

from __future__ import annotations

import importlib
from typing import Any

# Resolved on first use, so `robolake.view.frames` is importable without the web stack installed.
_EXPORTS: dict[str, str] = {
    "EpisodeCatalog": "robolake.view.episodes",
    "EpisodeQuery": "robolake.view.episodes",
    "FrameSource": "robolake.view.frames",
    "LakeCatalog": "robolake.view.catalog",
    "RecordSource": "robolake.view.record",
    "RerunExport": "robolake.view.rerun_export",
    "ViewServer": "robolake.view.server",
    "create_app": "robolake.view.app",
    "export_rerun": "robolake.view.rerun_export",
    "frame_bytes": "robolake.view.frames",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'robolake.view' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
