"""FP8 as a model conversion: Transformer Engine, torchao, or emulated float8 weights.

FP8 halves the bytes of every GEMM operand relative to bf16 and, on Hopper/Ada tensor cores
(compute capability >= 8.9), doubles the matmul rate. Its cost is range: e4m3 holds about two
decimal digits over +-448, so every tensor needs a scale. The libraries differ in where scales
come from, and that is the only thing this module decides:

- `te` (Transformer Engine): `nn.Linear` layers become `te.Linear`; the forward pass runs inside
  `te.autocast`/`te.fp8_autocast` with a DelayedScaling (amax history) or Float8CurrentScaling
  recipe. FP8 GEMMs want the token dimension to be a multiple of 16, which a packed batch's
  total_tokens is not, so each converted layer pads its rows to a multiple of 16 and slices back.
- `torchao`: `torchao.float8.convert_to_float8_training` swaps eligible Linears for Float8Linear
  with dynamic (current) tensorwise or rowwise scales; `pad_inner_dim` handles odd token counts.
- `weight_only` (inference): each Linear keeps its weight as `torch.float8_e4m3fn` plus a float32
  scale per output channel and dequantises in forward. It runs anywhere, CPU included, so its
  numerics and memory (about half of bf16) are testable without a GPU. On CUDA with torchao
  installed, `quantize_weights_fp8(..., backend="torchao")` uses torchao's Float8WeightOnlyConfig.

Layers whose in/out features are not multiples of 16 stay in high precision for `te`/`torchao`
(the FP8 GEMM kernels require it), and so do the category-specific embodiment layers, which are
tiny and sit where precision matters most (the action decoder).

The trainer never branches on any of this: `apply_fp8` returns an `FP8Conversion` whose
`forward_context()` the trainer enters around every forward pass (a no-op for `weight_only` and
when FP8 is unavailable).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "FP8Conversion",
    "FP8Recipe",
    "Float8WeightOnlyLinear",
    "apply_fp8",
    "fp8_training_supported",
    "linear_weight_bytes",
    "quantize_weights_fp8",
]

log = logging.getLogger(__name__)

FP8_BACKENDS = ("auto", "te", "torchao", "weight_only")
FP8_SCALINGS = ("current", "delayed", "rowwise")
E4M3_MAX = 448.0


@dataclass(frozen=True, kw_only=True)
class FP8Recipe:
    """How to run FP8.

    Attributes:
        backend: "auto" (te, then torchao, on CUDA with compute capability >= 8.9; otherwise no
            conversion), "te", "torchao", or "weight_only" (inference copy with float8 weights).
        scaling: "current" (scale from this step's amax: TE Float8CurrentScaling, torchao
            tensorwise), "delayed" (TE DelayedScaling over an amax history), or "rowwise"
            (torchao rowwise, TE Float8BlockScaling).
        amax_history_len: DelayedScaling history length.
        margin: DelayedScaling margin (powers of two of headroom).
        multiple_of: te/torchao convert only Linears whose in and out features are multiples of it.
        skip: Module-name substrings never converted.
        emulate: torchao only: emulate float8 matmuls (runs on CPU; for tests).
    """

    backend: str = "auto"
    scaling: str = "current"
    amax_history_len: int = 16
    margin: int = 0
    multiple_of: int = 16
    skip: tuple[str, ...] = ()
    emulate: bool = False

    def __post_init__(self) -> None:
        if self.backend not in FP8_BACKENDS:
            raise ValueError(f"FP8Recipe.backend must be one of {FP8_BACKENDS}, got {self.backend!r}")
        if self.scaling not in FP8_SCALINGS:
            raise ValueError(f"FP8Recipe.scaling must be one of {FP8_SCALINGS}, got {self.scaling!r}")
        if self.amax_history_len < 1 or self.margin < 0 or self.multiple_of < 1:
            raise ValueError("FP8Recipe needs amax_history_len >= 1, margin >= 0, multiple_of >= 1")
        if isinstance(self.skip, str):
            raise ValueError("FP8Recipe.skip must be a tuple of name substrings, not a string")


@dataclass(frozen=True)
class FP8Conversion:
    """Result of `apply_fp8`.

    Attributes:
        model: The converted model (the same object for te/torchao, a copy for weight_only).
        backend: What ran: "te", "torchao", "weight_only", or "none".
        converted: Names of the converted Linear layers.
        reason: Why `backend` was chosen (logged too).
        context_factory: Builds the context the forward pass must run in.
    """

    model: nn.Module
    backend: str
    converted: tuple[str, ...] = ()
    reason: str = ""
    context_factory: Callable[[], AbstractContextManager] = field(default=contextlib.nullcontext, repr=False)

    def forward_context(self) -> AbstractContextManager:
        """A fresh context manager to wrap one forward pass in."""
        return self.context_factory()


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _require(module: str, what: str) -> None:
    if not _has(module):
        raise ImportError(f"{what} needs the '{module}' package: pip install 'robolake[gpu]'")


def _model_device(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def fp8_training_supported(device: torch.device | str) -> bool:
    """True when `device` is CUDA with compute capability >= 8.9 (Ada/Hopper/Blackwell)."""
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability(dev) >= (8, 9)


def _eligible(recipe: FP8Recipe) -> Callable[[nn.Module, str], bool]:
    def ok(mod: nn.Module, fqn: str) -> bool:
        if not isinstance(mod, nn.Linear) or any(s in fqn for s in recipe.skip):
            return False
        return mod.in_features % recipe.multiple_of == 0 and mod.out_features % recipe.multiple_of == 0

    return ok


def _swap_linears(
    model: nn.Module, make: Callable[[nn.Linear], nn.Module], ok: Callable[[nn.Module, str], bool]
) -> tuple[str, ...]:
    done = []
    for fqn, mod in list(model.named_modules()):
        if fqn and ok(mod, fqn):
            parent_name, _, child = fqn.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, make(mod))  # type: ignore[arg-type]
            done.append(fqn)
    return tuple(done)


# -- Transformer Engine ----------------------------------------------------------------------


class _TELinear(nn.Module):
    """te.Linear that pads the token rows to a multiple of 16, as FP8 GEMMs require."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        import transformer_engine.pytorch as te

        self.inner = te.Linear(
            linear.in_features,
            linear.out_features,
            bias=linear.bias is not None,
            params_dtype=linear.weight.dtype,
            device=linear.weight.device,
        )
        with torch.no_grad():
            self.inner.weight.copy_(linear.weight)
            if linear.bias is not None:
                self.inner.bias.copy_(linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        rows = x2.shape[0]
        pad = (-rows) % 16
        if pad:
            x2 = F.pad(x2, (0, 0, 0, pad))
        return self.inner(x2)[:rows].reshape(*shape[:-1], -1)


def _te_context_factory(recipe: FP8Recipe) -> Callable[[], AbstractContextManager]:
    import transformer_engine.pytorch as te
    from transformer_engine.common import recipe as te_recipe

    if recipe.scaling == "delayed":
        r = te_recipe.DelayedScaling(
            fp8_format=te_recipe.Format.HYBRID,
            amax_history_len=recipe.amax_history_len,
            amax_compute_algo="max",
            margin=recipe.margin,
        )
    elif recipe.scaling == "current":
        r = te_recipe.Float8CurrentScaling(fp8_format=te_recipe.Format.HYBRID)
    else:
        r = te_recipe.Float8BlockScaling()
    if hasattr(te, "autocast"):  # TE >= 2.8
        return lambda: te.autocast(enabled=True, recipe=r)
    return lambda: te.fp8_autocast(enabled=True, fp8_recipe=r)


def _apply_te(model: nn.Module, recipe: FP8Recipe) -> FP8Conversion:
    _require("transformer_engine", "FP8 backend 'te'")
    if not fp8_training_supported(_model_device(model)):
        raise ValueError("FP8 backend 'te' needs the model on a CUDA device with compute capability >= 8.9")
    done = _swap_linears(model, _TELinear, _eligible(recipe))
    return FP8Conversion(model, "te", done, "transformer_engine", _te_context_factory(recipe))


# -- torchao ---------------------------------------------------------------------------------


def _apply_torchao(model: nn.Module, recipe: FP8Recipe) -> FP8Conversion:
    _require("torchao", "FP8 backend 'torchao'")
    if not recipe.emulate and not fp8_training_supported(_model_device(model)):
        raise ValueError(
            "FP8 backend 'torchao' needs the model on a CUDA device with compute capability >= 8.9 "
            "(or FP8Recipe(emulate=True) for a slow emulated run)"
        )
    if recipe.scaling == "delayed":
        raise ValueError("torchao float8 training has no delayed scaling; use scaling='current' or 'rowwise'")
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    if recipe.scaling == "rowwise":
        config = Float8LinearConfig.from_recipe_name("rowwise")
    else:
        config = Float8LinearConfig(pad_inner_dim=True, emulate=recipe.emulate)
    ok = _eligible(recipe)
    done = tuple(fqn for fqn, mod in model.named_modules() if fqn and ok(mod, fqn))
    convert_to_float8_training(model, module_filter_fn=ok, config=config)
    return FP8Conversion(model, "torchao", done, "torchao.float8")


# -- weight-only -----------------------------------------------------------------------------


class Float8WeightOnlyLinear(nn.Module):
    """A frozen Linear whose weight is float8_e4m3fn with a float32 scale per output channel."""

    weight_fp8: torch.Tensor
    weight_scale: torch.Tensor
    bias: torch.Tensor | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: torch.Tensor | None,
        device: torch.device | None = None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer(
            "weight_fp8",
            torch.zeros(out_features, in_features, dtype=torch.float8_e4m3fn, device=device),
        )
        self.register_buffer("weight_scale", torch.ones(out_features, dtype=torch.float32, device=device))
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Float8WeightOnlyLinear:
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1).clamp(min=1e-12) / E4M3_MAX
        mod = cls(linear.in_features, linear.out_features, linear.bias, device=w.device)
        mod.weight_fp8.copy_((w / scale[:, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn))
        mod.weight_scale.copy_(scale)
        return mod

    def dequantized_weight(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return (self.weight_fp8.float() * self.weight_scale[:, None]).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.dequantized_weight(x.dtype), bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, weight=float8_e4m3fn"


def quantize_weights_fp8(model: nn.Module, *, skip: tuple[str, ...] = (), backend: str = "auto") -> nn.Module:
    """An inference copy of `model` whose Linear weights are float8 with per-channel scales.

    Args:
        model: Left unchanged.
        skip: Module-name substrings to keep in high precision.
        backend: "emulated" (Float8WeightOnlyLinear, any device), "torchao" (Float8WeightOnlyConfig
            via `quantize_`, CUDA cc >= 8.9), or "auto" (torchao where it can run, else emulated).

    Raises:
        ValueError: unknown backend, or torchao requested where it cannot run.
        ImportError: torchao requested and not installed.
    """
    if backend not in ("auto", "emulated", "torchao"):
        raise ValueError(f"backend must be 'auto', 'emulated' or 'torchao', got {backend!r}")
    out = copy.deepcopy(model).eval()
    out.requires_grad_(False)
    device = _model_device(out)
    use_torchao = backend == "torchao" or (backend == "auto" and _has("torchao") and fp8_training_supported(device))
    if use_torchao:
        _require("torchao", "quantize_weights_fp8(backend='torchao')")
        if not fp8_training_supported(device):
            raise ValueError(
                "torchao float8 weight-only needs CUDA with compute capability >= 8.9; use backend='emulated'"
            )
        from torchao.quantization import Float8WeightOnlyConfig, quantize_

        quantize_(
            out,
            Float8WeightOnlyConfig(),
            filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and not any(s in fqn for s in skip),
        )
        return out
    _swap_linears(
        out,
        Float8WeightOnlyLinear.from_linear,
        lambda m, fqn: isinstance(m, nn.Linear) and not any(s in fqn for s in skip),
    )
    return out


def linear_weight_bytes(model: nn.Module) -> int:
    """Bytes held by Linear weights (float8 weights + scales for converted layers); biases excluded."""
    total = 0
    for mod in model.modules():
        if isinstance(mod, Float8WeightOnlyLinear):
            total += mod.weight_fp8.numel() * mod.weight_fp8.element_size()
            total += mod.weight_scale.numel() * mod.weight_scale.element_size()
        elif isinstance(mod, nn.Linear):
            total += mod.weight.numel() * mod.weight.element_size()
    return total


# -- entry point -----------------------------------------------------------------------------


def apply_fp8(model: nn.Module, recipe: FP8Recipe) -> FP8Conversion:
    """Convert `model` for FP8 according to `recipe`.

    te/torchao convert in place (build the optimizer afterwards); weight_only returns a frozen
    inference copy. With backend="auto" and no FP8-capable GPU or library, the model is returned
    unchanged with backend "none" and the reason logged at WARNING, once per process (the trainer
    records the backend that ran in every metrics line).

    Raises:
        ValueError: an explicit backend cannot run on this model's device.
        ImportError: an explicit backend's package is missing (install robolake[gpu]).
    """
    if recipe.backend == "te":
        return _apply_te(model, recipe)
    if recipe.backend == "torchao":
        return _apply_torchao(model, recipe)
    if recipe.backend == "weight_only":
        return FP8Conversion(
            quantize_weights_fp8(model, skip=recipe.skip),
            "weight_only",
            reason="weight-only float8 inference copy",
        )
    device = _model_device(model)
    if not fp8_training_supported(device):
        reason = (
            f"FP8 training needs CUDA with compute capability >= 8.9; model is on {device}, training in high precision"
        )
    elif _has("transformer_engine"):
        return _apply_te(model, recipe)
    elif _has("torchao") and recipe.scaling != "delayed":
        return _apply_torchao(model, recipe)
    else:
        reason = (
            "neither transformer_engine nor torchao is installed (pip install 'robolake[gpu]'); "
            "training in high precision"
        )
    _warn_once(f"fp8='auto': {reason}")
    return FP8Conversion(model, "none", reason=reason)


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    # A user who asked for FP8 must hear that it did not run, but once per process, not per model.
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning(message)
