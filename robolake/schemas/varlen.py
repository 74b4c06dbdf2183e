"""Variable-length sequence metadata: the one place `cu_seqlens` is built from sample lengths.

Packed sequences lay samples end to end. Attention kernels (flash-attn's varlen functions,
PyTorch's `varlen_attn`) take the boundaries as `cu_seqlens`: an int32 vector of length n+1 that
starts at 0 and holds the running sum of the lengths, plus `max_seqlen`. The packer (shard rows),
`make_packed_batch` (loaders) and the attention tests all build it through `cu_seqlens_from_lengths`
so that they cannot disagree on it; `position_ids_from_lengths` gives the per-sample positions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cu_seqlens_from_lengths", "position_ids_from_lengths"]


def cu_seqlens_from_lengths(lengths: np.ndarray | list[int]) -> np.ndarray:
    """int32 cumulative boundaries [0, l0, l0+l1, ...] of `lengths`.

    Raises:
        ValueError: a length is negative, or the total does not fit in int32.
    """
    arr = np.asarray(lengths, dtype=np.int64)
    if arr.ndim != 1:
        raise ValueError(f"lengths must be 1-D, got shape {arr.shape}")
    if arr.size and arr.min() < 0:
        raise ValueError(f"lengths must be >= 0, got {int(arr.min())}")
    out = np.zeros(arr.size + 1, dtype=np.int64)
    np.cumsum(arr, out=out[1:])
    if out[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"total length {int(out[-1])} does not fit int32 cu_seqlens; pack smaller sequences")
    return out.astype(np.int32)


def position_ids_from_lengths(lengths: np.ndarray | list[int]) -> np.ndarray:
    """int64 positions that restart at 0 at each sample, vectorised (no Python loop)."""
    arr = np.asarray(lengths, dtype=np.int64)
    total = int(arr.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(np.cumsum(arr) - arr, arr)
    return np.arange(total, dtype=np.int64) - starts
