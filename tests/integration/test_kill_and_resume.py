"""Idempotent ingest: re-running, or resuming after kill -9, leaves each episode exactly once;
a kill -9 of the driver also ends every process of the local Ray session it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.protocol.transaction import LakeTransaction
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("src")
    generate_synthetic(root / "syn", SyntheticConfig.tiny(episodes_per_embodiment=3))
    return root / "syn"


def _assert_consistent(lake: Lake) -> None:
    eps = lake.episodes().to_pylist()
    ids = [e["episode_id"] for e in eps]
    assert len(ids) == len(set(ids))
    assert len({e["content_hash"] for e in eps}) == len(eps)
    assert lake.count("steps") == sum(e["num_steps"] for e in eps)
    assert lake.count("media") == sum(e["num_steps"] * len(e["cameras"]) for e in eps)


def test_crash_before_publish_then_rerun(source, tmp_path, ray_session, monkeypatch):
    lake_uri = str(tmp_path / "lake")
    Lake.create(lake_uri)

    def die(self, operation, summary=None):
        raise KeyboardInterrupt("simulated crash after the table commits, before the manifest")

    monkeypatch.setattr(LakeTransaction, "commit", die)
    with pytest.raises(KeyboardInterrupt):
        ingest(str(source), lake_uri)
    monkeypatch.undo()
    crashed = Lake.open(lake_uri)
    assert crashed.version == 1 and crashed.count("episodes") == 0 and crashed.count("steps") == 0
    result = ingest(str(source), lake_uri)
    assert result.ingested == 9
    lake = Lake.open(lake_uri)
    _assert_consistent(lake)
    assert lake.count("episodes") == 9


SCRIPT = """
import sys
from robolake.lake.intake.ingest import ingest, IngestConfig
ingest(sys.argv[1], sys.argv[2], IngestConfig(num_cpus=2, episodes_per_task=1, execution="ray"))
"""


def _wait_for_fragments(lake_uri: str, timeout: float = 90.0) -> bool:
    """Wait until a worker has written media data files (uncommitted or not)."""
    data = Path(lake_uri) / "media.lance" / "data"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if data.is_dir() and any(data.iterdir()):
            return True
        time.sleep(0.02)
    return False


def _assert_all_gone(processes: list[psutil.Process], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    alive = processes
    while time.monotonic() < end:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return
        time.sleep(0.2)
    raise AssertionError(
        f"processes of the killed driver's Ray session still run: {[' '.join(p.cmdline())[:60] for p in alive]}"
    )


@pytest.mark.parametrize("when", ["early", "after_first_fragment"])
def test_kill_9_mid_ingest_then_resume(source, tmp_path, ray_session, when):
    lake_uri = str(tmp_path / "lake")
    Lake.create(lake_uri)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(source), lake_uri],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if when == "early":
        time.sleep(1.0)
    else:
        assert _wait_for_fragments(lake_uri), "the ingest never wrote a fragment"
    # Only the driver is killed: Ray's workers and agents sit in process groups of their own, so
    # a killpg would not reach them either; ensure_ray's reaper must end them.
    session = psutil.Process(proc.pid).children(recursive=True)
    if when == "after_first_fragment":  # Ray is up: its raylet is among the driver's descendants
        assert any("raylet" in " ".join(p.cmdline()) for p in session if p.is_running())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _assert_all_gone(session)
    # Readable at its last committed version, whatever that was.
    lake = Lake.open(lake_uri)
    assert lake.version in (1, 2)
    _assert_consistent(lake)
    ingest(str(source), lake_uri)
    ingest(str(source), lake_uri)
    lake = Lake.open(lake_uri)
    _assert_consistent(lake)
    assert lake.count("episodes") == 9
