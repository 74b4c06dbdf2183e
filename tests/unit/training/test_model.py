from __future__ import annotations

import dataclasses

import pytest
import torch

from robolake.training import GrootModel, ModelConfig


@pytest.fixture()
def model(tiny_config: ModelConfig) -> GrootModel:
    torch.manual_seed(0)
    return GrootModel(tiny_config)


def fixed_noise(model: GrootModel, batch, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(batch.action.shape, generator=g)
    t = model.sample_time(batch.num_samples, torch.device("cpu"), g)
    return noise, t


def test_packed_and_padded_give_the_same_loss_and_grads(model: GrootModel, batch_factory) -> None:
    batch = batch_factory(n=5, seed=3)
    noise, t = fixed_noise(model, batch)
    packed = model(batch, noise=noise, t=t)
    packed.loss.backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    padded = model(batch.to_padded(), noise=noise, t=t)
    padded.loss.backward()
    torch.testing.assert_close(packed.loss, padded.loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(packed.pred_velocity, padded.pred_velocity, rtol=1e-4, atol=1e-5)
    for name, p in model.named_parameters():
        if name in grads:
            torch.testing.assert_close(p.grad, grads[name], rtol=1e-3, atol=1e-5, msg=name)


def test_samples_do_not_interact(model: GrootModel, batch_factory) -> None:
    """A sample's prediction is the same alone and packed with others."""
    batch = batch_factory(n=4, seed=1)
    noise, t = fixed_noise(model, batch)
    together = model(batch, noise=noise, t=t).pred_velocity
    single = batch_factory(
        n=1,
        seed=9,
        views=[batch.views_per_sample[2].item()],
        text_lengths=[batch.text_lengths[2].item()],
    )
    # rebuild sample 2 on its own from the packed batch's tensors
    s, e = batch.cu_seqlens[2].item(), batch.cu_seqlens[3].item()
    vs = (batch.view_sample_index == 2).nonzero().flatten()
    ts, te = batch.cu_text[2].item(), batch.cu_text[3].item()
    single = dataclasses.replace(
        single,
        pixels=batch.pixels[vs],
        text_ids=batch.text_ids[ts:te],
        state=batch.state[2:3],
        state_mask=batch.state_mask[2:3],
        action=batch.action[2:3],
        action_mask=batch.action_mask[2:3],
        embodiment_id=batch.embodiment_id[2:3],
        position_ids=batch.position_ids[s:e],
    )
    alone = model(single, noise=noise[2:3], t=t[2:3]).pred_velocity
    torch.testing.assert_close(alone[0], together[2], rtol=1e-4, atol=1e-5)


def test_loss_is_velocity_mse_over_action_mask(model: GrootModel, batch_factory) -> None:
    batch = batch_factory(n=3, seed=2)
    noise, t = fixed_noise(model, batch)
    out = model(batch, noise=noise, t=t)
    mask = batch.action_mask.float()
    want = ((out.pred_velocity - (batch.action - noise)) ** 2 * mask).sum() / mask.sum()
    torch.testing.assert_close(out.loss, want)
    assert mask.sum() < mask.numel()  # the batch does have padded dims and steps


def test_get_action_shapes_and_determinism(model: GrootModel, batch_factory) -> None:
    batch = batch_factory(n=3)
    a = model.get_action(batch, num_steps=4, generator=torch.Generator().manual_seed(1))
    b = model.get_action(batch.to_padded(), num_steps=4, generator=torch.Generator().manual_seed(1))
    assert a.shape == (3, 16, 32)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="num_steps"):
        model.get_action(batch, num_steps=0)


def test_flow_timesteps_follow_groot_convention(model: GrootModel) -> None:
    t = model.sample_time(20000, torch.device("cpu"), torch.Generator().manual_seed(0))
    s = model.config.noise_s
    assert t.min() >= (s - 1) / s - 1e-6 and t.max() <= 1.0
    # t = (s - b)/s, b ~ Beta(1.5, 1): E[b] = 0.6 -> E[t] ~= (0.999 - 0.6) / 0.999
    assert abs(t.mean().item() - (s - 0.6) / s) < 0.01


def test_batch_model_mismatch_is_reported(model: GrootModel, batch_factory) -> None:
    other = ModelConfig.preset("tiny", tokens_per_view=4)
    batch = batch_factory(n=2, config=other)
    with pytest.raises(ValueError, match="tokens_per_view"):
        model(batch)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="multiple of patch_size"):
        ModelConfig(image_size=30, patch_size=8)
    with pytest.raises(ValueError, match="exceeds"):
        ModelConfig(tokens_per_view=64)
    with pytest.raises(ValueError, match="unknown model preset"):
        ModelConfig.preset("huge")
    with pytest.raises(ValueError, match="attention_backend"):
        ModelConfig(attention_backend="xformers")
    assert ModelConfig.preset("n15").d_model == 2048
    assert ModelConfig.preset("n15").dit_layers == 16


def test_vision_pooling_to_tokens_per_view() -> None:
    for tpv in (16, 4, 6):
        cfg = ModelConfig.preset("tiny", tokens_per_view=tpv)
        m = GrootModel(cfg)
        out = m.vision(torch.randint(0, 255, (3, 3, 32, 32), dtype=torch.uint8))
        assert out.shape == (3, tpv, cfg.d_model)
