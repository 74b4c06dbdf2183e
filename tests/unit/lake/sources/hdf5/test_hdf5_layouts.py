"""HDF5 layouts that used to land partly or not at all: indexed key families, nested obs groups,
cameras of another rank, and a rate the file does not record."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.media.frames import decode_row
from robolake.lake.sources import SourceOptions, discover_readers
from robolake.lake.sources.mapping import mapping_from_dict
from robolake.testing.hdf5 import write_indexed, write_robomimic
from robolake.testing.images import frames


def _reader(path: Path, **opts):
    (r,) = discover_readers(str(path), options=SourceOptions(**opts)).readers
    return r


def test_indexed_families_are_one_episode_per_index(tmp_path: Path):
    """states_<i> / actions_<i> pairs used to land one episode per file, the others left silently."""
    path = write_indexed(tmp_path / "flat.h5", episodes=4, images=True, fps=15.0)
    r = _reader(path)
    assert (r.format_name, r.fps, r.cameras) == ("hdf5-indexed", 15.0, ("images",))
    refs = r.discover()
    assert [ref.episode_index for ref in refs] == [0, 1, 2, 3]
    with h5py.File(path) as f:
        for ref in refs:
            ep = r.read_tabular(ref)
            i = ref.episode_index
            np.testing.assert_array_equal(ep.state, f[f"states_{i}"][()].astype(np.float32))
            np.testing.assert_array_equal(ep.action, f[f"actions_{i}"][()].astype(np.float32))
            (cam,) = list(r.read_frames(ep))
            np.testing.assert_array_equal(decode_row(cam.images[3], cam.encoding), f[f"images_{i}"][3])  # raw: lossless
    res = ingest(str(path), str(tmp_path / "lake"))
    assert (res.ingested, res.quarantined) == (4, 0)


def test_a_mapping_names_a_family_with_i_or_is_told_about_it(tmp_path: Path):
    path = write_indexed(tmp_path / "flat.h5", episodes=5, skip=(3,))
    one = mapping_from_dict({"state": ["states_0"], "action": ["actions_0"], "fps": 10}, "one.yaml")
    r = _reader(path, mapping=one)
    assert len(r.discover()) == 1 and any("name 'states_{i}' to ingest each as an episode" in n for n in r.notes)
    family = mapping_from_dict({"state": ["states_{i}"], "action": ["actions_{i}"], "fps": 10}, "family.yaml")
    r = _reader(path, mapping=family)
    assert [ref.episode_index for ref in r.discover()] == [0, 1, 2, 4]
    ep = r.read_tabular(r.discover()[3])
    with h5py.File(path) as f:
        np.testing.assert_array_equal(ep.state, f["states_4"][()].astype(np.float32))
    assert ep.metadata["index"] == "4"


def test_nested_obs_groups_and_odd_cameras_are_said_not_fatal(tmp_path: Path):
    """Isaac Lab's obs/datagen_info group used to fail the file ('Group' has no attribute 'dtype')."""
    path = write_robomimic(tmp_path / "mimic.hdf5", demos=2, datagen_info=True, gray_camera=True, stacked_camera=True)
    r = _reader(path)
    assert r.cameras == ("agentview", "depth", "robot0_eye_in_hand")
    assert any("obs/datagen_info is a group (3 datasets)" in n for n in r.notes), r.notes
    assert any("obs/stereo_image has shape (20, 2, 8, 8, 3) uint8 (5-D)" in n for n in r.notes), r.notes
    ep = r.read_tabular(r.discover()[1])
    depth = next(c for c in r.read_frames(ep) if c.camera == "depth")
    want = frames(20, 16, 16, seed=1)[..., 0]
    got = decode_row(depth.images[4], depth.encoding)
    assert got.shape == (16, 16, 3) and np.all(got == want[4][:, :, None])  # grayscale, as RGB
    # a group's datasets can be mapped by path
    m = mapping_from_dict(
        {
            "episodes": "data",
            "state": ["obs/robot0_eef_pos", "obs/datagen_info/object_pose/cube"],
            "action": ["actions"],
            "fps": 20,
        },
        "m.yaml",
    )
    assert _reader(path, mapping=m).spec().state_dim == 3 + 16


def test_an_assumed_rate_is_recorded_and_said(tmp_path: Path):
    (tmp_path / "src").mkdir()
    write_robomimic(tmp_path / "src" / "lift.hdf5", demos=2, images=False, control_freq=None)
    res = ingest(str(tmp_path / "src"), str(tmp_path / "lake"), IngestConfig())
    assert res.ingested == 2
    (note,) = [n for n in res.notes if "20 Hz assumed" in n]
    assert "lift.hdf5" in note
    ep = Lake.open(str(tmp_path / "lake")).episodes().to_pylist()[0]
    assert ep["fps"] == 20.0 and json.loads(ep["metadata"])["fps_source"].startswith("assumed")
    write_robomimic(tmp_path / "given.hdf5", demos=1, images=False, control_freq=30)
    r = _reader(tmp_path / "given.hdf5")
    assert r.fps == 30.0 and not r.notes
