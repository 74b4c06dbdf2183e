"""Factories for training tests: random PackedBatches shaped like the tiny preset expects."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from robolake.loaders import PackedBatch, make_packed_batch
from robolake.training import ModelConfig

# (state width, action width) per embodiment id
EMBODIMENTS = {0: (7, 7), 1: (14, 12), 2: (20, 16), 3: (32, 32)}


def random_batch(
    config: ModelConfig,
    n: int,
    *,
    seed: int = 0,
    views: list[int] | None = None,
    text_lengths: list[int] | None = None,
    embodiments: list[int] | None = None,
) -> PackedBatch:
    """n samples with 1-3 views, instructions of 5-40 bytes and mixed embodiments."""
    rng = np.random.default_rng(seed)
    views = views if views is not None else rng.integers(1, 4, size=n).tolist()
    text_lengths = (
        text_lengths if text_lengths is not None else rng.integers(5, 41, size=n).tolist()
    )
    embodiments = (
        embodiments
        if embodiments is not None
        else rng.integers(0, len(EMBODIMENTS), size=n).tolist()
    )
    horizon, size = config.action_horizon, config.image_size
    pixels = rng.integers(0, 256, size=(int(sum(views)), 3, size, size), dtype=np.uint8)
    text = [rng.integers(0, 256, size=length).astype(np.int64) for length in text_lengths]
    state = [rng.standard_normal(EMBODIMENTS[e][0]).astype(np.float32) for e in embodiments]
    action = [
        rng.standard_normal((horizon, EMBODIMENTS[e][1])).astype(np.float32) for e in embodiments
    ]
    valid = rng.integers(horizon // 2, horizon + 1, size=n).tolist()
    return make_packed_batch(
        pixels=pixels,
        views_per_sample=views,
        text_ids=text,
        state=state,
        action=action,
        action_valid_steps=valid,
        embodiment_id=embodiments,
        tokens_per_view=config.tokens_per_view,
        max_state_dim=config.max_state_dim,
        max_action_dim=config.max_action_dim,
        sample_keys=tuple((f"ep{seed}", i) for i in range(n)),
    )


@pytest.fixture(autouse=True)
def _single_thread():
    """Tiny models gain nothing from intra-op threads, and on a shared machine a second thread
    stalls at every kernel barrier; one thread keeps these tests fast and steady."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture()
def tiny_config() -> ModelConfig:
    return ModelConfig.preset("tiny")


@pytest.fixture()
def batch_factory(tiny_config: ModelConfig) -> Callable[..., PackedBatch]:
    def make(n: int = 4, seed: int = 0, config: ModelConfig | None = None, **kwargs) -> PackedBatch:
        return random_batch(config or tiny_config, n, seed=seed, **kwargs)

    return make
