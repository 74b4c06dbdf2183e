"""The GR00T adapter on the tiny synthetic lake: `LeRobotSingleDataset.get_step_data`'s contract.

Equality with Isaac-GR00T itself (its own dataset class on the real PickNPlace data) is in
tests/integration/test_gr00t_adapter.py, in the GR00T reference environment.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from robolake.integrations import gr00t
from robolake.integrations.gr00t import LakeGr00tDataset, ModalityConfig, lake_modality_json
from robolake.integrations.lerobot import LakeSource
from robolake.lake import Lake


@pytest.fixture(scope="module")
def source(packed_data) -> LakeSource:
    lake = Lake.open(str(packed_data.lake))
    counts: dict[str, int] = {}
    for e in lake.episodes(columns=["embodiment"])["embodiment"].to_pylist():
        counts[e] = counts.get(e, 0) + 1
    tag = max(counts, key=lambda k: (len(lake.embodiments()[k].cameras), counts[k]))
    return LakeSource(uri=str(packed_data.lake), embodiment=tag)


def _configs(source: LakeSource) -> dict:
    spec = Lake.open(source.uri).embodiments()[source.embodiment]
    modality = lake_modality_json(spec)
    return {
        "video": ModalityConfig((-2, 0, 1), tuple(f"video.{c}" for c in modality["video"])),
        "state": {"delta_indices": [-1, 0], "modality_keys": [f"state.{k}" for k in modality["state"]]},
        # GR00T's own pydantic ModalityConfig is any object with these two attributes
        "action": SimpleNamespace(
            delta_indices=list(range(-1, 4)), modality_keys=[f"action.{k}" for k in modality["action"]]
        ),
        "language": ModalityConfig((0,), tuple(f"annotation.{k}" for k in modality["annotation"])),
    }


def test_samples_have_gr00ts_keys_dtypes_and_shapes(source):
    configs = _configs(source)
    ds = LakeGr00tDataset(source, configs)
    sample = ds[3]
    keys = [k for c in configs.values() for k in (c["modality_keys"] if isinstance(c, dict) else c.modality_keys)]
    assert list(sample) == keys
    modality = ds.lerobot_modality_meta
    for key, value in sample.items():
        kind, _, sub = key.partition(".")
        if kind == "video":
            assert value.dtype == np.uint8 and value.ndim == 4 and value.shape[0] == 3 and value.shape[-1] == 3
        elif kind == "annotation":
            assert isinstance(value, list) and len(value) == 1 and all(isinstance(s, str) for s in value)
        else:
            body = modality[kind][sub]
            t = 2 if kind == "state" else 5
            assert value.dtype == np.float32 and value.shape == (t, body["end"] - body["start"])
    assert len(ds) == sum(ds.trajectory_lengths) == len(ds.all_steps)
    assert ds.all_steps[3] == (0, 3) and ds.modality_keys["language"] == list(configs["language"].modality_keys)


def test_windows_clamp_into_the_trajectory(source):
    ds = LakeGr00tDataset(source, _configs(source))
    t = ds.table
    camera = f"video.{t.cameras[0]}"
    state_key = next(k for k in ds.modality_keys["state"])
    a, b, _ = ds._plan[state_key][1]
    last = int(t.lengths[0]) - 1
    first, end = ds.get_step_data(0, 0), ds.get_step_data(0, last)
    # delta -2 and -1 at step 0 repeat step 0; delta +1 at the last step repeats the last step
    np.testing.assert_array_equal(first[camera][0], first[camera][1])
    np.testing.assert_array_equal(first[state_key][0], t.state[0, a:b])
    np.testing.assert_array_equal(end[camera][2], end[camera][1])
    assert not np.array_equal(first[camera][1], first[camera][2])  # inside the episode: the next frame
    action_key = ds.modality_keys["action"][0]
    aa, ab, _ = ds._plan[action_key][1]
    np.testing.assert_array_equal(end[action_key][1:], np.repeat(t.action[last : last + 1, aa:ab], 4, axis=0))
    # a step's own frame is the LeRobot adapter's frame of that index
    np.testing.assert_array_equal(first[camera][1], ds.frames.items([0])[0][t.camera_keys[0]].permute(1, 2, 0).numpy())


def test_relative_slices_pad_with_zeros(source, monkeypatch):
    real = lake_modality_json

    def relative(spec, cameras=None):
        modality = real(spec, cameras)
        for body in modality["action"].values():
            body["absolute"] = False
        return modality

    monkeypatch.setattr(gr00t.dataset, "lake_modality_json", relative)
    ds = LakeGr00tDataset(source, _configs(source))
    last = int(ds.table.lengths[0]) - 1
    key = ds.modality_keys["action"][0]
    a, b, absolute = ds._plan[key][1]
    assert absolute is False
    start, end = ds.get_step_data(0, 0)[key], ds.get_step_data(0, last)[key]
    # deltas -1..3: slot 1 is the step itself
    assert not start[0].any() and (end[2:] == 0).all()
    np.testing.assert_array_equal(start[1], ds.table.action[0, a:b])
    np.testing.assert_array_equal(end[1], ds.table.action[last, a:b])
    np.testing.assert_array_equal(end[0], ds.table.action[last - 1, a:b])


def test_batched_reads_and_transforms_equal_single_samples(source):
    ds = LakeGr00tDataset(source, _configs(source), transforms=lambda s: {k: s[k] for k in sorted(s)})
    picks = [0, 5, int(ds.table.starts[1]), len(ds) - 1]
    batch = ds.__getitems__(picks)
    for i, sample in zip(picks, batch, strict=True):
        single = ds[i]
        assert list(sample) == sorted(sample) == list(single)
        for key in sample:
            np.testing.assert_array_equal(np.asarray(sample[key]), np.asarray(single[key]))
    e = 1
    np.testing.assert_array_equal(
        ds.get_step_data(e, 2)[ds.modality_keys["state"][0]],
        ds.steps([int(ds.table.starts[e]) + 2])[0][ds.modality_keys["state"][0]],
    )
    with pytest.raises(IndexError):
        ds.get_step_data(0, int(ds.table.lengths[0]))
    last = ds[-1]  # a negative index counts from the end, as GR00T's list of steps does
    assert ds.all_steps[-1] == (ds.table.num_episodes - 1, int(ds.table.lengths[-1]) - 1)
    for key, value in ds[len(ds) - 1].items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(last[key]))


def test_configs_gr00t_refuses_are_refused_when_built(source):
    configs = _configs(source)
    with pytest.raises(ValueError, match="not one GR00T reads"):
        LakeGr00tDataset(source, {**configs, "proprio": configs["state"]})
    with pytest.raises(ValueError, match="not in this lake's modality.json"):
        LakeGr00tDataset(source, {"state": ModalityConfig((0,), ("state.no_such_part",))})
    with pytest.raises(ValueError, match="keeps only the task annotation"):
        LakeGr00tDataset(source, {"language": ModalityConfig((0,), ("annotation.human.validity",))})
    with pytest.raises(ValueError, match="must start with 'action.'"):
        LakeGr00tDataset(source, {"action": ModalityConfig((0,), ("state.x",))})
    with pytest.raises(ValueError, match="delta_indices and modality_keys"):
        LakeGr00tDataset(source, {"state": {"keys": ["state.x"]}})


def test_metadata_has_gr00ts_dataset_metadata_fields(source):
    ds = LakeGr00tDataset(source, _configs(source), embodiment_tag="new_embodiment")
    meta = ds.metadata()
    assert meta["embodiment_tag"] == "new_embodiment"
    for kind in ("state", "action"):
        for name, body in ds.lerobot_modality_meta[kind].items():
            width = body["end"] - body["start"]
            assert meta["modalities"][kind][name]["shape"] == [width]
            assert set(meta["statistics"][kind][name]) == {"mean", "std", "min", "max", "q01", "q99"}
            assert all(len(v) == width for v in meta["statistics"][kind][name].values())
    for camera in ds.table.cameras:
        video = meta["modalities"]["video"][camera]
        h, w = ds[0][f"video.{camera}"].shape[1:3]
        assert video["resolution"] == [w, h] and video["channels"] == 3


def test_pickles_for_spawned_workers(source):
    import pickle

    ds = LakeGr00tDataset(source, _configs(source))
    clone = pickle.loads(pickle.dumps(ds))  # what a forkserver/spawn DataLoader worker receives
    for key, value in clone[7].items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(ds[7][key]))


def test_sampler_draws_the_sources_mixture(source):
    from dataclasses import replace

    ds = LakeGr00tDataset(source, _configs(source))
    assert sorted(ds.sampler(shuffle=False)) == list(range(len(ds)))
    mixed = LakeGr00tDataset(replace(source, mix=f"embodiment={source.embodiment}:1"), _configs(source))
    drawn = list(mixed.sampler(epoch=1))
    assert drawn and all(0 <= i < len(mixed) for i in drawn)
