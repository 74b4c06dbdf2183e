"""Where this process sits in data-parallel training: the one place robolake reads it.

torchrun exports RANK, WORLD_SIZE and LOCAL_RANK before the script starts; an initialised
`torch.distributed` process group knows the same numbers. They are read here, once, by the entry
points (`open_batches` when no rank is given, the trainer's `setup_distributed`), and passed
on explicitly: the loader classes take rank and world size as constructor arguments
(rank 0 of 1 by default) and never read the environment, so a loader built before the process
group starts still reads only the share it was given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DataParallelRank", "data_parallel_rank", "resolve_rank"]


@dataclass(frozen=True, kw_only=True)
class DataParallelRank:
    """Attributes:
    rank: Global rank (0 when not distributed).
    world_size: Number of processes (1 when not distributed).
    local_rank: Rank on this machine (picks the CUDA device).
    """

    rank: int
    world_size: int
    local_rank: int = 0

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in [0, world_size), got rank={self.rank} world_size={self.world_size}")


def data_parallel_rank() -> DataParallelRank:
    """The initialised process group's rank and size, else torchrun's environment, else 0 of 1."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return DataParallelRank(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local)
    except ImportError:  # torch is a dependency; be safe in stripped environments
        pass
    return DataParallelRank(
        rank=int(os.environ.get("RANK", "0")), world_size=int(os.environ.get("WORLD_SIZE", "1")), local_rank=local
    )


def resolve_rank(rank: int | None, world_size: int | None) -> DataParallelRank:
    """Explicit (rank, world_size), or both from `data_parallel_rank()` when neither is given.

    Raises:
        ValueError: only one of the two was given, or they are out of range.
    """
    if rank is None and world_size is None:
        return data_parallel_rank()
    if rank is None or world_size is None:
        raise ValueError("pass both rank and world_size, or neither (to use torchrun's environment)")
    return DataParallelRank(rank=int(rank), world_size=int(world_size))
