"""Sessions: several topic-log files read as one recording.

Recorders do not always put one take in one file. `rosbag record` is often run once per topic
group, so a take is a folder of bags recorded side by side (joint states in one, a command in
another, a camera in a third); `rosbag record --split` and MCAP recorders cut a long take into
numbered parts (`name_0.bag, name_1.bag, ...`). Each such file alone is not an episode: the
camera bag has no state, a part has a fraction of the take. When the user says so
(`--session`, or `session:` in a mapping), this module makes them one.

Grouping (`group_sessions`, on the driver) probes each file cheaply (its topics and the log-time
span its index or summary declares; no message is read) and forms sessions by mode:

- `overlap`: files whose spans overlap, transitively (recorded side by side);
- `split`: files named `<stem>_<N>.<ext>` (`rosbag record --split` puts a fresh date in each
  part's name, `<prefix>_<date>_<N>.bag`: the date is not part of the stem), in index order; a
  part missing from the middle (or unreadable) makes the session a failed unit naming it,
  because reading around the hole would interpolate across it;
- `folder`: every file of the format in the folder.

A file in no session is read alone, as without the option; files of different formats never
share a session (`registry.find_sessions`). Which file a topic is read from is decided here, once:
the same topic in two files over the same time (or with two types) is read from the first file
only, and a note names the other (file, topic); in split parts the same topic in every part is
the point and is read from all of them.

`SessionRecording` then reads the files as one `Recording`: topics are the union, messages a
heap-merge by log time with one pending message per file (memory does not grow with the number
or size of files), and decoding goes to the file a message came from: a message's handle is
`(file index, that file's own handle)`, which only the recording itself looks into.
"""

from __future__ import annotations

import heapq
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.registry import Session, SessionFile, SessionHooks, SourceOptions, session_name
from robolake.lake.sources.topics.log import TopicLogReader
from robolake.lake.sources.topics.plan import Recording, TopicInfo

__all__ = ["SessionRecording", "PartMessage", "group_sessions", "session_file", "session_hooks"]

_NS = 1_000_000_000
# `<stem>_<N>.<ext>`; a `rosbag record --split` date before `_<N>` is not part of the stem
_PART = re.compile(r"^(?P<stem>.*?)_(?P<index>\d+)(?P<ext>\.[^._]+)$")
_DATE = re.compile(r"_?(\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})$")


class PartMessage(NamedTuple):
    """A session message's handle: which file it came from, and that file's own handle."""

    part: int
    raw: Any


class SessionRecording(Recording):
    """The files of a session read as one recording (see the module docstring).

    Args:
        session: The session (which file each topic is read from was decided when it was formed).
        parts: Each file of the session opened, in the session's order; closed with this one.
    """

    def __init__(self, session: Session, parts: Sequence[Recording]):
        if len(parts) != len(session.files):
            raise ValueError(f"{session.name}: {len(parts)} recordings for {len(session.files)} files")
        self.session = session
        self.parts = list(parts)
        self.path = session.name
        self._reads: list[set[str]] = []
        self._topics: dict[str, TopicInfo] = {}
        for part, f in zip(self.parts, session.files, strict=True):
            infos = part.topics()
            reads = set(infos) - set(f.left_out)
            self._reads.append(reads)
            for t in sorted(reads):
                have = self._topics.get(t)
                info = infos[t]
                self._topics[t] = (
                    info
                    if have is None
                    else TopicInfo(
                        name=t,
                        msgtype=have.msgtype,
                        count=have.count + info.count,
                        kind=have.kind,
                        encoding=have.encoding,
                    )
                )

    @classmethod
    def open(cls, session: Session, open_file: Callable[[str], Recording]) -> SessionRecording:
        """Open every file of `session` with `open_file` (those already open are closed if one fails)."""
        parts: list[Recording] = []
        try:
            for f in session.files:
                parts.append(open_file(f.path))
        except BaseException:
            for p in parts:
                p.close()
            raise
        return cls(session, parts)

    def close(self) -> None:
        for p in self.parts:
            p.close()

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def messages(
        self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None
    ) -> Iterator[tuple[str, int, Any]]:
        wanted = set(topics)
        streams = [
            _tagged(i, part.messages(sorted(wanted & reads), start_ns, stop_ns))
            for i, (part, reads) in enumerate(zip(self.parts, self._reads, strict=True))
            if wanted & reads
        ]
        yield from heapq.merge(*streams, key=lambda m: m[1])

    def decode(self, topic: str, raw: Any) -> Any:
        return self.parts[raw.part].decode(topic, raw.raw)

    def image_stamp_ns(self, topic: str, raw: Any) -> int | None:
        return self.parts[raw.part].image_stamp_ns(topic, raw.raw)

    def raw_bytes(self, raw: Any) -> bytes:
        return self.parts[raw.part].raw_bytes(raw.raw)


def _tagged(part: int, messages: Iterable[tuple[str, int, Any]]) -> Iterator[tuple[str, int, PartMessage]]:
    for topic, log_ns, raw in messages:
        yield topic, log_ns, PartMessage(part, raw)


# --- forming sessions -----------------------------------------------------------------------


def session_file(path: str, topics: dict[str, TopicInfo], span: tuple[int, int] | None) -> SessionFile:
    """A probed file: its topics (name -> type) and the (first, last) log time of its messages."""
    return SessionFile(
        path=path,
        start_ns=span[0] if span else None,
        end_ns=span[1] if span else None,
        streams={t: i.msgtype for t, i in sorted(topics.items())},
    )


def group_sessions(
    paths: tuple[str, ...],
    mode: str,
    options: SourceOptions,
    *,
    probe: Callable[[str, SourceOptions], SessionFile],
) -> list[Session]:
    """The sessions that files of one format under one folder form in `mode` (see the module docstring).

    Returns:
        Sessions of two files or more, and split sessions that cannot be formed (with `problem`).
        A file in none is read alone.
    """
    probed: dict[str, SessionFile] = {}
    unreadable: dict[str, str] = {}
    for p in sorted(paths):
        try:
            probed[p] = probe(p, options)
        except SourceError as e:  # read alone, it is reported (quarantined) on its own
            unreadable[p] = e.message
        except (ValueError, OSError) as e:
            unreadable[p] = str(e)
    if mode == "split":
        return _split_sessions(probed, unreadable)
    if mode == "overlap":
        groups = _overlapping(list(probed.values()))
    else:
        groups = [list(probed.values())]
    return [_claim_topics(mode, g, split=False) for g in groups if len(g) > 1]


def _overlapping(files: list[SessionFile]) -> list[list[SessionFile]]:
    """Files whose spans overlap, transitively, each group in path order (files with no messages alone)."""
    timed = sorted((f.start_ns, f.end_ns, f.path, f) for f in files if f.start_ns is not None and f.end_ns is not None)
    groups: list[list[SessionFile]] = []
    end = -1
    for start, stop, _, f in timed:
        if groups and start <= end:
            groups[-1].append(f)
            end = max(end, stop)
        else:
            groups.append([f])
            end = stop
    return [sorted(g, key=lambda f: f.path) for g in groups]


def _split_sessions(probed: dict[str, SessionFile], unreadable: dict[str, str]) -> list[Session]:
    """Numbered parts in index order, one session per run; a hole in a run fails the session."""
    keyed: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    for p in [*probed, *unreadable]:
        m = _PART.match(os.path.basename(p))
        if m is None:
            continue
        stem = m.group("stem")
        date = _DATE.search(stem)
        key = (stem[: date.start()] if date else stem, m.group("ext"))
        keyed.setdefault(key, []).append((date.group(1) if date else "", int(m.group("index")), p))
    sessions: list[Session] = []
    for (stem, ext), parts in keyed.items():
        runs: list[list[tuple[str, int, str]]] = []
        for part in sorted(parts):
            if runs and part[1] > runs[-1][-1][1]:
                runs[-1].append(part)
            else:  # the numbering starts again (or repeats): another recording with this stem
                runs.append([part])
        for run in runs:
            if len(run) < 2:
                continue
            indices = [i for _, i, _ in run]
            folder = os.path.dirname(run[0][2])
            named = f"{stem}_*_{{N}}{ext}" if run[0][0] else f"{stem}_{{N}}{ext}"
            missing = [
                os.path.join(folder, named.replace("{N}", str(i)))
                for a, b in zip(indices[:-1], indices[1:], strict=True)
                for i in range(a + 1, b)
            ]
            broken = [p for _, _, p in run if p in unreadable]
            files = [probed[p] for _, _, p in run if p in probed]
            if not files:  # every part unreadable: each is reported on its own
                continue
            if missing or broken:
                sessions.append(_failed_split(run, files, missing, broken, unreadable))
                continue
            session = _claim_topics("split", files, split=True)
            if indices[0] > 0:
                first = os.path.join(folder, named.replace("{N}", "0"))
                note = (
                    f"{session.name}: split parts start at {indices[0]}; if {first} exists, it is not in this "
                    "folder and the episode lacks its beginning"
                )
                session = Session(mode="split", files=session.files, notes=(*session.notes, note))
            sessions.append(session)
    return sessions


def _failed_split(
    run: list[tuple[str, int, str]],
    files: list[SessionFile],
    missing: list[str],
    broken: list[str],
    unreadable: dict[str, str],
) -> Session:
    every = [p for _, _, p in run]
    name = session_name(every)
    why = []
    if missing:
        why.append(f"part{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing")
    why += [f"part {p} unreadable ({unreadable[p]})" for p in broken]
    message = (
        f"split parts {name}: {'; '.join(why)}; reading around the hole would interpolate across it: "
        "put the part beside the others and ingest again, or ingest without --session split "
        "(each part its own episode)"
    )
    return Session(mode="split", files=tuple(files), problem=("missing_part", message))


def _claim_topics(mode: str, files: list[SessionFile], *, split: bool) -> Session:
    """Which file each topic is read from: the first file that holds it, and every later one that
    does not overlap a file it is read from (every part of a split session), with the same type."""
    claims: dict[str, list[SessionFile]] = {}
    notes: list[str] = []
    left_out: dict[str, list[str]] = {}
    name = session_name([f.path for f in files])
    for f in files:
        for topic, msgtype in f.streams.items():
            held = claims.setdefault(topic, [])
            clash = None if split else next((h for h in held if _overlap_s(h, f) is not None), None)
            if clash is not None:
                notes.append(
                    f"{name}: {topic} is in both {clash.path} and {f.path} over the same time "
                    f"({_overlap_s(clash, f):.3f} s overlap); read from {os.path.basename(clash.path)} only, "
                    f"left out of {os.path.basename(f.path)}"
                )
            elif held and held[0].streams[topic] != msgtype:
                clash = held[0]
                notes.append(
                    f"{name}: {topic} is {clash.streams[topic]} in {clash.path} but {msgtype} in {f.path}; "
                    f"read from {os.path.basename(clash.path)} only, left out of {os.path.basename(f.path)}"
                )
            if clash is not None:
                left_out.setdefault(f.path, []).append(topic)
            else:
                held.append(f)
    kept = tuple(
        SessionFile(
            path=f.path,
            start_ns=f.start_ns,
            end_ns=f.end_ns,
            streams=f.streams,
            left_out=tuple(left_out.get(f.path, ())),
        )
        for f in files
    )
    return Session(mode=mode, files=kept, notes=tuple(notes))


def _overlap_s(a: SessionFile, b: SessionFile) -> float | None:
    """Seconds the spans of two files share (None: they do not overlap)."""
    if a.start_ns is None or b.start_ns is None or a.end_ns is None or b.end_ns is None:
        return None
    lo, hi = max(a.start_ns, b.start_ns), min(a.end_ns, b.end_ns)
    return (hi - lo) / _NS if lo <= hi else None


def session_hooks(
    probe: Callable[[str, SourceOptions], SessionFile], reader: Callable[..., TopicLogReader]
) -> SessionHooks:
    """A topic format's `SessionHooks`: files probed by `probe`, a session read by `reader(root, options,
    session=..., describe_only=...)` (a `TopicLogReader` that opens its files as a `SessionRecording`)."""

    def group(paths: tuple[str, ...], mode: str, options: SourceOptions) -> list[Session]:
        return group_sessions(paths, mode, options, probe=probe)

    def open_reader(session: Session, options: SourceOptions) -> TopicLogReader:
        return reader(session.root, options, session=session)

    def inspect(session: Session, options: SourceOptions) -> dict[str, Any]:
        return reader(session.root, options, session=session, describe_only=True).inspect()

    return SessionHooks(group=group, open=open_reader, inspect=inspect)
