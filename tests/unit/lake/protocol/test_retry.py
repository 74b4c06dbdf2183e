"""The one commit-retry loop (`commit_with_retries`): a test per failure its essay lists, driven by
the fault hooks, and the writers that use it (rollouts, ingest) surviving a lost race."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from robolake.lake import CommitConflictError, Lake, LakeVersion
from robolake.lake.protocol import faults
from robolake.lake.protocol.retry import MAX_COMMIT_ATTEMPTS, commit_with_retries
from tests.unit.lake.protocol.test_lease import _rows


def _write(tag: str, n: int, seen: list[tuple[int, int]]):
    """An attempt that appends `n` quarantine rows of `tag` on top of the lake it is handed."""

    def attempt(lake: Lake, k: int) -> LakeVersion:
        seen.append((k, lake.version))
        with lake.begin() as tx:
            tx.append_table("quarantine", _rows(n, tag))
            return tx.commit(tag)

    return attempt


def _conflict_at(phase: str, times: int) -> tuple[list[str], faults.Callback]:
    """A hook that raises CommitConflictError (as a lost fence does) the first `times` times."""
    hits: list[str] = []

    def hook(p: str) -> None:
        hits.append(p)
        if len(hits) <= times:
            raise CommitConflictError(f"fault: lease taken over at {p}")

    return hits, hook


def test_a_lost_race_is_retried_on_the_new_head(tmp_path: Path):
    """B read version 1, waits for A's lease; A publishes; B's first attempt loses, its second
    (on the re-read lake) publishes only B's rows on top of A's."""
    lake = Lake.create(str(tmp_path / "lake"))
    a_paused, a_go, b_waiting = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []
    seen: list[tuple[int, int]] = []
    got: list[LakeVersion] = []

    def pause_a(phase: str) -> None:
        if threading.current_thread().name == "A":
            a_paused.set()
            assert a_go.wait(30)

    def b_waits(phase: str) -> None:
        if threading.current_thread().name == "B":
            b_waiting.set()

    def run(target, *args) -> None:
        try:
            target(*args)
        except BaseException as e:
            errors.append(e)

    def writer_b() -> None:
        got.append(commit_with_retries(lake, _write("B", 7, seen), what="B's rows"))

    with faults.installed("before_commit:quarantine", pause_a), faults.installed("lease_wait", b_waits):
        ta = threading.Thread(target=run, args=(_write("A", 10, []), lake, 1), name="A")
        ta.start()
        assert a_paused.wait(30)
        tb = threading.Thread(target=run, args=(writer_b,), name="B")
        tb.start()
        assert b_waiting.wait(30)
        a_go.set()
        ta.join(30)
        tb.join(30)
    assert not errors
    assert seen == [(1, 1), (2, 2)]  # the second attempt was handed the lake re-read at A's version
    assert got[0].version == 3
    assert sorted(Lake.open(lake.uri).to_arrow("quarantine")["source_uri"].to_pylist()) == ["A"] * 10 + ["B"] * 7


def test_a_fence_lost_once_is_retried(tmp_path: Path):
    lake = Lake.create(str(tmp_path / "lake"))
    seen: list[tuple[int, int]] = []
    hits, hook = _conflict_at("before_publish", times=1)
    with faults.installed("before_publish", hook):
        lv = commit_with_retries(lake, _write("x", 3, seen), what="x")
    assert [k for k, _ in seen] == [1, 2] and len(hits) == 2
    assert lv.version == 2 and Lake.open(lake.uri).count("quarantine") == 3  # the lost attempt left nothing


def test_gives_up_after_max_attempts_and_publishes_nothing(tmp_path: Path):
    lake = Lake.create(str(tmp_path / "lake"))
    seen: list[tuple[int, int]] = []
    hits, hook = _conflict_at("before_publish", times=10**6)
    with faults.installed("before_publish", hook):
        with pytest.raises(
            CommitConflictError, match=rf"gave up after {MAX_COMMIT_ATTEMPTS} attempts.*nothing of x was published"
        ):
            commit_with_retries(lake, _write("x", 3, seen), what="x")
    assert len(seen) == len(hits) == MAX_COMMIT_ATTEMPTS
    after = Lake.open(lake.uri)
    assert after.version == 1 and after.count("quarantine") == 0


@pytest.mark.parametrize("action, raised", [("error", RuntimeError), ("interrupt", KeyboardInterrupt)])
def test_other_failures_are_not_retried(action: str, raised: type[BaseException], tmp_path: Path, monkeypatch):
    lake = Lake.create(str(tmp_path / "lake"))
    seen: list[tuple[int, int]] = []
    monkeypatch.setenv(faults.ENV_VAR, f"after_commit:quarantine:{action}")
    with pytest.raises(raised, match="fault injected at after_commit:quarantine"):
        commit_with_retries(lake, _write("x", 3, seen), what="x")
    monkeypatch.delenv(faults.ENV_VAR)
    assert len(seen) == 1
    after = Lake.open(lake.uri)
    assert after.version == 1 and after.count("quarantine") == 0  # its table commit was rolled back


def test_max_attempts_must_be_positive(tmp_path: Path):
    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        commit_with_retries(Lake.create(str(tmp_path / "lake")), _write("x", 1, []), what="x", max_attempts=0)


def test_rollouts_survive_a_lost_race(tmp_path: Path):
    from robolake.lake.intake.rollouts import RolloutEpisode, RolloutOrigin, write_rollouts
    from robolake.schemas.embodiment import EmbodimentSpec

    rng = np.random.default_rng(0)
    episode = RolloutEpisode(
        embodiment="arm3",
        task="reach",
        seed=1,
        states=rng.normal(size=(4, 3)).astype(np.float32),
        actions=rng.normal(size=(4, 2)).astype(np.float32),
        frames=(("front", rng.integers(0, 255, (4, 8, 8, 3), dtype=np.uint8)),),
        rewards=np.zeros(4, np.float32),
        success=True,
        chunks=np.zeros((1, 2, 2), np.float32),
        chunk_steps=np.array([0]),
        fps=10.0,
    )
    origin = RolloutOrigin(producer="eval", run="t", checkpoint="/ckpt", checkpoint_sha256="cd" * 32)
    spec = EmbodimentSpec(tag="arm3", state_dim=3, action_dim=2, cameras=("front",), fps=10.0)
    hits, hook = _conflict_at("before_publish", times=1)
    with faults.installed("before_publish", hook):
        result = write_rollouts(str(tmp_path / "lake"), [episode], origin, spec=spec)
    assert len(hits) == 2 and (result.written, result.lake_version) == (1, 2)
    lake = Lake.open(str(tmp_path / "lake"))
    assert lake.count("episodes") == 1 and lake.embodiments()["arm3"].state_dim == 3
    assert lake.norm_stats("arm3").state.count == 4  # merged once, not once per attempt


def test_ingest_survives_a_lost_race(tmp_path: Path):
    pytest.importorskip("rosbags")
    from robolake.lake.intake.ingest import IngestConfig, ingest
    from robolake.testing.ros import Layout, write_ros1

    src = tmp_path / "src"
    src.mkdir()
    write_ros1(src / "take_1.bag", Layout(seconds=0.6, seed=1))
    hits, hook = _conflict_at("before_publish", times=2)
    with faults.installed("before_publish", hook):
        result = ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    assert len(hits) == 3 and (result.ingested, result.lake_version) == (1, 2)
    lake = Lake.open(str(tmp_path / "lake"))
    assert lake.count("episodes") == 1 and lake.count("steps") == result.steps
