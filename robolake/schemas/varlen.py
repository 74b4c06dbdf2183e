"""Variable-length sequence metadata: the one place `cu_seqlens` is built from sample lengths.

Packed sequences lay samples end to end. Attention kernels (flash-attn's varlen functions,
PyTorch's `varlen_attn`) take the boundaries as `cu_seqlens`: an int32 vector of length n+1 that
starts at 0 and holds the running sum of the lengths, plus `max_seqlen`. Packers, loaders and the
trainer all build it through `cu_seqlens_from_lengths` so that they cannot disagree on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["VarlenMetadata", "cu_seqlens_from_lengths", "position_ids_from_lengths"]


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


@dataclass(frozen=True, kw_only=True)
class VarlenMetadata:
    """Boundaries of a packed sequence.

    Attributes:
        cu_seqlens: int32 [n+1], starts at 0, non-decreasing.
        max_seqlen: Length of the longest sample.
    """

    cu_seqlens: np.ndarray
    max_seqlen: int

    @classmethod
    def from_lengths(cls, lengths: np.ndarray | list[int]) -> VarlenMetadata:
        arr = np.asarray(lengths, dtype=np.int64)
        return cls(cu_seqlens=cu_seqlens_from_lengths(arr), max_seqlen=int(arr.max(initial=0)))

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.cu_seqlens).astype(np.int64)

    @property
    def num_samples(self) -> int:
        return int(self.cu_seqlens.shape[0] - 1)

    @property
    def total_tokens(self) -> int:
        return int(self.cu_seqlens[-1])
