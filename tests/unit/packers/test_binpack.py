"""Bin-packing: exact equivalence to item-by-item FFD/BFD, plan invariants, the streaming packer."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robolake.packers.binpack import (
    PackPlan,
    best_fit_decreasing,
    first_fit_decreasing,
    reference_best_fit_decreasing,
)
from robolake.packers.window import WindowPacker

FAST = settings(max_examples=60, deadline=None)
PACKERS = [first_fit_decreasing, best_fit_decreasing, reference_best_fit_decreasing]


@st.composite
def length_lists(draw: st.DrawFn, max_len: int = 120) -> tuple[list[int], int]:
    cap = draw(st.integers(1, 300))
    lengths = draw(st.lists(st.integers(1, cap), max_size=max_len))
    return lengths, cap


def reference_first_fit_decreasing(lengths: list[int], cap: int) -> list[list[int]]:
    """Item-by-item FFD, longest first, ties in index order: the oracle for the vectorised one."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    rooms: list[int] = []
    bins: list[list[int]] = []
    for i in order:
        b = next((b for b, r in enumerate(rooms) if r >= lengths[i]), None)
        if b is None:
            b = len(rooms)
            rooms.append(cap)
            bins.append([])
        rooms[b] -= lengths[i]
        bins[b].append(i)
    return bins


def realistic_lengths(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    views = rng.choice([1, 2, 3], n, p=[0.3, 0.4, 0.3])
    per_view = rng.choice([256, 64], n, p=[0.8, 0.2])
    return views * per_view + rng.integers(5, 121, n) + rng.choice([2, 8, 16], n)


def check_plan(plan: PackPlan, lengths: list[int] | np.ndarray, cap: int) -> None:
    arr = np.asarray(lengths, dtype=np.int64)
    seen = np.concatenate([plan.order, plan.rejected])
    np.testing.assert_array_equal(np.sort(seen), np.arange(arr.size))  # each exactly once
    assert plan.max_tokens == cap
    assert np.all(plan.bin_sizes >= 1), "no empty bins"
    for b, members in enumerate(plan.bins()):
        assert int(arr[members].sum()) == int(plan.bin_tokens[b]) <= cap
    assert np.all(arr[plan.rejected] > cap)
    if plan.num_bins:
        assert plan.fill == pytest.approx(arr[plan.order].sum() / (plan.num_bins * cap))


@FAST
@given(length_lists())
def test_every_packer_keeps_each_sample_once_within_capacity(case: tuple[list[int], int]) -> None:
    lengths, cap = case
    for pack in PACKERS:
        check_plan(pack(lengths, cap), lengths, cap)


@FAST
@given(length_lists())
def test_bfd_matches_the_item_by_item_reference(case: tuple[list[int], int]) -> None:
    lengths, cap = case
    fast, ref = best_fit_decreasing(lengths, cap), reference_best_fit_decreasing(lengths, cap)
    assert fast.num_bins == ref.num_bins
    assert fast.fill == ref.fill
    np.testing.assert_array_equal(np.sort(fast.bin_tokens), np.sort(ref.bin_tokens))


@FAST
@given(length_lists())
def test_ffd_is_exactly_item_by_item_first_fit(case: tuple[list[int], int]) -> None:
    lengths, cap = case
    plan = first_fit_decreasing(lengths, cap)
    assert [sorted(b.tolist()) for b in plan.bins()] == [
        sorted(b) for b in reference_first_fit_decreasing(lengths, cap)
    ]


@FAST
@given(length_lists(max_len=40), st.sampled_from([1, 2, 3, 7]))
def test_bfd_equivalence_on_repeated_lengths(case: tuple[list[int], int], repeat: int) -> None:
    lengths, cap = case  # many equal lengths exercise the group moves and partial bins
    lengths = lengths * repeat
    fast, ref = best_fit_decreasing(lengths, cap), reference_best_fit_decreasing(lengths, cap)
    np.testing.assert_array_equal(np.sort(fast.bin_tokens), np.sort(ref.bin_tokens))
    ffd = first_fit_decreasing(lengths, cap)
    assert [sorted(b.tolist()) for b in ffd.bins()] == [sorted(b) for b in reference_first_fit_decreasing(lengths, cap)]


@pytest.mark.parametrize("pack", PACKERS)
def test_packers_are_deterministic(pack) -> None:
    lengths = realistic_lengths(3000, seed=1)
    a, b = pack(lengths, 4096), pack(lengths.copy(), 4096)
    np.testing.assert_array_equal(a.order, b.order)
    np.testing.assert_array_equal(a.bin_offsets, b.bin_offsets)


def test_bfd_fills_realistic_mixture() -> None:
    lengths = realistic_lengths(200_000)
    plan = best_fit_decreasing(lengths, 4096)
    check_plan(plan, lengths, 4096)
    assert plan.fill >= 0.99
    ffd = first_fit_decreasing(lengths, 4096)
    assert ffd.fill >= 0.99


@pytest.mark.parametrize("pack", PACKERS)
def test_oversize_sample_is_an_error_naming_it(pack) -> None:
    with pytest.raises(ValueError, match=r"sample 2 has 5000 tokens, more than max_tokens=4096"):
        pack([10, 4096, 5000, 7000], 4096)


@pytest.mark.parametrize("pack", PACKERS)
def test_oversize_samples_can_be_rejected_not_truncated(pack) -> None:
    lengths = [10, 5000, 4096, 7000, 3]
    plan = pack(lengths, 4096, on_oversize="reject")
    np.testing.assert_array_equal(plan.rejected, [1, 3])
    check_plan(plan, lengths, 4096)


@pytest.mark.parametrize(
    ("lengths", "cap", "match"),
    [
        ([3, 0, 2], 10, "sample 1 has length 0"),
        ([1.5, 2.0], 10, "must be integers"),
        ([[1, 2]], 10, "must be 1-D"),
        ([1], 0, "max_tokens must be a positive integer"),
    ],
)
def test_bad_input_is_a_value_error(lengths: list, cap: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        best_fit_decreasing(lengths, cap)


def test_bad_on_oversize_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="on_oversize"):
        first_fit_decreasing([1], 4, on_oversize="truncate")  # type: ignore[arg-type]


def test_empty_input_gives_an_empty_plan() -> None:
    plan = best_fit_decreasing(np.zeros(0, dtype=np.int64), 16)
    assert plan.num_bins == 0 and plan.fill == 1.0


# -- streaming window packer ----------------------------------------------------------------


class CountingStream:
    """(key, length) pairs that count how many were read, to measure what a packer holds."""

    def __init__(self, lengths: list[int] | np.ndarray) -> None:
        self.lengths = [int(x) for x in lengths]
        self.read = 0

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for i, n in enumerate(self.lengths):
            self.read += 1
            yield i, n


@FAST
@given(
    st.lists(st.integers(1, 200), max_size=300),
    st.integers(1, 50),
    st.integers(0, 2**16),
    st.floats(0.0, 0.9),
)
def test_window_packer_properties(lengths: list[int], window: int, seed: int, carry: float) -> None:
    packer = WindowPacker(max_tokens=200, window=window, seed=seed, max_carry=carry, num_buckets=4)
    stream = CountingStream(lengths)
    emitted: list[int] = []
    max_held = 0
    for b in packer.pack(stream):
        assert b and sum(lengths[k] for k in b) <= 200
        emitted.extend(b)
        max_held = max(max_held, stream.read - (len(emitted) - len(b)))
    assert sorted(emitted) == list(range(len(lengths)))
    assert max_held <= window  # memory bounded by the window


def test_window_packer_is_deterministic_for_a_seed_and_shuffles_across_seeds() -> None:
    lengths = realistic_lengths(5000, seed=2)

    def run(seed: int) -> list[list[int]]:
        return list(WindowPacker(max_tokens=4096, window=1000, seed=seed).pack(enumerate(lengths)))

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_window_packer_fill_and_delay_bound() -> None:
    lengths = realistic_lengths(50_000, seed=3)
    packer = WindowPacker(max_tokens=4096, window=4096, max_carry_rounds=2)
    stream = CountingStream(lengths)
    emitted = 0
    for b in packer.pack(stream):
        emitted += len(b)
        # a sample is emitted within max_carry_rounds + 1 windows of being read
        assert max(b) >= stream.read - (packer.max_carry_rounds + 2) * packer.window
    assert emitted == lengths.size
    plan = packer.pack_lengths(lengths)
    check_plan(plan, lengths, 4096)
    assert plan.fill >= 0.97


def test_window_packer_oversize() -> None:
    packer = WindowPacker(max_tokens=100, window=8)
    with pytest.raises(ValueError, match=r"sample 'ep1:3' has 101 tokens, more than max_tokens=100"):
        list(packer.pack([("ep1:2", 50), ("ep1:3", 101)]))
    rejecting = WindowPacker(max_tokens=100, window=8, on_oversize="reject")
    rejected: list[str] = []
    bins = list(rejecting.pack([("a", 50), ("b", 101), ("c", 40)], rejected=rejected))
    assert rejected == ["b"] and sorted(k for b in bins for k in b) == ["a", "c"]
    plan = rejecting.pack_lengths([50, 101, 40])
    np.testing.assert_array_equal(plan.rejected, [1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window": 0}, "window must be >= 1"),
        ({"max_carry": 1.0}, "max_carry must be in"),
        ({"min_fill": 0.0}, "min_fill must be in"),
        ({"bucket_boundaries": (300, 200)}, "strictly increasing"),
        ({"bucket_boundaries": (4096,)}, "strictly increasing"),
        ({"num_buckets": 0}, "num_buckets"),
        ({"on_oversize": "truncate"}, "on_oversize"),
    ],
)
def test_window_packer_config_is_validated(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        WindowPacker(max_tokens=4096, **kwargs)


def test_window_packer_bucket_edges() -> None:
    assert WindowPacker(max_tokens=4096, num_buckets=4).edges.tolist() == [1024, 2048, 3072]
    assert WindowPacker(max_tokens=4096, bucket_boundaries=(300, 900)).edges.tolist() == [300, 900]


def test_pack_plan_validates_itself() -> None:
    with pytest.raises(ValueError, match="bin_offsets"):
        PackPlan(
            order=np.arange(3),
            bin_offsets=np.array([0, 2]),
            bin_tokens=np.array([5]),
            max_tokens=8,
        )
    with pytest.raises(ValueError, match="more than max_tokens"):
        PackPlan(
            order=np.arange(2),
            bin_offsets=np.array([0, 2]),
            bin_tokens=np.array([9]),
            max_tokens=8,
        )
