"""NumPy episodes (.npz files, .npy folders): defaults, mapping, T+1 observations, sidecars, faults, inspect."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from robolake.cli import main as cli_main
from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources import SourceError, SourceOptions, formats, register_format
from robolake.lake.sources.mapping import load_mapping, mapping_from_dict
from robolake.lake.sources.npz import FILE_FORMAT, FORMAT, NpzReader
from robolake.testing.npz_episodes import (
    bench_fixture,
    episode_arrays,
    write_bad_sidecar,
    write_npz_episode,
    write_npz_folder,
    write_pickled,
    write_ragged,
    write_truncated,
)


@pytest.fixture(autouse=True, scope="module")
def _registered():
    for fmt in (FORMAT, FILE_FORMAT):
        if fmt.name not in {f.name for f in formats()}:
            register_format(fmt)


def _quarantine(lake: str) -> dict[str, dict]:
    return {Path(r["source_path"]).name: r for r in Lake.open(lake).to_arrow("quarantine").to_pylist()}


@pytest.mark.parametrize("npy", [False, True])
def test_defaults_ingest_every_episode_dropping_the_last_observation(tmp_path: Path, npy: bool):
    src = write_npz_folder(tmp_path / "demos", episodes=3, steps=12, npy=npy)
    result = ingest(str(src), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (3, 0)
    lake = Lake.open(str(tmp_path / "lake"))
    eps = sorted(lake.episodes().to_pylist(), key=lambda e: e["num_steps"])
    assert [e["num_steps"] for e in eps] == [12, 13, 14]  # T actions, T + 1 observations: the last one dropped
    assert [e["success"] for e in eps] == [True, True, False]  # from the sidecars
    assert [e["task"] for e in eps] == ["lift cube 0", "lift cube 1", "lift cube 0"]
    assert {e["fps"] for e in eps} == {10.0} and all(e["cameras"] == ["wrist_rgb"] for e in eps)
    meta = json.loads(eps[0]["metadata"])
    assert meta["dropped_last_observation"] is True and any("last observation" in n for n in meta["notes"])
    spec = lake.embodiments()["npz_s8_a7"]
    assert (spec.state_dim, spec.action_dim) == (8, 7)
    # state and action bit-exact (float32 of the arrays); the record keeps every array, all its rows
    arrays = episode_arrays(12, seed=0)
    steps = lake.to_arrow("steps", where=f"episode_id = '{eps[0]['episode_id']}'").sort_by("step_index")
    state = np.stack(steps["state"].to_numpy(zero_copy_only=False))
    action = np.stack(steps["action"].to_numpy(zero_copy_only=False))
    want = np.concatenate([arrays["obs_gripper"], arrays["obs_qpos"]], axis=1)[:12].astype(np.float32)
    assert np.array_equal(state, want) and np.array_equal(action, arrays["actions"].astype(np.float32))
    streams = meta["record"]["streams"]
    assert {"obs_qpos", "actions", "env_state", "rewards", "dones", "obs_gripper", "obs_wrist_rgb"} <= set(streams)
    assert lake.to_arrow("media").num_rows == 12 + 13 + 14


def test_frames_are_kept_losslessly(tmp_path: Path):
    from robolake.lake.media.frames import decode_row

    src = write_npz_folder(tmp_path / "demos", episodes=1, steps=6)
    ingest(str(src), str(tmp_path / "lake"))
    media = Lake.open(str(tmp_path / "lake")).to_arrow("media").sort_by("step_index").to_pylist()
    frames = episode_arrays(6, seed=0)["obs_wrist_rgb"]
    for row in media:
        assert np.array_equal(decode_row(row["data"], row["encoding"]), frames[row["step_index"]])


def test_a_lone_npz_file_is_a_unit(tmp_path: Path):
    path = write_npz_episode(tmp_path / "one.npz", steps=8)
    result = ingest(str(path), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (1, 0)


def test_a_mapping_names_the_arrays(tmp_path: Path):
    src = write_npz_folder(tmp_path / "demos", episodes=2, steps=10, camera=False)
    m = mapping_from_dict(
        {"embodiment": "arm7", "state": ["obs_qpos"], "action": ["actions"], "cameras": {}, "task": "stack", "fps": 5}
    )
    result = ingest(str(src), str(tmp_path / "lake"), IngestConfig(mapping=m))
    assert result.ingested == 2
    eps = Lake.open(str(tmp_path / "lake")).episodes().to_pylist()
    assert {(e["embodiment"], e["task"], e["fps"]) for e in eps} == {("arm7", "stack", 5.0)}
    bad = mapping_from_dict({"state": ["obs_joints"], "action": ["actions"]})
    with pytest.raises(SourceError, match="obs_joints"):
        NpzReader(str(src), SourceOptions(mapping=bad))


def test_suggest_map_ingests_as_written_and_lands_what_the_default_does(tmp_path: Path, capsys):
    src = write_npz_folder(tmp_path / "demos", episodes=2, steps=10)
    rc = cli_main(["inspect", str(src), "--json"])
    unit = json.loads(capsys.readouterr().out)["units"][0]
    assert rc == 0 and unit["format"] == "npz"
    keys = unit["keys"]
    assert keys["obs_qpos"] == {"type": "float64", "shape": [7], "count": 23, "groups": 2, "role": "state[1]"}
    assert keys["obs_wrist_rgb"]["role"] == "camera wrist_rgb" and keys["actions"]["count"] == 21
    assert keys["env_state"]["role"].startswith("in the record only")
    rc = cli_main(["inspect", str(src), "--suggest-map"])
    (tmp_path / "map.yaml").write_text(capsys.readouterr().out)
    mapped = ingest(str(src), str(tmp_path / "mapped"), IngestConfig(mapping=load_mapping(str(tmp_path / "map.yaml"))))
    default = ingest(str(src), str(tmp_path / "default"))
    assert (
        (mapped.ingested, mapped.steps, mapped.frames)
        == (default.ingested, default.steps, default.frames)
        == (2, 21, 21)
    )
    hashes = [
        sorted(e["content_hash"] for e in Lake.open(str(tmp_path / d)).episodes().to_pylist())
        for d in ("mapped", "default")
    ]
    assert hashes[0] == hashes[1]


def test_no_state_named_array_points_at_a_mapping(tmp_path: Path, capsys):
    np.savez(tmp_path / "ep.npz", joints=np.zeros((5, 3)), cmd=np.zeros((5, 3)))
    with pytest.raises(SourceError, match="suggest-map"):
        NpzReader(str(tmp_path / "ep.npz"))
    cli_main(["inspect", str(tmp_path / "ep.npz"), "--suggest-map"])
    m = mapping_from_dict(yaml.safe_load(capsys.readouterr().out))
    assert m.state[0].source == "joints" and m.action[0].source == "cmd"


def test_faults_are_quarantined_by_name_and_the_rest_lands(tmp_path: Path):
    src = write_npz_folder(tmp_path / "demos", episodes=2, steps=10, camera=False)
    write_pickled(src / "pickled_actions.npz", in_steps=True, steps=10)
    write_pickled(src / "pickled_infos.npz", steps=10)  # an object array the steps do not need
    write_ragged(src / "ragged.npz", steps=10)
    write_truncated(src / "truncated.npz", steps=10, camera=False)
    write_bad_sidecar(src / "bad_sidecar.npz", steps=10, camera=False)
    result = ingest(str(src), str(tmp_path / "lake"))
    q = _quarantine(str(tmp_path / "lake"))
    assert result.ingested == 3, q  # the two good ones and pickled_infos
    assert q["pickled_actions.npz"]["reason_code"] == "pickled" and "'actions'" in q["pickled_actions.npz"]["reason"]
    assert q["ragged.npz"]["reason_code"] == "shape" and "obs_gripper=8" in q["ragged.npz"]["reason"]
    assert q["truncated.npz"]["reason_code"] == "corrupt_file" and "truncated" in q["truncated.npz"]["reason"]
    assert (
        q["bad_sidecar.json"]["reason_code"] == "bad_metadata" and "not valid JSON" in q["bad_sidecar.json"]["reason"]
    )
    infos = next(
        e for e in Lake.open(str(tmp_path / "lake")).episodes().to_pylist() if "pickled_infos" in e["metadata"]
    )
    meta = json.loads(infos["metadata"])
    assert any("infos" in n and "pickle" in n for n in meta["notes"]) and "infos" in meta["record"]["left_out"]


def test_an_object_array_is_never_unpickled(tmp_path: Path, monkeypatch):
    import pickle

    path = write_pickled(tmp_path / "p.npz", in_steps=True, steps=6)
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    with pytest.raises(SourceError, match="'actions' is an object array") as e:
        NpzReader(str(path))
    assert e.value.reason_code == "pickled"
    ok = write_pickled(tmp_path / "infos.npz", steps=6)  # an object array the steps do not need: left out, unread
    reader = NpzReader(str(ok))
    episode = reader.read_tabular(reader.discover()[0])
    assert "infos" in episode.metadata["record"]["left_out"]


def test_an_array_over_the_read_budget_is_refused_before_loading(tmp_path: Path):
    from robolake.lake.sources import ReadLimits

    path = write_npz_episode(tmp_path / "e.npz", steps=6)
    reader = NpzReader(str(path), SourceOptions(limits=ReadLimits(max_read_bytes=200)))
    with pytest.raises(SourceError, match="declares shape") as e:
        reader.read_tabular(reader.discover()[0])
    assert e.value.reason_code == "too_large"


def test_bench_fixture(tmp_path: Path):
    bench_fixture(tmp_path / "b", episodes=2, steps=5)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "episode_00000.json",
        "episode_00000.npz",
        "episode_00001.json",
        "episode_00001.npz",
    ]
    reader = NpzReader(str(tmp_path / "b"))
    assert [reader.read_tabular(r).num_steps for r in reader.discover()] == [5, 5]


@pytest.mark.parametrize("what", ["npz", "sidecar"])
def test_a_file_linked_out_of_the_folder_is_never_opened(tmp_path: Path, what: str):
    src = write_npz_folder(tmp_path / "demos", episodes=2, steps=6)
    target = src / ("episode_001.npz" if what == "npz" else "episode_001.json")
    outside = tmp_path / f"elsewhere.{what}"
    target.rename(outside)
    target.symlink_to(outside)
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    assert res.ingested == 1
    (row,) = _quarantine(str(tmp_path / "lake")).values()
    assert row["reason_code"] == "outside_source" and target.name in row["reason"]
