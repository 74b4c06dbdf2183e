"""The write lease: writers serialise through the lake itself, on a local path or an object store.

What it is. A lake has one write lease at a time, kept as numbered *epoch* records under
`_robolake/lease/<epoch>.json`. Each record names its holder (writer id, host, pid), a random
token, the lake version the holder based its write on, and an expiry time. The newest epoch is
the lease's current state: `held` by its holder until it expires, or `free`.

Taking it. A writer reads the newest epoch E. If E is free, expired, or held by a process that is
provably dead (same host and boot, and its pid is gone, a zombie, or a different process), the
writer creates record E+1 with *put-if-absent*: a hard link of a finished temporary file on a
local path (`os.link` fails when the name exists), a conditional PUT (`If-None-Match: *`) on
S3-compatible stores, the primitive Lance's own commits rely on. Two writers racing for E+1: one
wins, the other sees E+1 held and waits. A lease held by a live writer is waited on (bounded);
readers never touch it.

Keeping it. A heartbeat thread rewrites the holder's record with a later expiry every ttl/3.
Only the holder ever writes its record, and only while it is still the newest epoch. Locally a
live process is never taken over, so a late renewal is harmless; on an object store a holder
that finds its own record expired counts the lease as lost (another host may be taking it).

Fencing. Before every table commit and before publishing the lake manifest, the transaction
calls `Lease.check`: the newest epoch must still be this writer's, with its token, and not
about to expire (the check renews it), and the lake's published head must still be the version
the lease was taken on. After each table commit the transaction also checks that the table
advanced by exactly one version, so a commit slipped in by anyone else is caught before it
could be published (transaction.py).

Cleaning up. Only the lease holder rolls back table commits no manifest names; it holds the
lease, so their writer is gone (dead, expired or released without publishing). A writer that
fails rolls back its own commits and deletes its own fragment files before releasing. Every
writer also keeps a *presence* record (`_robolake/writers/<id>.json`, same heartbeat) from
before its workers write data files until it exits; a lease holder that finds the record of a
dead writer deletes data files no table version references, but only when no other writer is
alive (a live writer's uncommitted fragments look exactly like a dead one's) and only files
older than its own look at the records, then removes the dead writer's records and stale lease
epochs.

Cases survived (each has a test in tests/unit/lake/test_lease.py or
tests/integration/test_writer_faults.py):

- a writer killed at any phase: its lease is taken over as soon as its pid is gone (locally)
  or its expiry passes (another host); its unpublished commits are rolled back and its files
  deleted by the next holder; readers saw the previous version throughout;
- two or three writers at once: one holds the lease, the others wait, then re-read the head,
  re-check content hashes against it and commit on top; no writer ever publishes another's rows;
- a writer whose lease was taken over while it stalled (expired on another host): its next
  fence check fails, it publishes nothing and touches nothing it does not own;
- a writer that loses every bounded retry exits with one line saying what happened and to re-run.

What it does not survive: clocks on different hosts more than `ttl_s / 3` apart, and a writer
on another host that stalls for longer than `ttl_s` *between* a successful fence check and the
table commit right after it (the post-commit version check then catches it, but the stalled
commit's rows sit in an unpublished table version until the next holder rolls them back).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from robolake.lake.protocol import faults
from robolake.lake.protocol.versions import meta_uri
from robolake.storage import (
    DocumentError,
    OutsideRootError,
    filesystem,
    list_names,
    put_if_absent,
    read_bytes,
    write_bytes_atomic,
)

__all__ = [
    "LeaseConfig",
    "LeaseRecord",
    "Lease",
    "Writer",
    "LeaseLostError",
    "put_if_absent",
    "lease_records",
    "presence_records",
    "identity",
    "is_dead",
]

log = logging.getLogger(__name__)

LEASE_DIR = "lease"  # under _robolake/ (versions.meta_uri)
WRITERS_DIR = "writers"
MAX_RECORD_BYTES = 1 << 20  # a lease or presence record is a few hundred bytes


class LeaseLostError(RuntimeError):
    """This writer no longer holds the lake's write lease (raised as a CommitConflictError by callers)."""


@dataclass(frozen=True, kw_only=True)
class LeaseConfig:
    """How the write lease behaves.

    Attributes:
        ttl_s: A record not renewed for this long is expired (its holder is taken for dead
            unless it provably lives on this host). Env: ROBOLAKE_LEASE_TTL.
        wait_s: How long `Writer.acquire` waits for a live holder before giving up.
            Env: ROBOLAKE_LEASE_WAIT.
        poll_s: Time between looks at a held lease.
        clock_skew_s: Allowed clock difference to an object store's timestamps (orphan sweep).
    """

    ttl_s: float = 30.0
    wait_s: float = 300.0
    poll_s: float = 0.1
    clock_skew_s: float = 300.0

    def __post_init__(self) -> None:
        if self.ttl_s <= 0 or self.wait_s < 0 or self.poll_s <= 0:
            raise ValueError(f"LeaseConfig needs ttl_s > 0, wait_s >= 0, poll_s > 0; got {self}")

    @classmethod
    def from_env(cls) -> LeaseConfig:
        kw: dict[str, float] = {}
        for key, env in (("ttl_s", "ROBOLAKE_LEASE_TTL"), ("wait_s", "ROBOLAKE_LEASE_WAIT")):
            if os.environ.get(env):
                try:
                    kw[key] = float(os.environ[env])
                except ValueError:
                    raise ValueError(f"{env}={os.environ[env]!r} is not a number of seconds") from None
        return cls(**kw)


# --- storage primitives ------------------------------------------------------------------------


def _read(uri: str, storage_options: dict[str, str] | None) -> dict[str, Any] | None:
    """A record's JSON; None where it is absent or not a record (a foreign tool's half file).

    A store that keeps failing raises: an unreadable newest epoch must not read as a free lease.
    """
    try:
        raw = read_bytes(uri, storage_options, max_bytes=MAX_RECORD_BYTES)
    except FileNotFoundError:
        return None
    except DocumentError:  # far larger than any record robolake writes: not one of ours
        log.warning("lease/presence record %s is too large to be one; ignoring it", uri)
        return None
    try:
        out = json.loads(raw)
    except (ValueError, RecursionError):
        log.warning("unreadable lease/presence record %s; ignoring it", uri)
        return None
    return out if isinstance(out, dict) else None


def _list(uri: str, storage_options: dict[str, str] | None) -> list[str]:
    return [n for n in list_names(uri, storage_options) if n.endswith(".json")]


def _delete(uri: str, storage_options: dict[str, str] | None) -> None:
    try:
        filesystem(uri, storage_options).rm_file(uri)
    except FileNotFoundError:
        pass


# --- who is alive ------------------------------------------------------------------------------


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _proc_start(pid: int) -> str | None:
    """The kernel's start time of `pid` ('' where /proc is absent), None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


_HOST = socket.gethostname()
_BOOT = _boot_id()


def identity() -> dict[str, Any]:
    """Where this process runs (host, boot, pid and its start), for `is_dead` to judge later."""
    pid = os.getpid()
    return {"host": _HOST, "boot": _BOOT, "pid": pid, "pid_start": _proc_start(pid) or ""}


def is_dead(record: dict[str, Any], now: float | None = None) -> bool:
    """Whether the writer of a lease or presence record is gone.

    On this host (same boot) a record is dead exactly when its process is: gone, a zombie, or
    a new process reusing the pid. Elsewhere only expiry tells.
    """
    if record.get("exited"):
        return True
    if record.get("host") == _HOST and record.get("boot") == _BOOT and record.get("pid"):
        start = _proc_start(int(record["pid"]))
        return start is None or (bool(start) and bool(record.get("pid_start")) and start != record["pid_start"])
    return (time.time() if now is None else now) > float(record.get("expires_at", 0.0))


# --- records -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LeaseRecord:
    """One epoch of the lease.

    Attributes:
        epoch: Its number; the newest epoch is the lease's state.
        state: `held` or `free`.
        holder: Writer id of the holder.
        token: Random per acquisition; fencing compares it.
        base_version: The lake version the holder's write is based on.
        host, boot, pid, pid_start: Where the holder runs (for the liveness check).
        acquired_at, expires_at: Unix seconds.
    """

    epoch: int
    state: str
    holder: str
    token: str
    base_version: int
    host: str = ""
    boot: str = ""
    pid: int = 0
    pid_start: str = ""
    acquired_at: float = 0.0
    expires_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LeaseRecord:
        return cls(
            epoch=int(d["epoch"]),
            state=str(d.get("state", "held")),
            holder=str(d.get("holder", "")),
            token=str(d.get("token", "")),
            base_version=int(d.get("base_version", 0)),
            host=str(d.get("host", "")),
            boot=str(d.get("boot", "")),
            pid=int(d.get("pid", 0)),
            pid_start=str(d.get("pid_start", "")),
            acquired_at=float(d.get("acquired_at", 0.0)),
            expires_at=float(d.get("expires_at", 0.0)),
            extra=dict(d.get("extra", {})),
        )

    def describe(self) -> str:
        return f"writer {self.holder} (pid {self.pid} on {self.host})"


def _epoch_uri(lake_uri: str, epoch: int) -> str:
    return meta_uri(lake_uri, LEASE_DIR, f"{epoch:010d}.json")


def lease_records(lake_uri: str, storage_options: dict[str, str] | None = None) -> list[LeaseRecord]:
    """Every lease epoch record still stored, oldest first."""
    out = []
    for name in _list(meta_uri(lake_uri, LEASE_DIR), storage_options):
        if name[:-5].isdigit():
            d = _read(meta_uri(lake_uri, LEASE_DIR, name), storage_options)
            if d is not None:
                out.append(LeaseRecord.from_json(d))
    return out


def _newest(lake_uri: str, storage_options: dict[str, str] | None) -> tuple[int, LeaseRecord | None]:
    """(newest epoch number, its record); the record is None if it is not valid JSON (treated as free)."""
    names = [n for n in _list(meta_uri(lake_uri, LEASE_DIR), storage_options) if n[:-5].isdigit()]
    if not names:
        return 0, None
    epoch = int(names[-1][:-5])
    d = _read(_epoch_uri(lake_uri, epoch), storage_options)
    return epoch, None if d is None else LeaseRecord.from_json(d)


def presence_records(lake_uri: str, storage_options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The presence records of writers that have not exited cleanly (live or dead)."""
    d = meta_uri(lake_uri, WRITERS_DIR)
    return [
        r
        for n in _list(d, storage_options)
        if (r := _read(meta_uri(lake_uri, WRITERS_DIR, n), storage_options)) is not None
    ]


# --- the lease and the writer -------------------------------------------------------------------


class Lease:
    """The write lease as held by one `Writer` (from `Writer.acquire`)."""

    def __init__(self, writer: Writer, record: LeaseRecord, previous: LeaseRecord | None):
        self._writer = writer
        self._record = record
        self._lock = threading.Lock()
        self._lost: str | None = None
        self._released = False
        self.previous = previous  # the epoch this lease followed: free, expired or a dead holder's

    @property
    def record(self) -> LeaseRecord:
        return self._record

    @property
    def epoch(self) -> int:
        return self._record.epoch

    @property
    def base_version(self) -> int:
        return self._record.base_version

    @property
    def held(self) -> bool:
        return not self._released and self._lost is None

    def set_base(self, version: int) -> None:
        """Record the lake version this write is based on (read after the lease was taken)."""
        with self._lock:
            self._record = replace(self._record, base_version=version)
            self._write()

    def _write(self) -> None:
        write_bytes_atomic(
            _epoch_uri(self._writer.lake_uri, self.epoch), self._record.to_bytes(), self._writer.storage_options
        )

    def renew(self) -> None:
        """Extend the expiry if this is still the newest epoch; otherwise mark the lease lost."""
        with self._lock:
            if self._released or self._lost:
                return
            epoch, rec = _newest(self._writer.lake_uri, self._writer.storage_options)
            if epoch != self.epoch or rec is None or rec.token != self._record.token:
                holder = rec.describe() if rec is not None else "another writer"
                self._lost = f"the write lease (epoch {self.epoch}) was taken over by {holder} at epoch {epoch}"
                return
            if "://" in self._writer.lake_uri and time.time() > self._record.expires_at:
                # On a shared store another host may be taking it over right now; locally nobody
                # takes over a live process, so a late renewal (a stalled heartbeat) is harmless.
                self._lost = f"the write lease (epoch {self.epoch}) expired before it could be renewed"
                return
            self._record = replace(self._record, expires_at=time.time() + self._writer.config.ttl_s)
            self._write()

    def check(self, head: int | None = None) -> None:
        """Fence: raise unless this writer still holds the lease and the head is still its base.

        Args:
            head: The lake's published head now, if the caller read it.

        Raises:
            LeaseLostError: the lease is no longer this writer's, or the head moved.
        """
        if self._released:
            raise LeaseLostError("this writer already released the write lease")
        self.renew()
        if self._lost:
            raise LeaseLostError(self._lost)
        if head is not None and head != self._record.base_version:
            raise LeaseLostError(
                f"lake version {head} was published while this writer held the lease on version "
                f"{self._record.base_version}"
            )

    def release(self) -> None:
        """Mark the lease free (only if it is still this writer's)."""
        with self._lock:
            if self._released:
                return
            self._released = True
            epoch, rec = _newest(self._writer.lake_uri, self._writer.storage_options)
            if epoch == self.epoch and rec is not None and rec.token == self._record.token:
                self._record = replace(self._record, state="free", expires_at=time.time())
                self._write()
        self._writer._lease_ended(self)
        faults.hook("lease_released")


class Writer:
    """One writing process's standing on a lake: its presence record, heartbeat and lease.

    Create one before any data file of this write exists (so a lease holder never mistakes
    them for a dead writer's), `acquire` the lease around the commits, `close` when done.
    """

    def __init__(self, lake_uri: str, storage_options: dict[str, str] | None = None, config: LeaseConfig | None = None):
        self.lake_uri = lake_uri
        self.storage_options = storage_options
        self.config = config or LeaseConfig.from_env()
        self.id = f"{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.started_at = time.time()
        self._lease: Lease | None = None
        self._stop = threading.Event()
        self._presence_uri = meta_uri(lake_uri, WRITERS_DIR, f"{self.id}.json")
        self._write_presence()
        self._thread = threading.Thread(target=self._heartbeat, name=f"robolake-lease-{self.id}", daemon=True)
        self._thread.start()

    def _write_presence(self) -> None:
        rec = {
            "writer": self.id,
            **identity(),
            "started_at": self.started_at,
            "expires_at": time.time() + self.config.ttl_s,
        }
        write_bytes_atomic(self._presence_uri, json.dumps(rec, sort_keys=True).encode(), self.storage_options)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.config.ttl_s / 3):
            try:
                self._write_presence()
                if self._lease is not None:
                    self._lease.renew()
            except Exception as e:  # a failed renewal is caught by the next fence check
                log.warning("lake %s: lease heartbeat failed: %s", self.lake_uri, e)

    @property
    def lease(self) -> Lease | None:
        return self._lease

    def acquire(self, base_version: int) -> Lease:
        """Take the lake's write lease, waiting up to `config.wait_s` for a live holder.

        Raises:
            LeaseLostError: another live writer held it for the whole wait.
        """
        if self._lease is not None and self._lease.held:
            return self._lease
        deadline = time.monotonic() + self.config.wait_s
        announced = False
        while True:
            epoch, rec = _newest(self.lake_uri, self.storage_options)
            if rec is None or rec.state == "free" or is_dead(asdict(rec)):
                now = time.time()
                mine = LeaseRecord(
                    epoch=epoch + 1,
                    state="held",
                    holder=self.id,
                    token=uuid.uuid4().hex,
                    base_version=base_version,
                    acquired_at=now,
                    expires_at=now + self.config.ttl_s,
                    **identity(),
                )
                try:
                    put_if_absent(_epoch_uri(self.lake_uri, mine.epoch), mine.to_bytes(), self.storage_options)
                except FileExistsError:
                    continue  # another writer took epoch+1 first; look again
                if rec is not None and rec.state == "held":
                    log.warning(
                        "lake %s: took over the write lease from %s, which is gone", self.lake_uri, rec.describe()
                    )
                self._lease = Lease(self, mine, rec)
                faults.hook("lease_acquired")
                return self._lease
            if time.monotonic() > deadline:
                raise LeaseLostError(
                    f"{rec.describe()} has held the write lease for {time.time() - rec.acquired_at:.0f}s"
                )
            if not announced:
                log.info("lake %s: waiting for %s to finish its write", self.lake_uri, rec.describe())
                announced = True
                faults.hook("lease_wait")
            time.sleep(self.config.poll_s)

    def _lease_ended(self, lease: Lease) -> None:
        if self._lease is lease:
            self._lease = None

    def close(self, *, clean: bool = True) -> None:
        """Release the lease if held, stop the heartbeat and remove the presence record.

        Args:
            clean: False when this writer may have left data files it cannot name (interrupted
                while its workers wrote): the presence record then stays, marked exited, so the
                next lease holder sweeps them as a dead writer's.
        """
        if self._lease is not None:
            self._lease.release()
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if clean:
            _delete(self._presence_uri, self.storage_options)
        else:
            rec = {"writer": self.id, **identity(), "started_at": self.started_at, "expires_at": 0.0, "exited": True}
            write_bytes_atomic(self._presence_uri, json.dumps(rec, sort_keys=True).encode(), self.storage_options)

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- cleanup of dead writers (lease holder only) --------------------------------------------

    def dead_writers(self) -> tuple[list[dict[str, Any]], bool]:
        """(presence records of dead writers, whether any other writer is alive)."""
        dead, others_alive = [], False
        for r in presence_records(self.lake_uri, self.storage_options):
            if r.get("writer") == self.id:
                continue
            if is_dead(r):
                dead.append(r)
            else:
                others_alive = True
        return dead, others_alive

    def forget(self, records: list[dict[str, Any]]) -> None:
        """Remove dead writers' presence records and lease epochs older than the held one."""
        for r in records:
            try:
                path = meta_uri(self.lake_uri, WRITERS_DIR, f"{r.get('writer')}.json")
            except OutsideRootError:  # a record naming a writer that is no name: not ours to delete by
                log.warning("presence record of writer %r names no file of this lake; left in place", r.get("writer"))
                continue
            _delete(path, self.storage_options)
        if self._lease is not None and self._lease.held:
            for rec in lease_records(self.lake_uri, self.storage_options):
                if rec.epoch < self._lease.epoch - 1:
                    _delete(_epoch_uri(self.lake_uri, rec.epoch), self.storage_options)
