"""WindowPacker: streaming best-fit-decreasing with bounded memory.

Offline packing needs the whole length column. `WindowPacker` packs a stream with bounded
memory: it holds at most `window` samples, packs them with BFD, emits the bins that are full
enough in a seeded shuffled order, and carries the samples of the emptiest bins into the next
window, where new samples can complete them. The carry is capped overall and per length bucket,
so a run of one awkward length (one embodiment's episodes arriving back to back) cannot fill the
carry and starve the window. Each window's samples are permuted (BFD breaks ties in input order)
and its bins emitted in shuffled order, both seeded: the same seed gives the same bins, a new seed
(say, per epoch) a new order. Across windows the order follows the input, so shuffle the source
(episodes, shards) upstream as for any streaming loader.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from robolake.packers.binpack import OnOversize, PackPlan, best_fit_decreasing

__all__ = ["WindowPacker"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
_I64 = np.int64


@dataclass(frozen=True, kw_only=True)
class WindowPacker:
    """Streaming best-fit-decreasing over a bounded window of samples.

    Attributes:
        max_tokens: Capacity of one packed sequence.
        window: Most samples held at once (newly read ones plus the carry); the memory bound.
        num_buckets: Number of equal-width length buckets over [1, max_tokens]; ignored when
            `bucket_boundaries` is given. The carry holds at most 1/num_buckets of its budget
            from any one bucket.
        bucket_boundaries: Strictly increasing inclusive upper bounds of all but the last bucket,
            each in [1, max_tokens); buckets are [1, b0], (b0, b1], ..., (b_last, max_tokens].
        min_fill: A bin at least this full is emitted at once; emptier bins may be carried.
        max_carry: Fraction of `window` that may be carried into the next window, in [0, 1).
        max_carry_rounds: A sample is carried at most this many times, so it is emitted at most
            `max_carry_rounds + 1` windows after it was read.
        seed: Seeds the per-window permutations; same seed and input, same bins in the same order.
        on_oversize: "error" raises on a sample longer than `max_tokens`; "reject" skips it and
            appends its key to the `rejected` list given to `pack` (or logs how many).
    """

    max_tokens: int
    window: int = 8192
    num_buckets: int = 8
    bucket_boundaries: tuple[int, ...] | None = None
    min_fill: float = 0.98
    max_carry: float = 0.25
    max_carry_rounds: int = 4
    seed: int = 0
    on_oversize: OnOversize = "error"

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1 sample, got {self.window}")
        if self.num_buckets < 1:
            raise ValueError(f"num_buckets must be >= 1, got {self.num_buckets}")
        b = self.bucket_boundaries
        if b is not None and (
            any(x >= y for x, y in zip(b, b[1:], strict=False)) or (b and (b[0] < 1 or b[-1] >= self.max_tokens))
        ):
            raise ValueError(f"bucket_boundaries must be strictly increasing within [1, {self.max_tokens}), got {b}")
        if not 0.0 < self.min_fill <= 1.0:
            raise ValueError(f"min_fill must be in (0, 1], got {self.min_fill}")
        if not 0.0 <= self.max_carry < 1.0:
            raise ValueError(f"max_carry must be in [0, 1), got {self.max_carry}")
        if self.max_carry_rounds < 0:
            raise ValueError(f"max_carry_rounds must be >= 0, got {self.max_carry_rounds}")
        if self.on_oversize not in ("error", "reject"):
            raise ValueError(f"on_oversize must be 'error' or 'reject', got {self.on_oversize!r}")

    @property
    def edges(self) -> np.ndarray:
        """int64 inclusive upper bounds of all buckets but the last."""
        if self.bucket_boundaries is not None:
            return np.asarray(self.bucket_boundaries, dtype=_I64)
        inner = np.linspace(0, self.max_tokens, self.num_buckets + 1)[1:-1]
        return np.unique(np.maximum(np.round(inner), 1).astype(_I64))

    def pack(self, samples: Iterable[tuple[K, int]], *, rejected: list[K] | None = None) -> Iterator[list[K]]:
        """Pack a stream of (key, length) into bins, lazily.

        Args:
            samples: (key, token length) pairs; read one window at a time.
            rejected: With `on_oversize="reject"`, keys of oversize samples are appended here.

        Returns:
            An iterator of bins, each a list of keys whose lengths sum to at most `max_tokens`.

        Raises:
            ValueError: a length is < 1, or longer than `max_tokens` with `on_oversize="error"`
                (the message names the sample's key and length).
        """
        keys: list[K] = []
        lens: list[int] = []
        ages: list[int] = []
        num_rejected = 0
        w = 0
        for key, length in samples:
            n = int(length)
            if n < 1:
                raise ValueError(
                    f"sample {key!r} has length {n}; every sample needs at least one token, "
                    "drop empty samples before packing"
                )
            if n > self.max_tokens:
                if self.on_oversize == "error":
                    raise ValueError(
                        f"sample {key!r} has {n} tokens, more than max_tokens={self.max_tokens}; "
                        "raise max_tokens or use on_oversize='reject'"
                    )
                num_rejected += 1
                if rejected is not None:
                    rejected.append(key)
                continue
            keys.append(key)
            lens.append(n)
            ages.append(0)
            if len(keys) >= self.window:
                emit, carry = self._pack_window(keys, lens, ages, w, final=False)
                w += 1
                keys = [keys[j] for j in carry]
                lens = [lens[j] for j in carry]
                ages = [ages[j] + 1 for j in carry]
                yield from emit
        if keys:
            emit, _ = self._pack_window(keys, lens, ages, w, final=True)
            yield from emit
        if num_rejected and rejected is None:
            logger.warning("rejected %d samples longer than max_tokens=%d", num_rejected, self.max_tokens)

    def pack_lengths(self, lengths: np.ndarray | list[int]) -> PackPlan:
        """Pack an in-memory length array as a stream (keys are indices) into a PackPlan.

        Raises:
            ValueError: as for `pack`.
        """
        arr = np.asarray(lengths, dtype=_I64)
        rejected: list[int] = []
        bins = list(self.pack(zip(range(arr.size), arr.tolist(), strict=True), rejected=rejected))
        order = np.fromiter((i for b in bins for i in b), dtype=_I64, count=sum(map(len, bins)))
        offsets = np.zeros(len(bins) + 1, dtype=_I64)
        np.cumsum([len(b) for b in bins], out=offsets[1:])
        tokens = np.add.reduceat(arr[order], offsets[:-1]) if bins else np.zeros(0, dtype=_I64)
        return PackPlan(
            order=order,
            bin_offsets=offsets,
            bin_tokens=tokens.astype(_I64),
            rejected=np.asarray(rejected, dtype=_I64),
            max_tokens=self.max_tokens,
        )

    def _pack_window(
        self, keys: list[K], lens: list[int], ages: list[int], w: int, *, final: bool
    ) -> tuple[list[list[K]], list[int]]:
        """BFD over one window: (bins to emit in shuffled order, indices of samples to carry)."""
        rng = np.random.default_rng([self.seed, w])
        lengths = np.asarray(lens, dtype=_I64)
        perm = rng.permutation(lengths.size)  # BFD breaks ties in input order: randomise it
        plan = best_fit_decreasing(lengths[perm], self.max_tokens)
        emit = np.ones(plan.num_bins, dtype=bool)
        carry: list[int] = []
        budget = int(self.max_carry * self.window)
        if not final and budget:
            edges = self.edges
            nb = edges.size + 1
            cap = -(-budget // nb)
            bucket_of = np.searchsorted(edges, lengths, side="left")
            age = np.asarray(ages, dtype=_I64)
            used = np.zeros(nb, dtype=_I64)
            fills = plan.bin_tokens / self.max_tokens
            cand = np.flatnonzero(fills < self.min_fill)
            for b in cand[np.argsort(fills[cand], kind="stable")].tolist():
                members = perm[plan.bin(b)]
                if len(carry) + members.size > budget:
                    break
                per_bucket = np.bincount(bucket_of[members], minlength=nb)
                if np.any(used + per_bucket > cap) or age[members].max() >= self.max_carry_rounds:
                    continue
                used += per_bucket
                emit[b] = False
                carry.extend(members.tolist())
        out_bins = np.flatnonzero(emit)
        rng.shuffle(out_bins)
        return [[keys[j] for j in perm[plan.bin(b)].tolist()] for b in out_bins.tolist()], carry
