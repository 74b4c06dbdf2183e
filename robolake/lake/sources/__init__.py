"""Source readers, one per on-disk format, their registry, and discovery of units under a path.

Built-in formats register here, in detection priority order (the first format whose `detect`
claims a path reads it). To add a format: write `robolake/lake/sources/<name>.py` exposing a
`SourceFormat` (keep heavy imports inside the reader), and add one `register_format` line in the
block below.
"""

from __future__ import annotations

from robolake.lake.sources import hdf5 as _hdf5
from robolake.lake.sources import rlds as _rlds
from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    SourceReader,
    TabularEpisode,
    content_hash,
)
from robolake.lake.sources.lerobot import LeRobotReader, is_lerobot_dataset
from robolake.lake.sources.registry import (
    DiscoveryResult,
    FailedUnit,
    SourceFormat,
    SourceOptions,
    discover_readers,
    format_choices,
    format_names,
    formats,
    get_format,
    register_format,
)

__all__ = [
    "EncodedFrames",
    "EpisodeRef",
    "SourceError",
    "SourceReader",
    "TabularEpisode",
    "content_hash",
    "LeRobotReader",
    "DiscoveryResult",
    "FailedUnit",
    "SourceFormat",
    "SourceOptions",
    "discover_readers",
    "format_choices",
    "format_names",
    "formats",
    "get_format",
    "register_format",
    "FORMATS",
]


def _open_lerobot(path: str, options: SourceOptions) -> SourceReader:
    return LeRobotReader(path, embodiment=options.embodiment, state_only=options.state_only, video_frames=options.video_frames)


# --- built-in formats, in detection priority ------------------------------------------------
register_format(SourceFormat(
    name="lerobot",
    description="LeRobot dataset v2.0/v2.1/v3.0 (meta/info.json)",
    detect=is_lerobot_dataset,
    open=_open_lerobot,
    unit="directory",
))
register_format(_hdf5.FORMAT)
register_format(_rlds.FORMAT)
# ROS 2 / ROS 1 / MCAP formats (H-ros): add their register_format lines here, after hdf5.

# H-ros: ROS 2 bag directories, lone ROS 2 storage files, ROS 1 bags, non-ROS MCAP (rosbag.py, mcap_json.py).
from robolake.lake.sources.mcap_json import MCAP_FORMAT  # noqa: E402
from robolake.lake.sources.rosbag import ROS1_FORMAT, ROS2_FILE_FORMAT, ROS2_FORMAT  # noqa: E402

for _fmt in (ROS2_FORMAT, ROS2_FILE_FORMAT, ROS1_FORMAT, MCAP_FORMAT):
    register_format(_fmt)

FORMATS = tuple(format_choices())
