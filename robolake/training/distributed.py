"""torch.distributed setup for runs launched by torchrun.

torchrun sets RANK, LOCAL_RANK and WORLD_SIZE (read in one place, `robolake.distributed`). With
WORLD_SIZE > 1 the process joins the process group (NCCL on CUDA, gloo on CPU) before any loader
is built: the entry point calls `setup_distributed` once (`train_on` first thing, handing the
`DistInfo` to `train`; `train` calls it itself only when it is the entry point) and the trainer
wraps the model in DistributedDataParallel. Each rank reads its own share of the data, which is
the batch source's job (opened for that rank by `open_batches`), not the trainer's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.distributed as dist

from robolake.distributed import data_parallel_rank

__all__ = ["DistInfo", "setup_distributed", "teardown_distributed"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits.

    Attributes:
        rank: Global rank (0 when not distributed).
        world_size: Number of processes (1 when not distributed).
        local_rank: Rank on this machine; picks the CUDA device.
        device: The device this rank trains on.
        initialized_here: True when `setup_distributed` created the process group.
    """

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    initialized_here: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed(device: str = "auto") -> DistInfo:
    """Join the process group when launched with WORLD_SIZE > 1 and pick this rank's device.

    Args:
        device: "auto" (CUDA when available, else CPU), "cpu", "cuda" or "cuda:N".

    Raises:
        ValueError: CUDA was asked for and is not available.
    """
    where = data_parallel_rank()
    world, rank, local = where.world_size, where.rank, where.local_rank
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available; use device='cpu'")
        if dev.index is None:
            dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    created = False
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        created = True
        log.info("joined process group: rank %d of %d on %s", rank, world, dev)
    if dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
    return DistInfo(rank=rank, world_size=world, local_rank=local, device=dev, initialized_here=created)


def teardown_distributed(info: DistInfo) -> None:
    """Leave the process group if `setup_distributed` created it."""
    if info.initialized_here and dist.is_initialized():
        dist.destroy_process_group()
