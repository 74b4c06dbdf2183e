"""The write lease: put-if-absent, takeover of dead and expired holders, heartbeat, fencing,
and the interleaving the lease exists for (writer A passes its checks, B tries to append, A appends)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import replace

import lance
import pyarrow as pa
import pytest

from robolake.lake import CommitConflictError, Lake
from robolake.lake.protocol import faults
from robolake.lake.protocol.lease import (
    LeaseConfig,
    LeaseLostError,
    LeaseRecord,
    Writer,
    lease_records,
    put_if_absent,
)
from robolake.lake.protocol.versions import list_versions
from robolake.schemas import schema_for_table


def _rows(n: int, tag: str) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "source_uri": tag,
                "source_path": f"{tag}/{i}",
                "source_format": "test",
                "source_episode_index": i,
                "reason_code": "test",
                "reason": "made by a test",
                "quarantined_at": 0,
            }
            for i in range(n)
        ],
        schema=schema_for_table("quarantine"),
    )


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _plant(lake_uri: str, epoch: int, **fields: object) -> None:
    base = {
        "epoch": epoch,
        "state": "held",
        "holder": "someone",
        "token": "t",
        "base_version": 1,
        "expires_at": time.time() + 3600,
    }
    put_if_absent(f"{lake_uri}/_robolake/lease/{epoch:010d}.json", json.dumps({**base, **fields}).encode())


FAST = LeaseConfig(ttl_s=0.6, wait_s=0.5, poll_s=0.02)


def test_put_if_absent_is_exclusive(tmp_path):
    put_if_absent(str(tmp_path / "a" / "x.json"), b"1")
    with pytest.raises(FileExistsError):
        put_if_absent(str(tmp_path / "a" / "x.json"), b"2")
    assert (tmp_path / "a" / "x.json").read_bytes() == b"1"
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["x.json"]  # no temporary left


def test_live_holder_blocks_then_frees(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    with Writer(lake.uri, config=FAST) as a, Writer(lake.uri, config=FAST) as b:
        lease = a.acquire(1)
        with pytest.raises(LeaseLostError, match=f"writer {a.id}"):
            b.acquire(1)
        lease.release()
        assert b.acquire(1).epoch == lease.epoch + 1
    assert lease_records(lake.uri)[-1].state == "free"


def test_dead_holder_on_this_host_is_taken_over_at_once(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    import socket

    from robolake.lake.protocol.lease import _BOOT

    _plant(lake.uri, 1, host=socket.gethostname(), boot=_BOOT, pid=_dead_pid())
    with Writer(lake.uri, config=FAST) as w:
        lease = w.acquire(1)
        assert lease.epoch == 2 and lease.previous is not None and lease.previous.holder == "someone"


def test_other_host_holder_counts_until_it_expires(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    _plant(lake.uri, 1, host="elsewhere", pid=1, expires_at=time.time() + 3600)
    with Writer(lake.uri, config=FAST) as w:
        with pytest.raises(LeaseLostError, match="elsewhere"):
            w.acquire(1)
    _plant(lake.uri, 2, host="elsewhere", pid=1, expires_at=time.time() - 1)
    with Writer(lake.uri, config=FAST) as w:
        assert w.acquire(1).epoch == 3


def test_heartbeat_renews(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    with Writer(lake.uri, config=LeaseConfig(ttl_s=0.6, poll_s=0.02)) as w:
        lease = w.acquire(1)
        first = lease_records(lake.uri)[-1].expires_at
        time.sleep(1.0)
        later = lease_records(lake.uri)[-1].expires_at
        assert later > first + 0.2
        lease.check()  # still ours, renewed


def test_fencing_a_taken_over_writer_publishes_nothing(tmp_path):
    lake = Lake.create(str(tmp_path / "lake"))
    tx = lake.begin()
    tx.append_table("quarantine", _rows(2, "stale"))
    # Another host took the lease over (as if this writer had stalled past its expiry).
    top = lease_records(lake.uri)[-1]
    _plant(lake.uri, top.epoch + 1, holder="usurper", host="elsewhere", pid=1)
    with pytest.raises(CommitConflictError, match="taken over by writer usurper"):
        tx.append_table("quarantine", _rows(1, "stale2"))
    tx.abort()
    assert list_versions(lake.uri) == [1]
    # It did not roll back, delete or release anything that is no longer its own.
    assert lease_records(lake.uri)[-1].holder == "usurper"


def test_the_issue_interleaving_never_mixes_rows(tmp_path):
    """A passes its checks and stalls before its commit; B tries to write; A commits and publishes.
    B waits for the lease, sees the head moved, and its retry (on the new head) publishes only B."""
    lake = Lake.create(str(tmp_path / "lake"))
    a_paused, a_go, b_waiting = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def pause_a(phase: str) -> None:
        if threading.current_thread().name == "A":
            a_paused.set()
            assert a_go.wait(30)

    def b_waits(phase: str) -> None:
        if threading.current_thread().name == "B":
            b_waiting.set()

    def writer_a() -> None:
        try:
            tx = lake.begin()
            tx.append_table("quarantine", _rows(10, "A"))
            tx.commit("A")
        except BaseException as e:
            errors.append(e)

    b_result: list[str] = []

    def writer_b() -> None:
        base = lake
        for _attempt in range(3):
            try:
                with base.begin() as tx:
                    tx.append_table("quarantine", _rows(7, "B"))
                    tx.commit("B")
                b_result.append("published")
                return
            except CommitConflictError as e:
                b_result.append(str(e))
                base = base.refresh()

    with faults.installed("before_commit:quarantine", pause_a), faults.installed("lease_wait", b_waits):
        ta = threading.Thread(target=writer_a, name="A")
        ta.start()
        assert a_paused.wait(30)
        tb = threading.Thread(target=writer_b, name="B")
        tb.start()
        assert b_waiting.wait(30)  # B is held off by A's lease: it cannot append under A
        a_go.set()
        ta.join(30)
        tb.join(30)
    assert not errors
    assert b_result[-1] == "published" and "was published after this writer read version 1" in b_result[0]
    v2, v3 = Lake.open(lake.uri, version=2), Lake.open(lake.uri, version=3)
    assert v2.to_arrow("quarantine")["source_uri"].to_pylist() == ["A"] * 10
    assert sorted(v3.to_arrow("quarantine")["source_uri"].to_pylist()) == ["A"] * 10 + ["B"] * 7
    assert lance.dataset(v3.table_uri("quarantine")).count_rows() == 17


def test_fault_env_actions(monkeypatch):
    monkeypatch.setenv(faults.ENV_VAR, "after_commit:steps:error,after_index:*:interrupt")
    faults.hook("after_commit:media")  # not armed
    with pytest.raises(RuntimeError, match="fault injected at after_commit:steps"):
        faults.hook("after_commit:steps")
    with pytest.raises(KeyboardInterrupt):
        faults.hook("after_index:media")
    monkeypatch.setenv(faults.ENV_VAR, "before_publish:explode")
    with pytest.raises(ValueError, match="unknown action 'explode'"):
        faults.hook("before_publish")


def test_lease_record_round_trip():
    rec = LeaseRecord(epoch=3, state="held", holder="w", token="t", base_version=2, pid=5, host="h")
    assert LeaseRecord.from_json(json.loads(rec.to_bytes())) == rec


def test_lease_and_manifest_on_s3(s3_options):
    uri = "s3://robolake/leased"
    put_if_absent(f"{uri}/probe.json", b"1", s3_options)
    with pytest.raises(FileExistsError):
        put_if_absent(f"{uri}/probe.json", b"2", s3_options)  # a conditional PUT, not exists-then-put
    lake = Lake.create(uri, storage_options=s3_options)
    with Writer(uri, s3_options, config=FAST) as a, Writer(uri, s3_options, config=FAST) as b:
        lease = a.acquire(1)
        with pytest.raises(LeaseLostError):
            b.acquire(1)
        lease.release()
        b.acquire(1).release()
    tx = lake.begin()
    tx.append_table("quarantine", _rows(3, "s3"))
    assert tx.commit("s3").version == 2
    assert Lake.open(uri, storage_options=s3_options).count("quarantine") == 3


def test_a_renewed_record_on_s3_never_reads_as_free(s3_options, monkeypatch):
    # Regression: s3fs's open() pinned the object's ETag; the holder renewing its record before
    # the GET made the read fail a precondition, the record read as absent and the lease as free
    # (CI: a second writer took a held lease). Here every read races a renewal, at its worst moment.
    from robolake import storage
    from robolake.lake.protocol import lease as lease_mod

    uri = "s3://robolake/renewed"
    rec_uri = f"{uri}/_robolake/lease/0000000001.json"
    held = LeaseRecord(epoch=1, state="held", holder="A", token="t1", base_version=1, expires_at=time.time() + 60)
    put_if_absent(rec_uri, held.to_bytes(), s3_options)
    real_fs = storage.filesystem(uri, s3_options)
    renewals = []

    def renew() -> None:
        renewals.append(1)
        real_fs.pipe_file(rec_uri, replace(held, expires_at=held.expires_at + len(renewals)).to_bytes())

    class RenewingFs:
        def __getattr__(self, name):
            return getattr(real_fs, name)

        def open(self, path, mode="rb", **kw):
            f = real_fs.open(path, mode, **kw)
            renew()
            return f

        def cat_file(self, path, **kw):
            renew()
            return real_fs.cat_file(path, **kw)

    monkeypatch.setattr(storage, "filesystem", lambda *a, **k: RenewingFs())
    monkeypatch.setattr(lease_mod, "filesystem", lambda *a, **k: RenewingFs())
    epoch, rec = lease_mod._newest(uri, s3_options)
    assert renewals and epoch == 1 and rec is not None and rec.holder == "A" and rec.state == "held"


def test_another_process_new_version_is_seen_on_s3(s3_options):
    # Regression: fsspec caches listings per filesystem instance (forever by default), so a
    # long-lived reader listed the versions it first saw, and a writer the lease epochs it first saw.
    s3fs = pytest.importorskip("s3fs")
    from robolake.lake.protocol.versions import list_versions

    uri = "s3://robolake/listed"
    Lake.create(uri, storage_options=s3_options)
    assert list_versions(uri, s3_options) == [1]
    other = s3fs.S3FileSystem(
        key="test",
        secret="test",
        skip_instance_cache=True,
        client_kwargs={"endpoint_url": s3_options["aws_endpoint"], "region_name": "us-east-1"},
    )
    other.pipe_file(f"{uri}/_robolake/versions/00000002.json", b"{}")  # another process's next version
    assert list_versions(uri, s3_options) == [1, 2]
