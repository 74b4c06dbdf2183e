"""LoaderState: one strict, JSON-only state shape for every batch source."""

from __future__ import annotations

import dataclasses
import json

import pytest

from robolake.schemas.batch import LoaderState


def _state(**kw) -> LoaderState:
    base = dict(
        loader="torch",
        source="/data/packed",
        version=3,
        spec=LoaderState.digest({"max_tokens": 512}),
        seed=1,
        shuffle=True,
        drop_last=False,
        sequences_per_batch=2,
        rank=0,
        world_size=2,
        epoch=4,
        batches_done=5,
        num_batches=9,
    )
    return LoaderState(**{**base, **kw})


def test_round_trips_through_json():
    state = _state()
    text = json.dumps(state.to_json())
    assert LoaderState.from_json(json.loads(text)) == state
    assert all(isinstance(v, str | int | bool) for v in state.to_json().values())


def test_digest_ignores_key_order_but_not_values():
    assert LoaderState.digest({"a": 1, "b": [2, 3]}) == LoaderState.digest({"b": [2, 3], "a": 1})
    assert LoaderState.digest({"a": 1}) != LoaderState.digest({"a": 2})


def test_missing_unknown_and_mistyped_keys_raise():
    good = _state().to_json()
    with pytest.raises(ValueError, match=r"missing \['spec'\]"):
        LoaderState.from_json({k: v for k, v in good.items() if k != "spec"})
    with pytest.raises(ValueError, match=r"unknown keys \['shards_root'\]"):
        LoaderState.from_json(good | {"shards_root": "/x"})
    with pytest.raises(ValueError, match="'version' must be int"):
        LoaderState.from_json(good | {"version": "3"})
    with pytest.raises(ValueError, match="'epoch' must be int"):
        LoaderState.from_json(good | {"epoch": True})
    with pytest.raises(ValueError, match="batches_done=10 of num_batches=9"):
        LoaderState.from_json(good | {"batches_done": 10})
    with pytest.raises(ValueError, match="rank=2 outside"):
        LoaderState.from_json(good | {"rank": 2})


def test_same_plan_resumes_at_the_saved_batch_and_after_a_finished_epoch():
    mine = _state(epoch=0, batches_done=0)
    assert mine.resume_from(_state().to_json()) == (4, 5)
    assert mine.resume_from(_state(batches_done=9).to_json()) == (5, 0)
    assert mine.resume_from(_state(batches_done=0).to_json()) == (4, 0)


@pytest.mark.parametrize(
    "key,value",
    [
        ("loader", "lake"),
        ("source", "/data/other"),
        ("version", 4),
        ("spec", LoaderState.digest({"max_tokens": 1024})),
        ("seed", 2),
        ("shuffle", False),
        ("drop_last", True),
        ("sequences_per_batch", 4),
    ],
)
def test_other_data_or_plan_is_refused_naming_the_key(key, value):
    saved = dataclasses.replace(_state(), **{key: value})
    for batches_done in (0, 5):  # at an epoch boundary as well as mid-epoch
        with pytest.raises(ValueError, match=f"loader state has {key}=.* but this loader has .*start over"):
            _state().resume_from(dataclasses.replace(saved, batches_done=batches_done).to_json())


def test_another_world_size_resumes_only_at_an_epoch_boundary():
    four = _state(rank=3, world_size=4, epoch=0, batches_done=0, num_batches=5)
    with pytest.raises(
        ValueError, match=r"world_size=2 but this loader has 4, and it was saved mid-epoch \(epoch 4, batch 5 of 9\)"
    ):
        four.resume_from(_state().to_json())
    assert four.resume_from(_state(batches_done=9).to_json()) == (5, 0)  # epoch finished: next one, split 4 ways
    assert four.resume_from(_state(batches_done=0).to_json()) == (4, 0)
    with pytest.raises(ValueError, match="rank=0 but this loader has 1, and it was saved mid-epoch"):
        _state(rank=1).resume_from(_state().to_json())
