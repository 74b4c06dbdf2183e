"""Held-out evaluation: action MSE of the policy against a mean-action baseline.

Actions in packed data are normalised with the lake's per-embodiment statistics (mean/std by
default), so predicting each embodiment's mean action is predicting zeros: the baseline any
policy has to beat. Errors are averaged over real action dims and steps (the batch's action
mask), in normalised units.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from robolake.schemas.batch import PackedBatch

__all__ = ["evaluate_actions", "heldout_loss"]


@torch.no_grad()
def evaluate_actions(
    model: nn.Module,
    batches: Iterable[PackedBatch],
    *,
    num_steps: int | None = None,
    seed: int = 0,
    max_batches: int | None = None,
) -> dict[str, float]:
    """Mean squared action error of `model.get_action` and of the mean-action baseline.

    Returns:
        {"mse", "baseline_mse", "ratio_to_baseline", "samples"}.
    """
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(seed)
    err = base = weight = 0.0
    samples = 0
    for i, batch in enumerate(batches):
        if max_batches is not None and i >= max_batches:
            break
        b = batch.to(device)
        pred = model.get_action(b, num_steps, generator=generator).float()  # type: ignore[operator]
        mask = b.action_mask.float()
        err += float((((pred - b.action) ** 2) * mask).sum())
        base += float(((b.action**2) * mask).sum())
        weight += float(mask.sum())
        samples += b.num_samples
    if weight == 0:
        raise ValueError("no valid actions to evaluate: the batches are empty")
    mse, baseline = err / weight, base / weight
    return {"mse": mse, "baseline_mse": baseline, "ratio_to_baseline": mse / baseline, "samples": float(samples)}


def heldout_loss(
    model: nn.Module, batches: Iterable[PackedBatch], *, seed: int = 0, max_batches: int | None = None
) -> float:
    """The flow-matching training loss on `batches` (e.g. held-out episodes), sample-weighted, with seeded noise.

    The same quantity the trainer minimises, so it sits on the training-loss curve: lower is better,
    and a gap above the training loss is overfitting.
    """
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(seed)
    total = weight = 0.0
    with torch.no_grad():
        for i, batch in enumerate(batches):
            if max_batches is not None and i >= max_batches:
                break
            b = batch.to(device)
            total += float(model(b, generator=generator).loss) * b.num_samples
            weight += b.num_samples
    if weight == 0:
        raise ValueError("no samples to evaluate: the batches are empty")
    return total / weight
