"""HDF5 reader: the layouts real recorders write, end to end through ingest, and bad input to quarantine."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.media.frames import decode_row
from robolake.lake.sources import SourceError, SourceOptions, discover_readers
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.testing.hdf5 import (
    CUSTOM_MAPPING,
    write_aloha,
    write_custom,
    write_robomimic,
    write_robosuite,
)
from robolake.testing.images import frames


def _reader(path: Path, **opts):
    found = discover_readers(str(path), options=SourceOptions(**opts))
    assert len(found) == 1
    return found[0]


def test_aloha_raw_and_compressed_cameras(tmp_path: Path):
    raw = _reader(write_aloha(tmp_path / "raw.hdf5"))
    packed = _reader(write_aloha(tmp_path / "packed.hdf5", compress=True))
    for r in (raw, packed):
        assert (r.format_name, r.tag, r.cameras) == ("hdf5-aloha", "aloha", ("cam_high", "cam_left_wrist"))
        ep = r.read_tabular(r.discover()[0])
        assert ep.state.shape == (30, 14) and ep.fps == 50.0
        np.testing.assert_allclose(ep.timestamps[1], 0.02)
        with h5py.File(r.root) as f:
            np.testing.assert_array_equal(ep.state, f["observations/qpos"][()])
            np.testing.assert_array_equal(ep.action, f["action"][()])
        cams = {c.camera: c for c in r.read_frames(ep)}
        assert [len(c.images) for c in cams.values()] == [30, 30]
        img = decode_row(cams["cam_high"].images[5], cams["cam_high"].encoding)
        assert img.shape == (48, 64, 3)
        if r is raw:  # raw pixels are kept losslessly (lake.codecs); JPEG cells pass through as they are
            assert cams["cam_high"].encoding == "ffv1;size=64x48"
            np.testing.assert_array_equal(img, frames(30, 48, 64)[5])
        assert np.abs(img.astype(int) - frames(30, 48, 64)[5].astype(int)).mean() < 8
    # compressed rows pass through byte for byte (padding cut at compress_len)
    with h5py.File(packed.root) as f:
        n = int(f["compress_len"][0, 3])
        stored = bytes(f["observations/images/cam_high"][3][:n])
    ep = packed.read_tabular(packed.discover()[0])
    assert next(iter(packed.read_frames(ep))).images[3] == stored


def test_aloha_layout_file_naming_its_robot_keeps_that_tag(tmp_path: Path):
    path = write_aloha(tmp_path / "episode_0.hdf5")
    with h5py.File(path, "a") as f:
        f.attrs["robot_type"] = "sawyer"
        f.attrs["task"] = "reach the goal"
    r = _reader(path)
    assert r.tag == "sawyer"
    assert r.read_tabular(r.discover()[0]).tasks == ("reach the goal",)
    assert _reader(path, embodiment="forced").tag == "forced"  # --embodiment still wins


def test_robomimic_and_robosuite_defaults(tmp_path: Path):
    rm = _reader(write_robomimic(tmp_path / "lift.hdf5"))
    assert rm.tag == "robomimic_panda_lift" and rm.cameras == ("agentview", "robot0_eye_in_hand")
    spec = rm.spec()
    assert (spec.state_dim, spec.action_dim) == (3 + 4 + 2 + 10, 7)
    assert [s.name for s in spec.state] == ["object", "robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos"]
    refs = rm.discover()
    assert [r.episode_index for r in refs] == [0, 1, 2]
    ep = rm.read_tabular(refs[2])
    assert ep.task == "Lift" and ep.success is True and ep.fps == 20.0
    assert ep.metadata["splits"] == ["valid"] and "model_file_sha256" in ep.metadata
    with h5py.File(rm.root) as f:
        np.testing.assert_allclose(ep.state[:, 10:13], f["data/demo_2/obs/robot0_eef_pos"][()], rtol=1e-6)
    rs = _reader(write_robosuite(tmp_path / "suite.hdf5", env="Door", robot="Sawyer"))
    assert rs.tag == "robosuite_sawyer_door" and rs.cameras == ()
    assert [r.episode_index for r in rs.discover()] == [1, 2]
    assert rs.read_tabular(rs.discover()[0]).state.shape == (15, 32)


def test_mapping_resamples_streams_at_different_rates(tmp_path: Path):
    path = write_custom(tmp_path / "rec.h5", seconds=2.0)
    r = _reader(path, mapping=mapping_from_dict(CUSTOM_MAPPING, "map.yaml"))
    assert (r.format_name, r.tag, r.cameras) == ("hdf5-mapped", "myarm", ("front",))
    ep = r.read_tabular(r.discover()[0])
    assert ep.fps == 30 and ep.task == "stack the red block"
    assert ep.state.shape[1] == 7 and ep.action.shape[1] == 7
    with h5py.File(path) as f:
        tj, tc, tv = f["robot/joint_t"][()], f["teleop/t"][()], f["camera/t"][()]
        cmd = f["teleop/cmd"][()]
    # window: where all three streams have data
    assert ep.timestamps[0] == pytest.approx(max(tj[0], tc[0], tv[0]))
    assert ep.timestamps[-1] <= min(tj[-1], tc[-1], tv[-1])
    np.testing.assert_allclose(np.diff(ep.timestamps), 1 / 30)
    # state: linear interpolation of sin(t); action: last command at or before the tick
    np.testing.assert_allclose(ep.state[:, 0], np.sin(ep.timestamps), atol=2e-4)
    k = np.searchsorted(tc, ep.timestamps, side="right") - 1
    np.testing.assert_allclose(ep.action, cmd[k], rtol=1e-6)
    # frames: the latest frame at or before each tick (15 fps camera -> repeats at 30 Hz)
    idx = np.asarray(ep.metadata["frame_index"]["front"])
    np.testing.assert_array_equal(idx, np.searchsorted(tv, ep.timestamps, side="right") - 1)
    assert (tv[idx] <= ep.timestamps).all()
    cam = next(iter(r.read_frames(ep)))
    assert len(cam.images) == ep.num_steps and (cam.height, cam.width) == (24, 32)


def _corrupt(path: Path, key: str, fn) -> None:
    with h5py.File(path, "r+") as f:
        data = fn(f[key][()])
        del f[key]
        f.create_dataset(key, data=data)


def test_mixed_directory_ingests_with_bad_files_quarantined(tmp_path: Path):
    src = tmp_path / "recordings"
    (src / "aloha" / "sim_transfer_cube").mkdir(parents=True)
    (src / "robomimic").mkdir()
    write_aloha(src / "aloha" / "sim_transfer_cube" / "episode_0.hdf5", seed=0)
    write_aloha(src / "aloha" / "sim_transfer_cube" / "episode_1.hdf5", seed=1, compress=True)
    write_robomimic(src / "robomimic" / "lift.hdf5", env="Lift", object_dim=10, demos=2, images=False)
    write_robomimic(src / "robomimic" / "can.hdf5", env="PickPlaceCan", object_dim=14, demos=2, images=False)
    write_robosuite(src / "suite.hdf5", demos=2)
    # bad input: NaN in qpos, a truncated file, JPEGs whose size changes mid-episode, a demo of another width
    bad_nan = write_aloha(src / "aloha" / "sim_transfer_cube" / "episode_2.hdf5", seed=2)
    _corrupt(bad_nan, "observations/qpos", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 40, np.nan, a))
    good = (src / "aloha" / "sim_transfer_cube" / "episode_0.hdf5").read_bytes()
    (src / "aloha" / "truncated.hdf5").write_bytes(good[: len(good) // 3])
    sizes = [(48, 64)] * 10 + [(40, 64)] * 20
    write_aloha(src / "aloha" / "resized.hdf5", compress=True, cams=("cam_high",), sizes=sizes)
    rm_bad = write_robomimic(src / "robomimic" / "widths.hdf5", env="Stack", demos=2, images=False)
    _corrupt(rm_bad, "data/demo_1/actions", lambda a: np.concatenate([a, a[:, :1]], axis=1))
    (src / "README.md").write_text("recordings of week 48")

    result = ingest(str(src), str(tmp_path / "lake"), IngestConfig(episodes_per_task=4))
    lake = Lake.open(str(tmp_path / "lake"))
    eps = lake.episodes().to_pylist()
    tags = sorted({e["embodiment"] for e in eps})
    assert tags == [
        "aloha",
        "robomimic_panda_lift",
        "robomimic_panda_pickplacecan",
        "robomimic_panda_stack",
        "robosuite_panda_lift",
    ]
    emb = lake.embodiments()
    assert emb["robomimic_panda_lift"].state_dim == 19 and emb["robomimic_panda_pickplacecan"].state_dim == 23
    q = {Path(r["source_path"]).name: r for r in lake.to_arrow("quarantine").to_pylist()}
    assert set(q) == {"episode_2.hdf5", "truncated.hdf5", "resized.hdf5", "widths.hdf5"}, q
    assert q["episode_2.hdf5"]["reason_code"] == "non_finite" and "observations/qpos" in q["episode_2.hdf5"]["reason"]
    assert q["truncated.hdf5"]["reason_code"] == "corrupt_file" and "truncated" in q["truncated.hdf5"]["reason"]
    assert q["resized.hdf5"]["reason_code"] == "shape" and "frame 10" in q["resized.hdf5"]["reason"]
    assert q["widths.hdf5"]["reason_code"] == "shape" and "actions" in q["widths.hdf5"]["reason"]
    assert result.ingested == 2 + 2 + 2 + 2 + 1  # aloha, lift, can, suite, stack demo_0
    aloha = [e for e in eps if e["embodiment"] == "aloha"]
    assert {e["task"] for e in aloha} == {"sim transfer cube"}
    assert all(e["cameras"] == ["cam_high", "cam_left_wrist"] and e["num_steps"] == 30 for e in aloha)
    assert lake.to_arrow("media").num_rows == 2 * 2 * 30
    meta = json.loads(next(e for e in eps if e["embodiment"] == "robomimic_panda_lift")["metadata"])
    assert meta["layout"] == "robomimic" and meta["splits"] in (["train"], ["valid"])
    # idempotent: a second run ingests nothing new and records no quarantine twice
    again = ingest(str(src), str(tmp_path / "lake"))
    assert (again.ingested, again.skipped) == (0, result.ingested)
    assert Lake.open(str(tmp_path / "lake")).to_arrow("quarantine").num_rows == 4


def test_mapped_recordings_bad_clocks_quarantined(tmp_path: Path):
    src = tmp_path / "logs"
    src.mkdir()
    write_custom(src / "good_a.h5", seed=1)
    write_custom(src / "good_b.h5", seed=2)
    back = write_custom(src / "backwards.h5", seed=3)
    _corrupt(back, "teleop/t", lambda t: np.r_[t[:30], t[30:35] - 0.5, t[35:]])
    write_custom(src / "apart.h5", seed=4, cam_offset=10.0)  # the camera starts after the joints end
    empty = write_custom(src / "empty.h5", seed=5)
    _corrupt(empty, "camera/rgb", lambda a: a[:0])
    _corrupt(empty, "camera/t", lambda a: a[:0])
    missing = write_custom(src / "missing.h5", seed=6)
    with h5py.File(missing, "r+") as f:
        del f["teleop/cmd"]
    mapping = mapping_from_dict(CUSTOM_MAPPING, "arm.yaml")
    result = ingest(str(src), str(tmp_path / "lake"), IngestConfig(mapping=mapping))
    assert result.ingested == 2
    q = {Path(p).name: reason for p, reason in result.quarantine}
    assert set(q) == {"backwards.h5", "apart.h5", "empty.h5", "missing.h5"}
    assert "teleop/cmd" in q["backwards.h5"] or "teleop/t" in q["backwards.h5"]
    assert "goes backwards at message 30" in q["backwards.h5"]
    assert "never overlap" in q["apart.h5"]
    assert "no messages" in q["empty.h5"]
    assert "'/teleop/cmd'" in q["missing.h5"] and "robot/joints" in q["missing.h5"]  # says which exist
    codes = {
        Path(r["source_path"]).name: r["reason_code"]
        for r in Lake.open(str(tmp_path / "lake")).to_arrow("quarantine").to_pylist()
    }
    assert codes == {
        "backwards.h5": "timestamps",
        "apart.h5": "no_overlap",
        "empty.h5": "empty",
        "missing.h5": "missing_key",
    }


def test_unknown_layout_says_to_write_a_mapping(tmp_path: Path):
    with h5py.File(tmp_path / "odd.h5", "w") as f:
        f.create_dataset("foo/bar", data=np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"foo/bar.*--map"):
        discover_readers(str(tmp_path))


def test_width_check_names_the_dataset(tmp_path: Path):
    r = _reader(write_robomimic(tmp_path / "w.hdf5", demos=2, images=False))
    _corrupt(tmp_path / "w.hdf5", "data/demo_1/obs/object", lambda a: a[:, :4])
    with pytest.raises(SourceError, match="obs/object has width 4"):
        r.read_tabular(r.discover()[1])


def _two_takes(path: Path) -> Path:
    """One recording holding two takes separated by a 3 s pause, with an `active` flag per joint row."""
    tj = np.r_[np.arange(0, 1, 0.01), np.arange(4, 5.5, 0.01)]
    tv = np.r_[np.arange(0, 1, 1 / 15), np.arange(4, 5.5, 1 / 15)]
    with h5py.File(path, "w") as f:
        active = np.zeros(len(tj), np.uint8)
        active[0:80] = active[100:180] = 1  # the operator's "recording" switch
        f["t"], f["joints"], f["active"] = tj, np.stack([tj, -tj], axis=1), active
        f["cam_t"], f["rgb"] = tv, frames(len(tv), 16, 16)
    return path


@pytest.mark.parametrize(
    ("split", "lengths"), [({"by": "gap", "seconds": 1.0}, [20, 30]), ({"by": "topic", "source": "active"}, [16, 16])]
)
def test_mapping_splits_a_recording(tmp_path: Path, split, lengths):
    m = mapping_from_dict(
        {
            "fps": 20,
            "state": [{"source": "joints", "stamps": "t"}],
            "action_from_state": True,
            "cameras": {"c": {"source": "rgb", "stamps": "cam_t"}},
            "split": split,
        },
        "takes.yaml",
    )
    r = _reader(_two_takes(tmp_path / "takes.h5"), mapping=m)
    refs = r.discover()
    eps = [r.read_tabular(ref) for ref in refs]
    assert [e.num_steps for e in eps] == lengths
    assert eps[1].timestamps[0] >= 4.0 and eps[0].timestamps[-1] < 1.0
    np.testing.assert_allclose(eps[1].state[:, 0], eps[1].timestamps, atol=1e-9)
    assert [len(next(iter(r.read_frames(e))).images) for e in eps] == lengths


def test_state_only_drops_a_missing_camera(tmp_path: Path):
    path = write_custom(tmp_path / "rec.h5")
    m = mapping_from_dict(
        {
            **CUSTOM_MAPPING,
            "cameras": {"front": {"source": "/camera/rgb", "stamps": "/camera/t"}, "side": "/camera/side"},
        },
        "m.yaml",
    )
    with pytest.raises(ValueError, match=r"cameras.side names '/camera/side'.*camera/rgb"):
        discover_readers(str(path), options=SourceOptions(mapping=m))
    r = _reader(path, mapping=m, state_only=True)
    assert r.cameras == ("front",)
    ep = r.read_tabular(r.discover()[0])
    assert [c.camera for c in r.read_frames(ep)] == ["front"]
