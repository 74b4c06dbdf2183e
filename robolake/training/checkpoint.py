"""Checkpoints that resume a run exactly.

A resumed run matches an uninterrupted one only if everything that decides the next step is
restored: weights, optimizer moments, the schedule's position, every random number generator
(torch CPU and CUDA, numpy, Python, and the trainer's own noise generator), the step counter, and
the position in the data stream. The data position comes from the batch source's `state_dict()`
(every `BatchSource` has one), and every rank has its own: a checkpoint keeps all of them, keyed
by rank (rank 0 gathers them before it writes), and on resume each rank loads the one it saved.
For a plain iterable, or a checkpoint without loader states, the trainer replays the stream up to
the saved step instead.

A run resumed with another world size than the one that saved it gives rank r the state rank r
saved (rank 0's where the checkpoint has no rank r) and leaves the verdict to the batch source,
whose `load_state_dict` refuses what would repeat or skip samples: robolake's sources accept
another world size only at an epoch boundary (the next epoch is split for the new world) and
otherwise raise a ValueError naming both world sizes (`LoaderState.resume_from`).

Files are written to a temporary name and renamed, so a run killed mid-save leaves the previous
checkpoint intact. They are loaded with `weights_only=False` (they hold RNG tuples and arbitrary
loader state): load only checkpoints you wrote.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["CheckpointState", "latest_checkpoint", "load_checkpoint", "save_checkpoint"]

_NAME = re.compile(r"^step_(\d+)\.pt$")


@dataclass(frozen=True)
class CheckpointState:
    """What a loaded checkpoint hands back besides the restored objects.

    Attributes:
        step: Optimizer steps completed when it was saved.
        loader_states: Every rank's loader `state_dict()` at that step, keyed by rank (all ranks
            of the run that saved it), or None.
        extra: Free-form metadata saved with it.
    """

    step: int
    loader_states: dict[int, Any] | None
    extra: dict[str, Any]

    @property
    def world_size(self) -> int | None:
        """Ranks of the run that saved the loader states (None without them)."""
        return None if self.loader_states is None else len(self.loader_states)

    def loader_source_rank(self, rank: int) -> int:
        """The rank whose saved loader state rank `rank` resumes from: its own, or 0 where the
        saving run had no rank `rank` (fewer ranks)."""
        return rank if self.loader_states is not None and rank in self.loader_states else 0

    def loader_state(self, rank: int) -> Any:
        """The loader state rank `rank` resumes from (see `loader_source_rank`; the batch source
        decides whether it can continue from a state another world size saved), or None."""
        if self.loader_states is None:
            return None
        return self.loader_states[self.loader_source_rank(rank)]


def _rng_state(generator: torch.Generator | None) -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "generator": generator.get_state() if generator is not None else None,
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any], generator: torch.Generator | None) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if generator is not None and state.get("generator") is not None:
        generator.set_state(state["generator"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    directory: str | os.PathLike[str],
    *,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    generator: torch.Generator | None = None,
    loader_states: Mapping[int, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write `step_{step:08d}.pt` into `directory` atomically and return its path.

    Args:
        loader_states: Every rank's loader `state_dict()` keyed by rank (0 .. world_size-1), or None.

    Raises:
        ValueError: `loader_states` is not keyed by the ranks 0 .. n-1.
    """
    if loader_states is not None and sorted(loader_states) != list(range(len(loader_states))):
        raise ValueError(f"loader_states must be keyed by every rank 0..n-1, got ranks {sorted(loader_states)}")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"step_{step:08d}.pt"
    payload = {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": _rng_state(generator),
        "loaders": None if loader_states is None else {str(r): s for r, s in loader_states.items()},
        "extra": dict(extra or {}),
    }
    tmp = path.with_suffix(".pt.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    generator: torch.Generator | None = None,
    restore_rng: bool = True,
) -> CheckpointState:
    """Restore a `save_checkpoint` file into the given objects.

    Raises:
        FileNotFoundError: `path` does not exist.
        RuntimeError: the model's parameters do not match the checkpoint (wrong preset?).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no checkpoint at {p}")
    payload = torch.load(p, map_location="cpu", weights_only=False)
    model.load_state_dict(payload["model"])
    if optimizer is not None:
        optimizer.load_state_dict(payload["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(payload["scheduler"])
    if restore_rng:
        _set_rng_state(payload["rng"], generator)
    loaders = payload.get("loaders")  # absent in checkpoints older than per-rank loader states
    return CheckpointState(
        step=int(payload["step"]),
        loader_states=None if loaders is None else {int(r): s for r, s in loaders.items()},
        extra=payload.get("extra", {}),
    )


def latest_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The checkpoint with the highest step in `directory`, or None."""
    d = Path(directory)
    if not d.is_dir():
        return None
    found = [(int(m.group(1)), f) for f in d.iterdir() if (m := _NAME.match(f.name))]
    return max(found)[1] if found else None
