"""Curation verbs under faults: kill -9 at each phase of delete / select / restore / optimize, and
each verb interleaved with an ingest. After each, every published version checks out row for row
(`check_lake`), the lake is at the version before the verb or the one after it, and the next
writer rolls back whatever the dead one left."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robolake import curate
from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.protocol import faults
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic
from tests.integration.test_writer_faults import assert_no_leftovers, assert_sound

REPO = Path(__file__).resolve().parents[2]

VERBS = {
    "delete": "curate.delete(uri, where=\"embodiment = 'single_arm_7dof'\", reason='bad rig')",
    "select": "curate.select(uri, 'num_steps >= 14', reason='long ones')",
    "restore": "curate.restore_episodes(uri, sys.argv[2].split(','))",
    "optimize": "curate.optimize(uri)",
}
PHASES = [
    "lease_acquired",
    "after_commit:episodes",
    "after_commit:steps",
    "after_commit:embodiments",
    "before_publish",
    "manifest_written",
]
DEFAULT = [
    ("delete", "after_commit:steps"),
    ("select", "before_publish"),
    ("restore", "after_commit:episodes"),
    ("optimize", "after_commit:media"),
]


def _script(verb: str) -> str:
    return f"import sys\nfrom robolake import curate\nuri = sys.argv[1]\n{VERBS[verb]}\n"


@pytest.fixture(scope="module")
def source(tmp_path_factory, ray_session) -> Path:
    root = tmp_path_factory.mktemp("curate_faults")
    generate_synthetic(
        root / "a",
        SyntheticConfig.tiny(
            embodiments=("single_arm_7dof", "bimanual_14dof"), seed=3, min_length=12, max_length=16, image_size=16
        ),
    )
    generate_synthetic(
        root / "b",
        SyntheticConfig.tiny(embodiments=("single_arm_7dof",), seed=4, min_length=12, max_length=16, image_size=16),
    )
    return root


def _lake(source: Path, tmp_path: Path, verb: str) -> tuple[str, list[str]]:
    uri = str(tmp_path / "lake")
    ingest(str(source / "a"), uri)
    gone: list[str] = []
    if verb == "restore":
        gone = Lake.open(uri).episode_ids()[:2]
        curate.delete(uri, episodes=gone, reason="to restore")
    if verb == "optimize":
        ingest(str(source / "b"), uri)  # a second fragment per table
    return uri, gone


def _run(verb: str, uri: str, gone: list[str], fault: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), faults.ENV_VAR: fault}
    return subprocess.Popen(
        [sys.executable, "-c", _script(verb), uri, ",".join(gone)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _kill_case(verb: str, phase: str, source: Path, tmp_path: Path) -> None:
    uri, gone = _lake(source, tmp_path, verb)
    before = Lake.open(uri)
    proc = _run(verb, uri, gone, f"{phase}:kill")
    proc.wait(timeout=300)
    assert proc.returncode == -9, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    lake = assert_sound(uri)
    assert lake.version in (before.version, before.version + 1)
    if lake.version == before.version:  # killed before publishing: the next writer applies the verb cleanly
        proc = _run(verb, uri, gone, "")
        proc.wait(timeout=300)
        assert proc.returncode == 0, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        lake = assert_sound(uri)
        assert lake.version == before.version + 1
    assert lake.version_info.operation in ("delete", "select", "restore_episodes", "optimize")
    assert_no_leftovers(uri)


@pytest.mark.parametrize("verb, phase", DEFAULT)
def test_kill_9_during_a_verb(verb: str, phase: str, source: Path, tmp_path: Path):
    _kill_case(verb, phase, source, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_kill_9_at_every_phase_of_every_verb(verb: str, phase: str, source: Path, tmp_path: Path):
    if verb == "optimize" and phase == "after_commit:embodiments":
        pytest.skip("optimize does not rewrite the embodiments table")
    _kill_case(verb, phase, source, tmp_path)


@pytest.mark.parametrize("verb", ["delete", "select"])
def test_a_verb_paused_before_publishing_and_an_ingest_never_mix(verb: str, source: Path, tmp_path: Path):
    uri, gone = _lake(source, tmp_path, verb)
    base = Lake.open(uri)
    pause = tmp_path / "pause"
    pause.mkdir()
    proc = _run(verb, uri, gone, f"before_publish:pause={pause}")
    deadline = time.time() + 120
    while not (pause / "before_publish.reached").exists():
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.05)
    # An ingest meanwhile: it waits for the verb's lease, then finds the head moved and re-bases.
    (pause / "before_publish.go").touch()
    ingest(str(source / "b"), uri)
    proc.wait(timeout=300)
    assert proc.returncode == 0, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    lake = assert_sound(uri)
    assert lake.version == base.version + 2
    ops = [v.operation for v in lake.versions()[-2:]]
    assert sorted(ops) == sorted([verb, "ingest"])
    b_hashes = _hashes_of(source / "b", tmp_path)
    assert b_hashes <= lake.content_hashes()  # every ingested episode landed


def _hashes_of(src: Path, tmp_path: Path) -> set[str]:
    uri = str(tmp_path / "ref")
    ingest(str(src), uri)
    return Lake.open(uri).content_hashes()
