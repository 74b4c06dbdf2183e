"""One numeric topic of a recording as streams of vectors, and the rate of a stream of stamps.

`NumericStream` turns the messages of one mapped topic into (time, vector) rows: a JointState's
joints in the mapping's order, a TF topic's transform of one child frame, any other message's
field (or all its numbers). Messages of one topic may not agree on which joints they carry (an
arm driver and a gripper driver both publishing `/joint_states`): they are grouped by the joints
they hold, each group resampled on its own times, and the columns put back in order after
alignment (`stream_columns`, `permute`). `robust_rate` measures a rate from log times with its
uncertainty; `nice_rate` snaps it to a whole or half hertz only within that uncertainty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.mapping import StreamMap
from robolake.lake.sources.resample import Stream, stack_rows
from robolake.lake.sources.topics import ros_messages as rm
from robolake.lake.sources.topics.plan import Recording, TopicInfo

__all__ = ["NumericStream", "rel_seconds", "stream_columns", "permute", "robust_rate", "nice_rate"]

_NS = 1_000_000_000


class NumericStream:
    """Reads one numeric stream: decode, stamp, vector (joints ordered by name).

    A JointState topic can be fed by several publishers with different joints (an arm driver
    and a gripper driver both on `/joint_states`). With `names:` in the mapping, each message
    fills the named joints it carries: messages are grouped by which of them they hold, each
    group becomes its own stream (resampled on its own times), and the groups' columns are put
    back in `names` order after alignment.

    A JointState whose messages leave `name` empty (some drivers publish positions only) is
    read by index: every value of the field, in the order published.

    A TF topic carries the transforms of many frames, each message some of them: the stream
    takes the transform of its `child_frame` from the messages holding it, stamped by that
    transform's own header, and skips the others. An indexed path (`transforms.0.transform`)
    instead takes that transform of every message, whatever its frame.
    """

    def __init__(self, s: StreamMap, info: TopicInfo, clock: str):
        self.s, self.info, self.clock = s, info, clock
        self.field = s.field
        self.names: tuple[str, ...] | None = s.names
        self.groups: dict[tuple[str, ...], tuple[list[int], list[np.ndarray]]] = {}
        self.count = 0
        self.header_clock: bool | None = None

    @property
    def t(self) -> list[int]:
        return [t for ts, _ in self.groups.values() for t in ts[:1]]

    @property
    def first_row(self) -> np.ndarray:
        return next(iter(self.groups.values()))[1][0]

    def add(self, rec: Recording, log_ns: int, msg: Any) -> None:
        if self.field is None and self.info.kind != rm.TF:
            self.field = rm.default_field(self.info.msgtype, msg)
        key: tuple[str, ...] = ()
        stamped = msg  # what carries the header stamp: the message, or the transform taken from it
        row: np.ndarray
        try:
            if self.info.kind == rm.TF and not self.s.child_frame and _indexed_transform(self.field):
                # `transforms.0.transform`: the i-th transform of every message, whatever its frame (a
                # /tf of one transform a message); stamped by that transform's header
                stamped = rm.get_field(msg, ".".join(str(self.field).split(".")[:2]))
                row = rm.to_vector(msg, self.field)
            else:
                picked = self._row(rec, msg)
                if picked is None:
                    self.count += 1
                    return  # a message without the frame or the joints the mapping wants
                row, key, stamped = picked
        except rm.FieldError as e:
            raise SourceError(
                "missing_key",
                rec.path,
                f"{self.s.source} ({rm.short_type(self.info.msgtype)}) message {self.count}: {e}",
            ) from None
        stamp = rm.header_stamp_ns(stamped) if self.clock == "header" else None
        if self.header_clock is None:
            self.header_clock = stamp is not None
        ts, rows = self.groups.setdefault(key, ([], []))
        ts.append(stamp if (self.header_clock and stamp is not None) else log_ns)
        rows.append(row)
        self.count += 1

    def _row(self, rec: Recording, msg: Any) -> tuple[np.ndarray, tuple[str, ...], Any] | None:
        """(vector, joint group, what carries the stamp) of one message; None when it holds
        neither the mapped frame nor any mapped joint.

        Raises:
            rm.FieldError: a field missing; a TF topic without a frame named.
            SourceError: the joints of a JointState change.
        """
        key: tuple[str, ...] = ()
        stamped = msg
        if self.info.kind == rm.TF:
            if not self.s.child_frame:
                frames = ", ".join(f"{c} (parent {p})" for p, c in rm.tf_frames(msg)) or "none in this message"
                raise rm.FieldError(
                    f"a TF topic holds transforms of several frames; name one with "
                    f"`child_frame:` in the mapping (frames: {frames})"
                )
            tr = rm.tf_transform(msg, self.s.child_frame)
            if tr is None:
                return None  # this message carries other frames
            msg = stamped = tr
            if self.field is None or self.field == rm.default_field(self.info.msgtype, None):
                self.field = self.s.field or "transform"
        if self.info.kind == rm.JOINT_STATE and not (self.field and "." in self.field):  # `position.1`: one value
            have = tuple(rm.get_field(msg, "name"))
            if not have and self.s.names is None and not self.names:
                self.names = ()  # a driver that leaves `name` empty: its joints by index, all of them
                return rm.to_vector(msg, self.field or "position"), (), stamped
            if self.names is None:
                self.names = have
            if self.s.names is None and set(have) != set(self.names):
                several = not set(have) & set(self.names)
                raise SourceError(
                    "shape",
                    rec.path,
                    f"{self.s.source}: the JointState joints change at message {self.count} "
                    f"({list(self.names)} -> {list(have)}); "
                    + (
                        "several publishers share the topic: list the joints to keep under `names:` in the mapping"
                        if several
                        else "select fixed joints with `names:` in the mapping "
                        "or split the recording where the robot changed"
                    ),
                )
            key = tuple(n for n in self.names if n in have)
            if not key:
                return None  # a publisher of joints the mapping does not want
            row = rm.joint_vector(msg, self.field or "position", key)
        else:
            row = rm.to_vector(msg, self.field)
        return row, key, stamped

    def streams(self, t0: int, path: str) -> list[tuple[Stream, list[int]]]:
        """One stream per group of messages, with the output columns (of this stream's vector) it fills.

        Raises:
            SourceError: no messages; a named joint no message carries; a width change.
        """
        if not self.groups:
            if self.s.child_frame:
                raise SourceError(
                    "empty",
                    path,
                    f"{self.s.source} holds no transform of frame {self.s.child_frame!r} in this "
                    "episode; `robolake inspect` lists the frames it holds",
                )
            raise SourceError(
                "empty", path, f"{self.s.source} has no messages in this episode; record it or drop it from the mapping"
            )
        if list(self.groups) == [()] or self.names is None:
            ((ts, rows),) = self.groups.values()
            return [
                (
                    Stream(
                        self.s.label if self.s.child_frame else self.s.source,
                        rel_seconds(ts, t0),
                        stack_rows(rows, self.s.source, path),
                        path,
                    ),
                    [],
                )
            ]
        missing = [n for n in self.names if not any(n in k for k in self.groups)]
        if missing:
            raise SourceError(
                "missing_key",
                path,
                f"{self.s.source}: no message carries joints {missing}; joints there: "
                f"{sorted({n for k in self.groups for n in k})}",
            )
        col = {n: i for i, n in enumerate(self.names)}
        out = []
        for key, (ts, rows) in self.groups.items():
            name = self.s.source if len(self.groups) == 1 else f"{self.s.source}[{','.join(key)}]"
            out.append((Stream(name, rel_seconds(ts, t0), stack_rows(rows, name, path), path), [col[n] for n in key]))
        return out


def _indexed_transform(field: str | None) -> bool:
    """A TF field path that picks a transform by position (`transforms.0...`), not by frame."""
    parts = (field or "").split(".")
    return len(parts) > 1 and parts[0] == "transforms" and parts[1].isdigit()


def rel_seconds(ns: Sequence[int], t0: int) -> np.ndarray:
    return (np.asarray(ns, dtype=np.int64) - t0).astype(np.float64) / _NS


def stream_columns(parts: list[list[tuple[Stream, list[int]]]]) -> np.ndarray | None:
    """Where each aligned column goes, when a JointState came in groups; None when in order."""
    dest: list[int] = []
    offset = 0
    grouped = False
    for pieces in parts:
        width = sum(int(np.shape(st.values)[1]) for st, _ in pieces)
        for st, cols in pieces:
            if cols:
                grouped = grouped or len(pieces) > 1 or cols != list(range(len(cols)))
                dest += [offset + c for c in cols]
            else:
                dest += list(range(offset, offset + int(np.shape(st.values)[1])))
        offset += width
    return np.asarray(dest, dtype=np.int64) if grouped else None


def permute(values: np.ndarray, dest: np.ndarray | None) -> np.ndarray:
    if dest is None:
        return values
    out = np.empty_like(values)
    out[:, dest] = values
    return out


def robust_rate(times_ns: Sequence[int]) -> tuple[float, float]:
    """Messages per second from log times, and its relative uncertainty (3 sigma).

    1 / mean interval, leaving out pauses (intervals over twice the median): a median alone is
    biased by jitter, a plain mean by pauses between takes. The jitter of the two end stamps is
    what remains in a mean interval, so the uncertainty is 3 x std(interval) / (n x mean).
    """
    dt = np.diff(np.asarray(times_ns, dtype=np.int64)).astype(np.float64)
    dt = dt[dt > 0]
    if dt.size == 0:
        return 0.0, 0.0
    kept = dt[dt <= 2 * np.median(dt)]
    mean = float(kept.mean())
    return float(_NS / mean), float(3 * kept.std() / (kept.size * mean))


def nice_rate(rate: float, uncertainty: float = 0.0) -> float:
    """A measured rate snapped to a whole number, else to a half, when that is within the
    measurement's uncertainty (100.3 Hz of jitter over 60 messages -> 100; 62.5 stays 62.5);
    otherwise kept to the millihertz. The reader notes any snap."""
    if rate <= 0:
        return 0.0
    tol = max(uncertainty, 1e-4)
    for cand in (round(rate), round(rate * 2) / 2):
        if cand > 0 and abs(rate - cand) / cand <= tol:
            return float(cand)
    return round(rate, 3)
