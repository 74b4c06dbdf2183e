"""What the training loop records: per-step metrics and per-rank sample records.

A step's loss and grad norm are tensors on the training device. Reading one as a Python float
waits for the device to finish everything queued before it, so doing that every step would stall
the CUDA stream every step. `StepMetrics` keeps them on the device and reads the pending ones in a
single transfer at each sync (`sync()`: every `log_every` steps, before a checkpoint and at the
end); the host-side numbers of a step (lr, timings, padding) are queued beside them, and each
metrics.jsonl row is written once its loss and grad norm have arrived. The rows are the same as
one written per step; they only reach the file in bursts. A loss that is not finite is reported
at the sync that reads it, naming its step and samples, before a checkpoint could save it.

`SampleRecords` writes, per rank, one JSON line per batch to `rank{R}.jsonl`:
`{"epoch", "step", "keys": [[episode_id, step_index], ...]}`, so a checkpoint can be traced to
exactly the samples it saw.
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from pathlib import Path
from typing import Any

import torch

__all__ = ["SampleRecords", "StepMetrics"]


def open_run_file(path: Path) -> Any:
    """`path` opened to append, refusing a symlink: a run directory handed over to resume could
    otherwise make training append to any file its user can write (`~/.bashrc`)."""
    try:  # O_NOFOLLOW: no window between a check and the open
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        if not path.is_symlink():
            raise
        raise ValueError(
            f"{path} is a symlink; robolake appends only to its own files inside the run directory: "
            "remove the link and run again"
        ) from e
    return os.fdopen(fd, "a")


class StepMetrics:
    """Per-step loss and grad norm held on the device between syncs, and the JSONL rows they end in.

    Args:
        path: metrics.jsonl, or None for none.
        write: Whether this rank writes the file (rank 0); every rank keeps `losses`.
    """

    def __init__(self, path: str | None, write: bool) -> None:
        self.path = Path(path) if path else None
        self.fh = None
        if self.path is not None and write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fh = open_run_file(self.path)
        self.losses: list[float] = []  # every synced step's loss, in order
        self.last_loss = math.nan  # the newest synced loss (what progress reports between syncs)
        self._device: list[tuple[int, torch.Tensor, tuple[tuple[str, int], ...]]] = []
        self._values: deque[tuple[float, float]] = deque()
        self._rows: deque[dict[str, Any]] = deque()

    def add(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor, keys: tuple[tuple[str, int], ...]) -> None:
        """Queue a step's loss and grad norm (still on the device; nothing is read)."""
        self._device.append((step, torch.stack((loss.float(), grad_norm.float())), keys))

    def sync(self) -> None:
        """Read every queued loss and grad norm in one device-to-host transfer.

        Raises:
            FloatingPointError: a loss is NaN or infinite (the steps before it are kept).
        """
        if not self._device:
            return
        pending, self._device = self._device, []
        values = torch.stack([v for _, v, _ in pending]).tolist()  # the one host sync
        bad = next((i for i, (loss, _) in enumerate(values) if not math.isfinite(loss)), len(values))
        for loss, grad_norm in values[:bad]:
            self.losses.append(loss)
            self.last_loss = loss
            self._values.append((loss, grad_norm))
        self._write_ready()
        if bad < len(values):
            step, _, keys = pending[bad]
            raise FloatingPointError(f"loss is {values[bad][0]} at step {step}; lower lr or check the batch {keys}")

    def row(self, record: dict[str, Any]) -> None:
        """Queue the host-side numbers of the next step's row (with its "step"; loss and grad norm join it)."""
        self._rows.append(record)
        self._write_ready()

    def _write_ready(self) -> None:
        while self._rows and self._values:
            record, (loss, grad_norm) = self._rows.popleft(), self._values.popleft()
            if self.fh is not None:
                self.fh.write(
                    json.dumps({"step": record["step"], "loss": loss, "grad_norm": grad_norm, **record}) + "\n"
                )
                self.fh.flush()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


class SampleRecords:
    """Per-rank JSONL of the samples each step trained on (appended, so a resumed run continues it)."""

    def __init__(self, directory: str | None, rank: int) -> None:
        self.fh = None
        if directory:
            folder = Path(directory)
            if folder.is_symlink():  # a resumed run directory someone handed over must not aim its appends elsewhere
                raise ValueError(
                    f"{folder} is a symlink; robolake writes sample records only inside the run directory: "
                    "remove the link and run again"
                )
            folder.mkdir(parents=True, exist_ok=True)
            self.fh = open_run_file(folder / f"rank{rank}.jsonl")

    def write(self, epoch: int, step: int, keys: tuple[tuple[str, int], ...]) -> None:
        if self.fh is not None:
            self.fh.write(
                json.dumps({"epoch": int(epoch), "step": int(step), "keys": [[e, int(s)] for e, s in keys]}) + "\n"
            )
            self.fh.flush()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
