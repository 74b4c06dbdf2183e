"""The record of a columnar source: whole arrays in, record parts and events out.

A topic log hands its reader one message at a time, so its record is built message by message
(`record.RecordBuilder`). A LeRobot parquet file, an HDF5 episode group and an RLDS record hold
each stream as one array of all its rows instead: a column, a dataset, a feature. Splitting such
an array into messages only to stack them again would cost a Python object per value, so these
readers hand the whole array over here, in the dtype the source wrote (float64 stays float64,
integer ticks stay integers, booleans stay booleans), with one time per row, and get back the
same `Record` the topic readers make: one part per stream (a row is a message, the stream's one
field is the value itself, `""`, as `flatten_message` names a bare value), text columns as
string events, and each camera's frame times as a `camera` part.

A stream's time is the source's own seconds where it records them (a LeRobot `timestamp`
column, an HDF5 stamps dataset: clock `source`), else its row index over the rate (clock
`rows`). The record of one episode is bounded like any other read (`budget`, the read limit):
a source whose streams together pass it is a `too_large` quarantine row, not a full memory.
What a reader leaves out (images that are not a camera, a column of structures) is kept with
its reason in the episode's metadata, so nothing is dropped without a word.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

import numpy as np

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.limits import human_bytes
from robolake.lake.sources.record import EventStream, Record, SignalPart, stream_summary

__all__ = ["ColumnRecord", "seconds_to_ns", "CLOCK_ROWS", "CLOCK_SOURCE"]

CLOCK_SOURCE = "source"  # the source's own seconds (a timestamp column, a stamps dataset)
CLOCK_ROWS = "rows"  # row index / rate: the source records no time for the stream


def seconds_to_ns(t: np.ndarray) -> np.ndarray:
    """int64 nanoseconds of times in seconds, rounded to the nearest (`round(t * 1e9)`)."""
    return np.round(np.asarray(t, dtype=np.float64) * 1e9).astype(np.int64)


class ColumnRecord:
    """Collects one episode's streams as whole arrays and builds its `Record`.

    Args:
        path: The source file, named in each part and in errors.
        budget: Bytes the record may hold (values and times), or None for no bound.
        streams: Glob patterns of the streams to keep (`--streams`); None keeps every one.
    """

    def __init__(self, *, path: str, budget: int | None = None, streams: Sequence[str] | None = None) -> None:
        self.path = path
        self._budget = budget
        self._patterns = tuple(streams) if streams is not None else None
        self._held = 0
        self._signals: list[SignalPart] = []
        self._events: list[EventStream] = []
        self._parts: dict[str, int] = {}
        self.source_bytes: dict[str, int] = {}  # stored bytes of each stream in the source, where known
        self.left_out: dict[str, str] = {}  # stream -> why the record does not keep it

    def wanted(self, stream: str, *, mapped: bool = False) -> bool:
        """Whether the record keeps `stream`: a mapped one always, another when `--streams` matches
        it (or is not given); one left out is said in `left_out`."""
        if mapped or self._patterns is None or any(fnmatch.fnmatchcase(stream, p) for p in self._patterns):
            return True
        self.left_out[stream] = "not matched by --streams"
        return False

    def _hold(self, stream: str, nbytes: int) -> None:
        self._held += int(nbytes)
        if self._budget is not None and self._held > self._budget:
            raise SourceError(
                "too_large",
                self.path,
                f"the record of this episode passes the read budget ({human_bytes(self._budget)}) at stream {stream}; "
                "keep fewer streams (--streams) or raise --max-read-gb",
            )

    def numeric(
        self,
        stream: str,
        t_ns: np.ndarray,
        values: np.ndarray,
        *,
        scalar: bool | None = None,
        clock: str = CLOCK_SOURCE,
        msgtype: str = "",
        nbytes: int | None = None,
    ) -> None:
        """One numeric stream (or one more part of it): `values` [N] or [N, ...] in the source's dtype.

        Args:
            scalar: Whether each row held a scalar; default: `values` is 1-D.
            nbytes: The stream's stored bytes in the source, when known.

        Raises:
            ValueError: `t_ns` and `values` differ in rows.
            SourceError: `too_large`, when the record passes the budget.
        """
        values = np.asarray(values)
        t_ns = np.asarray(t_ns, dtype=np.int64)
        if values.ndim == 0 or len(values) != len(t_ns):
            raise ValueError(f"{stream}: {values.shape} values for {len(t_ns)} times")
        width = int(np.prod(values.shape[1:])) if values.ndim > 1 else 1
        self._hold(stream, values.nbytes + t_ns.nbytes)
        part = self._parts.get(stream, 0)
        self._parts[stream] = part + 1
        self._signals.append(
            SignalPart(
                stream=stream,
                part=part,
                msgtype=msgtype,
                clock=clock,
                t_ns=t_ns,
                fields=("",),
                values=(values.reshape(len(values), width),),
                scalars=(values.ndim == 1 if scalar is None else scalar,),
                path=self.path,
            )
        )
        if nbytes is not None:
            self.source_bytes[stream] = self.source_bytes.get(stream, 0) + int(nbytes)

    def camera(self, stream: str, t_ns: np.ndarray, *, clock: str = CLOCK_SOURCE, msgtype: str = "") -> None:
        """A camera's frame times (its pixels live in the media table)."""
        t_ns = np.asarray(t_ns, dtype=np.int64)
        self._hold(stream, t_ns.nbytes)
        self._signals.append(
            SignalPart(stream=stream, kind="camera", msgtype=msgtype, clock=clock, t_ns=t_ns, path=self.path)
        )

    def text(
        self,
        stream: str,
        t_ns: np.ndarray,
        values: Sequence[str | None],
        *,
        kind: str = "string",
        clock: str = CLOCK_SOURCE,
        nbytes: int | None = None,
    ) -> None:
        """An event stream: one text (or None) per time."""
        t_ns = np.asarray(t_ns, dtype=np.int64)
        if len(values) != len(t_ns):
            raise ValueError(f"{stream}: {len(values)} values for {len(t_ns)} times")
        self._hold(stream, t_ns.nbytes + sum(len(v) for v in values if v is not None))
        self._events.append(
            EventStream(stream=stream, kind=kind, t_ns=t_ns, values=tuple(values), path=self.path, clock=clock)
        )
        if nbytes is not None:
            self.source_bytes[stream] = self.source_bytes.get(stream, 0) + int(nbytes)

    def leave_out(self, stream: str, why: str) -> None:
        self.left_out[stream] = why

    def build(self) -> Record:
        return Record(signals=tuple(self._signals), events=tuple(self._events))

    def metadata(self, record: Record) -> dict[str, Any]:
        """The episode metadata's `record` entry: per stream summary, source bytes, what was left out."""
        return {
            "streams": stream_summary(record),
            "source_bytes": dict(self.source_bytes),
            **({"left_out": dict(self.left_out)} if self.left_out else {}),
        }
