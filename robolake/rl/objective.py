"""The policy-gradient objective: group-relative advantages and a per-step clipped ratio.

Reward is the task's success flag: 1 for an episode that succeeded, 0 otherwise, credited to
every action chunk of the episode. There is no critic. A value network would need its own head
on the model and its own training, and with a single success bit per episode the natural
baseline is simply how often this task succeeds right now: an episode's advantage is its return
standardised against the returns of the most recent episodes of the same task (GRPO's
group-relative advantage). GRPO forms groups from simultaneous rollouts of one prompt; here the
group is a sliding window of the task's latest finished episodes, because waiting for a group
of simultaneous resets would make environments wait for each other, which is exactly what the
asynchronous pipeline exists to avoid. A task that always succeeds or always fails has zero
advantage everywhere (no signal, no update), as in GRPO.

The ratio is taken per denoising step (as Flow-GRPO does): each step's Gaussian is one "token"
with log-ratio log pi_theta(x_{k+1}|x_k) - log pi_behaviour(x_{k+1}|x_k), clipped to
1 +- eps, and the loss averages min(r A, clip(r) A) over steps and chunks. A ratio over the
whole chain would multiply K per-step ratios of H x A dims each and leave the clip range
after the smallest update.

Staleness (`LearnerConfig.max_staleness` K): a chunk sampled by policy version v reaches the
learner at version V >= v. Within K versions, the behaviour log-probability recorded at sampling
time makes the clipped ratio an importance-corrected estimate already. Beyond K, "drop" discards
the chunk (counted) and "correct" keeps it with the decoupled-PPO correction: the proximal
policy is the learner's current one, so the clipped term becomes the plain gradient of log pi
weighted by the truncated importance weight min(pi_theta / pi_behaviour, c), detached.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch

__all__ = ["GroupBaseline", "LossStats", "policy_loss"]


class GroupBaseline:
    """Sliding-window, per-task standardisation of episode returns (group-relative advantages)."""

    def __init__(self, window: int, min_group: int) -> None:
        self.window = window
        self.min_group = min_group
        self._returns: dict[str, deque[float]] = {}

    def advantage(self, task: str, ret: float) -> float:
        """Record `ret` for `task` and return its advantage against the task's window (itself included)."""
        q = self._returns.setdefault(task, deque(maxlen=self.window))
        q.append(float(ret))
        if len(q) < self.min_group:
            return 0.0
        t = torch.tensor(list(q))
        std = float(t.std(unbiased=False))
        if std < 1e-6:
            return 0.0
        return (float(ret) - float(t.mean())) / std

    def success_rate(self, task: str) -> float | None:
        q = self._returns.get(task)
        return sum(q) / len(q) if q else None


@dataclass(frozen=True)
class LossStats:
    """Diagnostics of one micro-batch."""

    clip_fraction: float
    approx_kl: float
    mean_ratio: float


def policy_loss(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantage: torch.Tensor,
    *,
    clip_eps: float,
    corrected: torch.Tensor | None = None,
    is_truncation: float = 2.0,
) -> tuple[torch.Tensor, LossStats]:
    """Clipped per-step policy-gradient loss (see the module docstring).

    Args:
        logp_new: [n, K] step log-probabilities under the learner's weights (differentiable).
        logp_old: [n, K] the same steps' log-probabilities recorded when they were sampled.
        advantage: [n] advantage of each chunk's episode.
        clip_eps: Ratio clip range.
        corrected: bool [n], chunks beyond the staleness bound kept with the truncated
            importance weight instead of the clipped ratio; None: none.
        is_truncation: Cap of that importance weight.
    """
    log_ratio = logp_new - logp_old.to(logp_new.device)
    ratio = torch.exp(log_ratio.clamp(max=20.0))
    adv = advantage.to(logp_new.device, logp_new.dtype)[:, None]
    clipped = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    if corrected is not None and bool(corrected.any()):
        weight = ratio.detach().clamp(max=is_truncation)
        pg = weight * torch.exp(logp_new - logp_new.detach()) * adv
        clipped = torch.where(corrected.to(logp_new.device)[:, None], pg, clipped)
    loss = -clipped.mean()
    with torch.no_grad():
        stats = LossStats(
            clip_fraction=float(((ratio - 1).abs() > clip_eps).float().mean()),
            approx_kl=float(((ratio - 1) - log_ratio).mean()),
            mean_ratio=float(ratio.mean()),
        )
    return loss, stats
