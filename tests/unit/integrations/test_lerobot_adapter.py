"""The LeRobot adapter on the tiny synthetic lake: LeRobot's item contract, windows, mixtures, streaming.

Equality with LeRobot itself (its own `LeRobotDataset` on an export) is in
tests/integration/test_lerobot_adapter.py, in LeRobot's isolated environment.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robolake.integrations.lerobot import (
    LakeLeRobotDataset,
    LakeLeRobotIterable,
    LakeSource,
    draw_epoch,
)
from robolake.integrations.lerobot.compare import compare_items
from robolake.integrations.lerobot.windows import check_delta_timestamps, delta_indices, window
from robolake.lake import Lake

ROW_KEYS = {"observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index", "task"}


@pytest.fixture(scope="module")
def lake_uri(packed_data) -> str:
    return str(packed_data.lake)


@pytest.fixture(scope="module")
def embodiment(lake_uri) -> str:
    lake = Lake.open(lake_uri)
    counts: dict[str, int] = {}
    for e in lake.episodes(columns=["embodiment"])["embodiment"].to_pylist():
        counts[e] = counts.get(e, 0) + 1
    return max(counts, key=lambda k: (len(lake.embodiments()[k].cameras), counts[k]))


def _source(lake_uri: str, embodiment: str, **kw) -> LakeSource:
    return LakeSource(uri=lake_uri, embodiment=embodiment, **kw)


def test_items_have_lerobots_keys_dtypes_shapes_and_ranges(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment))
    spec = Lake.open(lake_uri).embodiments()[embodiment]
    item = ds[3]
    cams = ds.meta.camera_keys
    assert cams and set(item) == ROW_KEYS | set(cams)
    for key in cams:
        x = item[key]
        assert x.dtype == torch.float32 and x.ndim == 3 and x.shape[0] == 3
        assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0 and float(x.max()) > 0.0
    assert item["observation.state"].dtype == torch.float32 and item["observation.state"].shape == (spec.state_dim,)
    assert item["action"].shape == (spec.action_dim,)
    assert item["timestamp"].dtype == torch.float32 and item["timestamp"].shape == ()
    for key in ("frame_index", "episode_index", "index", "task_index"):
        assert item[key].dtype == torch.int64 and item[key].shape == ()
    assert int(item["index"]) == 3 and isinstance(item["task"], str)
    assert ds.meta.tasks.index[int(item["task_index"])] == item["task"]


def test_numbering_is_global_and_contiguous_per_episode(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment))
    eps = ds.meta.episodes
    assert eps[0]["dataset_from_index"] == 0 and eps[-1]["dataset_to_index"] == len(ds) == ds.meta.total_frames
    last = ds[eps[0]["dataset_to_index"] - 1]
    first_of_next = ds[eps[1]["dataset_from_index"]]
    assert int(last["frame_index"]) == eps[0]["length"] - 1 and int(last["episode_index"]) == 0
    assert int(first_of_next["frame_index"]) == 0 and int(first_of_next["episode_index"]) == 1
    assert float(first_of_next["timestamp"]) == pytest.approx(0.0, abs=1e-6)


def test_windows_clamp_at_episode_edges_and_mark_padding(lake_uri, embodiment):
    fps = LakeLeRobotDataset(_source(lake_uri, embodiment)).fps
    cam = None
    delta = {"action": [i / fps for i in range(-2, 4)], "observation.state": [-1 / fps, 0.0]}
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment), delta_timestamps=delta)
    cam = ds.meta.camera_keys[0]
    ds_cam = LakeLeRobotDataset(_source(lake_uri, embodiment), delta_timestamps={cam: [-1 / fps, 0.0]})
    plain = LakeLeRobotDataset(_source(lake_uri, embodiment))
    end = ds.meta.episodes[0]["dataset_to_index"]
    head, tail = ds[0], ds[end - 1]
    assert head["action"].shape == (6, plain[0]["action"].shape[0])
    assert head["action_is_pad"].tolist() == [True, True, False, False, False, False]
    assert tail["action_is_pad"].tolist() == [False, False, False, True, True, True]
    # clamped slots repeat the episode's first / last frame, never the neighbour episode's
    assert torch.equal(head["action"][0], plain[0]["action"]) and torch.equal(head["action"][1], plain[0]["action"])
    assert torch.equal(tail["action"][5], plain[end - 1]["action"])
    assert head["observation.state_is_pad"].tolist() == [True, False]
    framed = ds_cam[0]
    assert framed[cam].shape[0] == 2 and framed[f"{cam}_is_pad"].tolist() == [True, False]
    assert torch.equal(framed[cam][0], framed[cam][1]) and torch.equal(framed[cam][1], plain[0][cam])


def test_window_arithmetic_is_lerobots():
    idx, start, stop = np.array([0, 5, 9]), np.array([0, 0, 0]), np.array([10, 10, 10])
    frames, pad = window(idx, start, stop, np.array([-1, 0, 1]))
    assert frames.tolist() == [[0, 0, 1], [4, 5, 6], [8, 9, 9]]
    assert pad.tolist() == [[True, False, False], [False, False, False], [False, False, True]]
    assert delta_indices({"a": [-0.1, 0.05, 0.15]}, 20)["a"].tolist() == [-2, 1, 3]
    with pytest.raises(ValueError, match="not multiples of 1/fps"):
        check_delta_timestamps({"action": [0.0, 0.033]}, 20, 1e-4)


def test_image_transforms_apply_per_camera_and_uint8(lake_uri, embodiment):
    calls: list[tuple[int, ...]] = []

    def flip(x: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return x.flip(-1)

    plain = LakeLeRobotDataset(_source(lake_uri, embodiment))
    flipped = LakeLeRobotDataset(_source(lake_uri, embodiment), image_transforms=flip)
    raw = LakeLeRobotDataset(_source(lake_uri, embodiment), return_uint8=True)
    cam = plain.meta.camera_keys[0]
    assert torch.equal(flipped[2][cam], plain[2][cam].flip(-1))
    assert len(calls) == len(plain.meta.camera_keys)
    assert raw[2][cam].dtype == torch.uint8 and torch.equal(raw[2][cam].float() / 255, plain[2][cam])


def test_batched_read_equals_item_by_item(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment), delta_timestamps={"action": [0.0, 0.05, 0.1]})
    picks = [7, 0, len(ds) - 1, 7]
    report = compare_items(ds.__getitems__(picks), [ds[i] for i in picks], ds.meta.camera_keys)
    assert report.equal and report.frames_bit_exact and report.items == 4


def test_compare_items_reports_a_difference(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment))
    a, b = ds[1], dict(ds[1])
    b["action"] = b["action"] + 1e-6
    cam = ds.meta.camera_keys[0]
    b[cam] = (b[cam] + 1 / 255).clamp(max=1.0)
    report = compare_items([a], [b], ds.meta.camera_keys, max_abs_pixel=2 / 255)
    assert not report.equal and any("action" in m for m in report.mismatches)
    assert not report.frames_bit_exact and 0 < report.max_abs_pixel <= 1 / 255 + 1e-6


def test_metadata_answers_what_policies_read(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment))
    meta = ds.meta
    cam = meta.camera_keys[0]
    h, w, c = meta.features[cam]["shape"]
    assert meta.features[cam]["dtype"] == "video" and tuple(ds[0][cam].shape) == (c, h, w)
    assert meta.features["observation.state"]["shape"] == [ds[0]["observation.state"].shape[0]]
    stats = meta.stats
    state = np.stack([ds[i]["observation.state"].numpy() for i in range(len(ds))])
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(stats["observation.state"]["max"], state.max(0).astype(np.float64))
    assert stats[cam]["mean"].shape == (3, 1, 1) and ((0 <= stats[cam]["mean"]) & (stats[cam]["mean"] <= 1)).all()
    assert set(stats["action"]) >= {"min", "max", "mean", "std", "count", "q01", "q99"}
    assert meta.fps == ds.fps and meta.total_episodes == len(meta.episodes) and meta.robot_type


def test_where_tag_and_errors(lake_uri, embodiment):
    full = LakeLeRobotDataset(_source(lake_uri, embodiment))
    first = full.table.episode_ids[0]
    one = LakeLeRobotDataset(_source(lake_uri, embodiment, where=f"episode_id = '{first}'"))
    assert one.num_episodes == 1 and len(one) == full.meta.episodes[0]["length"]
    assert torch.equal(one[0]["action"], full[0]["action"])
    with pytest.raises(ValueError, match="embodiments"):
        LakeLeRobotDataset(lake_uri)
    with pytest.raises(ValueError, match="not features of this dataset"):
        LakeLeRobotDataset(_source(lake_uri, embodiment), delta_timestamps={"observation.velocity": [0.0]})
    with pytest.raises(ValueError, match="one of version, tag or split"):
        LakeSource(uri=lake_uri, version=1, split="train")
    with pytest.raises(IndexError, match="out of range"):
        full[len(full)]


def test_mixture_draws_by_weight(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment))
    tasks = sorted(set(ds.table.tasks))
    first = ds.table.episode_ids[0]
    task = Lake.open(lake_uri).episodes(f"episode_id = '{first}'", columns=["task"])["task"][0].as_py()
    mixed = LakeLeRobotDataset(_source(lake_uri, embodiment, mix=f"task={task}:0.8,*:0.2"))
    ids = draw_epoch(mixed.source, mixed.table, epoch=0)
    assert ids.size == len(mixed)  # epoch size: everything the mixture matched
    share = float(np.isin(mixed.table.task_index[ids], [mixed.table.tasks.index(task)]).mean())
    assert abs(share - 0.8) < 0.02 and len(tasks) >= 1
    sampler = mixed.sampler()
    assert sorted(sampler) == sorted(ids.tolist()) and len(sampler) == ids.size
    sampler.set_epoch(1)
    assert list(sampler) != list(mixed.sampler(epoch=0))


def test_iterable_yields_every_item_once_per_epoch_split_by_rank(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment), delta_timestamps={"action": [0.0, 0.05]})
    ranks = [LakeLeRobotIterable(ds, block_frames=8, buffer_blocks=2, rank=r, world_size=2) for r in range(2)]
    seen = [[int(item["index"]) for item in it] for it in ranks]
    assert not set(seen[0]) & set(seen[1]) and sorted(seen[0] + seen[1]) == list(range(len(ds)))
    assert len(seen[0]) == len(ranks[0]) and seen[0] != sorted(seen[0])
    by_index = {int(item["index"]): item for item in ranks[0]}
    i = seen[0][0]
    assert compare_items([by_index[i]], [ds[i]], ds.meta.camera_keys).equal
    ranks[0].set_epoch(1)
    assert [int(item["index"]) for item in ranks[0]] != seen[0]


def test_dataloader_with_a_worker_collates_like_lerobot(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment), delta_timestamps={"action": [0.0, 0.05, 0.1]})
    loader = torch.utils.data.DataLoader(
        ds,
        batch_size=4,
        shuffle=True,
        num_workers=1,
        multiprocessing_context="forkserver",
        generator=torch.Generator().manual_seed(0),
    )
    batch = next(iter(loader))
    cam = ds.meta.camera_keys[0]
    assert batch["action"].shape[:2] == (4, 3) and batch["action_is_pad"].shape == (4, 3)
    assert batch[cam].shape[0] == 4 and len(batch["task"]) == 4
    for n, i in enumerate(batch["index"].tolist()):
        assert torch.equal(batch["action"][n], ds[i]["action"])


def test_a_forked_worker_says_how_to_start_workers(lake_uri, embodiment):
    ds = LakeLeRobotDataset(_source(lake_uri, embodiment))
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context="fork")
    with pytest.raises(RuntimeError, match="multiprocessing_context='forkserver'"):
        next(iter(loader))
