"""Elastic determinism: the epoch's order is the data's, not the world's; a state saved at N ranks
resumes at M with every sequence once and the rest of the order unchanged; mixtures hold per rank."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robolake.loaders import LoaderConfig, PackedLoader
from robolake.loaders.order import canonical_order, plan_epoch
from robolake.loaders.state import merge_states, read_state, write_state
from robolake.schemas.batch import LoaderState


def _world(order, strata, *, start, world, per_rank, steps=None):
    """Every rank's plan from `start`; returns (per-step global batches as sets, per-rank rows, end position)."""
    plans = [
        plan_epoch(order, start=start, rank=r, world_size=world, per_rank=per_rank, drop_last=False, strata=strata)
        for r in range(world)
    ]
    n = len(plans[0]) if steps is None else min(steps, len(plans[0]))
    assert len({len(p) for p in plans}) == 1, "every rank takes the same number of steps"
    assert len({tuple(p.ends) for p in plans}) == 1, "every rank agrees on the positions"
    assert all(len(p.batches[i]) >= 1 for p in plans for i in range(n)), "no rank idles in a step"
    steps_rows = [np.concatenate([p.batches[i] for p in plans]) for i in range(n)]
    mine = [np.concatenate(p.batches[:n]) if n else np.zeros(0, np.int64) for p in plans]
    return steps_rows, mine, plans[0].position(n)


@settings(max_examples=200, deadline=None)
@given(
    num=st.integers(1, 300),
    n_old=st.integers(1, 9),
    n_new=st.integers(1, 9),
    b_old=st.integers(1, 4),
    b_new=st.integers(1, 4),
    stop=st.floats(0, 1),
    mixed=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_a_resize_mid_epoch_reads_every_sequence_once_in_the_canonical_order(
    num, n_old, n_new, b_old, b_new, stop, mixed, seed
):
    rng = np.random.default_rng(seed)
    strata = (rng.integers(0, 3, num) << 16) + rng.integers(0, 1 << 16, num) if mixed else None
    order = canonical_order(num, seed=[seed, 1], strata=strata)
    if num < n_old:
        with pytest.raises(ValueError, match=f"cannot give each of {n_old} ranks a batch"):
            _world(order, strata, start=0, world=n_old, per_rank=b_old)
        return
    full_steps = len(plan_epoch(order, start=0, rank=0, world_size=n_old, per_rank=b_old, drop_last=False))
    old_steps, old_rows, position = _world(
        order, strata, start=0, world=n_old, per_rank=b_old, steps=int(stop * full_steps)
    )
    remaining = num - position
    if 0 < remaining < n_new:
        with pytest.raises(ValueError, match=f"cannot give each of {n_new} ranks a batch.*at most {remaining} ranks"):
            _world(order, strata, start=position, world=n_new, per_rank=b_new)
        return
    new_steps, new_rows, end = _world(order, strata, start=position, world=n_new, per_rank=b_new)
    assert end == num
    union = np.concatenate([*old_rows, *new_rows])
    assert sorted(union.tolist()) == list(range(num)), "every sequence of the epoch exactly once"
    # The global order is the data's: each step reads the next stretch of the one canonical order.
    walked = [set(s.tolist()) for s in old_steps + new_steps]
    lo = 0
    for rows in walked:
        assert rows == set(order[lo : lo + len(rows)].tolist())
        lo += len(rows)


def test_the_order_depends_on_seed_and_epoch_only():
    a = canonical_order(50, seed=[3, 1])
    assert (a == canonical_order(50, seed=[3, 1])).all()
    assert not (a == canonical_order(50, seed=[3, 2])).all()
    assert (canonical_order(5, seed=None) == np.arange(5)).all()


@pytest.mark.parametrize("n_old,n_new", [(4, 2), (4, 3), (2, 5), (8, 3)])
def test_a_mixture_keeps_its_share_across_a_resize(n_old, n_new):
    """The prefix the old world read and the rest the new world reads each hold the mixture, and so
    does every rank of the new world over its stretch (its own deal from the resize on)."""
    rng = np.random.default_rng(n_old * 10 + n_new)
    num = 2400
    group = np.where(rng.random(num) < 0.3, 0, np.where(rng.random(num) < 0.5, 1, 2))
    strata = (group << 16) + rng.integers(0, 1 << 16, num)
    order = canonical_order(num, seed=[0, 0], strata=strata)
    steps = len(plan_epoch(order, start=0, rank=0, world_size=n_old, per_rank=1, drop_last=False)) // 3
    _, old_rows, position = _world(order, strata, start=0, world=n_old, per_rank=1, steps=steps)
    _, new_rows, _ = _world(order, strata, start=position, world=n_new, per_rank=1)
    target = np.bincount(group, minlength=3) / num

    def error(rows):
        return np.abs(np.bincount(group[rows], minlength=3) / len(rows) - target).max()

    assert error(np.concatenate(old_rows)) < 0.005, "the prefix read before the resize holds the mixture"
    assert error(np.concatenate(new_rows)) < 0.005
    assert max(error(r) for r in new_rows) < 0.02, "every rank of the resized world reads the mixture"
    plain = [canonical_order(num, seed=[0, 0])[position:][r::n_new] for r in range(n_new)]  # no strata
    assert max(error(r) for r in new_rows) < max(error(r) for r in plain)


# --- states ------------------------------------------------------------------------------------


def _state(**kw) -> dict:
    base = dict(
        loader="torch",
        source="/data/packed",
        version=3,
        spec=LoaderState.digest({"max_tokens": 512}),
        seed=0,
        shuffle=True,
        drop_last=False,
        sequences_per_batch=2,
        rank=0,
        world_size=2,
        epoch=4,
        batches_done=5,
        num_batches=9,
        position=20,
        anchor=0,
        sequences=36,
    )
    return LoaderState(**{**base, **kw}).to_json()


def test_merge_states_checks_the_ranks_agree():
    merged = merge_states({1: _state(rank=1), 0: _state()})
    assert merged == _state()
    with pytest.raises(ValueError, match="disagree on the epoch .*rank 0 is in epoch 4, rank 1 in epoch 5"):
        merge_states([_state(), _state(rank=1, epoch=5)])
    with pytest.raises(ValueError, match="disagree on the position"):
        merge_states([_state(), _state(rank=1, batches_done=6, position=24)])
    with pytest.raises(ValueError, match=r"one state per rank 0..1 .*missing \[1\]"):
        merge_states([_state()])
    with pytest.raises(ValueError, match="disagree on seed"):
        merge_states([_state(), _state(rank=1, seed=1)])
    with pytest.raises(ValueError, match="got none"):
        merge_states([])
    with pytest.raises(ValueError, match="anchor=0, position=40 outside"):
        _state(position=40)


def test_a_state_file_truncated_mid_write_is_one_clear_error(tmp_path):
    path = tmp_path / "loader.json"
    write_state(path, _state())
    assert read_state(path) == _state()
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match="loader state .*loader.json is not valid JSON.*truncated mid-write") as e:
        read_state(path)
    assert "\n" not in str(e.value)
    path.write_text(json.dumps({"epoch": 1}))
    with pytest.raises(ValueError, match="missing"):
        read_state(path)


# --- the shard loader ---------------------------------------------------------------------------


def _keys(loader, limit=None):
    out = []
    for i, batch in enumerate(loader):
        out.append(batch.sample_keys)
        if limit is not None and i + 1 == limit:
            break
    return out


@pytest.mark.parametrize("n_old,n_new,workers", [(3, 2, 0), (2, 3, 1), (1, 4, 2)])
def test_shard_loaders_resized_mid_epoch_read_the_epoch_once(packed_data, n_old, n_new, workers):
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0, seed=4)
    old = [PackedLoader(str(packed_data.packed), cfg, rank=r, world_size=n_old) for r in range(n_old)]
    head = [k for s in old for b in _keys(s, limit=2) for k in b]
    merged = merge_states([s.state_dict() for s in old])
    assert merged["position"] == 2 * n_old
    new_cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=workers, seed=4)
    new = [PackedLoader(str(packed_data.packed), new_cfg, rank=r, world_size=n_new) for r in range(n_new)]
    for s in new:
        s.load_state_dict(json.loads(json.dumps(merged)))
    tails = [[k for b in _keys(s) for k in b] for s in new]
    got = head + [k for t in tails for k in t]
    assert len(got) == len(set(got)) == packed_data.num_samples, "every sample of the epoch exactly once"
    assert all(s.epoch == 0 for s in new)
    after = [s.state_dict() for s in new]
    assert merge_states(after)["position"] == packed_data.num_sequences


def test_a_preemption_after_a_resize_continues_the_resized_plan(packed_data):
    """Resized 1 -> 2 at step 2, then preempted at the same size: the second resume keeps the first's
    anchor, so each rank reads what it would have without the preemption."""
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0, seed=6)
    one = PackedLoader(str(packed_data.packed), cfg)
    _keys(one, limit=2)
    two = [PackedLoader(str(packed_data.packed), cfg, rank=r, world_size=2) for r in range(2)]
    for s in two:
        s.load_state_dict(one.state_dict())
    uninterrupted = [PackedLoader(str(packed_data.packed), cfg, rank=r, world_size=2) for r in range(2)]
    for s in uninterrupted:
        s.load_state_dict(one.state_dict())
    for s in two:
        _keys(s, limit=1)
    saved = merge_states([s.state_dict() for s in two])
    assert (saved["anchor"], saved["position"], saved["batches_done"]) == (2, 4, 1)
    for r in range(2):
        again = PackedLoader(str(packed_data.packed), cfg, rank=r, world_size=2)
        again.load_state_dict(saved)
        assert (again.start, again.batches_done) == (2, 1)
        assert _keys(again) == _keys(uninterrupted[r])[1:]


def test_bad_states_are_refused_in_one_line(packed_data, packed_copy):
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0)
    first = PackedLoader(str(packed_data.packed), cfg)
    _keys(first, limit=packed_data.num_sequences - 2)
    state = first.state_dict()  # two sequences left
    with pytest.raises(ValueError, match="2 left after position .*cannot give each of 3 ranks.*at most 2 ranks") as e:
        PackedLoader(str(packed_data.packed), cfg, rank=0, world_size=3).load_state_dict(state)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="another dataset, pack spec or loader config"):
        PackedLoader(str(packed_copy), cfg).load_state_dict(state)
    with pytest.raises(ValueError, match="seed=0 but this loader has 9"):
        PackedLoader(str(packed_data.packed), LoaderConfig(image_size=8, num_workers=0, seed=9)).load_state_dict(state)
    with pytest.raises(ValueError, match="spec="):
        PackedLoader(str(packed_data.packed), cfg).load_state_dict(state | {"spec": "0" * 64})
    legacy = {k: v for k, v in state.items() if k not in ("position", "anchor", "sequences")}
    with pytest.raises(ValueError, match="older robolake .*epoch boundary"):
        PackedLoader(str(packed_data.packed), cfg).load_state_dict(legacy)
    done = PackedLoader(str(packed_data.packed), cfg)
    done.load_state_dict(legacy | {"batches_done": legacy["num_batches"]})
    assert (done.epoch, done.batches_done) == (1, 0)


def test_a_checkpoint_hands_every_rank_the_merged_state(tmp_path):
    import torch

    from robolake.training.checkpoint import load_checkpoint, save_checkpoint

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    states = {0: _state(), 1: _state(rank=1)}
    path = save_checkpoint(
        tmp_path, step=5, model=model, optimizer=optimizer, scheduler=scheduler, loader_states=states
    )
    restored = load_checkpoint(path, model=model)
    assert [restored.loader_state(r) for r in range(3)] == [_state()] * 3  # any world size: one merged state
    bad = save_checkpoint(
        tmp_path,
        step=6,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        loader_states={0: _state(), 1: _state(rank=1, epoch=5)},
    )
    with pytest.raises(ValueError, match="disagree on the epoch"):
        load_checkpoint(bad, model=model).loader_state(0)
