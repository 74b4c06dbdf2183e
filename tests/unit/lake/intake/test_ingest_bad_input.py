"""Each kind of bad input lands in quarantine with its file and reason; the rest still lands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robolake.cli import main as cli_main
from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic
from robolake.writers.video import encode_video

EPISODES = 3


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pristine")
    generate_synthetic(
        root / "src", SyntheticConfig.tiny(embodiments=("single_arm_7dof",), episodes_per_embodiment=EPISODES)
    )
    return root / "src" / "single_arm_7dof"


@pytest.fixture()
def dataset(pristine, tmp_path) -> Path:
    dst = tmp_path / "single_arm_7dof"
    shutil.copytree(pristine, dst)
    return dst


def _parquet(ds: Path, i: int = 1) -> Path:
    return ds / f"data/chunk-000/episode_{i:06d}.parquet"


def _video(ds: Path, i: int = 1) -> Path:
    return next((ds / "videos/chunk-000").glob(f"*/episode_{i:06d}.mp4"))


def _rewrite_column(path: Path, name: str, fn) -> None:
    t = pq.read_table(path)
    col = fn(t[name])
    t = t.set_column(t.column_names.index(name), name, col)
    pq.write_table(t, path)


def _set_list_value(col: pa.ChunkedArray, row: int, dim: int, value: float) -> pa.Array:
    values = np.stack(col.to_numpy(zero_copy_only=False)).astype(np.float32)
    values[row, dim] = value
    return pa.array(list(values), type=col.type)


def truncate_parquet(ds: Path) -> tuple[str, Path]:
    p = _parquet(ds)
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    return "corrupt_file", p


def missing_video(ds: Path) -> tuple[str, Path]:
    p = _video(ds)
    p.unlink()
    return "missing_video", p


def short_video(ds: Path) -> tuple[str, Path]:
    p = _video(ds)
    with av.open(str(p)) as c:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    encode_video(p, [frames[: len(frames) // 2]], fps=20)
    return "frame_count", p


def garbage_video(ds: Path) -> tuple[str, Path]:
    p = _video(ds)
    p.write_bytes(b"\x00not an mp4" * 100)
    return "corrupt_video", p


def nan_state(ds: Path) -> tuple[str, Path]:
    p = _parquet(ds)
    _rewrite_column(p, "observation.state", lambda c: _set_list_value(c, 5, 2, float("nan")))
    return "non_finite", p


def inf_action(ds: Path) -> tuple[str, Path]:
    p = _parquet(ds)
    _rewrite_column(p, "action", lambda c: _set_list_value(c, 0, 0, float("inf")))
    return "non_finite", p


def non_monotonic_timestamps(ds: Path) -> tuple[str, Path]:
    p = _parquet(ds)

    def swap(col: pa.ChunkedArray) -> pa.Array:
        ts = col.to_numpy().copy()
        ts[3], ts[4] = ts[4], ts[3]
        return pa.array(ts, type=col.type)

    _rewrite_column(p, "timestamp", swap)
    return "timestamps", p


def state_width_contradicts_modality(ds: Path) -> tuple[str, Path]:
    p = _parquet(ds)
    _rewrite_column(
        p,
        "observation.state",
        lambda c: pa.array([v[:-1] for v in c.to_numpy(zero_copy_only=False)], type=c.type),
    )
    return "shape", p


def missing_action_column(ds: Path) -> tuple[str, Path]:
    p = _parquet(ds)
    t = pq.read_table(p)
    pq.write_table(t.drop_columns(["action"]), p)
    return "missing_column", p


def truncated_video(ds: Path) -> tuple[str, Path]:
    p = _video(ds)
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    return "corrupt_video", p


def video_larger_than_declared(ds: Path) -> tuple[str, Path]:
    p = _video(ds)
    with av.open(str(p)) as c:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    encode_video(p, [frames.repeat(2, axis=1).repeat(2, axis=2)], fps=20)  # 64x64; info.json says 32x32
    return "frame_size", p


def task_index_without_task(ds: Path) -> tuple[str, Path]:
    p = _parquet(ds)
    _rewrite_column(p, "task_index", lambda c: pa.array([99] * len(c), type=c.type))
    return "unknown_task", p


def episode_not_listed(ds: Path) -> tuple[str, Path]:
    lines = (ds / "meta/episodes.jsonl").read_text().splitlines()
    (ds / "meta/episodes.jsonl").write_text(
        "\n".join(line for line in lines if json.loads(line)["episode_index"] != 1) + "\n"
    )
    return "unlisted", _parquet(ds)


def episode_index_listed_twice(ds: Path) -> tuple[str, Path]:
    path = ds / "meta/episodes.jsonl"
    lines = path.read_text().splitlines()
    second = json.loads(lines[1])
    path.write_text("\n".join([*lines, json.dumps({**second, "length": second["length"] + 5})]) + "\n")
    return "duplicate_index", path


CASES = [
    truncate_parquet,
    missing_video,
    short_video,
    garbage_video,
    nan_state,
    inf_action,
    non_monotonic_timestamps,
    state_width_contradicts_modality,
    missing_action_column,
    truncated_video,
    video_larger_than_declared,
    task_index_without_task,
    episode_not_listed,
    episode_index_listed_twice,
]


@pytest.mark.parametrize("corrupt", CASES, ids=[c.__name__ for c in CASES])
def test_bad_episode_is_quarantined_and_the_rest_lands(corrupt, dataset, tmp_path):
    code, bad_path = corrupt(dataset)
    result = ingest(str(dataset), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (EPISODES - 1, 1)
    lake = Lake.open(str(tmp_path / "lake"))
    q = lake.to_arrow("quarantine").to_pylist()
    assert len(q) == 1
    assert q[0]["reason_code"] == code
    assert q[0]["source_path"] == str(bad_path)
    assert q[0]["source_episode_index"] == 1
    assert len(q[0]["reason"]) > 20  # a sentence a person can act on
    assert sorted(lake.episodes(columns=["source_episode_index"])["source_episode_index"].to_pylist()) == [0, 2]
    eps = lake.episodes().to_pylist()
    assert lake.count("steps") == sum(e["num_steps"] for e in eps)
    assert lake.count("media") == sum(e["num_steps"] for e in eps)


def test_fixing_a_quarantined_episode_and_reingesting_adds_it(pristine, dataset, tmp_path):
    nan_state(dataset)
    ingest(str(dataset), str(tmp_path / "lake"))
    shutil.copy(_parquet(pristine), _parquet(dataset))
    again = ingest(str(dataset), str(tmp_path / "lake"))
    assert (again.ingested, again.skipped, again.quarantined) == (1, 2, 0)
    assert Lake.open(str(tmp_path / "lake")).count("episodes") == EPISODES


def test_cli_exit_status(dataset, tmp_path, capsys):
    nan_state(dataset)
    assert cli_main(["ingest", str(dataset), str(tmp_path / "lake"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "quarantined 1" in out and "NaN" in out
    for i in range(EPISODES):
        _parquet(dataset, i).write_bytes(b"garbage")
    assert cli_main(["ingest", str(dataset), str(tmp_path / "lake2"), "--no-progress"]) == 1


def test_embodiment_width_conflict_is_quarantined(dataset, tmp_path):
    ingest(str(dataset), str(tmp_path / "lake"))
    info = json.loads((dataset / "meta/info.json").read_text())
    other = tmp_path / "other"
    generate_synthetic(other, SyntheticConfig.tiny(embodiments=("bimanual_14dof",), episodes_per_embodiment=1))
    # Same robot_type tag as the lake's single arm, but 14-dof vectors.
    meta = other / "bimanual_14dof/meta/info.json"
    d = json.loads(meta.read_text())
    d["robot_type"] = info["robot_type"]
    meta.write_text(json.dumps(d))
    result = ingest(str(other), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (0, 1)
    assert "--embodiment" in result.quarantine[0][1]


def test_rerun_over_a_bad_file_reports_it_but_records_it_once(dataset, tmp_path):
    nan_state(dataset)
    first = ingest(str(dataset), str(tmp_path / "lake"))
    again = ingest(str(dataset), str(tmp_path / "lake"))
    assert (first.quarantined, again.quarantined, again.skipped) == (1, 1, EPISODES - 1)
    lake = Lake.open(str(tmp_path / "lake"))
    assert lake.count("quarantine") == 1 and lake.version == 2
