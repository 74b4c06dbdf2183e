"""Transformer building blocks shared by the backbone, the vision encoder and the DiT head.

Attention layers do not know the layout. They take an `attend(q, k, v)` callable that owns it: a
`VarlenAttend` for packed tokens ([T, heads, dim] with `cu_seqlens`) or a `DenseAttend` for a
padded grid ([B, L, heads, dim] with a key padding mask). Every Linear, norm and MLP is written
for an arbitrary leading shape, so the same weights run the packed and the padded layout and
compute the same numbers on real tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from robolake.training.attention import (
    VarlenPlan,
    padded_attention,
    plan_varlen,
    resolve_backend,
    varlen_attention,
)

__all__ = ["Attend", "Attention", "DenseAttend", "MLP", "TransformerBlock", "VarlenAttend"]

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class VarlenAttend:
    """Attention within packed segments; q/k/v may carry any leading shape that flattens to tokens.

    The `cpu` backend's gather plan is built on first use and reused by every layer.
    """

    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int
    backend: str = "auto"
    causal: bool = False
    _plan: VarlenPlan | None = field(default=None, repr=False)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        shape = q.shape
        q, k, v = (
            q.reshape(-1, *shape[-2:]),
            k.reshape(-1, *k.shape[-2:]),
            v.reshape(-1, *v.shape[-2:]),
        )
        plan = None
        if resolve_backend(q.device, q.dtype, self.backend) == "cpu":
            if self._plan is None:
                self._plan = plan_varlen(self.cu_seqlens_q, self.cu_seqlens_k, q.device, causal=self.causal)
            plan = self._plan
        out = varlen_attention(
            q,
            k,
            v,
            self.cu_seqlens_q,
            self.cu_seqlens_k,
            self.max_seqlen_q,
            self.max_seqlen_k,
            causal=self.causal,
            backend=self.backend,
            plan=plan,
        )
        return out.reshape(shape)


@dataclass
class DenseAttend:
    """Dense attention over [B, L, heads, dim] with an optional key padding mask [B, Lk]."""

    key_padding_mask: torch.Tensor | None = None

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return padded_attention(q, k, v, self.key_padding_mask)


class Attention(nn.Module):
    """Multi-head attention with separate q and kv projections (kv from `context` when given)."""

    def __init__(self, dim: int, heads: int, kv_dim: int | None = None) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads, self.head_dim = heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(kv_dim or dim, 2 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, attend: Attend, context: torch.Tensor | None = None) -> torch.Tensor:
        src = x if context is None else context
        q = self.q(x).unflatten(-1, (self.heads, self.head_dim))
        k, v = self.kv(src).unflatten(-1, (2, self.heads, self.head_dim)).unbind(-3)
        return self.out(attend(q, k, v).flatten(-2))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class TransformerBlock(nn.Module):
    """Pre-norm self-attention block."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor, attend: Attend) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), attend)
        return x + self.mlp(self.norm2(x))
