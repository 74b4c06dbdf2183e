"""Dataset-level problems stay with their dataset; listing problems never drop an episode silently.

Each broken dataset is a synthetic tiny dataset (its own seed, so no two datasets share episode
content) broken one way. Reader-level tests check the error (code, file, field, the episodes it
covers) without Ray; the ingest tests put several broken datasets beside a good one and check
that the good one lands, each broken one is quarantined, and the CLI says one line per problem.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from robolake.cli import main as cli_main
from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.sources import LeRobotReader, SourceError, discover_readers
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

EPISODES = 2
_CACHE: dict[tuple[int, str, str], Path] = {}


@pytest.fixture(scope="module")
def make(tmp_path_factory) -> Callable[..., Path]:
    """make(dst, seed=0, robot=..., version=...) -> a fresh copy of a tiny one-robot dataset at dst."""
    base = tmp_path_factory.mktemp("pristine")

    def _make(dst: Path, seed: int = 0, robot: str = "single_arm_7dof", version: str = "v2.1") -> Path:
        key = (seed, robot, version)
        if key not in _CACHE:
            out = base / f"{seed}-{robot}-{version}"
            generate_synthetic(
                out,
                SyntheticConfig.tiny(
                    embodiments=(robot,), episodes_per_embodiment=EPISODES, seed=seed, version=version
                ),
            )  # type: ignore[arg-type]
            _CACHE[key] = out / robot
        shutil.copytree(_CACHE[key], dst)
        return dst

    return _make


def _cli(argv: list[str]) -> int:
    # cli.main adds a stderr handler to the robolake logger on every call, bound to the stream of
    # the moment; drop the ones earlier in-process calls left (their capsys streams are closed).
    log = logging.getLogger("robolake")
    for h in list(log.handlers):
        if isinstance(h, logging.StreamHandler):
            log.removeHandler(h)
    return cli_main(argv)


def _edit_info(ds: Path, fn: Callable[[dict], object]) -> None:
    p = ds / "meta/info.json"
    d = json.loads(p.read_text())
    out = fn(d)
    p.write_text(json.dumps(d if out is None else out))


def _pop(key: str) -> Callable[[dict], None]:
    return lambda d: d.pop(key) and None


def _set(key: str, value: object) -> Callable[[dict], None]:
    return lambda d: d.__setitem__(key, value)


# (name, how to break the dataset, file named in the message, words the message must hold, episodes known)
INFO_CASES = [
    ("fps_zero", lambda ds: _edit_info(ds, _set("fps", 0)), "meta/info.json", ["fps is 0", "recording rate"], True),
    (
        "fps_null",
        lambda ds: _edit_info(ds, _set("fps", None)),
        "meta/info.json",
        ["fps is null", "recording rate"],
        True,
    ),
    ("fps_missing", lambda ds: _edit_info(ds, _pop("fps")), "meta/info.json", ["fps is missing"], True),
    (
        "fps_string",
        lambda ds: _edit_info(ds, _set("fps", "fast")),
        "meta/info.json",
        ["fps is 'fast'", "not a number"],
        True,
    ),
    (
        "info_invalid_json",
        lambda ds: (ds / "meta/info.json").write_text('{"fps": 20,'),
        "meta/info.json",
        ["not valid JSON", "line 1"],
        True,
    ),
    (
        "info_list",
        lambda ds: (ds / "meta/info.json").write_text("[]"),
        "meta/info.json",
        ["holds a list", "object"],
        True,
    ),
    ("info_missing", lambda ds: (ds / "meta/info.json").unlink(), "meta/info.json", ["is missing", "re-export"], True),
    (
        "unknown_version",
        lambda ds: _edit_info(ds, _set("codebase_version", "v9.9")),
        "meta/info.json",
        ["codebase_version is 'v9.9'", "v2.0, v2.1, v3.0"],
        True,
    ),
    (
        "data_path_missing",
        lambda ds: _edit_info(ds, _pop("data_path")),
        "meta/info.json",
        ["data_path is missing"],
        True,
    ),
    (
        "data_path_placeholder",
        lambda ds: _edit_info(ds, _set("data_path", "data/{chunk}/ep_{episode_index}.parquet")),
        "meta/info.json",
        ["data_path", "{chunk}", "{episode_chunk}"],
        True,
    ),
    (
        "data_path_constant",
        lambda ds: _edit_info(ds, _set("data_path", "data/all.parquet")),
        "meta/info.json",
        ["same file", "{episode_index}"],
        True,
    ),
    (
        "video_path_missing",
        lambda ds: _edit_info(ds, _pop("video_path")),
        "meta/info.json",
        ["video_path is missing"],
        True,
    ),
    (
        "no_state_feature",
        lambda ds: _edit_info(ds, lambda d: d["features"].pop("observation.state") and None),
        "meta/info.json",
        ["'observation.state'"],
        True,
    ),
    ("chunks_size_bad", lambda ds: _edit_info(ds, _set("chunks_size", "x")), "meta/info.json", ["chunks_size"], True),
    (
        "episodes_missing",
        lambda ds: (ds / "meta/episodes.jsonl").unlink(),
        "meta/episodes.jsonl",
        ["is missing"],
        False,
    ),
    (
        "episodes_bad_line",
        lambda ds: (ds / "meta/episodes.jsonl").write_text('{"episode_index": 0, "length": 3}\n{oops\n'),
        "meta/episodes.jsonl",
        ["line 2", "not valid JSON"],
        False,
    ),
    ("tasks_missing", lambda ds: (ds / "meta/tasks.jsonl").unlink(), "meta/tasks.jsonl", ["is missing"], True),
    (
        "tasks_bad_index",
        lambda ds: (ds / "meta/tasks.jsonl").write_text('{"task_index": "a", "task": "x"}\n'),
        "meta/tasks.jsonl",
        ["line 1", "task_index is 'a'"],
        True,
    ),
    (
        "modality_invalid_json",
        lambda ds: (ds / "meta/modality.json").write_text("{'state': {}}"),
        "meta/modality.json",
        ["not valid JSON", "line 1 column 2"],
        True,
    ),
    (
        "modality_state_list",
        lambda ds: (ds / "meta/modality.json").write_text('{"state": [0, 7]}'),
        "meta/modality.json",
        ['"state" is a list'],
        True,
    ),
    (
        "modality_bad_bound",
        lambda ds: (ds / "meta/modality.json").write_text('{"state": {"arm": {"start": "0", "end": 6}}, "action": {}}'),
        "meta/modality.json",
        ["state.arm.start is '0'"],
        True,
    ),
    (
        "modality_past_width",
        lambda ds: (ds / "meta/modality.json").write_text('{"state": {"arm": {"start": 0, "end": 9}}, "action": {}}'),
        "meta/modality.json",
        ["ends at 9", "7 values"],
        True,
    ),
    (
        "modality_unknown_camera",
        lambda ds: (ds / "meta/modality.json").write_text(
            '{"state": {}, "action": {}, "video": {"top": {"original_key": "observation.images.top"}}}'
        ),
        "meta/modality.json",
        ["camera 'top'", "--state-only"],
        True,
    ),
]


@pytest.mark.parametrize("name,breaks,rel,words,known", INFO_CASES, ids=[c[0] for c in INFO_CASES])
def test_dataset_error_names_the_file_and_field(make, tmp_path, name, breaks, rel, words, known):
    ds = make(tmp_path / name)
    breaks(ds)
    with pytest.raises(SourceError) as info:
        LeRobotReader(str(ds))
    err = info.value
    assert err.reason_code == "bad_metadata"
    assert err.path == str(ds / rel)
    assert err.message.startswith(f"{rel}: ")
    for w in words:
        assert w in err.message, err.message
    assert "\n" not in err.message
    assert err.episodes == (tuple(range(EPISODES)) if known else ())


def test_v3_dataset_errors(make, tmp_path):
    ds = make(tmp_path / "a", version="v3.0")
    (ds / "meta/tasks.parquet").unlink()
    with pytest.raises(SourceError, match="meta/tasks.parquet: is missing") as info:
        LeRobotReader(str(ds))
    assert info.value.episodes == (0, 1)
    ds = make(tmp_path / "b", version="v3.0")
    shutil.rmtree(ds / "meta/episodes")
    with pytest.raises(SourceError, match="meta/episodes: has no chunk-") as info:
        LeRobotReader(str(ds))
    assert info.value.episodes == ()


def test_a_directory_with_lerobot_data_but_no_info_json_is_a_failed_unit(make, tmp_path):
    make(tmp_path / "src/good", seed=0)
    broken = make(tmp_path / "src/broken", seed=1)
    (broken / "meta/info.json").unlink()
    found = discover_readers(str(tmp_path / "src"))
    assert [r.root for r in found.readers] == [str(tmp_path / "src/good")]
    assert [(u.path, u.reason_code, u.episodes) for u in found.failed] == [(str(broken), "bad_metadata", (0, 1))]
    assert found.failed[0].message.startswith("meta/info.json: is missing")


BROKEN = {
    "b_fps_null": lambda ds: _edit_info(ds, _set("fps", None)),
    "c_info_list": lambda ds: (ds / "meta/info.json").write_text("[]"),
    "d_no_info": lambda ds: (ds / "meta/info.json").unlink(),
    "e_no_tasks": lambda ds: (ds / "meta/tasks.jsonl").unlink(),
    "f_bad_modality": lambda ds: (ds / "meta/modality.json").write_text("{'state': {}}"),
    "g_no_episodes": lambda ds: (ds / "meta/episodes.jsonl").unlink(),
}


def test_bad_datasets_are_quarantined_and_the_good_one_lands(make, tmp_path, capsys):
    src = tmp_path / "src"
    make(src / "a_good", seed=0)
    for seed, (name, breaks) in enumerate(BROKEN.items(), start=1):
        breaks(make(src / name, seed=seed))
    rc = _cli(["ingest", str(src), str(tmp_path / "lake"), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "Traceback" not in captured.out + captured.err
    assert "quarantined" not in captured.err and "cannot open" not in captured.err  # said once, on stdout
    lake = Lake.open(str(tmp_path / "lake"))
    assert {e["source_uri"] for e in lake.episodes().to_pylist()} == {str(src / "a_good")}
    assert lake.count("episodes") == EPISODES
    rows = lake.to_arrow("quarantine").to_pylist()
    by_unit: dict[str, list[int]] = {}
    for q in rows:
        assert q["reason_code"] == "bad_metadata"
        by_unit.setdefault(q["source_uri"], []).append(q["source_episode_index"])
    # One row per declared episode where the episode list is readable, one row for the dataset otherwise.
    assert {Path(k).name: sorted(v) for k, v in by_unit.items()} == {
        **{name: [0, 1] for name in BROKEN if name != "g_no_episodes"},
        "g_no_episodes": [-1],
    }
    lines = [line for line in captured.out.splitlines() if line.startswith("  quarantined")]
    assert len(lines) == len(BROKEN)  # one line per problem, not per episode
    assert any("b_fps_null (2 episodes): meta/info.json: fps is null; set fps" in line for line in lines)
    assert any("d_no_info (2 episodes): meta/info.json: is missing" in line for line in lines)
    assert any("f_bad_modality (2 episodes): meta/modality.json: is not valid JSON" in line for line in lines)
    assert any("g_no_episodes: meta/episodes.jsonl: is missing" in line for line in lines)


def test_only_bad_datasets_fail_in_one_line_and_leave_no_lake(make, tmp_path, capsys):
    _edit_info(make(tmp_path / "src/x", seed=1), _set("fps", None))
    rc = _cli(["ingest", str(tmp_path / "src"), str(tmp_path / "lake"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc != 0
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "meta/info.json: fps is null" in err
    assert not (tmp_path / "lake").exists()


def test_same_tag_different_widths_in_one_run_never_mix(make, tmp_path):
    make(tmp_path / "src/a_arm", seed=0)
    other = make(tmp_path / "src/b_bimanual", seed=1, robot="bimanual_14dof")
    _edit_info(other, _set("robot_type", "single_arm_7dof"))
    result = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (EPISODES, EPISODES)
    assert all("--embodiment" in reason and "a_arm" in reason for _, reason in result.quarantine)
    lake = Lake.open(str(tmp_path / "lake"))
    assert lake.embodiments()["single_arm_7dof"].state_dim == 7
    assert {len(s) for s in lake.to_arrow("steps", columns=["state"])["state"].to_pylist()} == {7}


def _add_copy_of_episode_0(ds: Path) -> None:
    """Episode 2: byte-identical files of episode 0, listed in episodes.jsonl."""
    shutil.copy(ds / "data/chunk-000/episode_000000.parquet", ds / "data/chunk-000/episode_000002.parquet")
    for video in (ds / "videos/chunk-000").glob("*/episode_000000.mp4"):
        shutil.copy(video, video.with_name("episode_000002.mp4"))
    eps = (ds / "meta/episodes.jsonl").read_text().splitlines()
    first = json.loads(eps[0])
    eps.append(json.dumps({**first, "episode_index": 2}))
    (ds / "meta/episodes.jsonl").write_text("\n".join(eps) + "\n")


def test_a_duplicate_episode_is_recorded_and_a_rerun_skips_it(make, tmp_path):
    ds = make(tmp_path / "ds")
    _add_copy_of_episode_0(ds)
    first = ingest(str(ds), str(tmp_path / "lake"))
    assert (first.ingested, first.skipped, first.duplicates, first.quarantined) == (2, 0, 1, 1)
    lake = Lake.open(str(tmp_path / "lake"))
    (q,) = lake.to_arrow("quarantine").to_pylist()
    assert (q["reason_code"], q["source_episode_index"]) == ("duplicate", 2)
    assert q["source_path"] == str(ds / "data/chunk-000/episode_000002.parquet")
    assert "episode 0" in q["reason"]
    again = ingest(str(ds), str(tmp_path / "lake"))
    assert (again.ingested, again.skipped, again.duplicates, again.quarantined) == (0, 3, 0, 0)
    assert Lake.open(str(tmp_path / "lake")).count("quarantine") == 1


def test_an_episode_listed_twice_identically_is_read_once_with_a_note(make, tmp_path, capsys):
    ds = make(tmp_path / "ds")
    lines = (ds / "meta/episodes.jsonl").read_text().splitlines()
    (ds / "meta/episodes.jsonl").write_text("\n".join([*lines, lines[1]]) + "\n")
    assert _cli(["ingest", str(ds), str(tmp_path / "lake"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "note:" in out and "episode_index 1 twice identically" in out
    assert Lake.open(str(tmp_path / "lake")).count("episodes") == EPISODES


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_missing_declared_videos_quarantine_unless_state_only(make, tmp_path, version):
    ds = make(tmp_path / "ds", version=version)
    shutil.rmtree(ds / "videos")
    lake_uri = str(tmp_path / "lake")
    strict = ingest(str(ds), lake_uri)
    assert (strict.ingested, strict.quarantined) == (0, EPISODES)
    assert {q["reason_code"] for q in Lake.open(lake_uri).to_arrow("quarantine").to_pylist()} == {"missing_video"}
    assert all("--state-only" in reason for _, reason in strict.quarantine)
    state_only = ingest(str(ds), lake_uri, IngestConfig(state_only=True))
    assert (state_only.ingested, state_only.quarantined) == (EPISODES, 0)
    assert any("camera 'front'" in n and "--state-only" in n for n in state_only.notes)
    lake = Lake.open(lake_uri)
    assert [e["cameras"] for e in lake.episodes().to_pylist()] == [[]] * EPISODES
    assert lake.count("media") == 0 and lake.count("steps") > 0


def _v3_episodes_file(ds: Path) -> Path:
    return ds / "meta/episodes/chunk-000/file-000.parquet"


def test_v3_unlisted_and_twice_listed_episodes_are_quarantined_not_dropped(make, tmp_path):
    import pyarrow.parquet as pq

    ds = make(tmp_path / "unlisted", version="v3.0")
    table = pq.read_table(_v3_episodes_file(ds))
    pq.write_table(table.slice(0, 1), _v3_episodes_file(ds))  # episode 1 is in the data file, not listed
    refs = LeRobotReader(str(ds)).discover()
    assert [r.episode_index for r in refs] == [0, 1]
    with pytest.raises(SourceError) as info:
        LeRobotReader(str(ds)).read_tabular(refs[1])
    assert info.value.reason_code == "unlisted"
    assert info.value.path == str(ds / "data/chunk-000/file-000.parquet")
    assert "meta/episodes/ does not list it" in info.value.message
    LeRobotReader(str(ds)).read_tabular(refs[0])  # the listed one reads

    ds = make(tmp_path / "twice", version="v3.0")
    rows = table.to_pylist()
    rows.append({**rows[1], "length": rows[1]["length"] + 1})
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), _v3_episodes_file(ds))
    reader = LeRobotReader(str(ds))
    refs = reader.discover()
    assert [r.episode_index for r in refs] == [0, 1]
    with pytest.raises(SourceError) as info:
        reader.read_tabular(refs[1])
    assert info.value.reason_code == "duplicate_index" and "more than once" in info.value.message


def test_a_rerun_over_bad_datasets_records_them_once(make, tmp_path):
    src = tmp_path / "src"
    make(src / "a_good", seed=0)
    _edit_info(make(src / "b_fps_null", seed=1), _set("fps", None))
    first = ingest(str(src), str(tmp_path / "lake"))
    again = ingest(str(src), str(tmp_path / "lake"))
    assert (first.ingested, first.quarantined) == (EPISODES, EPISODES)
    assert (again.ingested, again.skipped, again.quarantined) == (0, EPISODES, EPISODES)
    lake = Lake.open(str(tmp_path / "lake"))
    assert lake.version == first.lake_version == again.lake_version
    assert lake.count("quarantine") == EPISODES


def test_state_only_leaves_out_only_the_missing_video(make, tmp_path):
    ds = make(tmp_path / "ds")
    next((ds / "videos/chunk-000").glob("*/episode_000001.mp4")).unlink()
    result = ingest(str(ds), str(tmp_path / "lake"), IngestConfig(state_only=True))
    assert (result.ingested, result.quarantined) == (EPISODES, 0)
    eps = sorted(Lake.open(str(tmp_path / "lake")).episodes().to_pylist(), key=lambda e: e["source_episode_index"])
    assert [e["cameras"] for e in eps] == [["front"], []]


def _as_image_column(ds: Path, sizes: list[int]) -> None:
    """Turn camera `front` of episode 0 into a LeRobot `image` feature: PNG bytes in the parquet."""
    import io

    import av
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = "observation.images.front"
    _edit_info(ds, lambda d: d["features"][key].__setitem__("dtype", "image"))
    video = ds / "videos/chunk-000" / key / "episode_000000.mp4"
    with av.open(str(video)) as c:
        frames = [f.to_image() for f in c.decode(video=0)]
    shutil.rmtree(ds / "videos")
    cells = []
    for i, img in enumerate(frames):
        buf = io.BytesIO()
        img.resize((sizes[i % len(sizes)],) * 2).save(buf, format="PNG")
        cells.append({"bytes": buf.getvalue(), "path": None})
    p = ds / "data/chunk-000/episode_000000.parquet"
    t = pq.read_table(p)
    pq.write_table(t.append_column(key, pa.array(cells, pa.struct([("bytes", pa.binary()), ("path", pa.string())]))), p)


def test_image_columns_are_read_and_size_checked(make, tmp_path):
    good = make(tmp_path / "good")
    _as_image_column(good, [32])
    reader = LeRobotReader(str(good))
    ep = reader.read_tabular(reader.discover()[0])
    (frames,) = reader.read_frames(ep)
    assert (frames.camera, frames.encoding, frames.height, frames.width, len(frames.images)) == (
        "front",
        "png",
        32,
        32,
        ep.num_steps,
    )
    mixed = make(tmp_path / "mixed")
    _as_image_column(mixed, [32, 32, 48])
    reader = LeRobotReader(str(mixed))
    ep = reader.read_tabular(reader.discover()[0])
    with pytest.raises(SourceError) as info:
        list(reader.read_frames(ep))
    assert info.value.reason_code == "frame_size" and "48x48" in info.value.message and "32x32" in info.value.message


def test_a_video_modality_json_does_not_name_is_noted(make, tmp_path):
    ds = make(tmp_path / "ds")
    modality = json.loads((ds / "meta/modality.json").read_text())
    modality["video"] = {}
    modality["video"]["front_renamed"] = {"original_key": "observation.images.front"}
    (ds / "meta/modality.json").write_text(json.dumps(modality))
    assert LeRobotReader(str(ds)).notes == []
    _edit_info(
        ds, lambda d: d["features"].__setitem__("observation.images.side", d["features"]["observation.images.front"])
    )
    shutil.copytree(ds / "videos/chunk-000/observation.images.front", ds / "videos/chunk-000/observation.images.side")
    reader = LeRobotReader(str(ds))
    assert reader.cameras == ("front_renamed",)
    assert len(reader.notes) == 1 and "'observation.images.side' has files" in reader.notes[0]
