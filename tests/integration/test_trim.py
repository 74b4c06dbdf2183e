"""`robolake trim`: steps dropped as a new version, frames never rewritten, and every reader
(frames, pack, export, check, diff, restore) follows the kept steps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from robolake import curate
from robolake.cli import main
from robolake.lake import IngestConfig, Lake, export_lerobot, ingest
from robolake.writers.lerobot import EpisodeArrays, write_lerobot_dataset
from robolake.writers.synthetic import SyntheticConfig, synthetic_episodes

ROBOT = "single_arm_7dof"
HEAD, TAIL, N = 9, 5, 40  # idle steps at each end: steps 0..8 hold step 8's values (step 8 arrives still)


def _planted() -> list[EpisodeArrays]:
    """Three episodes of 40 steps; 0 and 1 idle for 9 steps at the start and 5 at the end, 2 moving throughout."""
    eps = synthetic_episodes(SyntheticConfig.tiny(min_length=N, max_length=N, episodes_per_embodiment=3), ROBOT)
    out = []
    for i, e in enumerate(eps):
        state, action = e.state.copy(), e.action.copy()
        if i < 2:
            state[: HEAD - 1], action[: HEAD - 1] = state[HEAD - 1], action[HEAD - 1]
            state[N - TAIL :], action[N - TAIL :] = state[N - TAIL - 1], action[N - TAIL - 1]
        out.append(EpisodeArrays(state=state, action=action, task=e.task, frames=e.frames))
    return out


@pytest.fixture(scope="module", params=["record", "jpeg"])
def idle_lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The planted episodes, frames as recorded video (packets + stream index) and as JPEG rows."""
    root = tmp_path_factory.mktemp(f"trim-{request.param}")
    src = write_lerobot_dataset(root / "src", episodes=_planted(), fps=20, robot_type=ROBOT)
    uri = str(root / "lake")
    ingest(str(src), uri, IngestConfig(execution="local", video_frames=request.param))
    return uri


def _copy(uri: str, dest: Path) -> str:
    shutil.copytree(uri, dest)
    return str(dest)


def _media_files(uri: str) -> set[str]:
    return {p.name for p in (Path(uri) / "media.lance" / "data").iterdir()}


def test_trim_idle_drops_heads_and_tails_and_frames_follow(idle_lake: str, tmp_path: Path) -> None:
    uri = _copy(idle_lake, tmp_path / "lake")
    before = Lake.open(uri)
    ids = sorted(before.episode_ids())
    frames_before = {e: before.frames().read_many([(e, "front", t) for t in range(N)]) for e in ids}
    media_before = _media_files(uri)

    r = curate.trim(uri, curate.TrimSpec(idle=True, reason="idle ends"))
    assert r.version == before.version + 1
    assert set(r.removed) == {ids[0], ids[1]}, r.removed
    for eid in (ids[0], ids[1]):
        assert r.removed[eid] == HEAD + TAIL, (eid, r.removed)
    after = Lake.open(uri)
    assert _media_files(uri) == media_before  # no frame was rewritten
    kept = after.trimmed()
    assert set(kept) == {ids[0], ids[1]}
    assert kept[ids[0]].ranges == ((HEAD, N - TAIL),)
    row = {r_["episode_id"]: r_ for r_ in after.episodes().to_pylist()}
    assert row[ids[0]]["num_steps"] == N - HEAD - TAIL and row[ids[2]]["num_steps"] == N
    steps = after.to_arrow("steps", where=f"episode_id = '{ids[0]}'").sort_by("step_index")
    assert steps["step_index"].to_pylist() == list(range(N - HEAD - TAIL))
    old = before.to_arrow("steps", where=f"episode_id = '{ids[0]}'").sort_by("step_index")
    assert np.array_equal(steps["timestamp"].to_numpy(), old["timestamp"].to_numpy()[HEAD : N - TAIL])
    # each kept step shows the frame it showed before, bit for bit
    got = after.frames().read_many([(ids[0], "front", t) for t in range(N - HEAD - TAIL)])
    for t, f in enumerate(got):
        assert np.array_equal(f, frames_before[ids[0]][t + HEAD]), t
    with pytest.raises(KeyError, match="trimmed episode has"):
        after.frames().read(ids[0], "front", N - HEAD - TAIL)
    # the viewer's episode page says so, and its frames are the kept steps'
    from robolake.view.catalog import LakeCatalog
    from robolake.view.episodes import EpisodeCatalog
    from robolake.view.frames import FrameSource

    detail = EpisodeCatalog(LakeCatalog(after)).detail(ids[0])
    assert detail is not None and detail["trim"] == {"frames": N, "kept": [[HEAD, N - TAIL]]}
    assert detail["num_steps"] == N - HEAD - TAIL
    source = FrameSource(after)
    assert source.get(ids[0], "front", 0) == FrameSource(before).get(ids[0], "front", HEAD)
    # the step quality is measured again on what remains
    meta = json.loads(row[ids[0]]["metadata"])
    assert meta["quality"]["idle_head"] == 0 and meta["quality"]["idle_tail"] == 0


def test_trim_check_diff_and_restore(idle_lake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = _copy(idle_lake, tmp_path / "lake")
    base = Lake.open(uri).version
    assert main(["trim", uri, "--idle", "--head", "--reason", "idle heads"]) == 0
    out = capsys.readouterr().out
    assert f"version {base + 1} dropped {2 * HEAD} of {2 * N} steps from 2 episodes" in out
    assert main(["check", uri]) == 0
    capsys.readouterr()
    assert main(["diff", uri, str(base), str(base + 1), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert sorted(v for v in d["steps_changed"].values()) == [[N, N - HEAD], [N, N - HEAD]]
    one = sorted(Lake.open(uri).trimmed())[0]
    assert main(["restore", uri, "--episodes", one, "--reason", "want its head back"]) == 0
    lake = Lake.open(uri)
    assert one not in lake.trimmed() and len(lake.trimmed()) == 1
    assert lake.count("steps") == 3 * N - HEAD and main(["check", uri]) == 0
    assert main(["restore", uri, str(base)]) == 0
    lake = Lake.open(uri)
    assert lake.trimmed() == {} and lake.count("steps") == 3 * N


def test_trim_where_steps_and_twice_composes(idle_lake: str, tmp_path: Path) -> None:
    uri = _copy(idle_lake, tmp_path / "lake")
    lake = Lake.open(uri)
    ids = sorted(lake.episode_ids())
    frames = lake.frames().read_many([(ids[2], "front", t) for t in range(N)])
    where = f"episode_id = '{ids[2]}'"
    curate.trim(uri, curate.TrimSpec(where_steps="step >= 10 and step < 20", where=where))
    curate.trim(uri, curate.TrimSpec(where_steps="steps_from_end < 5", where=where))
    lake = Lake.open(uri)
    shown = np.r_[0:10, 20 : N - 5]
    assert lake.trimmed()[ids[2]].frame_steps.tolist() == shown.tolist()
    got = lake.frames().read_many([(ids[2], "front", t) for t in range(len(shown))])
    for t, f in enumerate(got):
        assert np.array_equal(f, frames[int(shown[t])]), t


def test_trim_refuses_to_empty_an_episode_and_bad_expressions(idle_lake: str, tmp_path: Path) -> None:
    uri = _copy(idle_lake, tmp_path / "lake")
    base = Lake.open(uri).version
    r = curate.trim(uri, curate.TrimSpec(where_steps="t >= 0"))
    assert r.version == base and not r.removed and len(r.kept) == 3
    assert all("delete it instead" in why for why in r.kept.values())
    with pytest.raises(ValueError, match="unknown name 'speed'"):
        curate.TrimSpec(where_steps="speed < 1")
    with pytest.raises(ValueError, match="reduce it"):
        curate.trim(uri, curate.TrimSpec(where_steps="abs(action) < 1"))
    with pytest.raises(ValueError, match="--head and --tail"):
        curate.TrimSpec(where_steps="t < 1", head=True)


def test_pack_and_export_read_only_the_kept_steps(idle_lake: str, tmp_path: Path) -> None:
    import lance

    from robolake.packers import PackSpec, pack

    def packed_frames(lake: Lake, out: Path) -> dict[tuple[str, int], bytes]:
        res = pack(lake, PackSpec(image_size=32), str(out), execution="local")
        rows = lance.dataset(str(out / "shards.lance")).to_table(columns=["episode_id", "step_index", "frames"])
        got = {}
        for r in rows.to_pylist():  # one camera: a view per sample
            got.update({(e, t): f for e, t, f in zip(r["episode_id"], r["step_index"], r["frames"], strict=True)})
        assert len(got) == res.num_samples
        return got

    uri = _copy(idle_lake, tmp_path / "lake")
    whole = packed_frames(Lake.open(uri), tmp_path / "whole")
    curate.trim(uri, curate.TrimSpec(idle=True))
    lake = Lake.open(uri)
    trimmed = packed_frames(lake, tmp_path / "packed")
    assert len(trimmed) == 3 * N - 2 * (HEAD + TAIL)
    shown = {e: k.frame_steps for e, k in lake.trimmed().items()}
    for (e, t), frame in trimmed.items():  # each sample packs the frame its original step packed
        assert frame == whole[(e, int(shown[e][t]) if e in shown else t)], (e, t)
    out = export_lerobot(lake, tmp_path / "export")
    back = tmp_path / "back"
    ingest(str(out[0].path), str(back), IngestConfig(execution="local"))
    again = Lake.open(str(back))
    lengths = sorted(r["num_steps"] for r in again.episodes().to_pylist())
    assert lengths == sorted([N - HEAD - TAIL, N - HEAD - TAIL, N])


def test_trim_a_lake_of_several_embodiments(tmp_path: Path) -> None:
    """Embodiments of other state widths share a chunk of steps (the README tour's lake failed here)."""
    lake = tmp_path / "lake"
    assert main(["ingest", "--format", "synthetic", str(tmp_path / "syn"), str(lake), "--no-progress"]) == 0
    before = Lake.open(str(lake))
    widths = {len(r["state"]) for r in before.to_arrow("steps", columns=["state"]).to_pylist()}
    assert len(widths) > 1
    r = curate.trim(str(lake), curate.TrimSpec(where_steps="steps_from_end < 2"))
    assert len(r.removed) == before.count("episodes") and set(r.removed.values()) == {2}
    assert main(["check", str(lake)]) == 0
