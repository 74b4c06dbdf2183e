"""Input encoders: camera views, instruction bytes, and embodiment-specific state/action MLPs.

Robots in one batch differ in what their state and action vectors mean, so GR00T keeps one set of
weights per embodiment ("category") for the small MLPs at the edges of the model and shares the
transformer in between. `CategorySpecificLinear` stores weights as [num_embodiments, in, out] and
gathers each sample's slice by embodiment id, so one batched matmul serves a mixed batch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from robolake.training.layers import DenseAttend, TransformerBlock

__all__ = [
    "CategorySpecificLinear",
    "CategorySpecificMLP",
    "MultiEmbodimentActionEncoder",
    "StreamTokenEncoder",
    "VisionEncoder",
    "sinusoidal_embedding",
]


def sinusoidal_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """[..., dim] sin/cos features of `t` (any shape; integer timesteps or positions)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[..., None] * freqs
    emb = torch.cat([torch.sin(args), torch.cos(args)], dim=-1)
    return F.pad(emb, (0, dim % 2))


class CategorySpecificLinear(nn.Module):
    """A Linear layer with one weight matrix per category, selected per sample."""

    def __init__(self, num_categories: int, in_features: int, out_features: int) -> None:
        super().__init__()
        # Unit gain (std 1/sqrt(in)), not GR00T's fixed 0.02: 0.02 is about 1/sqrt(in) only at
        # GR00T's widths (1024-1536); at tiny widths every layer shrank its input ~6x, so the state
        # token and the decoded velocity started ~1e-2 and the head learned nothing in time.
        self.weight = nn.Parameter(torch.randn(num_categories, in_features, out_features) / math.sqrt(in_features))
        self.bias = nn.Parameter(torch.zeros(num_categories, out_features))

    def forward(self, x: torch.Tensor, category: torch.Tensor) -> torch.Tensor:
        """x [n, L, in], category int64 [n] -> [n, L, out]."""
        w = self.weight[category].to(x.dtype)
        return torch.baddbmm(self.bias[category].to(x.dtype).unsqueeze(1), x, w)


class CategorySpecificMLP(nn.Module):
    def __init__(self, num_categories: int, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__()
        self.layer1 = CategorySpecificLinear(num_categories, in_features, hidden)
        self.layer2 = CategorySpecificLinear(num_categories, hidden, out_features)

    def forward(self, x: torch.Tensor, category: torch.Tensor) -> torch.Tensor:
        return self.layer2(F.relu(self.layer1(x, category)), category)


class StreamTokenEncoder(nn.Module):
    """One small MLP per recorded stream over a history token's (values, time-offset features).

    History tokens are many (tens per sample) and streams few, so tokens are grouped by stream and
    each group goes through its own MLP as one matmul; `CategorySpecificLinear`'s per-row weight
    gather would copy a weight matrix per token.
    """

    def __init__(self, num_streams: int, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__()
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(in_features, hidden), nn.GELU(), nn.Linear(hidden, out_features))
            for _ in range(num_streams)
        )
        self.out_features = out_features

    def forward(self, x: torch.Tensor, stream: torch.Tensor) -> torch.Tensor:
        """x [T, in], stream int64 [T] -> [T, out]."""
        out = x.new_zeros(x.shape[0], self.out_features)
        for k, mlp in enumerate(self.mlps):
            idx = torch.nonzero(stream == k, as_tuple=True)[0]
            if idx.numel():
                out = out.index_copy(0, idx, mlp(x[idx]).to(out.dtype))
        return out


class MultiEmbodimentActionEncoder(nn.Module):
    """Noisy action chunk + flow timestep -> action tokens, with per-embodiment weights (GR00T)."""

    def __init__(self, action_dim: int, dim: int, num_categories: int) -> None:
        super().__init__()
        self.dim = dim
        self.w1 = CategorySpecificLinear(num_categories, action_dim, dim)
        self.w2 = CategorySpecificLinear(num_categories, 2 * dim, dim)
        self.w3 = CategorySpecificLinear(num_categories, dim, dim)

    def forward(self, actions: torch.Tensor, timestep: torch.Tensor, category: torch.Tensor) -> torch.Tensor:
        """actions [n, H, A], timestep int64 [n] (discretised), category [n] -> [n, H, dim]."""
        a = self.w1(actions, category)
        tau = sinusoidal_embedding(timestep, self.dim).to(a.dtype)[:, None, :].expand_as(a)
        x = F.silu(self.w2(torch.cat([a, tau], dim=-1), category))
        return self.w3(x, category)


class VisionEncoder(nn.Module):
    """Patch-embedding ViT per camera view, pooled to `tokens_per_view` tokens of width `out_dim`.

    Every view has the same number of patches, so its transformer runs dense without a mask and
    costs the same in the packed and the padded layout.
    """

    def __init__(
        self,
        *,
        image_size: int,
        patch_size: int,
        tokens_per_view: int,
        dim: int,
        layers: int,
        heads: int,
        out_dim: int,
    ) -> None:
        super().__init__()
        self.grid = image_size // patch_size
        self.image_size = image_size
        self.tokens_per_view = tokens_per_view
        self.patch = nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size)
        self.pos = nn.Parameter(0.02 * torch.randn(self.grid * self.grid, dim))
        self.blocks = nn.ModuleList(TransformerBlock(dim, heads, 4.0) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, out_dim)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """uint8 [V, 3, H, W] -> [V, tokens_per_view, out_dim]."""
        x = pixels.to(self.pos.dtype) / 127.5 - 1.0
        if x.shape[-1] != self.image_size or x.shape[-2] != self.image_size:
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos  # [V, P, dim]
        attend = DenseAttend(None)
        for block in self.blocks:
            x = block(x, attend)
        x = self._pool(self.norm(x))
        return self.proj(x)

    def _pool(self, x: torch.Tensor) -> torch.Tensor:
        t, p = self.tokens_per_view, x.shape[1]
        if t == p:
            return x
        side = math.isqrt(t)
        if side * side == t and self.grid % side == 0:
            g = x.transpose(1, 2).unflatten(-1, (self.grid, self.grid))
            return F.avg_pool2d(g, self.grid // side).flatten(2).transpose(1, 2)
        return F.adaptive_avg_pool1d(x.transpose(1, 2), t).transpose(1, 2)
