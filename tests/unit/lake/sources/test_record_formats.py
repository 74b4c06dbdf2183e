"""Every reader keeps a record: inspect's counts per stream equal the lake's, dtypes as the source wrote them.

For each format the source is inspected from outside (`robolake inspect SRC --json`), ingested
into a lake, and each stream inspect lists is found in the lake's record with as many messages
(the signals and events tables, and `robolake info`'s streams, which sum the episodes'
metadata). What the record leaves out on purpose is listed per format with its reason:

* LeRobot: `episode_index` (the same in every row; the episode row keeps it).
* HDF5: datasets outside every episode (robomimic's `mask/*`), ACT's `compress_len` (the byte
  lengths of the cameras' padded JPEG rows, part of their frames).
* RLDS: nothing; inspect counts the first episode, so the first episode's record is compared.
* ROS 1, ROS 2, MCAP: nothing.

Cameras are in the record as their frame times (`camera` parts), one per frame inspect counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from robolake.cli import main as cli_main
from robolake.lake import IngestConfig, Lake, ingest
from robolake.lake.sources.columnar import ColumnRecord
from robolake.lake.sources.lerobot.record import column_values, record_rows
from robolake.lake.sources.mapping import load_mapping
from robolake.lake.sources.record import Record, read_record
from robolake.lake.sources.rlds.tfrecord import iter_records, parse_example
from robolake.testing.hdf5 import CUSTOM_MAPPING, write_aloha, write_custom, write_indexed, write_robomimic
from robolake.testing.rlds import write_tfds
from robolake.testing.ros import Layout, write_mcap_json, write_ros1, write_ros2
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic
from tests.fixtures import copy_pick_n_place

# --- helpers ------------------------------------------------------------------------------------


def _inspect(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    capsys.readouterr()
    rc = cli_main(["inspect", *argv, "--json"])
    out = capsys.readouterr().out
    assert rc == 0, out
    return list(json.loads(out)["units"])


def _table_counts(lake: Lake, episode_id: str | None = None) -> dict[str, int]:
    """Messages per stream in the signals and events tables (of one episode, or all)."""
    sig = lake.to_arrow("signals", columns=["episode_id", "stream", "count"])
    ev = lake.to_arrow("events", columns=["episode_id", "stream"])
    if episode_id is not None:
        sig = sig.filter(pc.equal(sig["episode_id"], episode_id))
        ev = ev.filter(pc.equal(ev["episode_id"], episode_id))
    out: dict[str, int] = {}
    for stream, n in zip(sig["stream"].to_pylist(), sig["count"].to_pylist(), strict=True):
        out[stream] = out.get(stream, 0) + int(n)
    for stream in ev["stream"].to_pylist():
        out[stream] = out.get(stream, 0) + 1
    return out


def _info_counts(lake: Lake) -> dict[str, int]:
    """`robolake info`'s streams of every embodiment, summed."""
    out: dict[str, int] = {}
    for emb in lake.summary()["embodiments"].values():
        for s in emb["streams"]:
            out[s["name"]] = out.get(s["name"], 0) + int(s["count"])
    return out


def _same_counts(inspected: dict[str, int], lake: Lake, not_kept: dict[str, str]) -> dict[str, int]:
    """Inspect's count of each stream is the lake's; the lake has no stream inspect does not list."""
    tables = _table_counts(lake)
    assert tables == _info_counts(lake)
    for name, n in inspected.items():
        if name in not_kept:
            assert name not in tables, f"{name} is kept but should not be ({not_kept[name]})"
        else:
            assert tables.get(name, 0) == n, f"{name}: inspect counts {n}, the lake holds {tables.get(name, 0)}"
    assert set(tables) <= set(inspected), sorted(set(tables) - set(inspected))
    return tables


def _episode_record(lake: Lake, episode_id: str) -> Record:
    sig = lake.to_arrow("signals")
    ev = lake.to_arrow("events")
    return read_record(
        sig.filter(pc.equal(sig["episode_id"], episode_id)), ev.filter(pc.equal(ev["episode_id"], episode_id))
    )


def _episode_id(lake: Lake, source_index: int, source_uri: str | None = None) -> str:
    eps = lake.episodes(columns=["episode_id", "source_episode_index", "source_uri"]).to_pylist()
    return next(
        e["episode_id"]
        for e in eps
        if e["source_episode_index"] == source_index and (source_uri is None or e["source_uri"] == source_uri)
    )


def _values(rec: Record, stream: str) -> np.ndarray:
    (part,) = rec.parts(stream)
    (values,) = part.values
    return values


# --- LeRobot ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gr00t(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Lake]:
    root = tmp_path_factory.mktemp("gr00t")
    src = copy_pick_n_place(root)
    ingest(str(src), str(root / "lake"), IngestConfig(execution="local"))
    return src, Lake.open(str(root / "lake"))


def test_gr00t_every_column_lands_with_inspects_counts(gr00t: tuple[Path, Lake], capsys: pytest.CaptureFixture[str]):
    src, lake = gr00t
    (unit,) = _inspect(capsys, str(src))
    counts = _same_counts(
        {k: int(v["count"]) for k, v in unit["keys"].items()},
        lake,
        {"episode_index": "the same in every row; the episode row keeps it"},
    )
    assert counts["observation.state"] == counts["next.done"] == counts["observation.images.ego_view"] == 2096
    assert unit["keys"]["observation.images.egoview"]["count"] == 0  # declared, no video file: no stream either
    streams = {s["name"]: s for s in lake.summary()["embodiments"]["gr1_arms_only"]["streams"]}
    assert streams["observation.images.ego_view"]["kind"] == "camera" and streams["next.done"]["rate_hz"] == 20.0


def test_gr00t_dtypes_survive_and_read_back_bit_exact(gr00t: tuple[Path, Lake]):
    src, lake = gr00t
    rec = _episode_record(lake, _episode_id(lake, 2))
    rows = pq.read_table(src / "data" / "chunk-000" / "episode_000002.parquet")
    state = _values(rec, "observation.state")
    assert state.dtype == np.float64 and state.shape == (rows.num_rows, 44)  # list<double>[44] stays float64
    expected = np.asarray(rows["observation.state"].to_pylist(), dtype=np.float64)
    assert state.tobytes() == expected.tobytes()
    assert _values(rec, "timestamp").reshape(-1).tobytes() == rows["timestamp"].to_numpy().tobytes()
    assert _values(rec, "index").dtype == np.int64 and _values(rec, "task_index").dtype == np.int64
    assert _values(rec, "next.done").dtype == np.bool_
    (part,) = rec.parts("observation.state")
    ts = rows["timestamp"].to_numpy()
    assert part.clock == "source" and part.t_ns.tolist() == np.round(ts * 1e9).astype(np.int64).tolist()
    meta = json.loads(lake.episodes(columns=["metadata"])["metadata"][0].as_py())["record"]
    assert meta["source_bytes"]["observation.state"] > 0
    assert "episode_index" in meta["left_out"]


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_synthetic_lerobot_counts_and_float32(tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str):
    (src,) = generate_synthetic(
        tmp_path / "src", SyntheticConfig.tiny(embodiments=("single_arm_7dof",), version=version, episodes_per_file=2)
    )
    ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    lake = Lake.open(str(tmp_path / "lake"))
    (unit,) = _inspect(capsys, str(src))
    counts = _same_counts({k: int(v["count"]) for k, v in unit["keys"].items()}, lake, {"episode_index": ""})
    assert counts["frame_index"] == counts["action"] == lake.count("steps")
    rec = _episode_record(lake, _episode_id(lake, 1))
    state = _values(rec, "observation.state")
    assert state.dtype == np.float32 and state.shape[1] == 7  # float32 (fixed_size_list in v3.0) stays float32
    assert _values(rec, "frame_index").dtype == np.int64 and _values(rec, "frame_index")[0, 0] == 0


def test_columns_of_every_shape_become_parts_in_their_own_dtype():
    table = pa.table(
        {
            "ragged": pa.array([[1, 2], [3, 4, 5], None, [6, 7]], pa.list_(pa.int16())),
            "nested": pa.array([[[1.0, 2.0], [3.0, 4.0]]] * 4, pa.list_(pa.list_(pa.float64()))),
            "flag": pa.array([True, None, False, True]),
            "ints": pa.array([[1, None], [2, 3], [4, 5], [6, 7]], pa.list_(pa.int32())),
            "note": pa.array(["a", None, "b", "c"]),
            "blob": pa.array([b"x"] * 4),
            "episode_index": pa.array([7] * 4),
        }
    )
    parts = column_values(table["ragged"])
    assert not isinstance(parts, str)
    assert [(r.tolist(), v.dtype, v.tolist()) for r, v, _ in parts] == [
        ([0, 3], np.dtype(np.int16), [[1, 2], [6, 7]]),
        ([1], np.dtype(np.int16), [[3, 4, 5]]),
    ]
    into = ColumnRecord(path="x.parquet")
    record_rows(table, into, t_ns=np.arange(4) * 10, clock="source", cameras={})
    rec = into.build()
    assert rec.counts() == {"ragged": 3, "nested": 4, "flag": 3, "ints": 4, "note": 4}  # a null row: no message
    assert _values(rec, "nested").shape == (4, 4)
    (flag,) = rec.parts("flag")
    assert flag.values[0].dtype == np.bool_ and flag.t_ns.tolist() == [0, 20, 30]
    ints = _values(rec, "ints")
    assert ints.dtype == np.float64 and np.isnan(ints[0, 1]) and ints[3].tolist() == [6, 7]  # a null inside a row
    assert rec.event("note") is not None and rec.event("note").values == ("a", None, "b", "c")  # type: ignore[union-attr]
    assert set(into.left_out) == {"blob", "episode_index"}


# --- HDF5 ---------------------------------------------------------------------------------------


def _hdf5_counts(unit: dict[str, Any]) -> dict[str, int]:
    """Inspect's keys, named as the record names them (relative to the episode group)."""
    return {k.removeprefix("data/*/"): int(v["count"]) for k, v in unit["keys"].items()}


@pytest.mark.parametrize(
    "name",
    ["robomimic", "aloha_compressed", "indexed"],
)
def test_hdf5_every_dataset_lands_with_inspects_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str):
    path = tmp_path / "src" / f"{name}.hdf5"
    path.parent.mkdir()
    not_kept: dict[str, str] = {}
    if name == "robomimic":
        write_robomimic(path, demos=3, datagen_info=True)
        not_kept = {"mask/train": "outside every episode", "mask/valid": "outside every episode"}
    elif name == "aloha_compressed":
        write_aloha(path, compress=True)
        not_kept = {"compress_len": "byte lengths of the cameras' JPEG rows"}
    else:
        write_indexed(path, images=True, fps=10.0)
    (unit,) = _inspect(capsys, str(path))
    ingest(str(path), str(tmp_path / "lake"), IngestConfig(execution="local"))
    lake = Lake.open(str(tmp_path / "lake"))
    counts = _same_counts(_hdf5_counts(unit), lake, not_kept)
    for key in not_kept:
        assert unit["keys"][key]["role"].startswith("not kept")
    if name == "robomimic":
        assert counts["obs/datagen_info/eef_pose"] == counts["states"] == counts["obs/agentview_image"] == 60
        rec = _episode_record(lake, _episode_id(lake, 1))
        with h5py.File(path) as f:
            assert _values(rec, "obs/object").tobytes() == f["data/demo_1/obs/object"][()].tobytes()
            assert (
                _values(rec, "obs/datagen_info/eef_pose").tobytes()
                == f["data/demo_1/obs/datagen_info/eef_pose"][()].tobytes()
            )
        assert _values(rec, "dones").dtype == np.int64 and _values(rec, "rewards").dtype == np.float64
        (part,) = rec.parts("states")
        assert part.clock == "rows" and part.t_ns[1] == 50_000_000  # row 1 at 20 Hz
    elif name == "aloha_compressed":
        assert counts["observations/qvel"] == 30
        rec = _episode_record(lake, _episode_id(lake, 0))
        assert _values(rec, "observations/qpos").dtype == np.float32  # float32 stays float32
        with h5py.File(path) as f:
            assert _values(rec, "observations/effort").tobytes() == f["observations/effort"][()].tobytes()
    else:
        assert set(counts) == {"states_{i}", "actions_{i}", "images_{i}"}
        rec = _episode_record(lake, _episode_id(lake, 2))
        with h5py.File(path) as f:
            assert _values(rec, "actions_{i}").tobytes() == f["actions_2"][()].tobytes()


def test_hdf5_streams_at_their_own_stamps(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = write_custom(tmp_path / "rig.hdf5")
    with h5py.File(path, "a") as f:  # datasets the mapping does not name: one with a clock, one with none
        f.create_dataset("robot/torque", data=np.arange(len(f["robot/joint_t"]) * 2, dtype=np.int32).reshape(-1, 2))
        f.create_dataset("robot/status", data=np.array([b"ok"] * len(f["robot/joint_t"])))
        f.create_dataset("battery", data=np.linspace(1, 0, 7))
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(CUSTOM_MAPPING))
    (unit,) = _inspect(capsys, str(path), "--map", str(tmp_path / "rig.yaml"))
    ingest(
        str(path),
        str(tmp_path / "lake"),
        IngestConfig(execution="local", mapping=load_mapping(str(tmp_path / "rig.yaml"))),
    )
    lake = Lake.open(str(tmp_path / "lake"))
    _same_counts(_hdf5_counts(unit), lake, {})
    rec = _episode_record(lake, _episode_id(lake, 0))
    with h5py.File(path) as f:
        joint_t = f["robot/joint_t"][()]
        teleop_t = f["teleop/t"][()]
    torque = rec.parts("robot/torque")[0]
    assert torque.clock == "source" and torque.t_ns.tolist() == np.round(joint_t * 1e9).astype(np.int64).tolist()
    assert torque.values[0].dtype == np.int32  # integer ticks stay integers
    cmd = rec.parts("teleop/cmd")[0]
    assert cmd.t_ns.tolist() == np.round(teleop_t * 1e9).astype(np.int64).tolist()
    assert rec.parts("battery")[0].clock == "rows"  # no clock of its own: its rows at the rate
    status = rec.event("robot/status")
    assert status is not None and status.values[0] == "ok" and len(status) == len(joint_t)
    assert unit["keys"]["robot/torque"]["role"].startswith("in the record only")


# --- RLDS ---------------------------------------------------------------------------------------


def test_rlds_every_feature_lands_with_inspects_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    src = write_tfds(tmp_path / "bridge_mini" / "1.0.0")
    (unit,) = _inspect(capsys, str(src))
    assert unit["counts_of"].startswith("the first episode")
    ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    lake = Lake.open(str(tmp_path / "lake"))
    first = _episode_id(lake, 0)
    counts = _table_counts(lake, first)
    inspected = {k: int(v["count"]) for k, v in unit["keys"].items()}
    assert counts == inspected
    assert _table_counts(lake) == _info_counts(lake)
    assert counts["steps/observation/image"] == counts["steps/is_first"] == 12
    rec = _episode_record(lake, first)
    assert (
        _values(rec, "steps/is_first").dtype == np.bool_
        and _values(rec, "steps/is_first")[:, 0].tolist() == [True] + [False] * 11
    )
    shard = sorted(src.glob("*-train.tfrecord-00000-*"))[0]
    ex = parse_example(next(iter_records(str(shard))))
    assert _values(rec, "steps/action").dtype == np.float32
    assert _values(rec, "steps/action").tobytes() == np.asarray(ex["steps/action"], np.float32).tobytes()
    assert rec.event("steps/language_instruction").values[0] == "put the carrot in the pot"  # type: ignore[union-attr]


# --- topic logs ---------------------------------------------------------------------------------


def _extras() -> dict[str, Any]:
    return {
        "/imu": ("imu", [(t, np.arange(10) * 0.1 + t) for t in np.arange(100) / 100.0]),
        "/ticks": ("int64", [(t, 1_000_000_007 + i) for i, t in enumerate(np.arange(20) / 20.0)]),
        "/fault": ("bool", [(0.2, False), (0.5, True)]),
        "/phase": ("string", [(0.1, "reach"), (0.6, "grasp")]),
    }


def _topic_counts(unit: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in unit["recordings"]:
        for topic, row in rec["topics"].items():
            out[topic] = out.get(topic, 0) + int(row["count"])
    return out


@pytest.mark.parametrize("fmt", ["ros1", "ros2", "mcap"])
def test_topic_logs_every_topic_lands_with_inspects_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
):
    pytest.importorskip("rosbags")
    extras = _extras() if fmt != "mcap" else {"/phase": _extras()["/phase"]}  # the JSON writer writes strings only
    layout = Layout(seconds=1.0, extra=extras)
    src = tmp_path / "src" / {"ros1": "rig.bag", "ros2": "rig", "mcap": "rig.mcap"}[fmt]
    src.parent.mkdir()
    if fmt == "ros1":
        write_ros1(src, layout)
    elif fmt == "ros2":
        write_ros2(src, layout)
    else:
        write_mcap_json(src, layout)
    (unit,) = _inspect(capsys, str(src))
    ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    lake = Lake.open(str(tmp_path / "lake"))
    counts = _same_counts(_topic_counts(unit), lake, {})
    assert counts["/joint_states"] == 100 and counts["/wrist/image_raw/compressed"] == 15
    assert counts["/phase"] == 2
    if fmt != "mcap":
        assert counts["/imu"] == 100 and counts["/ticks"] == 20 and counts["/fault"] == 2


def test_streams_narrows_the_record_but_keeps_what_the_steps_use(tmp_path: Path):
    path = write_robomimic(tmp_path / "mimic.hdf5", demos=1, images=False)
    ingest(str(path), str(tmp_path / "lake"), IngestConfig(execution="local", streams=("obs/robot0_*",)))
    lake = Lake.open(str(tmp_path / "lake"))
    counts = _table_counts(lake)
    assert set(counts) == {
        "obs/object",
        "obs/robot0_eef_pos",
        "obs/robot0_eef_quat",
        "obs/robot0_gripper_qpos",
        "actions",
    }
    meta = json.loads(lake.episodes(columns=["metadata"])["metadata"][0].as_py())["record"]
    assert meta["left_out"] == {
        "dones": "not matched by --streams",
        "rewards": "not matched by --streams",
        "states": "not matched by --streams",
    }
