"""LoaderState: one strict, JSON-only state shape for every batch source, and the legacy shape."""

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
        position=10,
        anchor=0,
        sequences=18,
    )
    return LoaderState(**{**base, **kw})


def _legacy(**kw) -> dict:
    """A state as robolake wrote it before positions were recorded."""
    state = _state(**kw).to_json()
    return {k: v for k, v in state.items() if k not in ("position", "anchor", "sequences")}


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
    with pytest.raises(ValueError, match="position=19 outside the epoch's 18 sequences"):
        LoaderState.from_json(good | {"position": 19})
    with pytest.raises(ValueError, match="JSON object from state_dict"):
        LoaderState.from_json([good])


def test_resumes_at_the_saved_position_on_any_world_size():
    mine = _state(epoch=0, batches_done=0, position=0)
    assert mine.resume_from(_state().to_json()) == (4, 10, 0)  # same world and batch: the saved plan's anchor
    assert mine.resume_from(_state(batches_done=9, position=18).to_json()) == (5, 0, 0)  # finished: next epoch
    four = _state(rank=3, world_size=4, epoch=0, batches_done=0, num_batches=5, position=0)
    assert four.resume_from(_state().to_json()) == (4, 10, None)  # another world: plan from the position
    bigger = _state(sequences_per_batch=4)
    assert bigger.resume_from(_state().to_json()) == (4, 10, None)


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
    ],
)
def test_other_data_or_plan_is_refused_naming_the_key(key, value):
    saved = dataclasses.replace(_state(), **{key: value})
    for batches_done in (0, 5):  # at an epoch boundary as well as mid-epoch
        with pytest.raises(ValueError, match=f"loader state has {key}=.* but this loader has .*start over"):
            _state().resume_from(dataclasses.replace(saved, batches_done=batches_done).to_json())
        with pytest.raises(ValueError, match=f"loader state has {key}=.* but this loader has .*start over"):
            _state().resume_from(_legacy(**{key: value, "batches_done": batches_done}))


def test_a_state_from_before_positions_resumes_only_at_an_epoch_boundary():
    four = _state(rank=3, world_size=4, epoch=0, batches_done=0, num_batches=5, position=0)
    with pytest.raises(ValueError, match=r"\(epoch 4, batch 5\) was written by an older robolake"):
        four.resume_from(_legacy())
    assert four.resume_from(_legacy(batches_done=9, position=18)) == (5, 0, 0)  # epoch finished: the next one
    assert four.resume_from(_legacy(batches_done=0, position=0)) == (4, 0, 0)
    with pytest.raises(ValueError, match="'epoch' must be int"):
        four.resume_from(_legacy() | {"epoch": "4"})
