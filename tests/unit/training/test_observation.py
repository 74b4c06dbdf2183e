"""ObservationBatcher: observations become the trainer's batch layout; chunks come back in robot units."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robolake.lake.stats.norm import NormStats, VectorStats
from robolake.packers.lengths import ByteTokenizer, TokenLengthConfig
from robolake.training.config import ModelConfig
from robolake.training.normalize import Normalizer
from robolake.training.observation import ObservationBatcher

CONFIG = ModelConfig.preset(
    "tiny",
    image_size=16,
    patch_size=8,
    tokens_per_view=4,
    action_horizon=8,
    max_state_dim=6,
    max_action_dim=5,
    num_embodiments=3,
)


def _batcher(mode: str = "mean_std", **kwargs) -> ObservationBatcher:
    rng = np.random.default_rng(0)
    stats = NormStats(
        state=VectorStats.of(rng.normal(2.0, 3.0, (100, 4))), action=VectorStats.of(rng.uniform(-2, 2, (100, 3)))
    )
    defaults = dict(
        config=CONFIG,
        normalizer=Normalizer(stats={"arm": stats}, mode=mode),
        embodiment="arm",
        embodiment_id=2,
        action_dim=3,
    )
    return ObservationBatcher(**(defaults | kwargs))


def test_batch_holds_each_observation_as_one_sample() -> None:
    b = _batcher(tokens=TokenLengthConfig(tokens_per_view=4, max_text_tokens=5, state_tokens=0))
    rng = np.random.default_rng(1)
    views = [rng.integers(0, 256, (v, 16, 16, 3), dtype=np.uint8) for v in (1, 2)]
    states = [rng.normal(size=4).astype(np.float32) for _ in views]
    batch = b.batch(views, states, ["pick", "open the top drawer"])

    assert batch.num_samples == 2
    assert batch.pixels.shape[0] == 3 and batch.view_sample_index.tolist() == [0, 1, 1]
    assert batch.cu_seqlens.tolist() == [0, 4 + 5, 4 + 5 + 2 * 4 + 5]  # views * tokens_per_view + capped text
    assert batch.text_ids[:5].tolist() == ByteTokenizer().encode("pick").tolist()
    np.testing.assert_array_equal(
        batch.state[:, :4].numpy(), np.stack([b.normalizer.normalize_state(s, "arm") for s in states])
    )
    assert not batch.state_mask[:, 4:].any() and batch.state_mask[:, :4].all()
    assert batch.embodiment_id.tolist() == [2, 2]
    assert batch.action.shape == (2, CONFIG.action_horizon, CONFIG.max_action_dim) and not batch.action.any()
    assert batch.action_mask[:, :, :3].all() and not batch.action_mask[:, :, 3:].any()
    assert torch.equal(b.action_mask(2), batch.action_mask[:, 0])


def test_no_observations_give_an_empty_batch() -> None:
    batch = _batcher().batch([], [], [])
    assert batch.num_samples == 0 and batch.pixels.shape[0] == 0


@pytest.mark.parametrize("mode", ["mean_std", "min_max", "q01_q99", "none"])
def test_unnormalize_cuts_to_the_action_width_and_undoes_the_packer(mode: str) -> None:
    b = _batcher(mode)
    robot = np.random.default_rng(2).uniform(-2, 2, (4, 8, 3)).astype(np.float32)
    model_units = np.zeros((4, 8, CONFIG.max_action_dim), np.float32)
    model_units[..., :3] = b.normalizer.normalize_action(robot, "arm")
    model_units[..., 3:] = 7.0  # padding dims never reach the robot
    back = b.unnormalize(model_units)
    assert back.shape == (4, 8, 3) and back.dtype == np.float32
    np.testing.assert_allclose(back, robot, atol=1e-5)
    assert not np.shares_memory(back, model_units)


def test_action_width_must_fit_the_model() -> None:
    with pytest.raises(ValueError, match="max_action_dim=5"):
        _batcher(action_dim=6)
