"""The writer protocol under faults: kill -9 at every phase of an ingest, two and three writers
interleaved at pairs of phases, and (opt-in, -m slow) a soak of concurrent writers with random kills.

After each: the lake opens at a published version, every published version's tables agree row
for row with its manifest (`check_lake`: no foreign rows, exact per-episode counts), re-running
lands each episode exactly once, and no file of a dead or losing writer is left behind.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lance
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.protocol import faults
from robolake.lake.protocol.lease import lease_records
from robolake.lake.protocol.versions import list_versions
from robolake.lake.upkeep.check import check_lake
from robolake.schemas.tables import TABLES
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

REPO = Path(__file__).resolve().parents[2]

PHASES = list(faults.INGEST_PHASES)  # every phase a plain ingest of new episodes passes, in order
# Pairs of phases for interleaving: one before the lease, the lease itself, commits, publishing.
PAIR_PHASES = ["fragments_written", "lease_acquired", "after_commit:steps", "after_index:media", "before_publish"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """Three small sources of the same robot with different content (2 episodes each)."""
    root = tmp_path_factory.mktemp("writer_src")
    out = {}
    for i, name in enumerate("ABC"):
        generate_synthetic(
            root / name,
            SyntheticConfig.tiny(
                embodiments=("single_arm_7dof",), seed=100 + i, min_length=12, max_length=16, image_size=16
            ),
        )
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def expected(sources, tmp_path_factory, ray_session) -> dict[str, set[str]]:
    """Content hashes each source lands (from one clean ingest per source)."""
    out = {}
    for name, src in sources.items():
        uri = str(tmp_path_factory.mktemp("ref") / "lake")
        ingest(str(src), uri)
        out[name] = Lake.open(uri).content_hashes()
        assert len(out[name]) == 2
    return out


def assert_sound(uri: str) -> Lake:
    """Every published version checks out; no leftovers of writers that are gone."""
    lake = Lake.open(uri)
    for v in list_versions(uri):
        report = check_lake(uri, v)
        assert report.ok, [str(p) for p in report.problems]
    return lake


def assert_no_leftovers(uri: str) -> None:
    for table in TABLES:
        ds = lance.dataset(f"{uri}/{table}.lance")
        tracked = set(ds.tracked_files().read_all().column("path").to_pylist())
        orphans = [
            p
            for p in ds.all_files().read_all().column("path").to_pylist()
            if p.startswith("data/") and p not in tracked
        ]
        assert not orphans, f"{table}: {len(orphans)} data files no version references"
    assert not list(Path(uri, "_robolake", "writers").glob("*.json")), "a writer's presence record was left"
    recs = lease_records(uri)
    assert not recs or recs[-1].state == "free"


def _hashes(uri: str) -> list[str]:
    return Lake.open(uri).episodes(columns=["content_hash"])["content_hash"].to_pylist()


# --- kill -9 at every phase ---------------------------------------------------------------------

KILL_SCRIPT = """
import sys
from robolake.lake.intake.ingest import ingest, IngestConfig
ingest(sys.argv[1], sys.argv[2], IngestConfig(num_cpus=1, episodes_per_task=1))
"""


def _kill_at(phase: str, src: Path, uri: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), faults.ENV_VAR: f"{phase}:kill"}
    return subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(src), uri], env=env, capture_output=True, timeout=300)


# The default run kills at one phase of each kind (before the lease, mid-commit, before the
# manifest); `-m slow` kills at every phase.
KILL_DEFAULT = ["fragments_written", "after_commit:steps", "before_publish"]


def test_kill_9_at_some_phases(sources, expected, tmp_path, ray_session):
    _kill_and_resume(KILL_DEFAULT, sources, expected, tmp_path)


@pytest.mark.slow
def test_kill_9_at_every_phase(sources, expected, tmp_path, ray_session):
    _kill_and_resume(PHASES, sources, expected, tmp_path)


def _kill_and_resume(
    phases: list[str], sources: dict[str, Path], expected: dict[str, set[str]], tmp_path: Path
) -> None:
    """One killed ingest per phase (three at a time), each then checked and resumed."""
    uris = {}
    for phase in phases:
        uri = str(tmp_path / phase.replace(":", "_"))
        Lake.create(uri)
        uris[phase] = uri
    with ThreadPoolExecutor(3) as pool:
        procs = dict(zip(phases, pool.map(lambda p: _kill_at(p, sources["A"], uris[p]), phases), strict=True))
    for phase, proc in procs.items():
        uri = uris[phase]
        assert proc.returncode == -signal.SIGKILL, f"{phase}: rc {proc.returncode}: {proc.stderr.decode()[-1500:]}"
        lake = assert_sound(uri)
        published = phase in ("manifest_written", "lease_released")
        assert lake.version == (2 if published else 1), phase
        assert set(_hashes(uri)) == (expected["A"] if published else set()), phase
        # A second writer on the same lake meanwhile is not disturbed by the dead one.
        ingest(str(sources["B"]), uri)
        result = ingest(str(sources["A"]), uri)
        assert result.ingested == (0 if published else 2), phase
        hashes = _hashes(uri)
        assert sorted(hashes) == sorted(expected["A"] | expected["B"]), phase  # each exactly once
        assert_sound(uri)
        assert_no_leftovers(uri)


@pytest.mark.parametrize(
    "phases",
    [
        ["fragments_written", "after_commit:steps", "after_index:media", "manifest_written"],
        pytest.param(PHASES, marks=pytest.mark.slow),
    ],
    ids=["some", "every"],
)
def test_interrupt_at_phases_cleans_up_itself(phases, sources, expected, tmp_path, ray_session, monkeypatch):
    """Ctrl-C at each phase: the writer removes its own files and lease on the way out (at
    manifest_written the version is published, so its files must stay)."""
    for phase in phases:
        uri = str(tmp_path / phase.replace(":", "_"))
        Lake.create(uri)
        monkeypatch.setenv(faults.ENV_VAR, f"{phase}:interrupt")
        with pytest.raises(KeyboardInterrupt):
            ingest(str(sources["A"]), uri)
        monkeypatch.delenv(faults.ENV_VAR)
        published = phase in ("manifest_written", "lease_released")
        assert Lake.open(uri).version == (2 if published else 1), phase
        assert_sound(uri)
        assert_no_leftovers(uri)  # by the interrupted writer itself: nobody else wrote since
        ingest(str(sources["A"]), uri)
        assert sorted(_hashes(uri)) == sorted(expected["A"]), phase


# --- interleaved writers ------------------------------------------------------------------------


class _Gates:
    """Pause named writer threads at chosen phases (each gate once)."""

    def __init__(self, plan: dict[str, str], free: tuple[str, ...] = ()):
        self.plan = plan  # thread name -> phase
        self.reached = {n: threading.Event() for n in plan}
        self.waiting = {n: threading.Event() for n in [*plan, *free]}
        self.go = {n: threading.Event() for n in plan}
        self.used: set[str] = set()

    def __call__(self, phase: str) -> None:
        name = threading.current_thread().name
        if phase == "lease_wait" and name in self.waiting:
            self.waiting[name].set()
        if self.plan.get(name) == phase and name not in self.used:
            self.used.add(name)
            self.reached[name].set()
            assert self.go[name].wait(120), f"{name} was never released from {phase}"


def _interleave(sources: dict[str, Path], uri: str, plan: dict[str, str], free: list[str]) -> dict[str, object]:
    """Writers in `plan` order each pause at their phase; later ones start while earlier ones
    are paused; `free` writers run straight through while all are paused. Then release in order."""
    gates = _Gates(plan, tuple(free))
    results: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            results[name] = ingest(str(sources[name]), uri)
        except BaseException as e:  # reported by the assertions below
            results[name] = e

    threads = []
    with faults.installed("*", gates):
        for name in [*plan, *free]:
            t = threading.Thread(target=run, args=(name,), name=name)
            threads.append(t)
            t.start()
            # Wait until this writer is paused, blocked by a lease, or done, before the next one.
            while not (
                gates.reached.get(name, threading.Event()).is_set()
                or gates.waiting.get(name, threading.Event()).is_set()
                or not t.is_alive()
            ):
                t.join(0.05)
        # Release in order: each runs until it is done or waits for a lease a later one holds.
        for name, t in zip([*plan, *free], threads, strict=True):
            if name in gates.go:
                gates.waiting[name].clear()
                gates.go[name].set()
            while t.is_alive() and not gates.waiting[name].is_set():
                t.join(0.05)
        for name, t in zip([*plan, *free], threads, strict=True):
            t.join(180)
            assert not t.is_alive(), f"writer {name} hung"
    assert sorted(results) == sorted([*plan, *free])
    return results


def _assert_interleaving(
    uri: str, results: dict[str, object], expected: dict[str, set[str]], sources: dict[str, Path]
) -> None:
    for name, res in results.items():
        assert not isinstance(res, BaseException), f"writer {name} failed: {res!r}"
    want = set().union(*(expected[n] for n in results))
    hashes = _hashes(uri)
    assert sorted(hashes) == sorted(want)  # everything landed, each once
    assert len(list_versions(uri)) == 1 + len(results)  # one version per writer
    assert_sound(uri)  # every version: no foreign rows, exact counts
    assert_no_leftovers(uri)
    for name in results:
        assert ingest(str(sources[name]), uri).ingested == 0


@pytest.mark.parametrize("first", PAIR_PHASES)
def test_two_writers_first_paused_at_each_phase(first, sources, expected, tmp_path, ray_session):
    uri = str(tmp_path / "lake")
    Lake.create(uri)
    results = _interleave(sources, uri, {"A": first}, free=["B"])
    _assert_interleaving(uri, results, expected, sources)


@pytest.mark.parametrize(
    "pair",
    [
        ("lease_acquired", "fragments_written"),
        ("before_publish", "after_commit:steps"),
        ("fragments_written", "before_publish"),
    ],
)
def test_three_writers(pair, sources, expected, tmp_path, ray_session):
    uri = str(tmp_path / "lake")
    Lake.create(uri)
    results = _interleave(sources, uri, {"A": pair[0], "B": pair[1]}, free=["C"])
    _assert_interleaving(uri, results, expected, sources)


def test_same_data_twice_at_once_lands_once(sources, expected, tmp_path, ray_session):
    """Two writers ingest the same source: the second re-checks hashes on the new head."""
    uri = str(tmp_path / "lake")
    Lake.create(uri)
    both = {"A": sources["A"], "A2": sources["A"]}
    gates = _Gates({"A": "fragments_written", "A2": "fragments_written"})
    out: dict[str, object] = {}
    with faults.installed("*", gates):
        ts = [threading.Thread(target=lambda n=n: out.__setitem__(n, ingest(str(both[n]), uri)), name=n) for n in both]
        for t, n in zip(ts, both, strict=True):
            t.start()
            assert gates.reached[n].wait(120)
        for n in both:
            gates.go[n].set()
        for t in ts:
            t.join(180)
    assert sorted(_hashes(uri)) == sorted(expected["A"])
    assert sorted(r.ingested for r in out.values()) == [0, 2]  # type: ignore[attr-defined]
    assert_sound(uri)
    assert_no_leftovers(uri)


@pytest.mark.slow
@pytest.mark.parametrize("pair", list(itertools.product(PAIR_PHASES, PAIR_PHASES)))
def test_two_writers_every_pair(pair, sources, expected, tmp_path, ray_session):
    uri = str(tmp_path / "lake")
    Lake.create(uri)
    results = _interleave(sources, uri, {"A": pair[0], "B": pair[1]}, free=[])
    _assert_interleaving(uri, results, expected, sources)


# --- soak --------------------------------------------------------------------------------------

SOAK_SCRIPT = """
import random, sys
from robolake.lake.intake.ingest import ingest, IngestConfig
ingest(sys.argv[1], sys.argv[2], IngestConfig(num_cpus=1, episodes_per_task=1))
"""


@pytest.mark.slow
def test_soak_three_writers_twenty_rounds_random_kills(tmp_path, ray_session):
    """3 concurrent writer processes x 20 rounds, a random third of them SIGKILLed at a random phase."""
    rng = random.Random(7)
    src = tmp_path / "src"
    names = []
    for i in range(6):
        generate_synthetic(
            src / f"s{i}",
            SyntheticConfig.tiny(
                embodiments=("single_arm_7dof",), seed=200 + i, min_length=10, max_length=12, image_size=16
            ),
        )
        names.append(src / f"s{i}")
    uri = str(tmp_path / "lake")
    Lake.create(uri)
    kills = 0
    for _round in range(20):
        procs = []
        for _w in range(3):
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            if rng.random() < 1 / 3:
                env[faults.ENV_VAR] = f"{rng.choice(PHASES)}:kill"
                kills += 1
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", SOAK_SCRIPT, str(rng.choice(names)), uri],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
        for p in procs:
            _, err = p.communicate(timeout=600)
            assert p.returncode in (0, -signal.SIGKILL), err.decode()[-1500:]
        assert_sound(uri)
    for n in names:
        ingest(str(n), uri)
    hashes = _hashes(uri)
    assert len(hashes) == len(set(hashes)) == 12
    assert_sound(uri)
    # Dead writers' files go with the next lease holder; an ingest with nothing new takes no
    # lease, so gc (a lease holder) is that writer here.
    import datetime as dt

    from robolake.lake.upkeep.gc import gc

    gc(uri, dt.timedelta(days=7))
    assert_sound(uri)
    assert_no_leftovers(uri)
    shutil.rmtree(src)
    assert kills > 0


def test_cli_ctrl_c_says_where_the_lake_is(sources, tmp_path, ray_session, monkeypatch, capsys):
    from robolake.cli import main

    uri = str(tmp_path / "lake")
    ingest(str(sources["B"]), uri)
    monkeypatch.setenv(faults.ENV_VAR, "after_commit:steps:interrupt")
    assert main(["ingest", str(sources["A"]), uri, "--no-progress"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "robolake ingest: interrupted; the lake is still at version 2; re-run to resume"
    monkeypatch.delenv(faults.ENV_VAR)
    assert_sound(uri)
    assert_no_leftovers(uri)


def test_cli_lost_race_is_one_line(sources, tmp_path, ray_session, monkeypatch, capsys):
    """A writer that cannot get the lease (held by a live writer) gives up with one line."""
    from robolake.cli import main
    from robolake.lake.protocol.lease import Writer

    uri = str(tmp_path / "lake")
    Lake.create(uri)
    monkeypatch.setenv("ROBOLAKE_LEASE_WAIT", "0.3")
    with Writer(uri) as holder:
        holder.acquire(1)
        assert main(["ingest", str(sources["A"]), uri, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in err if line.startswith("robolake ingest:")]) == 1
    assert "has held the write lease" in err[-1] and "re-run" in err[-1] and "Traceback" not in "\n".join(err)
    monkeypatch.delenv("ROBOLAKE_LEASE_WAIT")
    assert ingest(str(sources["A"]), uri).ingested == 2
    assert_no_leftovers(uri)
