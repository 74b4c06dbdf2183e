"""Training tests: one thread, the tiny preset, and a batch factory (random_batch lives in tests.fixtures)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from robolake.schemas.batch import PackedBatch
from robolake.training import ModelConfig
from tests.fixtures import random_batch


@pytest.fixture(autouse=True)
def _single_thread(monkeypatch):
    """Tiny models gain nothing from intra-op threads, and on a shared machine a second thread
    stalls at every kernel barrier; one thread keeps these tests fast and steady (also inside
    `train`, which otherwise chooses its own count: robolake/training/threads.py)."""
    monkeypatch.setenv("ROBOLAKE_TORCH_THREADS", "1")
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
