"""The pi0-style family: same batches as GR00T, prefix-LM structure, exact packed vs padded, FP8, one pack for both."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import cast

import pytest
import torch

from robolake.training import (
    FP8Recipe,
    GrootModel,
    ModelConfig,
    Pi0Model,
    PolicyModel,
    apply_fp8,
    build_model,
    quantize_weights_fp8,
)


@pytest.fixture()
def pi0_config() -> ModelConfig:
    return ModelConfig.preset("pi0:tiny")


def _perturbed(config: ModelConfig, dtype: torch.dtype = torch.float64) -> Pi0Model:
    """A model whose zero-initialised expert branches are not zero, so every path carries signal."""
    torch.manual_seed(0)
    model = Pi0Model(config).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def _noise(model: Pi0Model, batch, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return torch.randn(batch.action.shape, generator=g, dtype=dtype), model.sample_time(
        batch.num_samples, torch.device("cpu"), g
    )


def test_preset_and_build_model_choose_the_family(pi0_config: ModelConfig) -> None:
    assert pi0_config.family == "pi0" and ModelConfig.preset("tiny").family == "groot"
    assert isinstance(build_model(pi0_config), Pi0Model)
    assert isinstance(build_model(ModelConfig.preset("tiny")), GrootModel)
    with pytest.raises(ValueError, match="build models with robolake.training.build_model"):
        GrootModel(pi0_config)
    with pytest.raises(ValueError, match="family must be one of"):
        ModelConfig.preset("tiny", family="pi1")
    with pytest.raises(ValueError, match="names family 'pi0' but family='groot'"):
        ModelConfig.preset("pi0:tiny", family="groot")
    with pytest.raises(ValueError, match="attention_backend of the groot family"):
        ModelConfig.preset("tiny", attention_backend="flex")  # flex serves only the prefix-LM


def test_packed_and_padded_give_the_same_loss_and_grads_float64(pi0_config: ModelConfig, batch_factory) -> None:
    model = _perturbed(pi0_config)
    batch = batch_factory(n=5, seed=3)
    noise, t = _noise(model, batch)
    packed = model(batch, noise=noise, t=t)
    packed.loss.backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    padded = model(batch.to_padded(), noise=noise, t=t)
    padded.loss.backward()
    assert packed.loss.item() > 0
    torch.testing.assert_close(packed.loss, padded.loss, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(packed.pred_velocity, padded.pred_velocity, rtol=1e-10, atol=1e-10)
    assert len(grads) == len(list(model.parameters()))  # every weight is used (DDP needs it)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[name], rtol=1e-9, atol=1e-10, msg=name)


def test_samples_do_not_interact(pi0_config: ModelConfig, batch_factory) -> None:
    model = _perturbed(pi0_config)
    batch = batch_factory(n=4, seed=1)
    noise, t = _noise(model, batch)
    together = model(batch, noise=noise, t=t).pred_velocity
    for i in range(batch.num_samples):
        alone = batch_factory(n=4, seed=1 + 100 * (i + 1))  # other samples everywhere but slot i
        mixed = _replace_sample(alone, batch, i)
        torch.testing.assert_close(model(mixed, noise=noise, t=t).pred_velocity[i], together[i], rtol=0, atol=1e-12)


def _replace_sample(into, src, i):
    """`into` with its sample i's inputs rebuilt from `src`'s sample i (same lengths), via make_packed_batch."""
    from robolake.schemas.batch import make_packed_batch

    def views(b, j):
        return b.pixels[b.view_sample_index == j]

    def text(b, j):
        return b.text_ids[b.cu_text[j] : b.cu_text[j + 1]].numpy()

    pick = [src if j == i else into for j in range(into.num_samples)]
    return make_packed_batch(
        pixels=torch.cat([views(b, j) for j, b in enumerate(pick)]).numpy(),
        views_per_sample=[int((b.view_sample_index == j).sum()) for j, b in enumerate(pick)],
        text_ids=[text(b, j) for j, b in enumerate(pick)],
        state=[b.state[j].numpy() for j, b in enumerate(pick)],
        action=[b.action[j].numpy() for j, b in enumerate(pick)],
        action_valid_steps=[int(b.action_mask[j].any(-1).sum()) for j, b in enumerate(pick)],
        embodiment_id=[int(b.embodiment_id[j]) for j, b in enumerate(pick)],
        tokens_per_view=src.tokens_per_view,
        max_state_dim=src.state.shape[1],
        max_action_dim=src.action.shape[2],
    )


def test_action_tokens_attend_causally_and_read_the_prefix(pi0_config: ModelConfig, batch_factory) -> None:
    model = _perturbed(pi0_config)
    batch = batch_factory(n=3, seed=4)
    ctx = model.encode(batch)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch.action.shape, generator=g, dtype=torch.float64)
    t = torch.full((3,), 0.5, dtype=torch.float64)
    base = model.velocity(ctx, x, t, batch.embodiment_id)
    later = x.clone()
    later[:, 10] += 1.0  # a later action step cannot change earlier predictions
    moved = model.velocity(ctx, later, t, batch.embodiment_id)
    torch.testing.assert_close(moved[:, :10], base[:, :10], rtol=0, atol=1e-12)
    assert (moved[:, 10:] - base[:, 10:]).abs().amax() > 1e-4
    other_state = dataclasses.replace(batch, state=batch.state + 1.0)  # the state is a prefix token
    assert (model.velocity(model.encode(other_state), x, t, batch.embodiment_id) - base).abs().amax() > 1e-4


def test_get_action_reuses_the_prefix_and_integrates_the_velocity(pi0_config: ModelConfig, batch_factory) -> None:
    model = _perturbed(pi0_config).eval()
    batch = batch_factory(n=3, seed=5)
    noise = torch.randn(batch.action.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    got = model.get_action(batch, 3, noise=noise)
    x = noise.clone()
    for k in range(3):  # a fresh prefix at every step: the cached one must give the same chunk
        t = torch.full((3,), k / 3, dtype=torch.float64)
        x = x + model.velocity(model.encode(batch), x, t, batch.embodiment_id) / 3
    torch.testing.assert_close(got, x, rtol=0, atol=1e-12)
    assert got.shape == (3, pi0_config.action_horizon, pi0_config.max_action_dim)
    with pytest.raises(ValueError, match="num_steps must be >= 1"):
        model.get_action(batch, 0)


def test_fp8_is_a_conversion_for_both_families(pi0_config: ModelConfig, batch_factory) -> None:
    batch = batch_factory(n=3, seed=6)
    for config in (pi0_config, ModelConfig.preset("tiny")):
        torch.manual_seed(0)
        model = build_model(config).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.02 * torch.randn_like(p))
        noise = torch.randn(batch.action.shape, generator=torch.Generator().manual_seed(0))
        ref = model.get_action(batch, noise=noise)
        conv = apply_fp8(model, FP8Recipe(backend="weight_only"))
        assert conv.backend == "weight_only" and conv.model is not model
        quantized = [n for n, m in conv.model.named_modules() if type(m).__name__ == "Float8WeightOnlyLinear"]
        assert len(quantized) > 10
        fp8_model = cast(PolicyModel, conv.model)
        err = float((fp8_model.get_action(batch, noise=noise) - ref).norm() / ref.norm())
        assert 0 < err < 0.1, (config.family, err)
        assert apply_fp8(build_model(config), FP8Recipe()).backend == "none"  # no FP8 GPU here: unchanged
    assert type(quantize_weights_fp8(Pi0Model(pi0_config))).__name__ == "Pi0Model"


def test_one_pack_trains_both_families(packed_data, tmp_path: Path) -> None:
    from robolake.training.run import RunConfig, train_on

    losses = {}
    for preset in ("tiny", "pi0:tiny"):
        run = RunConfig(out=str(tmp_path / preset.replace(":", "_")), preset=preset, steps=3, num_workers=0, lr=1e-3)
        result = train_on(str(packed_data.packed), run)
        assert cast(PolicyModel, result.model).config.family == ("pi0" if preset.startswith("pi0") else "groot")
        assert result.step == 3 and all(torch.isfinite(torch.tensor(result.losses)))
        losses[preset] = result.losses
        from robolake.sim.learned import LearnedPolicy  # the checkpoint rebuilds its own family
        from robolake.training.checkpoint import read_checkpoint
        from robolake.training.normalize import POLICY_CARD_KEY

        embodiment = read_checkpoint(run.out).extra[POLICY_CARD_KEY]["embodiments"][0]
        policy = LearnedPolicy.from_checkpoint(run.out, embodiment=embodiment)
        assert type(policy.model) is type(result.model)
    assert losses["tiny"] != losses["pi0:tiny"]


def test_stream_history_tokens_join_the_prefix(pi0_config: ModelConfig) -> None:
    import numpy as np

    from robolake.bench.train import HISTORY_STREAMS, HISTORY_WIDTH, make_history_batch

    config = dataclasses.replace(pi0_config, history_streams=len(HISTORY_STREAMS), history_width=HISTORY_WIDTH)
    batch = make_history_batch(config, 3, np.random.default_rng(0))
    assert int(batch.history_lengths.min()) > 0
    model = _perturbed(config)
    noise, t = _noise(model, batch)
    packed = model(batch, noise=noise, t=t)
    torch.testing.assert_close(packed.loss, model(batch.to_padded(), noise=noise, t=t).loss, rtol=1e-12, atol=1e-12)
    assert batch.history_values is not None
    moved = dataclasses.replace(batch, history_values=batch.history_values + 1.0)
    assert (model(moved, noise=noise, t=t).pred_velocity - packed.pred_velocity).abs().amax() > 1e-6
