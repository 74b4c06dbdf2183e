from __future__ import annotations

import importlib.util

import pytest
import torch
from torch import nn

from robolake.training import (
    Float8WeightOnlyLinear,
    FP8Recipe,
    GrootModel,
    ModelConfig,
    apply_fp8,
    linear_weight_bytes,
    quantize_weights_fp8,
)


def test_weight_only_linear_numerics() -> None:
    torch.manual_seed(0)
    lin = nn.Linear(64, 48)
    q = Float8WeightOnlyLinear.from_linear(lin)
    assert q.weight_fp8.dtype == torch.float8_e4m3fn and q.weight_scale.shape == (48,)
    w_err = (q.dequantized_weight() - lin.weight).norm() / lin.weight.norm()
    assert w_err < 0.04  # e4m3 keeps 3 mantissa bits: ~2-3% relative error
    x = torch.randn(10, 64)
    y_err = (q(x) - lin(x)).norm() / lin(x).norm()
    assert y_err < 0.04


def test_weight_only_memory_is_half_of_bf16() -> None:
    torch.manual_seed(0)
    model = GrootModel(ModelConfig.preset("tiny"))
    bf16 = linear_weight_bytes(model.to(torch.bfloat16))
    fp8 = linear_weight_bytes(quantize_weights_fp8(model))
    assert 0.5 <= fp8 / bf16 < 0.55  # 1 byte per weight + a float32 scale per output channel


def test_quantize_leaves_the_original_untouched() -> None:
    model = GrootModel(ModelConfig.preset("tiny"))
    q = quantize_weights_fp8(model, skip=("dit.proj_out_2",))
    assert isinstance(model.blocks[0].mlp.fc1, nn.Linear)
    assert isinstance(q.blocks[0].mlp.fc1, Float8WeightOnlyLinear)
    assert isinstance(q.dit.proj_out_2, nn.Linear)
    assert not any(p.requires_grad for p in q.parameters())


def test_fp8_policy_actions_close_to_bf16(batch_factory) -> None:
    torch.manual_seed(0)
    model = GrootModel(ModelConfig.preset("tiny")).eval()
    batch = batch_factory(n=4, seed=5)
    noise = torch.randn(4, 16, 32, generator=torch.Generator().manual_seed(0))
    ref = model.get_action(batch, noise=noise)
    bf16 = GrootModel(ModelConfig.preset("tiny")).eval()
    bf16.load_state_dict(model.state_dict())
    a_bf16 = bf16.to(torch.bfloat16).get_action(batch, noise=noise).float()
    a_fp8 = apply_fp8(model, FP8Recipe(backend="weight_only")).model.get_action(batch, noise=noise)
    err_bf16 = ((a_bf16 - ref).norm() / ref.norm()).item()
    err_fp8 = ((a_fp8 - ref).norm() / ref.norm()).item()
    assert err_fp8 < 0.05
    assert err_fp8 < 10 * err_bf16 + 1e-3  # same order as bf16's own rounding


def test_apply_fp8_auto_on_cpu_is_a_no_op_with_reason() -> None:
    model = GrootModel(ModelConfig.preset("tiny"))
    conv = apply_fp8(model, FP8Recipe())
    assert conv.backend == "none" and conv.model is model and "CUDA" in conv.reason
    with conv.forward_context():
        pass


def test_explicit_backends_fail_clearly_on_cpu() -> None:
    model = GrootModel(ModelConfig.preset("tiny"))
    if importlib.util.find_spec("transformer_engine") is None:
        with pytest.raises(ImportError, match=r"robolake\[gpu\]"):
            apply_fp8(model, FP8Recipe(backend="te"))
    if importlib.util.find_spec("torchao") is None:
        with pytest.raises(ImportError, match=r"robolake\[gpu\]"):
            apply_fp8(model, FP8Recipe(backend="torchao"))
    else:
        with pytest.raises(ValueError, match="compute capability"):
            apply_fp8(model, FP8Recipe(backend="torchao"))


def test_recipe_validation() -> None:
    with pytest.raises(ValueError, match="backend"):
        FP8Recipe(backend="msamp")
    with pytest.raises(ValueError, match="scaling"):
        FP8Recipe(scaling="blockwise")
    with pytest.raises(ValueError, match="tuple"):
        FP8Recipe(skip="dit")  # type: ignore[arg-type]


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="torchao not installed")
def test_torchao_emulated_training_step(batch_factory) -> None:
    torch.manual_seed(0)
    model = GrootModel(ModelConfig.preset("tiny"))
    conv = apply_fp8(model, FP8Recipe(backend="torchao", emulate=True))
    assert conv.backend == "torchao" and conv.converted
    loss = conv.model(batch_factory(n=3)).loss
    loss.backward()
    assert torch.isfinite(loss)


def test_fp8_auto_without_hardware_warns_once(caplog):
    import logging

    import robolake.training.fp8 as fp8_mod
    from robolake.training import FP8Recipe, GrootModel, ModelConfig, apply_fp8

    fp8_mod._WARNED.clear()
    model = GrootModel(ModelConfig.preset("tiny"))
    with caplog.at_level(logging.WARNING, logger="robolake.training.fp8"):
        first = apply_fp8(model, FP8Recipe(backend="auto"))
        second = apply_fp8(model, FP8Recipe(backend="auto"))
    assert first.backend == second.backend == "none"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "fp8='auto'" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
