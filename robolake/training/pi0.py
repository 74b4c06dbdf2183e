"""A thin pi0-style policy that consumes the same PackedBatch (or its padded twin) as GrootModel.

Data flow for a batch of n samples:

1. The backbone tokens are GR00T's (`tokens.py`: views, text, stream history, learned positions
   from `position_ids`); one state token per sample (an embodiment-specific MLP of the state)
   follows them. Together they are sample i's **prefix**, `seqlen_i + 1` tokens.
2. The action expert's tokens are the H noisy actions of the chunk (an embodiment-specific
   encoder of the noisy action and the flow timestep, plus a learned position per step): the
   **suffix**. Each sample's joint sequence is its prefix then its suffix, and
   `prefix_lm_layout(cu_seqlens + arange * (1 + H), seqlens + 1)` says where everything lies.
3. Every layer is one joint attention with two sets of weights, as pi0's VLM and action expert
   share attention: the prefix stream (`d_model` wide) and the expert stream (`dit_dim` wide)
   project to the same heads; prefix tokens attend bidirectionally within their sample's prefix,
   expert tokens to their sample's prefix and causally among themselves (`prefix_lm.py`). No
   prefix token ever reads the suffix, so the prefix is run once per batch and its keys and
   values kept per layer: training runs the expert stream once over them, `get_action` once per
   Euler step (pi0's KV cache), never recomputing the backbone. The last layer's prefix only
   needs keys and values, so it has no output projection or MLP.
4. Flow matching exactly as GrootModel (`flow.py`); the flow timestep also modulates every
   expert layer's pre-attention norm (adaptive layer norm, as pi0.5 and GR00T's DiT do).

The expert's residual branches start at zero for the reason `dit.py` gives: an untrained expert
then passes its action tokens through unchanged, and each branch grows only as far as it lowers
the loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from robolake.schemas.batch import PackedBatch, PaddedBatch
from robolake.training.config import ModelConfig
from robolake.training.dit import TimestepEncoder
from robolake.training.encoders import (
    CategorySpecificMLP,
    MultiEmbodimentActionEncoder,
    StreamTokenEncoder,
    VisionEncoder,
)
from robolake.training.flow import euler_actions, flow_loss, sample_flow_time
from robolake.training.layers import MLP
from robolake.training.model import ModelOutput
from robolake.training.prefix_lm import DensePrefixLM, VarlenPrefixLM, prefix_lm_layout
from robolake.training.tokens import DT_FEATURES, BackboneTokens, check_batch

__all__ = ["Pi0Context", "Pi0Model"]

PrefixAttend = VarlenPrefixLM | DensePrefixLM


@dataclass
class Pi0Context:
    """What the expert needs of a batch: each layer's prefix keys and values, and the attention.

    Attributes:
        kv: Per layer, (keys, values) of the prefix, [P, heads, dim] packed or [n, Lp, heads, dim] padded.
        attend: The layout's attention (`VarlenPrefixLM` packed, `DensePrefixLM` padded).
        packed: Whether the expert's tokens are flattened to the suffix axis for `attend`.
    """

    kv: list[tuple[torch.Tensor, torch.Tensor]]
    attend: PrefixAttend
    packed: bool


class _PrefixLayer(nn.Module):
    """One backbone layer of the prefix stream; `kv_only` for the last (its output is never read)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, *, kv_only: bool) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.norm1 = nn.LayerNorm(dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.kv_only = kv_only
        if not kv_only:
            self.q = nn.Linear(dim, dim)
            self.out = nn.Linear(dim, dim)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = MLP(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor, attend: PrefixAttend) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(next x, keys, values) of the prefix tokens x [..., dim]."""
        h = self.norm1(x)
        k, v = self.kv(h).unflatten(-1, (2, self.heads, self.head_dim)).unbind(-3)
        if self.kv_only:
            return x, k, v
        q = self.q(h).unflatten(-1, (self.heads, self.head_dim))
        x = x + self.out(attend.prefix(q, k, v).flatten(-2))
        return x + self.mlp(self.norm2(x)), k, v


class _ExpertLayer(nn.Module):
    """One action-expert layer: AdaLN on the timestep, joint attention over the prefix, MLP."""

    def __init__(self, dim: int, attn_dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, attn_dim // heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False)
        self.ada = nn.Linear(dim, 2 * dim)
        self.q = nn.Linear(dim, attn_dim)
        self.kv = nn.Linear(dim, 2 * attn_dim)
        self.out = nn.Linear(attn_dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, int(dim * mlp_ratio))
        for branch_out in (self.out, self.mlp.fc2):
            nn.init.zeros_(branch_out.weight)
            nn.init.zeros_(branch_out.bias)

    def forward(
        self, x: torch.Tensor, temb: torch.Tensor, kv_prefix: tuple[torch.Tensor, torch.Tensor], ctx: Pi0Context
    ) -> torch.Tensor:
        """x [n, H, dim], temb [n, dim] -> [n, H, dim]."""
        scale, shift = self.ada(F.silu(temb)).unsqueeze(1).chunk(2, dim=-1)
        h = self.norm1(x) * (1 + scale) + shift
        q = self.q(h).unflatten(-1, (self.heads, self.head_dim))
        k, v = self.kv(h).unflatten(-1, (2, self.heads, self.head_dim)).unbind(-3)
        kp, vp = kv_prefix
        if ctx.packed:  # onto the suffix axis: sample i's H tokens at rows i*H..(i+1)*H-1
            o = ctx.attend.suffix(q.flatten(0, 1), kp, vp, k.flatten(0, 1), v.flatten(0, 1)).unflatten(0, q.shape[:2])
        else:
            o = ctx.attend.suffix(q, kp, vp, k, v)
        x = x + self.out(o.flatten(-2))
        return x + self.mlp(self.norm2(x))


class Pi0Model(nn.Module):
    """Prefix-LM backbone over packed tokens + a flow-matching action expert sharing its attention."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.family != "pi0":
            raise ValueError(
                f"Pi0Model builds the pi0 family, got a {config.family!r} config; "
                "build models with robolake.training.build_model(config)"
            )
        c = self.config = config
        layers = max(1, c.backbone_layers)  # the expert needs at least one joint layer
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
        self.history_encoder = (
            StreamTokenEncoder(c.history_streams, c.history_width + DT_FEATURES, c.head_hidden, c.d_model)
            if c.history_streams
            else None
        )
        self.state_encoder = CategorySpecificMLP(c.num_embodiments, c.max_state_dim, c.head_hidden, c.d_model)
        self.prefix_layers = nn.ModuleList(
            _PrefixLayer(c.d_model, c.backbone_heads, c.mlp_ratio, kv_only=(i == layers - 1)) for i in range(layers)
        )
        self.action_encoder = MultiEmbodimentActionEncoder(c.max_action_dim, c.dit_dim, c.num_embodiments)
        self.action_position = nn.Parameter(0.02 * torch.randn(c.action_horizon, c.dit_dim))
        self.timestep = TimestepEncoder(c.dit_dim)
        self.expert_layers = nn.ModuleList(
            _ExpertLayer(c.dit_dim, c.d_model, c.backbone_heads, c.mlp_ratio) for _ in range(layers)
        )
        self.expert_norm = nn.LayerNorm(c.dit_dim)
        self.action_decoder = CategorySpecificMLP(c.num_embodiments, c.dit_dim, c.head_hidden, c.max_action_dim)
        nn.init.normal_(self.text.weight, std=0.02)
        nn.init.normal_(self.position.weight, std=0.02)

    @property
    def dtype(self) -> torch.dtype:
        return self.action_position.dtype

    # -- prefix ---------------------------------------------------------------------------------

    def encode(self, batch: PackedBatch | PaddedBatch) -> Pi0Context:
        """Run the prefix stream once; returns every layer's prefix keys and values and the attention."""
        b = batch.packed if isinstance(batch, PaddedBatch) else batch
        check_batch(self.config, b, has_history_encoder=self.history_encoder is not None)
        c, n, dev = self.config, b.num_samples, b.cu_seqlens.device
        x = BackboneTokens(self.vision, self.text, self.position, self.history_encoder, c.d_model)(b)
        state = self.state_encoder(b.state.to(x.dtype)[:, None, :], b.embodiment_id).to(x.dtype)  # [n, 1, d]
        attend: PrefixAttend
        if isinstance(batch, PaddedBatch):
            # the padded grid plus one column for the state token (attention is order-free over keys)
            mask = batch.key_padding_mask
            grid = x[batch.token_index] * mask[..., None].to(x.dtype)
            xp = torch.cat([grid, state], dim=1)
            attend = DensePrefixLM(torch.cat([mask, mask.new_ones(n, 1)], dim=1))
        else:
            seqlens = b.seqlens
            steps = torch.arange(n + 1, device=dev, dtype=torch.int32)
            layout = prefix_lm_layout(
                b.cu_seqlens + steps * (1 + c.action_horizon),
                seqlens + 1,
                max_seqlen=b.max_seqlen + 1 + c.action_horizon,
            )
            # sample i's tokens shift down by the i state tokens before them; its state token closes its prefix
            sample = torch.repeat_interleave(torch.arange(n, device=dev), seqlens, output_size=x.shape[0])
            rows = torch.arange(x.shape[0], device=dev) + sample
            state_rows = b.cu_seqlens[1:].long() + torch.arange(n, device=dev)
            xp = x.new_zeros(x.shape[0] + n, c.d_model).index_copy(0, rows, x).index_copy(0, state_rows, state[:, 0])
            attend = VarlenPrefixLM(layout, c.attention_backend)
        kv = []
        for layer in self.prefix_layers:
            xp, k, v = layer(xp, attend)
            kv.append((k, v))
        return Pi0Context(kv, attend, packed=not isinstance(batch, PaddedBatch))

    # -- action expert --------------------------------------------------------------------------

    def sample_time(self, n: int, device: torch.device, generator: torch.Generator | None = None) -> torch.Tensor:
        """GR00T's flow timesteps, float32 [n] (`flow.sample_flow_time`)."""
        return sample_flow_time(self.config, n, device, generator)

    def velocity(self, ctx: Pi0Context, x_t: torch.Tensor, t: torch.Tensor, embodiment: torch.Tensor) -> torch.Tensor:
        """Predicted velocity [n, H, A] of noisy actions `x_t` at flow time `t` [n]."""
        c = self.config
        step = (t * c.num_timestep_buckets).long()
        temb = self.timestep(step, x_t.dtype)
        h = self.action_encoder(x_t, step, embodiment) + self.action_position.to(x_t.dtype)
        for layer, kv in zip(self.expert_layers, ctx.kv, strict=True):
            h = layer(h, temb, kv, ctx)
        return self.action_decoder(self.expert_norm(h), embodiment)

    def forward(
        self,
        batch: PackedBatch | PaddedBatch,
        *,
        noise: torch.Tensor | None = None,
        t: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> ModelOutput:
        """Flow-matching training loss on `batch` (the same contract as `GrootModel.forward`)."""
        b = batch.packed if isinstance(batch, PaddedBatch) else batch
        ctx = self.encode(batch)
        action = b.action.to(self.dtype)
        if noise is None:
            noise = torch.randn(action.shape, device=action.device, dtype=action.dtype, generator=generator)
        if t is None:
            t = self.sample_time(b.num_samples, action.device, generator)
        tt = t.to(action.dtype)[:, None, None]
        x_t = (1 - tt) * noise.to(action.dtype) + tt * action
        pred = self.velocity(ctx, x_t, t, b.embodiment_id)
        return ModelOutput(loss=flow_loss(pred, action - noise.to(action.dtype), b.action_mask), pred_velocity=pred)

    @torch.no_grad()
    def get_action(
        self,
        batch: PackedBatch | PaddedBatch,
        num_steps: int | None = None,
        *,
        noise: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Action chunks [n, H, max_action_dim]: Euler steps of the expert over the cached prefix.

        Raises:
            ValueError: num_steps < 1.
        """
        b = batch.packed if isinstance(batch, PaddedBatch) else batch
        ctx = self.encode(batch)
        return euler_actions(
            lambda x, t: self.velocity(ctx, x, t, b.embodiment_id),
            (b.num_samples, self.config.action_horizon, self.config.max_action_dim),
            num_steps if num_steps is not None else self.config.num_inference_steps,
            dtype=self.dtype,
            device=b.state.device,
            noise=noise,
            generator=generator,
        )
