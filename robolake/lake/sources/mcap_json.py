"""Reader for MCAP files from non-ROS stacks: JSON messages described by JSON Schema.

Robot stacks that do not use ROS (Foxglove SDK users, custom Python/C++ recorders) commonly log
MCAP with `message_encoding: json` and `schema encoding: jsonschema`, with schema names such as
`foxglove.CompressedImage`, `foxglove.RawImage` or their own `JointState`-like types. The
messages are dicts; everything downstream (defaults, mapping, resampling, bad-input checks) is
shared with the ROS readers (`topic_log`). Byte fields are base64 strings in JSON (the Foxglove
convention); a stamp is `header.stamp {sec, nanosec}` or a top-level `timestamp {sec, nsec}`,
else the MCAP log time.

An MCAP file whose header profile is `ros2` is a ROS 2 recording and goes to the ROS 2 reader;
this one claims the others. Channels in another encoding (protobuf, flatbuffer, ros1) are
listed by `inspect` but cannot be mapped: mapping one quarantines the file with that reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from robolake.lake.sources import ros_messages as rm
from robolake.lake.sources.base import SourceError
from robolake.lake.sources.registry import SourceFormat, SourceOptions
from robolake.lake.sources.rosbag import mcap_profile
from robolake.lake.sources.topic_log import Recording, TopicInfo, TopicLogReader

__all__ = ["McapJsonReader", "is_non_ros_mcap", "MCAP_FORMAT"]


def is_non_ros_mcap(path: str) -> bool:
    """An MCAP file (magic bytes) whose profile is not `ros2`."""
    if not os.path.isfile(path):
        return False
    profile = mcap_profile(path)
    return profile is not None and profile != "ros2"


class _McapRecording(Recording):
    def __init__(self, path: str):
        from mcap.reader import make_reader

        self.path = path
        try:
            self._file: Any = open(path, "rb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise SourceError("corrupt_file", path, f"cannot open the MCAP file ({e})") from None
        try:
            self._reader = make_reader(self._file)
            summary = self._reader.get_summary()
            if summary is None:
                raise ValueError("the file has no summary section (recording interrupted before it was closed)")
            counts = dict(summary.statistics.channel_message_counts) if summary.statistics else None
            if counts is None:
                counts = {}
                for _, channel, _ in self._reader.iter_messages():
                    counts[channel.id] = counts.get(channel.id, 0) + 1
        except SourceError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise SourceError(
                "corrupt_file", path,
                f"cannot read the MCAP file ({type(e).__name__}: {e}); it is truncated or corrupt; "
                "re-copy it, or recover it with `mcap recover`",
            ) from None
        self._topics: dict[str, TopicInfo] = {}
        self._encoding: dict[str, str] = {}
        for cid, ch in summary.channels.items():
            schema = summary.schemas.get(ch.schema_id)
            name = schema.name if schema is not None else ch.topic
            have = self._topics.get(ch.topic)
            self._topics[ch.topic] = TopicInfo(name=ch.topic, msgtype=name, count=int(counts.get(cid, 0)) + (have.count if have else 0),
                                               kind=rm.kind_of(name), encoding=ch.message_encoding)
            self._encoding[ch.topic] = ch.message_encoding

    def close(self) -> None:
        f = getattr(self, "_file", None)
        if f is not None:
            f.close()
            self._file = None

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def messages(self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None) -> Iterator[tuple[str, int, Any]]:
        if not topics:
            return
        try:
            for _, channel, message in self._reader.iter_messages(topics=list(topics), start_time=start_ns, end_time=stop_ns,
                                                                  log_time_order=True):
                yield channel.topic, int(message.log_time), message.data
        except Exception as e:
            raise SourceError("corrupt_file", self.path, f"cannot read messages ({type(e).__name__}: {e}); the file is truncated or corrupt") from None

    def decode(self, topic: str, raw: Any) -> Any:
        enc = self._encoding.get(topic, "")
        if enc != "json":
            raise SourceError(
                "missing_type", self.path,
                f"topic {topic} uses message encoding {enc!r}; robolake reads JSON MCAP (and ROS 2 MCAP); "
                "convert the topic to JSON or drop it from the mapping",
            )
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise SourceError("corrupt_file", self.path, f"topic {topic}: a message is not valid JSON ({e})") from None


class McapJsonReader(TopicLogReader):
    """One MCAP file of JSON messages.

    Raises:
        SourceError: the file cannot be read, or the mapping does not fit it.
    """

    def __init__(self, root: str, options: SourceOptions | None = None):
        options = options or SourceOptions()
        super().__init__(root, format_name="mcap-json", mapping=options.mapping, embodiment=options.embodiment,
                         state_only=options.state_only)

    def _recordings(self) -> list[tuple[str, ...]]:
        return [(self.root,)]

    def _open(self, paths: tuple[str, ...]) -> Recording:
        return _McapRecording(paths[0])


MCAP_FORMAT = SourceFormat(
    name="mcap",
    description="MCAP file from a non-ROS stack (JSON messages, jsonschema schemas)",
    detect=is_non_ros_mcap,
    open=McapJsonReader,
    unit="file",
)
