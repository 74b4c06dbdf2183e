"""Rerun reader: recordings written by rerun-sdk, end to end through ingest and inspect, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rerun")

from robolake.cli import main as cli_main  # noqa: E402
from robolake.lake import Lake  # noqa: E402
from robolake.lake.intake.ingest import IngestConfig, ingest  # noqa: E402
from robolake.lake.sources import formats, register_format  # noqa: E402
from robolake.lake.sources.base import SourceError  # noqa: E402
from robolake.lake.sources.mapping import load_mapping, mapping_from_dict  # noqa: E402
from robolake.lake.sources.registry import SourceOptions  # noqa: E402
from robolake.lake.sources.rerun.reader import FORMAT, RerunReader  # noqa: E402
from robolake.testing import rerun_recordings as rrd  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    if FORMAT.name not in {f.name for f in formats()}:
        register_format(FORMAT)


def _local() -> IngestConfig:
    return IngestConfig(execution="local")


def test_default_read_resamples_state_keeps_every_entity_and_passes_jpeg_through(tmp_path: Path):
    path = rrd.write_robot(tmp_path / "arm.rrd", steps=60)
    r = RerunReader(str(path))
    assert r.plan.timeline == "time" and r.fps == 100.0
    assert [s.source for s in r.plan.state] == ["/robot/gripper", "/robot/joints"]
    assert [s.source for s in r.plan.action] == ["/robot/action"]
    assert [c.source for c in r.plan.cameras] == ["/camera/wrist"] and r.plan.task_from == "/task"
    (ref,) = r.discover()
    ep = r.read_tabular(ref)
    assert ep.num_steps == 60 and ep.task == "pick up the cube"
    np.testing.assert_allclose(ep.timestamps, np.arange(60) / 100.0, atol=1e-9)
    want = np.stack([rrd.joint_values(k) for k in range(60)])
    np.testing.assert_allclose(ep.state[:, 1:], want, atol=1e-6)
    streams = ep.metadata["record"]["streams"]
    assert {
        "/robot/joints",
        "/robot/gripper",
        "/robot/action",
        "/robot/ee:Transform3D:translation",
        "/log",
        "/task",
    } <= set(streams)
    assert streams["/robot/joints"]["count"] == 60 and streams["/robot/joints"]["dtypes"] == ["float64"]
    assert streams["/robot/ee:Transform3D:translation"]["dtypes"] == ["float32"]
    (part,) = ep.record.parts("/robot/joints")
    np.testing.assert_array_equal(part.values[0], want)  # as logged, float64, every row
    (frames,) = list(r.read_frames(ep))
    assert frames.encoding == "jpeg" and len(frames.images) == 60 and (frames.height, frames.width) == (24, 32)
    assert frames.images[0][:3] == b"\xff\xd8\xff"


def test_raw_images_are_a_camera_encoded_losslessly(tmp_path: Path):
    r = RerunReader(str(rrd.write_robot(tmp_path / "raw.rrd", steps=30, camera="raw")))
    ep = r.read_tabular(r.discover()[0])
    (frames,) = list(r.read_frames(ep))
    assert len(frames.images) == 30 and (frames.height, frames.width) == (24, 32) and frames.encoding != "jpeg"


def test_a_mapping_splits_by_gap_or_by_label_entity_and_chooses_the_timeline(tmp_path: Path):
    path = rrd.write_robot(tmp_path / "takes.rrd", steps=40, episodes=3, gap_s=1.5, phase=True, camera=None)
    assert len(RerunReader(str(path)).discover()) == 1  # one per file by default
    base = {"state": [{"source": "/robot/joints"}], "action": [{"source": "/robot/action"}], "cameras": {}}
    gap = mapping_from_dict({**base, "split": {"by": "gap", "seconds": 0.5}})
    r = RerunReader(str(path), SourceOptions(mapping=gap))
    eps = [r.read_tabular(ref) for ref in r.discover()]
    assert [e.num_steps for e in eps] == [40, 40, 40] and r.spec().state_dim == 7
    label = mapping_from_dict({**base, "split": {"by": "topic", "source": "/episode/phase"}})
    r = RerunReader(str(path), SourceOptions(mapping=label))
    assert [r.read_tabular(ref).num_steps for ref in r.discover()] == [40, 40, 40]
    on_log = mapping_from_dict({**base, "state": [{"source": "/robot/joints", "stamps": "log_time"}]})
    assert RerunReader(str(path), SourceOptions(mapping=on_log)).plan.timeline == "log_time"
    with pytest.raises(SourceError, match="no_such"):
        RerunReader(str(path), SourceOptions(mapping=mapping_from_dict({**base, "state": [{"source": "/no_such"}]})))


def test_a_scalar_entity_whose_timeline_goes_backwards_is_named(tmp_path: Path):
    path = rrd.write_backwards(tmp_path / "ft.rrd")
    r = RerunReader(str(path))  # default: left out of the state, kept in the record, said
    assert [s.source for s in r.plan.state] == ["/robot/joints"]
    ep = r.read_tabular(r.discover()[0])
    assert ep.metadata["record"]["streams"]["/sensor/ft"]["count"] == 60
    assert any("/sensor/ft" in n and "backwards" in n for n in ep.metadata["notes"])
    mapped = mapping_from_dict({"state": [{"source": "/sensor/ft"}], "action_from_state": True, "cameras": {}})
    r = RerunReader(str(path), SourceOptions(mapping=mapped))
    with pytest.raises(SourceError, match="ft") as e:
        r.read_tabular(r.discover()[0])
    assert e.value.reason_code == "timestamps" and e.value.path.endswith("ft.rrd")


def test_an_image_entity_whose_size_changes_is_named(tmp_path: Path):
    r = RerunReader(str(rrd.write_image_size_change(tmp_path / "cam.rrd")))
    ep = r.read_tabular(r.discover()[0])
    with pytest.raises(SourceError, match="/camera/top") as e:
        list(r.read_frames(ep))
    assert e.value.reason_code in ("frame_size", "shape")


def test_empty_and_truncated_recordings_are_refused_by_name(tmp_path: Path):
    with pytest.raises(SourceError, match="empty") as e:
        RerunReader(str(rrd.write_empty(tmp_path / "empty.rrd")))
    assert e.value.reason_code == "empty"
    with pytest.raises(SourceError, match="truncated") as e:
        RerunReader(str(rrd.write_truncated(tmp_path / "cut.rrd")))
    assert e.value.reason_code == "corrupt_file" and e.value.path.endswith("cut.rrd")


def test_ingest_lands_good_files_and_quarantines_bad_ones(tmp_path: Path):
    src = tmp_path / "runs"
    rrd.write_robot(src / "a.rrd", steps=45)
    rrd.write_robot(src / "b.rrd", steps=30, app="robot")
    rrd.write_empty(src / "empty.rrd")
    rrd.write_truncated(src / "cut.rrd")
    rrd.write_image_size_change(src / "resized.rrd")
    res = ingest(str(src), str(tmp_path / "lake"), _local())
    lake = Lake.open(str(tmp_path / "lake"))
    eps = sorted(lake.episodes().to_pylist(), key=lambda e: e["num_steps"])
    assert [e["num_steps"] for e in eps] == [30, 45] and res.ingested == 2
    assert all(e["source_format"] == "rerun" and e["task"] == "pick up the cube" for e in eps)
    meta = json.loads(eps[0]["metadata"])
    assert meta["timeline"]["name"] == "time" and "/robot/ee:Transform3D:translation" in meta["record"]["streams"]
    q = {Path(r["source_path"]).name: r for r in lake.to_arrow("quarantine").to_pylist()}
    assert set(q) == {"empty.rrd", "cut.rrd", "resized.rrd"}, q
    assert q["cut.rrd"]["reason_code"] == "corrupt_file" and q["empty.rrd"]["reason_code"] == "empty"
    assert "/camera/top" in q["resized.rrd"]["reason"]


def test_inspect_describes_every_entity_and_its_suggested_map_ingests_the_same(tmp_path: Path, capsys):
    path = rrd.write_robot(tmp_path / "arm.rrd", steps=50)
    assert cli_main(["inspect", str(path), "--json"]) == 0
    (unit,) = json.loads(capsys.readouterr().out)["units"]
    rows = unit["entities"]
    joints = rows["/robot/joints Scalars:scalars"]
    assert joints["count"] == 50 and joints["rate_hz"] == pytest.approx(100) and joints["shape"] == "[7]"
    assert joints["role"] == "state" and rows["/camera/wrist EncodedImage:blob"]["role"].startswith("camera")
    assert rows["/robot/ee Transform3D:translation"]["role"] == "record" and unit["timeline"] == "time"
    assert cli_main(["inspect", str(path), "--suggest-map"]) == 0
    (tmp_path / "arm.yaml").write_text(capsys.readouterr().out)
    default = ingest(str(path), str(tmp_path / "lake1"), _local())
    mapped = ingest(
        str(path),
        str(tmp_path / "lake2"),
        IngestConfig(execution="local", mapping=load_mapping(str(tmp_path / "arm.yaml"))),
    )
    assert default.ingested == mapped.ingested == 1
    e1, e2 = (Lake.open(str(tmp_path / x)).episodes().to_pylist()[0] for x in ("lake1", "lake2"))
    assert e1["num_steps"] == e2["num_steps"] == 50 and e1["cameras"] == e2["cameras"]


def test_bench_fixture_writes_one_recording_per_episode(tmp_path: Path):
    rrd.bench_fixture(tmp_path, episodes=2, steps=20)
    files = sorted(tmp_path.glob("*.rrd"))
    assert (
        len(files) == 2
        and RerunReader(str(files[0])).read_tabular(RerunReader(str(files[0])).discover()[0]).num_steps == 20
    )
