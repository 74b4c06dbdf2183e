"""The pack plan: which samples an epoch packs and into which packed sequences. Pure and Ray-free.

Both consumers of a lake's samples plan with these functions, so their plans cannot drift apart:
`pack` (`pipeline.py`, which runs the plan's materialisation on Ray or in this process) and the
lake stream (`loaders/lake_stream.py`, which plans every epoch on the fly). Everything here reads
only the sample index (lengths and keys) and the spec, holds no open files and starts nothing.

- `epoch_samples`: the one mixture step. Without a mixture, every sample once; with one
  (`spec.mix`, bound by `mixture_for`), the mixture's draw for the epoch (`mix.py`).
- `plan_sequences`: the mixture draw, a seeded shuffle (equal-length neighbours, consecutive steps
  of one episode, spread over many sequences), the packer (`binpack.py`) and a second shuffle,
  because best-fit emits sequences ordered by size.
- `window_sequences`: the same chain with the bounded window packer (`window.py`), which emits in
  a seeded order of its own: the lake stream's packer.
- `plan_ranges`: above `PLAN_RANGE_SAMPLES` samples, episodes dealt by a seeded shuffle into
  ranges planned one at a time, so no process holds the whole plan (`pipeline.py` says why).
- `padded_fill`: the real-token fraction the same samples would have in padded batches, the
  baseline a manifest reports beside the packed fill.

Same index + spec + seed (+ epoch) => the same plan, whichever process computes it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robolake.lake import Lake
from robolake.packers.binpack import OnOversize, best_fit_decreasing, first_fit_decreasing
from robolake.packers.mix import Mixture, bind_mixture
from robolake.packers.samples import SampleIndex
from robolake.packers.spec import PackSpec
from robolake.packers.window import WindowPacker

__all__ = [
    "PLAN_RANGE_SAMPLES",
    "epoch_samples",
    "mixture_for",
    "padded_fill",
    "plan_ranges",
    "plan_sequences",
    "window_sequences",
]

PLAN_RANGE_SAMPLES = 4_000_000  # above this many samples, `pack` plans per range of episodes


def padded_fill(lengths: np.ndarray, batch_size: int) -> float:
    """Real-token fraction if `lengths` (in this order) were padded per batch of `batch_size`."""
    if len(lengths) == 0:
        return 0.0
    b = max(1, int(batch_size))
    n = (len(lengths) + b - 1) // b * b
    padded = np.zeros(n, dtype=np.int64)
    padded[: len(lengths)] = lengths
    grid = padded.reshape(-1, b)
    counts = np.minimum(b, len(lengths) - np.arange(grid.shape[0]) * b)
    return float(lengths.sum() / (grid.max(1) * counts).sum())


def _oversize_error(index: SampleIndex, spec: PackSpec, ids: np.ndarray, lengths: np.ndarray) -> ValueError:
    ((eid, step),) = index.keys(ids[:1])
    return ValueError(
        f"sample (episode {eid}, step {step}) has {int(lengths[0])} tokens, more than "
        f"max_tokens={spec.max_tokens} ({ids.size} such samples); raise max_tokens "
        "(`robolake pack --max-tokens`), cap the instruction (`--max-text-tokens`, tokens.max_text_tokens), "
        "or record and skip them (`--reject-oversize`, on_oversize='reject')"
    )


def mixture_for(lake: Lake, index: SampleIndex, spec: PackSpec) -> Mixture | None:
    """`spec.mix` bound to `index` (None without a mixture): what `epoch_samples` draws with."""
    return None if spec.mix is None else bind_mixture(lake, index, spec.mix, max_tokens=spec.max_tokens)


def epoch_samples(
    index: SampleIndex,
    spec: PackSpec,
    samples: np.ndarray | None = None,
    *,
    mixture: Mixture | None = None,
    epoch: int = 0,
    on_oversize: OnOversize | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The sample ids one epoch packs: the one mixture step of `pack` and the lake stream.

    Without a mixture, every id of `samples` (all by default) once, oversize ones included (the
    packer rejects them or raises). With one, the mixture's draw (`Mixture.draw`: repeats and
    subsamples, seeded by `spec.seed` and `epoch`) from the samples that fit `max_tokens`.

    Returns:
        (ids to pack, ids left out for being longer than max_tokens: only with a mixture).

    Raises:
        ValueError: `spec.mix` is set but no mixture was bound (`mixture_for`), or an oversize
            sample with on_oversize="error" under a mixture.
    """
    ids = np.arange(index.num_samples, dtype=np.int64) if samples is None else np.asarray(samples, dtype=np.int64)
    if mixture is None:
        if spec.mix is not None:
            raise ValueError(
                f"the pack spec holds the mixture {spec.mix.to_text()}: bind it to the index first "
                "(mixture=mixture_for(lake, index, spec)) and pass it on"
            )
        return ids, np.zeros(0, dtype=np.int64)
    lengths = index.length_of(ids)
    over = lengths > spec.max_tokens
    if over.any() and (on_oversize or spec.on_oversize) == "error":
        raise _oversize_error(index, spec, ids[over], lengths[over])
    return mixture.draw(index, ids[~over], seed=spec.seed, epoch=epoch), ids[over]


def plan_sequences(
    index: SampleIndex,
    spec: PackSpec,
    samples: np.ndarray | None = None,
    *,
    seed: int | Sequence[int] | None = None,
    mixture: Mixture | None = None,
    epoch: int = 0,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Assign samples of `index` (all, or the ids in `samples`) to packed sequences.

    Args:
        index: The sample index.
        spec: The pack spec.
        samples: Sample ids to plan (one range of a large run); None plans every sample.
        seed: Seed of the shuffles; `spec.seed` when None.
        mixture: `spec.mix` bound to the index (`mixture_for`); required when the spec has one.
        epoch: The epoch whose mixture draw to plan.

    Returns:
        (sequences, rejected): sample ids of each packed sequence, in training order; sample ids
        rejected for being longer than `spec.max_tokens` (only with on_oversize="reject").

    Raises:
        ValueError: a sample is longer than max_tokens and on_oversize="error"; the message
            names its episode and step. A spec with a mixture and no `mixture`.
    """
    ids = np.arange(index.num_samples, dtype=np.int64) if samples is None else np.asarray(samples, dtype=np.int64)
    all_lengths = index.length_of(ids)
    oversize = np.flatnonzero(all_lengths > spec.max_tokens)
    if oversize.size and spec.on_oversize == "error":
        raise _oversize_error(index, spec, ids[oversize], all_lengths[oversize])
    del all_lengths
    ids, left_out = epoch_samples(index, spec, ids, mixture=mixture, epoch=epoch)
    shuffle_seed = spec.seed if seed is None else seed
    if spec.algorithm == "window":  # the window packer already emits in a seeded shuffled order
        sequences, rejected = _window_pack(index, spec, ids, shuffle_seed, spec.seed, "reject")
        return sequences, np.concatenate([left_out, rejected])
    rng = np.random.default_rng(shuffle_seed)
    perm = ids[rng.permutation(len(ids))]
    packer = best_fit_decreasing if spec.algorithm == "bfd" else first_fit_decreasing
    plan = packer(index.length_of(perm), spec.max_tokens, on_oversize="reject")
    sequences = [perm[plan.bin(b)] for b in range(plan.num_bins)]
    sequences = [sequences[i] for i in rng.permutation(len(sequences))]
    return sequences, np.concatenate([left_out, perm[plan.rejected]])


def window_sequences(
    index: SampleIndex,
    spec: PackSpec,
    *,
    samples: np.ndarray | None = None,
    shuffle_seed: int | Sequence[int] | None,
    packer_seed: int,
    on_oversize: OnOversize | None = None,
    mixture: Mixture | None = None,
    epoch: int = 0,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Sample ids -> mixture draw -> seeded shuffle -> `WindowPacker`: the one window chain of
    `pack` and `LakeStream`.

    Args:
        index: The sample index.
        spec: The pack spec (max_tokens, window, on_oversize).
        samples: Sample ids to pack; None packs every sample.
        shuffle_seed: Seed of the shuffle of the samples before packing; None keeps their order.
        packer_seed: The window packer's seed (its per-window permutations and emit order).
        on_oversize: Overrides `spec.on_oversize`.
        mixture: `spec.mix` bound to the index (`mixture_for`); required when the spec has one.
        epoch: The epoch whose mixture draw to pack.

    Returns:
        (sequences, rejected): sample ids of each packed sequence, in the packer's emit order;
        ids of samples longer than `spec.max_tokens` (with on_oversize="reject").

    Raises:
        ValueError: a sample is longer than max_tokens and on_oversize is "error", or a spec with
            a mixture and no `mixture`.
    """
    ids, left_out = epoch_samples(index, spec, samples, mixture=mixture, epoch=epoch, on_oversize=on_oversize)
    sequences, rejected = _window_pack(index, spec, ids, shuffle_seed, packer_seed, on_oversize)
    return sequences, np.concatenate([left_out, rejected])


def _window_pack(
    index: SampleIndex,
    spec: PackSpec,
    ids: np.ndarray,
    shuffle_seed: int | Sequence[int] | None,
    packer_seed: int,
    on_oversize: OnOversize | None,
) -> tuple[list[np.ndarray], np.ndarray]:
    order = ids if shuffle_seed is None else ids[np.random.default_rng(shuffle_seed).permutation(len(ids))]
    packer = WindowPacker(
        max_tokens=spec.max_tokens, window=spec.window, seed=packer_seed, on_oversize=on_oversize or spec.on_oversize
    )
    rejected: list[int] = []
    bins = packer.pack(zip(order.tolist(), index.length_of(order).tolist(), strict=True), rejected=rejected)
    return [np.asarray(b, dtype=np.int64) for b in bins], np.asarray(rejected, dtype=np.int64)


def plan_ranges(index: SampleIndex, spec: PackSpec, max_samples: int = PLAN_RANGE_SAMPLES) -> list[np.ndarray]:
    """Episode rows of each planning range: one range of every episode when the run is small,
    else episodes dealt by a seeded shuffle into ranges of about `max_samples` samples."""
    if index.num_samples <= max_samples:
        return [np.arange(index.num_episodes, dtype=np.int64)]
    order = np.random.default_rng([spec.seed, 0x9E37]).permutation(index.num_episodes)
    cum = np.cumsum(np.diff(index.sample_start)[order])
    cuts = np.searchsorted(cum, np.arange(max_samples, int(cum[-1]), max_samples), side="left") + 1
    return [np.sort(r) for r in np.split(order, cuts) if len(r)]
