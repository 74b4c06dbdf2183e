"""A thin GR00T-N1.5-style policy that consumes a PackedBatch (or its padded twin).

Data flow for a batch of n samples:

1. Every camera view goes through the vision encoder (same cost whatever the layout) and becomes
   `tokens_per_view` tokens; instruction bytes go through an embedding; each stream-history
   message (`pack --history`) goes through its stream's small MLP over (values, time offset).
   All are scattered into the packed token axis: sample i's views in order, then its text, then
   its history tokens, at `cu_seqlens[i]`. Learned
   positions are looked up with `position_ids`, which restart at 0 for each sample.
2. The backbone runs transformer blocks over that axis. Packed, attention is varlen (no token of
   sample i sees sample j, and no compute is spent on padding). Padded (`PaddedBatch`), the same
   blocks run on [n, max_seqlen, d] with dense attention and a key padding mask, computing on
   every padded slot; on real tokens both give the same numbers.
3. The action head builds, per sample, [state token, F future tokens, H noisy action tokens]
   with embodiment-specific encoders, and a DiT denoises them while cross-attending to the
   sample's backbone tokens. The model computes its own action-side boundaries
   `arange(n+1) * (1 + F + H)`; the key side is the batch's `cu_seqlens`.
4. Flow matching as GR00T: t = (s - Beta(1.5, 1)) / s, x_t = (1 - t) noise + t action, the model
   predicts the velocity action - noise, and the MSE is averaged over `action_mask`. `get_action`
   integrates the learned velocity from noise with Euler steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from robolake.schemas.batch import PackedBatch, PaddedBatch
from robolake.training.config import ModelConfig
from robolake.training.dit import DiT
from robolake.training.encoders import (
    CategorySpecificMLP,
    MultiEmbodimentActionEncoder,
    StreamTokenEncoder,
    VisionEncoder,
)
from robolake.training.flow import euler_actions, flow_loss, sample_flow_time
from robolake.training.layers import Attend, DenseAttend, TransformerBlock, VarlenAttend
from robolake.training.tokens import DT_FEATURES, BackboneTokens, check_batch

__all__ = ["GrootModel", "ModelOutput"]


@dataclass(frozen=True)
class ModelOutput:
    """Result of a training forward pass.

    Attributes:
        loss: Scalar flow-matching loss (masked MSE of the velocity).
        pred_velocity: [n, H, max_action_dim] predicted velocity.
    """

    loss: torch.Tensor
    pred_velocity: torch.Tensor


@dataclass
class _Context:
    """Backbone output plus the attention callables the action head needs for this layout."""

    features: torch.Tensor  # [T, d] packed or [n, L, d] padded
    self_attend: Attend
    cross_attend: Attend


class GrootModel(nn.Module):
    """Vision/text backbone over packed tokens + flow-matching DiT action head."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.family != "groot":
            raise ValueError(
                f"GrootModel builds the groot family, got a {config.family!r} config; "
                "build models with robolake.training.build_model(config)"
            )
        c = self.config = config
        self.vision = VisionEncoder(
            image_size=c.image_size,
            patch_size=c.patch_size,
            tokens_per_view=c.tokens_per_view,
            dim=c.vision_dim,
            layers=c.vision_layers,
            heads=c.vision_heads,
            out_dim=c.d_model,
        )
        self.text = nn.Embedding(c.vocab_size, c.d_model)
        self.position = nn.Embedding(c.max_positions, c.d_model)
        self.blocks = nn.ModuleList(
            TransformerBlock(c.d_model, c.backbone_heads, c.mlp_ratio) for _ in range(c.backbone_layers)
        )
        self.norm = nn.LayerNorm(c.d_model)
        self.state_encoder = CategorySpecificMLP(c.num_embodiments, c.max_state_dim, c.head_hidden, c.dit_dim)
        self.action_encoder = MultiEmbodimentActionEncoder(c.max_action_dim, c.dit_dim, c.num_embodiments)
        self.action_position = nn.Parameter(0.02 * torch.randn(c.action_horizon, c.dit_dim))
        self.future_tokens = nn.Parameter(0.02 * torch.randn(c.num_future_tokens, c.dit_dim))
        self.dit = DiT(
            dim=c.dit_dim,
            layers=c.dit_layers,
            heads=c.dit_heads,
            context_dim=c.d_model,
            output_dim=c.dit_output_dim,
        )
        self.action_decoder = CategorySpecificMLP(c.num_embodiments, c.dit_output_dim, c.head_hidden, c.max_action_dim)
        # one MLP per history stream over [values, time offset features] (categories = stream ids)
        self.history_encoder = (
            StreamTokenEncoder(c.history_streams, c.history_width + DT_FEATURES, c.head_hidden, c.d_model)
            if c.history_streams
            else None
        )
        nn.init.normal_(self.text.weight, std=0.02)
        nn.init.normal_(self.position.weight, std=0.02)

    @property
    def dtype(self) -> torch.dtype:
        return self.action_position.dtype

    # -- backbone -------------------------------------------------------------------------------

    def _check(self, b: PackedBatch) -> None:
        check_batch(self.config, b, has_history_encoder=self.history_encoder is not None)

    def _embed(self, b: PackedBatch) -> torch.Tensor:
        """[total_tokens, d_model] inputs of the backbone in packed order."""
        return BackboneTokens(self.vision, self.text, self.position, self.history_encoder, self.config.d_model)(b)

    def encode(self, batch: PackedBatch | PaddedBatch) -> _Context:
        """Run the backbone; returns its features and the action head's attention for this layout."""
        b = batch.packed if isinstance(batch, PaddedBatch) else batch
        self._check(b)
        c, n = self.config, b.num_samples
        x = self._embed(b)
        lq = c.action_side_tokens
        if isinstance(batch, PaddedBatch):
            mask = batch.key_padding_mask
            x = x[batch.token_index] * mask[..., None].to(x.dtype)
            attend: Attend = DenseAttend(mask)
            self_attend: Attend = DenseAttend(None)
            cross_attend: Attend = DenseAttend(mask)
        else:
            attend = VarlenAttend(b.cu_seqlens, b.cu_seqlens, b.max_seqlen, b.max_seqlen, c.attention_backend)
            cu_q = torch.arange(n + 1, device=b.cu_seqlens.device, dtype=torch.int32) * lq
            self_attend = VarlenAttend(cu_q, cu_q, lq, lq, c.attention_backend)
            cross_attend = VarlenAttend(cu_q, b.cu_seqlens, lq, b.max_seqlen, c.attention_backend)
        for block in self.blocks:
            x = block(x, attend)
        return _Context(self.norm(x), self_attend, cross_attend)

    # -- action head ----------------------------------------------------------------------------

    def sample_time(self, n: int, device: torch.device, generator: torch.Generator | None = None) -> torch.Tensor:
        """GR00T's flow timesteps, float32 [n] (`flow.sample_flow_time`)."""
        return sample_flow_time(self.config, n, device, generator)

    def velocity(
        self,
        ctx: _Context,
        state_tokens: torch.Tensor,
        x_t: torch.Tensor,
        t: torch.Tensor,
        embodiment: torch.Tensor,
    ) -> torch.Tensor:
        """Predicted velocity [n, H, A] of noisy actions `x_t` at flow time `t` [n]."""
        c = self.config
        step = (t * c.num_timestep_buckets).long()
        actions = self.action_encoder(x_t, step, embodiment) + self.action_position.to(x_t.dtype)
        future = self.future_tokens.to(x_t.dtype).expand(x_t.shape[0], -1, -1)
        h = torch.cat([state_tokens.to(actions.dtype), future, actions], dim=1)
        out = self.dit(h, step, ctx.features, ctx.self_attend, ctx.cross_attend)
        return self.action_decoder(out, embodiment)[:, -c.action_horizon :]

    def forward(
        self,
        batch: PackedBatch | PaddedBatch,
        *,
        noise: torch.Tensor | None = None,
        t: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> ModelOutput:
        """Flow-matching training loss on `batch`.

        Args:
            batch: A PackedBatch, or a PaddedBatch of the same samples.
            noise: [n, H, max_action_dim] starting noise; drawn from `generator` when None.
            t: [n] flow times; drawn with `sample_time` when None.
            generator: Source of noise and t (the global RNG when None).
        """
        b = batch.packed if isinstance(batch, PaddedBatch) else batch
        ctx = self.encode(batch)
        action = b.action.to(self.dtype)
        if noise is None:
            noise = torch.randn(action.shape, device=action.device, dtype=action.dtype, generator=generator)
        if t is None:
            t = self.sample_time(b.num_samples, action.device, generator)
        tt = t.to(action.dtype)[:, None, None]
        x_t = (1 - tt) * noise.to(action.dtype) + tt * action
        target = action - noise.to(action.dtype)
        state_tokens = self.state_encoder(b.state.to(self.dtype)[:, None, :], b.embodiment_id)
        pred = self.velocity(ctx, state_tokens, x_t, t, b.embodiment_id)
        return ModelOutput(loss=flow_loss(pred, target, b.action_mask), pred_velocity=pred)

    @torch.no_grad()
    def get_action(
        self,
        batch: PackedBatch | PaddedBatch,
        num_steps: int | None = None,
        *,
        noise: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Action chunks [n, H, max_action_dim] by Euler integration of the velocity from noise.

        Raises:
            ValueError: num_steps < 1.
        """
        b = batch.packed if isinstance(batch, PaddedBatch) else batch
        ctx = self.encode(batch)
        state_tokens = self.state_encoder(b.state.to(self.dtype)[:, None, :], b.embodiment_id)
        return euler_actions(
            lambda x, t: self.velocity(ctx, state_tokens, x, t, b.embodiment_id),
            (b.num_samples, self.config.action_horizon, self.config.max_action_dim),
            num_steps if num_steps is not None else self.config.num_inference_steps,
            dtype=self.dtype,
            device=b.state.device,
            noise=noise,
            generator=generator,
        )
