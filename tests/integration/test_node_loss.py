"""A Ray node lost mid-job, a node added mid-job, and the driver killed mid-pack, on a real cluster.

Each run is its own process (`robolake.bench.scale --child-cluster`) holding a
`ray.cluster_utils.Cluster` of a head and two one-CPU workers. The node-loss run removes a worker
(SIGKILL, as a preempted machine goes) while a task of ingest's load stage, and later one of pack's
write stage, has written its fragments but not yet returned (`ray_tasks.hold_point`), and adds a
fresh node each time. Its lake and shards must equal a one-node run's, table by table; the ingest
must have published one version (nothing committed twice); `check` must pass (no partial fragment
published); the added nodes must have run tasks; and the Ray Data loader, losing a worker after its
first batch, must still deliver every sample of the epoch exactly once.

Killing the driver (`kill -9`) while pack's write tasks are in flight must leave the shards directory
with the last complete manifest (a re-pack over an earlier one) or none (a first pack).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from robolake.ray_tasks import HOLD_ENV
from tests.fixtures import child_cluster_args, child_cluster_env, run_child_cluster

pytestmark = pytest.mark.slow

STAGE = "_WriteStage"  # pack's write stage (one plan range: every lake here is tiny)


def test_node_lost_and_added_mid_ingest_and_pack(tmp_path: Path) -> None:
    src = tmp_path / "src"
    single = run_child_cluster(tmp_path / "single", 1, src)
    lossy = run_child_cluster(tmp_path / "loss", 3, src, "--lose-nodes", "--stream")
    loss = lossy["node_loss"]
    assert loss["errors"] == []
    assert loss["lost"] == 2 and loss["added"] == 2  # one in ingest's load stage, one in pack's write stage
    assert set(lossy["digest"]) == {"episodes", "steps", "media", "embodiments", "quarantine", "shards"}
    assert lossy["digest"] == single["digest"]
    assert lossy["lake_versions"] == single["lake_versions"]  # the ingest published once
    assert lossy["check_ok"] and single["check_ok"]
    assert all(n > 0 for n in loss["added_nodes_ran_tasks"]), loss  # a node added mid-job got work
    stream = lossy["stream"]
    assert stream["lost_at_batch"] == 1 and stream["batches"] > 1
    assert stream["exactly_once"], stream


def _kill_in_pack(work: Path, src: Path, *, repack: bool) -> bytes | None:
    """Start a cluster run, SIGKILL its driver while a write task of the (last) pack holds; return
    the first pack's manifest bytes (with `repack`), after removing every process the driver had."""
    import psutil

    hold = work / "_hold_test"
    hold.mkdir(parents=True)
    if not repack:
        (hold / f"hold-{STAGE}").touch()
    extra = ["--repack"] if repack else []
    proc = subprocess.Popen(
        child_cluster_args(work, 3, src, *extra),
        env=child_cluster_env(**{HOLD_ENV: str(hold)}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    manifest = work / "packed" / "manifest.json"
    first = None
    try:
        deadline = time.monotonic() + 600
        if repack:  # hold only the second pack's writes
            while not manifest.exists():
                assert proc.poll() is None and time.monotonic() < deadline, "the first pack never finished"
                time.sleep(0.05)
            first = manifest.read_bytes()
            (hold / f"hold-{STAGE}").touch()
        while not any(p.name.startswith(f"held-{STAGE}-") for p in hold.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, "no write task reached its hold point"
            time.sleep(0.05)
    finally:
        tree = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for p in tree:  # the cluster's raylets, GCS and workers: this test started them
            try:
                p.kill()
            except psutil.Error:
                pass
    return first


def test_driver_killed_during_first_pack_leaves_no_manifest(tmp_path: Path) -> None:
    _kill_in_pack(tmp_path / "run", tmp_path / "src", repack=False)
    assert not (tmp_path / "run" / "packed" / "manifest.json").exists()


def test_driver_killed_during_repack_leaves_the_last_complete_manifest(tmp_path: Path) -> None:
    from collections import Counter

    import lance

    from robolake.loaders.shards import open_shards
    from robolake.packers import read_manifest

    packed = tmp_path / "run" / "packed"
    first = _kill_in_pack(tmp_path / "run", tmp_path / "src", repack=True)
    assert first is not None
    assert (packed / "manifest.json").read_bytes() == first  # not the killed pack's, nor a torn one
    m = read_manifest(str(packed))
    shards = open_shards(str(packed))  # loadable: its shards version is still there
    assert shards.version == m.shards_version and shards.num_rows == m.num_sequences
    rows = lance.dataset(str(packed / "shards.lance"), version=m.shards_version).to_table(columns=["episode_id"])
    samples = Counter(e for r in rows.column("episode_id").to_pylist() for e in r)
    assert sum(samples.values()) == m.num_samples
