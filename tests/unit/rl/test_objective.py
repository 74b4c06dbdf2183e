"""Group-relative advantages and the clipped per-step objective."""

from __future__ import annotations

import pytest
import torch

from robolake.rl.objective import GroupBaseline, policy_loss


def test_group_baseline_standardises_within_a_task():
    g = GroupBaseline(window=4, min_group=2)
    assert g.advantage("a", 1.0) == 0.0  # alone: no group yet
    assert g.advantage("a", 0.0) == pytest.approx(-1.0)
    assert g.advantage("b", 1.0) == 0.0  # another task has its own group
    assert g.advantage("a", 1.0) > 0
    for _ in range(4):
        last = g.advantage("c", 1.0)
    assert last == 0.0  # a task that always succeeds gives no signal
    assert g.success_rate("a") == pytest.approx(2 / 3)


def test_clip_stops_the_gradient_outside_the_trust_region():
    old = torch.zeros(2, 3)
    new = torch.tensor([[0.5, 0.0, -0.5], [0.0, 0.0, 0.0]], requires_grad=True)
    loss, stats = policy_loss(new, old, torch.tensor([1.0, -1.0]), clip_eps=0.2)
    loss.backward()
    grad = new.grad
    assert grad is not None
    assert grad[0, 0] == 0  # ratio e^0.5 > 1.2 with A > 0: clipped
    assert grad[0, 2] < 0  # ratio below 1 - eps with A > 0: still pushed up (min picks the unclipped)
    assert grad[1, 0] > 0  # A < 0: pushed down
    assert stats.clip_fraction == pytest.approx(2 / 6)


def test_corrected_samples_use_the_truncated_importance_weight():
    old = torch.zeros(1, 2)
    new = torch.tensor([[3.0, 3.0]], requires_grad=True)
    loss, _ = policy_loss(
        new, old, torch.tensor([1.0]), clip_eps=0.2, corrected=torch.tensor([True]), is_truncation=2.0
    )
    loss.backward()
    assert new.grad is not None
    torch.testing.assert_close(new.grad, torch.full((1, 2), -2.0 / 2))  # -w * A / (n * K), w = 2 (capped)
