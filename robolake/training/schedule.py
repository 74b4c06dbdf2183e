"""Learning-rate schedule: linear warmup, then cosine decay to a floor.

Warmup keeps the first updates of AdamW (whose second-moment estimate is still noisy) small; the
cosine tail lowers the rate smoothly so the last steps refine rather than jump. The schedule is a
pure function of the step, so resuming from a checkpoint lands on exactly the same rate.
"""

from __future__ import annotations

import functools
import math

import torch
from torch.optim.lr_scheduler import LambdaLR

__all__ = ["build_scheduler", "warmup_cosine"]


def warmup_cosine(step: int, *, warmup_steps: int, total_steps: int, min_lr_ratio: float) -> float:
    """Multiplier of the base rate at optimizer step `step` (0-based)."""
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    decay = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(
    optimizer: torch.optim.Optimizer, *, warmup_steps: int, total_steps: int, min_lr_ratio: float
) -> LambdaLR:
    """A LambdaLR applying `warmup_cosine` to every parameter group."""
    fn = functools.partial(warmup_cosine, warmup_steps=warmup_steps, total_steps=total_steps, min_lr_ratio=min_lr_ratio)
    return LambdaLR(optimizer, fn)
