"""Writers of source datasets: the LeRobot v2.x/v3.0 writer, its mp4 encoder, the synthetic generator.

They produce inputs for `robolake ingest` (tests, demos, benchmarks, recorded simulation) and
`robolake export`'s output; the readers live in `robolake.lake.sources`. Data still moves forward
only: nothing here writes into a lake. Names resolve on first use, so a module that needs only the
encoder settings (`robolake.writers.video`) does not import the LeRobot writer and its pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robolake.writers.lerobot import (
        EpisodeArrays,
        LeRobotFeatures,
        LeRobotFiles,
        LeRobotWriter,
        write_lerobot_dataset,
    )
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic, synthetic_episodes
    from robolake.writers.video import Mp4Writer, VideoOptions, encode_video

_HOME = {
    "EpisodeArrays": "lerobot",
    "LeRobotFeatures": "lerobot",
    "LeRobotFiles": "lerobot",
    "LeRobotWriter": "lerobot",
    "write_lerobot_dataset": "lerobot",
    "SyntheticConfig": "synthetic",
    "generate_synthetic": "synthetic",
    "synthetic_episodes": "synthetic",
    "Mp4Writer": "video",
    "VideoOptions": "video",
    "encode_video": "video",
}

__all__ = [
    "EpisodeArrays",
    "LeRobotFeatures",
    "LeRobotFiles",
    "LeRobotWriter",
    "Mp4Writer",
    "SyntheticConfig",
    "VideoOptions",
    "encode_video",
    "generate_synthetic",
    "synthetic_episodes",
    "write_lerobot_dataset",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'robolake.writers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"robolake.writers.{_HOME[name]}"), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
