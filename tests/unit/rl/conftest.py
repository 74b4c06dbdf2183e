"""RL test fixtures: a very small model and a behaviour-cloned policy for PointReachEnv."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robolake.rl.env import PointReachEnv, PointReachFactory
from robolake.rl.policy import ModelPolicy, ModelPolicyFactory
from robolake.training.config import ModelConfig
from robolake.training.model import GrootModel

TASKS = ("reach-left", "reach-right")


def small_config() -> ModelConfig:
    return ModelConfig.preset(
        "tiny",
        image_size=16,
        patch_size=8,
        tokens_per_view=4,
        d_model=32,
        backbone_layers=1,
        dit_dim=32,
        dit_output_dim=32,
        head_hidden=64,
        action_horizon=8,
        max_state_dim=4,
        max_action_dim=4,
        num_embodiments=1,
        max_positions=64,
    )


def _bc_train(model: GrootModel, steps: int = 60, seed: int = 0) -> None:
    """Flow-matching fit of the straight-line expert of PointReachEnv (chunks of constant actions)."""
    policy = ModelPolicy(model, action_dim=2)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    h = model.config.action_horizon
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared: more threads only contend
    model.train()
    for _ in range(steps):
        obs, actions = [], []
        for _ in range(32):
            env = PointReachEnv(TASKS[int(rng.integers(len(TASKS)))], image_size=16)
            env.reset(int(rng.integers(1 << 30)))
            env.pos = rng.uniform(-0.9, 0.9, 2).astype(np.float32)
            obs.append(env.observe())
            chunk = []
            for _ in range(h):
                a = env.expert()
                chunk.append(a)
                env.pos = np.clip(env.pos + env.speed * a, -1, 1).astype(np.float32)
            actions.append(np.stack(chunk))
        batch = policy.batch(obs)
        act = torch.zeros_like(batch.action)
        act[:, :, :2] = torch.from_numpy(np.stack(actions))
        import dataclasses

        mask = torch.zeros_like(batch.action_mask)
        mask[:, :, :2] = True
        batch = dataclasses.replace(batch, action=act, action_mask=mask)
        loss = model(batch, generator=gen).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.set_num_threads(threads)
    model.eval()


@pytest.fixture(scope="session")
def random_policy_factory() -> ModelPolicyFactory:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GrootModel(small_config())
    return ModelPolicyFactory.from_model(model, action_dim=2)


@pytest.fixture(scope="session")
def bc_policy_factory() -> ModelPolicyFactory:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GrootModel(small_config())
        _bc_train(model)
    return ModelPolicyFactory.from_model(model, action_dim=2)


@pytest.fixture(scope="session")
def point_env() -> PointReachFactory:
    return PointReachFactory(max_steps=24, image_size=16)
