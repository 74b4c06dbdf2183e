"""ModelConfig: the shape of the thin policy models (GR00T-style or pi0-style), with named presets.

`tiny` trains on a laptop CPU in milliseconds per step and is what tests and the CPU benchmark use.
Its action head is wider than the backbone (DiT 128, head MLPs 256) because every head token carries
a whole noisy action vector: at 64 wide, with about half of the decoder's ReLU units inactive, the
head could not pass a 44-dof humanoid's action through and learned little in a few hundred steps.
`small` is a single-GPU model for throughput checks. `n15` follows GR00T N1.5's published shapes:
a SigLIP-sized vision tower (1152 wide, 27 layers, 224 px, patch 14, 64 tokens per view after
pooling), a 2048-wide language backbone cut at 12 layers, and a 16-layer DiT (32 heads x 48 =
1536 wide, output 1024) with 32 future tokens, horizon 16, state width 64, action width 32 and 32
embodiment slots.

`family` picks the model the same shape builds (`training/families.py`). "groot" (the default) is
a backbone over the packed views, text and history plus a DiT action head that cross-attends to
it. "pi0" is a pi0-style model: the same backbone tokens plus a state token form each sample's
prefix, and an action expert (one block per backbone block, `dit_dim` wide, the backbone's heads
and head width) joins the backbone's attention at every layer, its tokens attending to their
sample's prefix and causally among themselves (`training/prefix_lm.py`). The pi0 family does not
use `dit_layers`, `dit_heads`, `dit_output_dim` or `num_future_tokens`. Presets are shared: a
name may carry the family, `"pi0:tiny"`, which is how a string-only caller (a run config) asks
for one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from robolake.training.attention import ATTENTION_BACKENDS
from robolake.training.prefix_lm import PREFIX_LM_BACKENDS

__all__ = ["BYTE_VOCAB", "MODEL_FAMILIES", "ModelConfig"]

MODEL_FAMILIES = ("groot", "pi0")

BYTE_VOCAB = 256 + 4  # byte-level ids 0..255 plus pad, bos, eos, sep


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape and flow-matching settings of `GrootModel` and `Pi0Model`.

    Attributes:
        family: "groot" (backbone + cross-attending DiT head) or "pi0" (prefix-LM backbone with an
            action expert); see the module notes for which fields each uses.
        image_size: Side of the square image the vision encoder sees (inputs are resized to it).
        patch_size: Patch side; image_size must be a multiple of it.
        tokens_per_view: Backbone tokens per camera view (<= patches per view; pooled down to it).
        vision_dim: Width of the vision transformer.
        vision_layers: Vision transformer blocks (0: patch embedding only).
        vision_heads: Vision attention heads.
        vocab_size: Text vocabulary (byte-level: 256 + specials).
        d_model: Backbone width.
        backbone_layers: Backbone transformer blocks over the packed sequence.
        backbone_heads: Backbone attention heads.
        mlp_ratio: Backbone MLP hidden / d_model.
        max_positions: Learned backbone positions (longest sample allowed).
        dit_dim: DiT width (GR00T's input_embedding_dim).
        dit_layers: DiT blocks (even: cross-attention, odd: self-attention).
        dit_heads: DiT attention heads.
        dit_output_dim: DiT output width fed to the action decoder.
        head_hidden: Hidden width of the per-embodiment state encoder and action decoder.
        num_future_tokens: Learned future tokens between the state token and the action tokens.
        action_horizon: H, action steps per chunk.
        max_state_dim: Padded state width.
        max_action_dim: Padded action width.
        num_embodiments: Embodiment slots of the category-specific layers.
        noise_beta_alpha: Alpha of the Beta distribution of flow timesteps.
        noise_beta_beta: Beta of the Beta distribution of flow timesteps.
        noise_s: GR00T's cutoff s: t = (s - Beta sample) / s.
        num_timestep_buckets: Timesteps are discretised to int(t * buckets) before embedding.
        num_inference_steps: Euler steps of `get_action`.
        attention_backend: One of ATTENTION_BACKENDS, for every varlen attention in the model
            (pi0: one of PREFIX_LM_BACKENDS, which adds "flex").
        history_streams: Stream-history streams the model embeds (one small MLP each); 0: none.
        history_width: Values per history token.
    """

    family: str = "groot"
    image_size: int = 32
    patch_size: int = 8
    tokens_per_view: int = 16
    vision_dim: int = 64
    vision_layers: int = 0
    vision_heads: int = 4
    vocab_size: int = BYTE_VOCAB
    d_model: int = 128
    backbone_layers: int = 2
    backbone_heads: int = 4
    mlp_ratio: float = 4.0
    max_positions: int = 1024
    dit_dim: int = 128
    dit_layers: int = 2
    dit_heads: int = 4
    dit_output_dim: int = 128
    head_hidden: int = 256
    num_future_tokens: int = 4
    action_horizon: int = 16
    max_state_dim: int = 32
    max_action_dim: int = 32
    num_embodiments: int = 8
    noise_beta_alpha: float = 1.5
    noise_beta_beta: float = 1.0
    noise_s: float = 0.999
    num_timestep_buckets: int = 1000
    num_inference_steps: int = 4
    attention_backend: str = "auto"
    history_streams: int = 0
    history_width: int = 0

    def __post_init__(self) -> None:
        if self.family not in MODEL_FAMILIES:
            raise ValueError(f"ModelConfig.family must be one of {MODEL_FAMILIES}, got {self.family!r}")
        if self.history_streams < 0 or self.history_width < 0 or (self.history_streams > 0) != (self.history_width > 0):
            raise ValueError(
                f"history_streams ({self.history_streams}) and history_width ({self.history_width}) must both be 0 "
                "or both be positive"
            )
        positive = (
            "image_size",
            "patch_size",
            "tokens_per_view",
            "vision_dim",
            "vision_heads",
            "vocab_size",
            "d_model",
            "backbone_heads",
            "max_positions",
            "dit_dim",
            "dit_layers",
            "dit_heads",
            "dit_output_dim",
            "head_hidden",
            "action_horizon",
            "max_state_dim",
            "max_action_dim",
            "num_embodiments",
            "num_timestep_buckets",
            "num_inference_steps",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"ModelConfig.{name} must be > 0, got {getattr(self, name)}")
        for name in ("vision_layers", "backbone_layers", "num_future_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"ModelConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} must be a multiple of patch_size {self.patch_size}")
        patches = (self.image_size // self.patch_size) ** 2
        if self.tokens_per_view > patches:
            raise ValueError(
                f"tokens_per_view {self.tokens_per_view} exceeds the {patches} patches per view; "
                "raise image_size or lower patch_size"
            )
        for width, heads in (
            ("vision_dim", "vision_heads"),
            ("d_model", "backbone_heads"),
            ("dit_dim", "dit_heads"),
        ):
            if getattr(self, width) % getattr(self, heads):
                raise ValueError(
                    f"ModelConfig.{width}={getattr(self, width)} is not divisible by {heads}={getattr(self, heads)}"
                )
        if self.vocab_size < 256:
            raise ValueError(f"vocab_size must cover the 256 byte ids, got {self.vocab_size}")
        if self.mlp_ratio <= 0:
            raise ValueError(f"mlp_ratio must be > 0, got {self.mlp_ratio}")
        if self.noise_beta_alpha <= 0 or self.noise_beta_beta <= 0:
            raise ValueError("noise_beta_alpha and noise_beta_beta must be > 0")
        if not 0.0 < self.noise_s <= 1.0:
            raise ValueError(f"noise_s must be in (0, 1], got {self.noise_s}")
        backends = PREFIX_LM_BACKENDS if self.family == "pi0" else ATTENTION_BACKENDS
        if self.attention_backend not in backends:
            raise ValueError(
                f"attention_backend of the {self.family} family must be one of {backends}, "
                f"got {self.attention_backend!r}"
            )

    @property
    def action_side_tokens(self) -> int:
        """Action-head tokens per sample: state + future tokens + H actions (groot); H actions (pi0)."""
        if self.family == "pi0":
            return self.action_horizon
        return 1 + self.num_future_tokens + self.action_horizon

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """A named preset ("tiny", "small", "n15"), optionally as "FAMILY:NAME" ("pi0:tiny") and
        with fields overridden.

        Raises:
            ValueError: unknown preset name or family, or an invalid override.
        """
        family, _, size = name.rpartition(":")
        if size not in _PRESETS:
            raise ValueError(f"unknown model preset {size!r}; choose one of {sorted(_PRESETS)}")
        if family:
            if "family" in overrides and overrides["family"] != family:
                raise ValueError(f"preset {name!r} names family {family!r} but family={overrides['family']!r}")
            overrides = {**overrides, "family": family}
        return dataclasses.replace(cls(**_PRESETS[size]), **overrides)


_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {},
    "small": dict(
        image_size=224,
        patch_size=14,
        tokens_per_view=64,
        vision_dim=384,
        vision_layers=4,
        vision_heads=6,
        d_model=1024,
        backbone_layers=8,
        backbone_heads=16,
        mlp_ratio=4.0,
        max_positions=2048,
        dit_dim=512,
        dit_layers=8,
        dit_heads=8,
        dit_output_dim=512,
        head_hidden=512,
        num_future_tokens=16,
        action_horizon=16,
        max_state_dim=64,
        max_action_dim=32,
        num_embodiments=32,
    ),
    "n15": dict(
        image_size=224,
        patch_size=14,
        tokens_per_view=64,
        vision_dim=1152,
        vision_layers=27,
        vision_heads=16,
        d_model=2048,
        backbone_layers=12,
        backbone_heads=16,
        mlp_ratio=3.0,
        max_positions=4096,
        dit_dim=1536,
        dit_layers=16,
        dit_heads=32,
        dit_output_dim=1024,
        head_hidden=1024,
        num_future_tokens=32,
        action_horizon=16,
        max_state_dim=64,
        max_action_dim=32,
        num_embodiments=32,
    ),
}
