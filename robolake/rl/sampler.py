"""A stochastic Euler sampler for the flow-matching action head, with exact log-probabilities.

`GrootModel.get_action` integrates the learned velocity from Gaussian noise with K Euler steps:
x_{k+1} = x_k + dt v(x_k, t_k). That map is deterministic given x_0, so the probability of an
action chunk is the density of x_0 pushed through K network evaluations: computing it needs the
divergence of v along the path (a trace per step), which is expensive and, estimated with
Hutchinson probes, too noisy for a policy gradient.

What is chosen instead (as Flow-GRPO, ReinFlow and DPPO do for diffusion/flow policies): the
denoising steps are made an inner Markov chain whose every step is Gaussian,

    x_{k+1} ~ N(mu_k, sigma^2 I),   mu_k = x_k + dt v_theta(x_k, t_k | observation),

and the policy's "action" is the whole chain x_0 .. x_K; the environment executes x_K. Then
log pi(chain) = log N(x_0; 0, I) + sum_k log N(x_{k+1}; mu_k, sigma^2), the first term does not
depend on theta, and each step's term is a squared error the learner can differentiate. The
sampler records the chain, the learner recomputes mu_k with its current weights on the very same
x_k: the ratio pi_new / pi_old of every step is exact.

Noise is fixed (`SamplerConfig.sigma`, in normalised action units) rather than learned. A learned
noise head (ReinFlow) adds parameters the behaviour-cloned checkpoint does not have and lets the
optimiser buy probability by shrinking sigma instead of by moving actions; a fixed sigma keeps the
BC model as it is and bounds exploration: the executed action departs from the deterministic
Euler result by about sigma * sqrt(K), 0.4 standard deviations of the demonstrations for
sigma = 0.2 and K = 4.

The chain starts at x_0 = start_noise * N(0, I), by default 0: where the closed-loop evaluator
starts its deterministic `get_action`. The density of x_0 does not depend on the weights, so
variation that comes from x_0 is exploration the gradient cannot credit; with x_0 ~ N(0, I) it
dominates the executed actions, and RL from a BC policy did not improve it (see
`SamplerConfig`). Starting at 0 leaves only the scored per-step noise, and RL improves exactly
the policy the evaluator measures. Converting the ODE to the SDE with the same
marginals (Flow-GRPO) needs a score correction that diverges near t = 0 at K = 4 steps; with so
few steps the plain Gaussian chain is the stable choice. As sigma -> 0 the sampler becomes
`get_action` exactly (the tests check that).

Noise is drawn per chunk from a generator seeded by that chunk's own seed, never from a stream
shared across a batch, so a chunk's sample does not depend on which other observations happened
to be batched with it: the asynchronous server's dynamic batches and the synchronous lockstep
batches sample the same chunk for the same (seed, episode, chunk).

Only real action dims are noised and scored (the embodiment's width, from the policy's action
mask); padded dims follow mu deterministically, as they do in `get_action`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from robolake.schemas.batch import PackedBatch
from robolake.training.model import GrootModel

__all__ = ["Chains", "chain_log_prob", "draw_noise", "sample_chains"]

_LOG_2PI = math.log(2 * math.pi)


@dataclass(frozen=True)
class Chains:
    """Sampled denoising chains.

    Attributes:
        chain: float32 [n, K+1, H, A] x_0 .. x_K; x_K is the action chunk (normalised).
        logp: float32 [n, K] log N(x_{k+1}; mu_k, sigma^2) of every step, summed over real dims.
    """

    chain: torch.Tensor
    logp: torch.Tensor


def draw_noise(
    seeds: Sequence[int], steps: int, horizon: int, action_dim: int, start_noise: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Starting noise x_0 [n, H, A] (scaled by `start_noise`) and step noise [n, K, H, A], each
    chunk from its own seed (the same draws whatever the scale)."""
    x0 = torch.empty(len(seeds), horizon, action_dim)
    eps = torch.empty(len(seeds), steps, horizon, action_dim)
    for i, seed in enumerate(seeds):
        g = torch.Generator().manual_seed(int(seed) % (2**63 - 1))
        x0[i] = torch.randn(horizon, action_dim, generator=g) * start_noise
        eps[i] = torch.randn(steps, horizon, action_dim, generator=g)
    return x0, eps


def _step_log_prob(x_next: torch.Tensor, mu: torch.Tensor, mask: torch.Tensor, sigma: float) -> torch.Tensor:
    """[n] log N(x_next; mu, sigma^2) summed over the dims where `mask` [n, 1, A] holds."""
    z = (x_next.float() - mu.float()) / sigma
    per = -0.5 * z * z - math.log(sigma) - 0.5 * _LOG_2PI
    return (per * mask).sum(dim=(1, 2))


def _head_inputs(model: GrootModel, batch: PackedBatch) -> tuple[object, torch.Tensor]:
    ctx = model.encode(batch)
    state_tokens = model.state_encoder(batch.state.to(model.dtype)[:, None, :], batch.embodiment_id)
    return ctx, state_tokens


@torch.no_grad()
def sample_chains(
    model: GrootModel,
    batch: PackedBatch,
    x0: torch.Tensor,
    eps: torch.Tensor,
    action_mask: torch.Tensor,
    sigma: float,
) -> Chains:
    """Run the stochastic Euler chain from `x0` with step noise `eps` (see the module docstring).

    Args:
        model: The policy's model (its device decides where this runs).
        batch: Normalised observations, one sample per chunk.
        x0: [n, H, A] starting noise.
        eps: [n, K, H, A] standard normal step noise; K is the number of Euler steps.
        action_mask: bool [n, A], the real action dims of each sample.
        sigma: Step noise standard deviation.
    """
    dev = next(model.parameters()).device
    b = batch.to(dev)
    n, steps = x0.shape[0], eps.shape[1]
    ctx, st = _head_inputs(model, b)
    m = action_mask.to(dev)[:, None, :].to(model.dtype)
    x = x0.to(dev, model.dtype)
    chain = [x]
    logps = []
    dt = 1.0 / steps
    for k in range(steps):
        t = torch.full((n,), k * dt, device=dev)
        mu = x + dt * model.velocity(ctx, st, x, t, b.embodiment_id).to(x.dtype)  # type: ignore[arg-type]
        x = mu + sigma * eps[:, k].to(dev, x.dtype) * m
        chain.append(x)
        logps.append(_step_log_prob(x, mu, m, sigma))
    return Chains(torch.stack(chain, 1).float().cpu(), torch.stack(logps, 1).float().cpu())


def chain_log_prob(
    model: GrootModel, batch: PackedBatch, chain: torch.Tensor, action_mask: torch.Tensor, sigma: float
) -> torch.Tensor:
    """[n, K] log-probability of every step of recorded `chain` [n, K+1, H, A] under `model` (differentiable)."""
    dev = next(model.parameters()).device
    b = batch.to(dev)
    n, steps = chain.shape[0], chain.shape[1] - 1
    ctx, st = _head_inputs(model, b)
    m = action_mask.to(dev)[:, None, :].to(model.dtype)
    c = chain.to(dev, model.dtype)
    dt = 1.0 / steps
    out = []
    for k in range(steps):
        t = torch.full((n,), k * dt, device=dev)
        mu = c[:, k] + dt * model.velocity(ctx, st, c[:, k], t, b.embodiment_id).to(c.dtype)  # type: ignore[arg-type]
        out.append(_step_log_prob(c[:, k + 1], mu, m, sigma))
    return torch.stack(out, 1)
