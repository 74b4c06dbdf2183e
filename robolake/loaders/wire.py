"""How a batch crosses from a DataLoader worker to the training process.

torch's DataLoader moves each tensor a worker yields through shared memory: the worker copies the
tensor's storage into a new shared segment and passes its file descriptor over a socket, and the
trainer maps it. That costs a few hundred microseconds a tensor whatever its size, and a
`PackedBatch` holds eleven. On the e2e workload (batches of about 200 KB) it was 5.2 ms of the
trainer's wait a batch, and 1.4 ms when the same arrays travel as numpy arrays pickled through
the queue's pipe. For a large array the pipe's two copies cost more than one shared segment (a
6 MB pixel tensor: 7.4 ms against 5.5 ms), so arrays of at least `SHARED_MIN_BYTES` stay tensors
and take the shared-memory path; the rest travel inline.

`to_wire` runs in the worker (the loader's collate hands the DataLoader a `WireBatch`),
`from_wire` in the trainer's process; the batch that comes out is equal to the one that went in.
With `pin_memory` the DataLoader's pinning thread calls `WireBatch.pin_memory`, which rebuilds
and pins the batch off the training thread.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from robolake.schemas.batch import PackedBatch

__all__ = ["SHARED_MIN_BYTES", "WireBatch", "from_wire", "to_wire"]

SHARED_MIN_BYTES = 1 << 20  # arrays this big or bigger cross in shared memory, smaller ones inline


@dataclass(frozen=True)
class WireBatch:
    """A PackedBatch in transit: its small tensors as numpy arrays, the rest as they are."""

    fields: dict[str, Any]

    def pin_memory(self) -> PackedBatch:
        """The batch, rebuilt and in pinned memory (the DataLoader's pinning thread calls this)."""
        return from_wire(self).pin_memory()


def to_wire(batch: PackedBatch) -> WireBatch:
    """`batch` ready to leave a worker (see the module docstring)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(batch):
        value = getattr(batch, f.name)
        if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.nbytes < SHARED_MIN_BYTES:
            value = value.numpy()
        out[f.name] = value
    return WireBatch(out)


def from_wire(item: WireBatch | PackedBatch) -> PackedBatch:
    """The PackedBatch a worker sent (a PackedBatch passes through unchanged)."""
    if isinstance(item, PackedBatch):
        return item
    fields: dict[str, Any] = {
        k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in item.fields.items()
    }
    return PackedBatch(**fields)
