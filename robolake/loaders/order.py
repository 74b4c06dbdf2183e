"""The epoch's global order of packed sequences, and how ranks take slices of it (elastic plans).

What. An epoch of N packed sequences (shard rows, or the sequences a lake stream packed) has one
**canonical order**, a function of (data, pack spec, seed, epoch) only: never of the world size,
the DataLoader workers or the batch size. Training walks it front to back. A step of W ranks
taking B sequences each consumes the next W x B sequences of the order (its *global batch*), and
every rank takes a disjoint slice of that global batch. So after any step the sequences the whole
world has read are a prefix of the order, and one number, the `position` (sequences consumed),
says where the epoch stands, whoever read them. A run stopped at position K resumes on M ranks
(any M, any workers, any B) by planning the rest of the order from K for its own world
(`plan_epoch(start=K)`): nothing is read twice, nothing is skipped, and the remaining order is the
one the old run would have read. This is MosaicML Streaming's canonical order and Energon's
logical workers, at the granularity of packed sequences.

The order is `default_rng([seed, epoch]).permutation(N)` (or 0..N-1 unshuffled: a lake stream's
packer has shuffled already). A mixed pack's sequences (row strata recorded,
`packers.mix.row_strata`) are instead interleaved by their dominant group, each group in a random
order and spread evenly over the epoch (jittered stratification), so every stretch of the order,
each step's global batch and any prefix a resized run has read, holds the mixture to within about
one sequence per group, whatever the world size.

The split. Unmixed, rank r takes every W-th sequence of the global batch. A mixed pack (row strata
recorded, `packers.mix.row_strata`: each sequence's dominant group, that group's share, its fill)
is dealt so that every rank reads the mixture sample for sample: each run of W sequences of nearly
the same make-up goes one to every rank, while each step still gives every rank its B
(`deal.py`). The deal is computed over the plan's stretch of the order, from where this world's
plan began (its *anchor*), so it is a function of (order, anchor, world size, batch size): a run
resumed on the same world keeps its anchor and reads exactly what the uninterrupted run would have
(the same batches on the same ranks); a resized one anchors at its position and deals the rest,
so the ranks' shares hold on both sides of the resize.

The tail. Every rank must take the same number of steps (DDP), each with at least one sequence.
With `drop_last` the at most W x B - 1 sequences left after the last full global batch are skipped
(which ones depends on where the run was resized). Without it the last global batch is smaller;
if it would leave a rank without a sequence (fewer than W), it is folded into the step before,
whose ranks then take one more. A remainder of fewer than W sequences with no step before it (a
resume near the end of an epoch on many ranks) cannot be split: `plan_epoch` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["EpochPlan", "canonical_order", "check_strata", "plan_epoch"]


def canonical_order(num: int, *, seed: Sequence[int] | None, strata: np.ndarray | None = None) -> np.ndarray:
    """int64 [num]: the epoch's global order of its sequences (indices).

    Args:
        num: Sequences in the epoch.
        seed: The epoch's seed (e.g. `[config.seed, epoch]`); None keeps the sequences in their
            own order (no shuffle).
        strata: A mixed pack's stratum of every sequence: with a seed, the groups are
            interleaved evenly (see the module notes).

    Raises:
        ValueError: `strata` does not name one stratum per sequence.
    """
    strata = check_strata(strata, num)
    if seed is None:
        return np.arange(num, dtype=np.int64)
    rng = np.random.default_rng(list(seed))
    if strata is None:
        return rng.permutation(num).astype(np.int64)
    # Jittered stratification: the k-th sequence (in a random order) of a group of n_g sits at
    # (k + u) / n_g, so every stretch of the order holds each group in its share, to about one.
    group = np.unique(strata >> 16, return_inverse=True)[1]
    shuffled = rng.permutation(num)
    rank_in_group = np.empty(num, dtype=np.float64)
    sizes = np.bincount(group)
    for g, size in enumerate(sizes.tolist()):
        members = shuffled[group[shuffled] == g]
        rank_in_group[members] = (np.arange(size) + rng.random(size)) / max(1, size)
    return np.lexsort((rng.random(num), rank_in_group)).astype(np.int64)


def check_strata(strata: np.ndarray | None, num: int) -> np.ndarray | None:
    """`strata` as an int64 array, or None without strata.

    Raises:
        ValueError: `strata` does not name one stratum per sequence.
    """
    if strata is None:
        return None
    if len(strata) != num:
        raise ValueError(
            f"the pack's row strata name {len(strata)} rows but the shards hold {num}; re-run `robolake pack`"
        )
    return np.asarray(strata, dtype=np.int64)


@dataclass(frozen=True)
class EpochPlan:
    """One rank's steps over the rest of an epoch, from `start`.

    Attributes:
        batches: The sequences (indices into the epoch's sequences) this rank reads at each step.
        ends: Global position (sequences of the epoch consumed by all ranks) after each step.
        start: Position the plan starts from.
        sequences: Sequences in the epoch.
    """

    batches: list[np.ndarray]
    ends: list[int]
    start: int
    sequences: int

    def __len__(self) -> int:
        return len(self.batches)

    def position(self, steps: int) -> int:
        """The global position after `steps` steps of this plan."""
        return self.start if steps <= 0 else self.ends[min(steps, len(self.ends)) - 1]


def _bounds(remaining: int, world_size: int, per_rank: int, drop_last: bool) -> list[int]:
    """Sizes of the global batches that cover `remaining` sequences (see the notes on the tail)."""
    size = world_size * per_rank
    if drop_last:
        return [size] * (remaining // size)
    if remaining == 0:
        return []
    steps = -(-remaining // size)
    sizes = [size] * (steps - 1) + [remaining - size * (steps - 1)]
    if sizes[-1] < world_size and len(sizes) > 1:
        last = sizes.pop()
        sizes[-1] += last
    return sizes


def plan_epoch(
    order: np.ndarray,
    *,
    start: int,
    rank: int,
    world_size: int,
    per_rank: int,
    drop_last: bool,
    strata: np.ndarray | None = None,
    epoch: int = 0,
) -> EpochPlan:
    """Rank `rank`'s steps over `order[start:]` at `world_size` ranks of `per_rank` sequences.

    Args:
        order: The epoch's canonical order (`canonical_order`).
        start: Sequences of the order already consumed (0 at the start of the epoch).
        rank: This rank.
        world_size: Ranks sharing the epoch from `start`.
        per_rank: Sequences per rank and step (B).
        drop_last: Skip the tail that does not fill a global batch.
        strata: Stratum of every sequence (a mixed pack's): each global batch is dealt by its
            groups (the notes), counted from `start`.
        epoch: Named in errors.

    Raises:
        ValueError: a rank outside [0, world_size), a start outside the epoch, no sequences,
            strata of another length, or fewer sequences left than ranks (without drop_last).
    """
    num = len(order)
    strata = check_strata(strata, num) if world_size > 1 else None
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    if not 0 <= start <= num:
        raise ValueError(f"the epoch has {num} packed sequences; position {start} is outside it")
    if num == 0:
        raise ValueError(
            "the shards hold no packed sequences (every sample was rejected, or the selection was empty); "
            "re-run `robolake pack` with a larger --max-tokens (manifest.json lists the rejected samples)"
        )
    remaining = num - start
    if not drop_last and 0 < remaining < world_size:
        where = "" if start == 0 else f"epoch {epoch} has {remaining} left after position {start} of {num}: "
        raise ValueError(
            f"{where}{remaining} packed sequences cannot give each of {world_size} ranks a batch; train or resume on "
            f"at most {remaining} ranks (torchrun --nproc-per-node), re-run `robolake pack` with a smaller "
            "--max-tokens (more, shorter sequences), or pass LoaderConfig(drop_last=True)"
        )
    sizes = _bounds(remaining, world_size, per_rank, drop_last)
    owner = None
    if strata is not None and sizes:  # a mixed pack: the stratified deal of `deal.py`
        from robolake.loaders.deal import deal_ranks

        substeps = [min(world_size, size - k) for size in sizes for k in range(0, size, world_size)]
        owner = deal_ranks(strata[order[start : start + sum(sizes)]], substeps, world_size)
    batches, ends, lo = [], [], start
    for size in sizes:
        hi = lo + size
        chunk = order[lo:hi]
        batches.append(chunk[rank::world_size] if owner is None else chunk[owner[lo - start : hi - start] == rank])
        ends.append(hi)
        lo = hi
    return EpochPlan(batches=batches, ends=ends, start=start, sequences=num)
