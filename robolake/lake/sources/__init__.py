"""Source readers, one per on-disk format, their registry, and discovery of units under a path.

Built-in formats register here, in detection priority order (the first format whose `detect`
claims a path reads it). To add a format: write `robolake/lake/sources/<name>.py` exposing a
`SourceFormat` (keep heavy imports inside the reader), and add it to the block below.
"""

from __future__ import annotations

from robolake.lake.sources import lerobot_lance, npz
from robolake.lake.sources.base import (
    EncodedFrames,
    EpisodeRef,
    SourceError,
    SourceReader,
    TabularEpisode,
    content_hash,
)
from robolake.lake.sources.hdf5 import reader as hdf5
from robolake.lake.sources.lerobot import reader as lerobot
from robolake.lake.sources.lerobot.reader import LeRobotReader
from robolake.lake.sources.limits import ReadLimits
from robolake.lake.sources.registry import (
    RESAMPLE_MODES,
    SESSION_MODES,
    DiscoveryResult,
    FailedUnit,
    Session,
    SessionFile,
    SessionHooks,
    SourceFormat,
    SourceOptions,
    UnitScan,
    discover_readers,
    find_units,
    format_choices,
    format_names,
    formats,
    get_format,
    open_unit,
    register_format,
)
from robolake.lake.sources.rerun import reader as rerun_rrd
from robolake.lake.sources.rlds import reader as rlds
from robolake.lake.sources.topics import mcap_file, rosbag
from robolake.lake.sources.zarr import reader as zarr_buffer

__all__ = [
    "EncodedFrames",
    "EpisodeRef",
    "SourceError",
    "SourceReader",
    "TabularEpisode",
    "content_hash",
    "LeRobotReader",
    "ReadLimits",
    "RESAMPLE_MODES",
    "SESSION_MODES",
    "Session",
    "SessionFile",
    "SessionHooks",
    "DiscoveryResult",
    "UnitScan",
    "find_units",
    "open_unit",
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

# --- built-in formats, in detection priority ------------------------------------------------
for _format in (
    lerobot_lance.FORMAT,  # before lerobot: lerobot claims any folder with meta/info.json
    lerobot.FORMAT,
    hdf5.FORMAT,
    zarr_buffer.FORMAT,  # after lerobot (a LeRobot dataset is never a Zarr group)
    rlds.FORMAT,
    rosbag.ROS2_FORMAT,
    rosbag.ROS2_FILE_FORMAT,
    rosbag.ROS1_FORMAT,
    mcap_file.MCAP_FORMAT,
    npz.FORMAT,  # a folder of .npz files or .npy folders, one per episode (after the others: it walks past them)
    npz.FILE_FORMAT,  # a lone .npz given directly
    rerun_rrd.FORMAT,  # *.rrd files (or files starting b"RRF"); no other format reads them
):
    register_format(_format)

FORMATS = tuple(format_choices())
