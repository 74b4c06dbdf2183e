"""The diffusion transformer (DiT) of the action head, GR00T style.

Each sample contributes the same number of action-side tokens (state, future tokens, noisy
actions). Blocks alternate between cross-attention to the sample's backbone tokens (even blocks)
and self-attention among its action-side tokens (odd blocks), as GR00T's `interleave_self_attention`
does. The flow timestep conditions every block through adaptive layer norm: a LayerNorm without
affine weights whose scale and shift come from a projection of the timestep embedding, so the
same weights denoise differently at different noise levels. A final AdaLN and a projection map
to `output_dim`.

Each block's residual branches (the attention and MLP output projections) start at zero, so the
untrained DiT passes its input tokens through unchanged. With random branches, the first
cross-attention added one context average to every action-side token of a sample; under a high
learning rate that shared vector grew within a few dozen steps until it swamped the state token
after LayerNorm, and the self-attention never learned to read the state (the small model then
predicted noise). Starting from identity lets each branch grow only as far as it lowers the loss,
the same reasoning as DiT's adaLN-Zero, without adding its gates to GR00T's block.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from robolake.training.encoders import sinusoidal_embedding
from robolake.training.layers import MLP, Attend, Attention

__all__ = ["DiT", "DiTBlock", "TimestepEncoder"]


class TimestepEncoder(nn.Module):
    """Discretised timestep -> [n, dim] via sinusoidal features and a two-layer MLP."""

    def __init__(self, dim: int, freq_dim: int = 256) -> None:
        super().__init__()
        self.freq_dim = freq_dim
        self.fc1 = nn.Linear(freq_dim, dim)
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, timestep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        emb = sinusoidal_embedding(timestep, self.freq_dim).to(dtype)
        return self.fc2(F.silu(self.fc1(emb)))


class DiTBlock(nn.Module):
    """AdaLN-conditioned attention (cross or self) followed by a plain pre-norm MLP."""

    def __init__(self, dim: int, heads: int, *, cross: bool, context_dim: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.cross = cross
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False)
        self.ada = nn.Linear(dim, 2 * dim)
        self.attn = Attention(dim, heads, kv_dim=context_dim if cross else None)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, int(dim * mlp_ratio))
        for branch_out in (self.attn.out, self.mlp.fc2):
            nn.init.zeros_(branch_out.weight)
            nn.init.zeros_(branch_out.bias)

    def forward(
        self,
        x: torch.Tensor,
        temb: torch.Tensor,
        context: torch.Tensor,
        self_attend: Attend,
        cross_attend: Attend,
    ) -> torch.Tensor:
        scale, shift = self.ada(F.silu(temb)).unsqueeze(1).chunk(2, dim=-1)
        h = self.norm1(x) * (1 + scale) + shift
        if self.cross:
            x = x + self.attn(h, cross_attend, context)
        else:
            x = x + self.attn(h, self_attend)
        return x + self.mlp(self.norm2(x))


class DiT(nn.Module):
    """Action-side tokens [n, L, dim] + timestep [n] + backbone context -> [n, L, output_dim]."""

    def __init__(self, *, dim: int, layers: int, heads: int, context_dim: int, output_dim: int) -> None:
        super().__init__()
        self.timestep = TimestepEncoder(dim)
        self.blocks = nn.ModuleList(
            DiTBlock(dim, heads, cross=(i % 2 == 0), context_dim=context_dim) for i in range(layers)
        )
        self.norm_out = nn.LayerNorm(dim, elementwise_affine=False)
        self.proj_out_1 = nn.Linear(dim, 2 * dim)
        self.proj_out_2 = nn.Linear(dim, output_dim)

    def forward(
        self,
        x: torch.Tensor,
        timestep: torch.Tensor,
        context: torch.Tensor,
        self_attend: Attend,
        cross_attend: Attend,
    ) -> torch.Tensor:
        temb = self.timestep(timestep, x.dtype)
        for block in self.blocks:
            x = block(x, temb, context, self_attend, cross_attend)
        shift, scale = self.proj_out_1(F.silu(temb)).unsqueeze(1).chunk(2, dim=-1)
        return self.proj_out_2(self.norm_out(x) * (1 + scale) + shift)
