"""The stochastic Euler sampler: exact log-probabilities, get_action in the limit, batch independence."""

from __future__ import annotations

import torch

from robolake.rl.env import PointReachEnv
from robolake.rl.sampler import chain_log_prob, draw_noise, sample_chains


def _inputs(factory, n=3):
    policy = factory()
    obs = []
    for i in range(n):
        env = PointReachEnv(PointReachEnv.TASKS[i % 4], image_size=16)
        obs.append(env.reset(i))
    return policy, obs


def test_zero_noise_limit_is_get_action(bc_policy_factory):
    policy, obs = _inputs(bc_policy_factory)
    model = policy.model
    batch = policy.batch(obs)
    x0, eps = draw_noise([1, 2, 3], 4, model.config.action_horizon, model.config.max_action_dim)
    chains = sample_chains(model, batch, x0, eps, policy.action_mask(obs), sigma=1e-7)
    expected = model.get_action(batch, 4, noise=x0)
    torch.testing.assert_close(chains.chain[:, -1], expected, atol=1e-5, rtol=1e-5)
    assert chains.chain.shape == (3, 5, model.config.action_horizon, model.config.max_action_dim)


def test_learner_recomputes_the_sampled_log_prob(bc_policy_factory):
    policy, obs = _inputs(bc_policy_factory)
    model = policy.model
    batch, mask = policy.batch(obs), policy.action_mask(obs)
    x0, eps = draw_noise([5, 6, 7], 4, model.config.action_horizon, model.config.max_action_dim)
    chains = sample_chains(model, batch, x0, eps, mask, sigma=0.1)
    logp = chain_log_prob(model, batch, chains.chain, mask, sigma=0.1)
    torch.testing.assert_close(logp, chains.logp, atol=1e-3, rtol=1e-5)
    # only the real action dims are noised; padded dims follow the mean
    assert logp.requires_grad
    step = chains.chain[:, 1] - chains.chain[:, 0]
    assert float(step[..., :2].abs().sum()) > 0


def test_log_prob_changes_with_weights(bc_policy_factory, random_policy_factory):
    bc, obs = _inputs(bc_policy_factory)
    rnd, _ = _inputs(random_policy_factory)
    batch, mask = bc.batch(obs), bc.action_mask(obs)
    x0, eps = draw_noise([5, 6, 7], 4, bc.model.config.action_horizon, bc.model.config.max_action_dim)
    chains = sample_chains(bc.model, batch, x0, eps, mask, sigma=0.1)
    other = chain_log_prob(rnd.model, rnd.batch(obs), chains.chain, mask, sigma=0.1).detach()
    assert float((other - chains.logp).abs().max()) > 1.0


def test_a_chunk_does_not_depend_on_its_batch(bc_policy_factory):
    policy, obs = _inputs(bc_policy_factory, n=4)
    model = policy.model
    h, a = model.config.action_horizon, model.config.max_action_dim
    x0, eps = draw_noise([11, 12, 13, 14], 4, h, a)
    together = sample_chains(model, policy.batch(obs), x0, eps, policy.action_mask(obs), 0.1)
    x0b, epsb = draw_noise([13], 4, h, a)
    alone = sample_chains(model, policy.batch(obs[2:3]), x0b, epsb, policy.action_mask(obs[2:3]), 0.1)
    torch.testing.assert_close(alone.chain[0], together.chain[2], atol=1e-5, rtol=1e-5)


def test_start_noise_scales_only_the_starting_point(bc_policy_factory):
    policy, obs = _inputs(bc_policy_factory)
    model = policy.model
    h, a = model.config.action_horizon, model.config.max_action_dim
    x1, eps1 = draw_noise([1, 2, 3], 4, h, a, start_noise=1.0)
    x0, eps0 = draw_noise([1, 2, 3], 4, h, a, start_noise=0.0)
    assert float(x0.abs().max()) == 0.0 and float(x1.abs().max()) > 0.5
    torch.testing.assert_close(eps0, eps1)  # the step noise is the same draw whatever the scale
    # start 0, step noise -> 0: the evaluator's deterministic action (LearnedPolicy noise_scale=0)
    chains = sample_chains(model, policy.batch(obs), x0, eps0, policy.action_mask(obs), sigma=1e-7)
    expected = model.get_action(policy.batch(obs), 4, noise=torch.zeros(3, h, a))
    torch.testing.assert_close(chains.chain[:, -1], expected, atol=1e-5, rtol=1e-5)


def test_start_noise_is_validated():
    import pytest

    from robolake.rl.config import SamplerConfig

    assert SamplerConfig().start_noise == 0.0
    with pytest.raises(ValueError, match="start_noise"):
        SamplerConfig(start_noise=-0.1)
