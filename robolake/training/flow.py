"""Flow matching as GR00T trains it, shared by both model families.

t = (s - b) / s with b ~ Beta(alpha, beta) (GR00T: alpha 1.5, beta 1, s 0.999), so t leans toward
1, the clean end; x_t = (1 - t) noise + t action; the model predicts the velocity action - noise,
and the loss is its squared error averaged over the real action dims and steps (`action_mask`).
At inference the velocity is integrated from noise with Euler steps of 1 / K.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from robolake.training.config import ModelConfig

__all__ = ["euler_actions", "flow_loss", "sample_flow_time"]


def sample_flow_time(
    config: ModelConfig, n: int, device: torch.device, generator: torch.Generator | None = None
) -> torch.Tensor:
    """GR00T's flow timesteps, float32 [n].

    Beta(a, 1) and Beta(1, b) are drawn by inverse CDF from `generator`; other shapes use
    torch.distributions (global RNG).
    """
    c = config
    if c.noise_beta_beta == 1.0 or c.noise_beta_alpha == 1.0:
        u = torch.rand(n, device=device, generator=generator)
        b = u ** (1.0 / c.noise_beta_alpha) if c.noise_beta_beta == 1.0 else 1.0 - u ** (1.0 / c.noise_beta_beta)
    else:
        b = torch.distributions.Beta(c.noise_beta_alpha, c.noise_beta_beta).sample((n,)).to(device)
    return (c.noise_s - b) / c.noise_s


def flow_loss(pred: torch.Tensor, target: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Mean squared velocity error over the True entries of `action_mask`, in float32."""
    mask = action_mask.to(pred.dtype)
    return ((pred.float() - target.float()) ** 2 * mask).sum() / mask.sum().clamp(min=1.0)


def euler_actions(
    velocity: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    shape: tuple[int, int, int],
    steps: int,
    *,
    dtype: torch.dtype,
    device: torch.device,
    noise: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Action chunks `shape` integrated from noise by `steps` Euler steps of `velocity(x, t)`.

    Raises:
        ValueError: steps < 1.
    """
    if steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {steps}")
    x = noise.to(dtype) if noise is not None else torch.randn(shape, device=device, dtype=dtype, generator=generator)
    dt = 1.0 / steps
    for k in range(steps):
        t = torch.full((shape[0],), k * dt, device=device)
        x = x + dt * velocity(x, t).to(x.dtype)
    return x
