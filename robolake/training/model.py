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
    sinusoidal_embedding,
)
from robolake.training.layers import Attend, DenseAttend, TransformerBlock, VarlenAttend

__all__ = ["GrootModel", "ModelOutput"]

_DT_FEATURES = 8  # sinusoidal features of a history token's time offset (seconds before its sample)


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
            StreamTokenEncoder(c.history_streams, c.history_width + _DT_FEATURES, c.head_hidden, c.d_model)
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
        c = self.config
        if b.tokens_per_view != c.tokens_per_view:
            raise ValueError(f"batch has tokens_per_view={b.tokens_per_view} but the model expects {c.tokens_per_view}")
        if b.max_seqlen > c.max_positions:
            raise ValueError(
                f"a sample has {b.max_seqlen} tokens, more than max_positions={c.max_positions}; "
                "raise it or pack shorter samples"
            )
        if b.state.shape[-1] != c.max_state_dim or b.action.shape[-1] != c.max_action_dim:
            raise ValueError(
                f"batch state/action widths {b.state.shape[-1]}/{b.action.shape[-1]} differ from the model's "
                f"max_state_dim/max_action_dim {c.max_state_dim}/{c.max_action_dim}"
            )
        if b.action.shape[1] != c.action_horizon:
            raise ValueError(f"batch action horizon {b.action.shape[1]} differs from the model's {c.action_horizon}")
        if b.history_values is not None and b.history_values.shape[0] and self.history_encoder is None:
            raise ValueError(
                "the batch carries stream-history tokens but the model has no history encoder; size the model to the "
                "data (`size_model_config`) so that history_streams and history_width are set"
            )
        if b.history_values is not None and b.history_values.shape[0] and b.history_values.shape[1] != c.history_width:
            raise ValueError(
                f"history tokens have {b.history_values.shape[1]} values, the model expects {c.history_width}"
            )
        if b.embodiment_id.device.type == "cpu" and b.num_samples and int(b.embodiment_id.max()) >= c.num_embodiments:
            raise ValueError(f"embodiment id {int(b.embodiment_id.max())} >= num_embodiments={c.num_embodiments}")

    def _embed(self, b: PackedBatch) -> torch.Tensor:
        """[total_tokens, d_model] inputs of the backbone in packed order."""
        n, tpv, dev = b.num_samples, b.tokens_per_view, b.cu_seqlens.device
        starts = b.cu_seqlens[:-1].long()
        views = b.views_per_sample
        first_view = torch.cumsum(views, 0) - views
        vsi = b.view_sample_index
        rank = torch.arange(vsi.shape[0], device=dev) - first_view[vsi]
        view_pos = (starts[vsi] + rank * tpv)[:, None] + torch.arange(tpv, device=dev)
        text_len = b.text_lengths
        tsi = torch.repeat_interleave(torch.arange(n, device=dev), text_len, output_size=b.text_ids.shape[0])
        text_pos = (
            starts[tsi] + views[tsi] * tpv + torch.arange(b.text_ids.shape[0], device=dev) - b.cu_text[:-1].long()[tsi]
        )
        vis = self.vision(b.pixels).flatten(0, 1)
        txt = self.text(b.text_ids).to(vis.dtype)
        x = vis.new_zeros(b.total_tokens, self.config.d_model)
        x = x.index_copy(0, view_pos.flatten(), vis).index_copy(0, text_pos, txt)
        if (
            self.history_encoder is not None
            and b.history_values is not None
            and b.history_dt is not None
            and b.history_stream is not None
            and b.cu_history is not None
            and b.history_values.shape[0]
        ):
            x = self._embed_history(
                self.history_encoder,
                (b.history_values, b.history_dt, b.history_stream, b.cu_history),
                x,
                starts,
                views * tpv + text_len,
            )
        return x + self.position(b.position_ids).to(x.dtype)

    @staticmethod
    def _embed_history(
        encoder: StreamTokenEncoder,
        history: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
        x: torch.Tensor,
        starts: torch.Tensor,
        before: torch.Tensor,
    ) -> torch.Tensor:
        """x with each sample's history tokens (values, dt, stream ids, cu_history) placed after its views and text."""
        values, dt, stream, cu_history = history
        dev, total = x.device, int(values.shape[0])
        hist_len = (cu_history[1:] - cu_history[:-1]).long()
        hsi = torch.repeat_interleave(torch.arange(hist_len.shape[0], device=dev), hist_len, output_size=total)
        hist_pos = starts[hsi] + before[hsi] + torch.arange(total, device=dev) - cu_history[:-1].long()[hsi]
        feats = torch.cat([values.to(x.dtype), sinusoidal_embedding(dt * 100.0, _DT_FEATURES).to(x.dtype)], dim=-1)
        return x.index_copy(0, hist_pos, encoder(feats, stream).to(x.dtype))

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
        """GR00T's flow timesteps: t = (s - b) / s with b ~ Beta(alpha, beta), float32 [n].

        Beta(a, 1) and Beta(1, b) are drawn by inverse CDF from `generator`; other shapes use
        torch.distributions (global RNG).
        """
        c = self.config
        if c.noise_beta_beta == 1.0 or c.noise_beta_alpha == 1.0:
            u = torch.rand(n, device=device, generator=generator)
            b = u ** (1.0 / c.noise_beta_alpha) if c.noise_beta_beta == 1.0 else 1.0 - u ** (1.0 / c.noise_beta_beta)
        else:
            b = torch.distributions.Beta(c.noise_beta_alpha, c.noise_beta_beta).sample((n,)).to(device)
        return (c.noise_s - b) / c.noise_s

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
        mask = b.action_mask.to(pred.dtype)
        loss = ((pred.float() - target.float()) ** 2 * mask).sum() / mask.sum().clamp(min=1.0)
        return ModelOutput(loss=loss, pred_velocity=pred)

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
        steps = num_steps if num_steps is not None else self.config.num_inference_steps
        if steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {steps}")
        b = batch.packed if isinstance(batch, PaddedBatch) else batch
        ctx = self.encode(batch)
        n, dev = b.num_samples, b.state.device
        shape = (n, self.config.action_horizon, self.config.max_action_dim)
        x = (
            noise.to(self.dtype)
            if noise is not None
            else torch.randn(shape, device=dev, dtype=self.dtype, generator=generator)
        )
        state_tokens = self.state_encoder(b.state.to(self.dtype)[:, None, :], b.embodiment_id)
        dt = 1.0 / steps
        for k in range(steps):
            t = torch.full((n,), k * dt, device=dev)
            x = x + dt * self.velocity(ctx, state_tokens, x, t, b.embodiment_id).to(x.dtype)
        return x
