"""Source readers, one per on-disk format, and discovery of datasets under a path."""

from __future__ import annotations

import os

from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    SourceReader,
    TabularEpisode,
    content_hash,
)
from robolake.lake.sources.lerobot import LeRobotReader, is_lerobot_dataset

__all__ = [
    "EncodedFrames",
    "EpisodeRef",
    "SourceError",
    "SourceReader",
    "TabularEpisode",
    "content_hash",
    "LeRobotReader",
    "discover_readers",
    "FORMATS",
]

FORMATS = ("auto", "lerobot", "synthetic")


def discover_readers(src: str, *, format: str = "auto", embodiment: str | None = None) -> list[LeRobotReader]:
    """Readers for every dataset at or below `src` (two levels deep).

    Args:
        src: A dataset root, or a directory holding several (one per embodiment, as the synthetic
            generator writes them).
        format: `auto`, `lerobot` or `synthetic` (the synthetic generator writes LeRobot layouts).
        embodiment: Force this embodiment tag on every dataset found.

    Raises:
        ValueError: unknown format, or nothing readable under `src`.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown source format {format!r}; use one of {FORMATS}")
    src = os.path.abspath(src)
    if not os.path.isdir(src):
        raise ValueError(f"source {src} is not a directory")
    roots: list[str] = []
    if is_lerobot_dataset(src):
        roots.append(src)
    else:
        for dirpath, dirnames, _ in os.walk(src):
            depth = dirpath[len(src):].count(os.sep)
            if depth >= 2:
                dirnames[:] = []
            if dirpath != src and is_lerobot_dataset(dirpath):
                roots.append(dirpath)
                dirnames[:] = []
            dirnames.sort()
    if not roots:
        raise ValueError(
            f"no dataset found under {src}: expected a LeRobot dataset (meta/info.json) or a directory of them"
        )
    return [LeRobotReader(r, embodiment=embodiment) for r in sorted(roots)]
