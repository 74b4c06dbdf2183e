"""Prefix-LM attention over packed samples: a bidirectional prefix and a causal suffix per sample.

A pi0-style policy gives every sample one joint sequence: its **prefix** (camera views, text,
stream history, state) followed by its **suffix** (the action expert's tokens). Prefix tokens
attend to every prefix token of their own sample; suffix token j attends to its sample's whole
prefix and to suffix tokens 0..j. Written as one mask over sample i's joint positions,
`allowed(q, k) = same_sample(q, k) and (k < prefix_len_i or k <= q)`; a prefix query never sees
a suffix key because every suffix key lies after it. Nothing crosses a sample boundary.

`prefix_lm_layout(cu_seqlens, prefix_lengths)` is the one function that turns the joint sample
boundaries and the per-sample prefix lengths into a `PrefixLMLayout`: the prefix boundaries, the
suffix boundaries, the joint key boundaries the suffix attends over, and the index that
interleaves prefix and suffix rows back into the joint order. Every backend reads only it.

Why two calls instead of one masked call: because a prefix never attends to its suffix, the mask
factorises exactly into (1) varlen self-attention over the prefixes, bidirectional, and (2) the
suffix queries against their sample's joint keys (prefix keys, then suffix keys) with a causal
mask aligned to the bottom-right corner, so suffix query j sees keys <= prefix_len + j. Both are
ordinary varlen calls, so every backend of `attention.py` serves them (flash-attn's and PyTorch's
varlen kernels on CUDA, the exact grouped `cpu` path anywhere) and they cost exactly the allowed
score entries, sum(P_i^2 + S_i (P_i + S_i)), nothing for the masked-out prefix-to-suffix block.
The split also gives the inference KV cache for free: the prefix keys and values of every layer
are computed once per observation and each denoising step runs only the suffix call.

`flex` (CUDA, `torch.nn.attention.flex_attention`) runs the same two calls with explicit
`mask_mod`s (sample equality; prefix-or-causal) compiled into block-sparse masks, so it does not
depend on how a kernel aligns its causal diagonal when query and key lengths differ. Without
CUDA it runs flex_attention's unfused reference (exact, dense per call, forward only: for tests).

`DensePrefixLM` is the padded baseline ([n, L] grids with a key padding mask), computing on every
padded slot exactly as a padded trainer would; on real tokens it gives the same numbers.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

import torch
import torch.nn.functional as F

from robolake.training.attention import VarlenPlan, plan_varlen, resolve_backend, varlen_attention

__all__ = ["PREFIX_LM_BACKENDS", "DensePrefixLM", "PrefixLMLayout", "VarlenPrefixLM", "prefix_lm_layout"]

PREFIX_LM_BACKENDS = ("auto", "flash", "torch_varlen", "flex", "cpu")


@lru_cache(maxsize=1)
def _has_flex() -> bool:
    return importlib.util.find_spec("torch.nn.attention.flex_attention") is not None


@dataclass(frozen=True)
class PrefixLMLayout:
    """Where the prefix and suffix of every packed sample lie; built only by `prefix_lm_layout`.

    Three token axes are involved. The **joint** axis holds sample i's prefix then its suffix at
    `cu_seqlens[i]`. The **prefix** axis holds the prefixes alone (`cu_prefix`), the **suffix**
    axis the suffixes alone (`cu_suffix`); models keep the two streams apart because their
    weights differ (pi0's backbone and action expert).

    Attributes:
        cu_seqlens: int32 [n+1] joint boundaries (prefix + suffix of each sample).
        prefix_lengths: int64 [n] prefix tokens of each sample.
        cu_prefix: int32 [n+1] boundaries on the prefix axis.
        cu_suffix: int32 [n+1] boundaries on the suffix axis.
        max_seqlen: Longest joint sample.
        max_prefix: Longest prefix.
        max_suffix: Longest suffix.
        joint_index: int64 [total], for each joint position its row in cat([prefix axis, suffix axis]).
    """

    cu_seqlens: torch.Tensor
    prefix_lengths: torch.Tensor
    cu_prefix: torch.Tensor
    cu_suffix: torch.Tensor
    max_seqlen: int
    max_prefix: int
    max_suffix: int
    joint_index: torch.Tensor

    @property
    def num_samples(self) -> int:
        return int(self.cu_seqlens.shape[0]) - 1

    @property
    def suffix_lengths(self) -> torch.Tensor:
        return (self.cu_suffix[1:] - self.cu_suffix[:-1]).long()

    def joint(self, prefix: torch.Tensor, suffix: torch.Tensor) -> torch.Tensor:
        """Rows of the prefix axis and the suffix axis interleaved into the joint order."""
        return torch.cat([prefix, suffix.to(prefix.dtype)])[self.joint_index]

    def dense_mask(self) -> torch.Tensor:
        """bool [total, total] of the joint axis, True where attention is allowed.

        O(total^2): the definition the tests check every backend against, never used to train.
        """
        lengths = (self.cu_seqlens[1:] - self.cu_seqlens[:-1]).long()
        total = int(lengths.sum())
        sample = torch.repeat_interleave(torch.arange(lengths.shape[0]), lengths.cpu(), output_size=total)
        pos = torch.arange(total) - self.cu_seqlens.cpu().long()[sample]
        prefix_len = self.prefix_lengths.cpu()[sample]
        same = sample[:, None] == sample[None, :]
        return same & ((pos[None, :] < prefix_len[None, :]) | (pos[None, :] <= pos[:, None]))


def prefix_lm_layout(
    cu_seqlens: torch.Tensor, prefix_lengths: torch.Tensor, *, max_seqlen: int | None = None
) -> PrefixLMLayout:
    """The layout of packed samples whose first `prefix_lengths[i]` tokens form a prefix.

    Args:
        cu_seqlens: int32 [n+1] joint sample boundaries (from `cu_seqlens_from_lengths`).
        prefix_lengths: int [n], 0 <= prefix_lengths[i] <= length of sample i.
        max_seqlen: Longest joint sample, when the caller knows it (saves a host read).

    Raises:
        ValueError: the boundaries are malformed, or a prefix is negative or longer than its
            sample (checked when the tensors are on the CPU; on CUDA a model builds both from
            the batch, which keeps them consistent by construction).
    """
    if cu_seqlens.ndim != 1 or prefix_lengths.ndim != 1 or prefix_lengths.shape[0] != cu_seqlens.shape[0] - 1:
        raise ValueError(
            f"need cu_seqlens [n+1] and prefix_lengths [n], got {tuple(cu_seqlens.shape)} and "
            f"{tuple(prefix_lengths.shape)}"
        )
    dev = cu_seqlens.device
    cu = cu_seqlens.long()
    lengths = cu[1:] - cu[:-1]
    prefix = prefix_lengths.to(device=dev, dtype=torch.long)
    suffix = lengths - prefix
    if dev.type == "cpu":
        if cu.shape[0] == 0 or int(cu[0]) != 0 or bool((lengths < 0).any()):
            raise ValueError(f"cu_seqlens must start at 0 and never decrease, got {cu.tolist()[:8]}...")
        if bool((prefix < 0).any()) or bool((suffix < 0).any()):
            raise ValueError(
                "every prefix length must lie in 0..its sample's length; got prefix lengths "
                f"{prefix.tolist()[:8]} for sample lengths {lengths.tolist()[:8]}"
            )
    zero = cu.new_zeros(1)
    cu_prefix = torch.cat([zero, torch.cumsum(prefix, 0)])
    cu_suffix = torch.cat([zero, torch.cumsum(suffix, 0)])
    total = int(cu[-1])
    n = lengths.shape[0]
    sample = torch.repeat_interleave(torch.arange(n, device=dev), lengths, output_size=total)
    pos = torch.arange(total, device=dev) - cu[:-1][sample]
    in_prefix = pos < prefix[sample]
    prefix_rows = cu_prefix[:-1][sample] + pos
    suffix_rows = int(cu_prefix[-1]) + cu_suffix[:-1][sample] + pos - prefix[sample]
    joint_index = torch.where(in_prefix, prefix_rows, suffix_rows)
    if max_seqlen is None:
        max_seqlen = int(lengths.max()) if n else 0
    return PrefixLMLayout(
        cu_seqlens=cu.to(torch.int32),
        prefix_lengths=prefix,
        cu_prefix=cu_prefix.to(torch.int32),
        cu_suffix=cu_suffix.to(torch.int32),
        max_seqlen=max_seqlen,
        max_prefix=int(prefix.max()) if n else 0,
        max_suffix=int(suffix.max()) if n else 0,
        joint_index=joint_index,
    )


def resolve_prefix_lm_backend(device: torch.device, dtype: torch.dtype, backend: str = "auto") -> str:
    """The backend `VarlenPrefixLM` uses: `auto` is flash, then torch_varlen, on CUDA in fp16/bf16
    (as for self-attention), and the exact `cpu` path elsewhere; `flex` only when asked for.

    Raises:
        ValueError: unknown backend, or `flex` without flex_attention.
        ImportError: as `attention.resolve_backend` for flash / torch_varlen.
    """
    if backend not in PREFIX_LM_BACKENDS:
        raise ValueError(f"unknown prefix-LM attention backend {backend!r}; choose one of {PREFIX_LM_BACKENDS}")
    if backend == "flex":
        if not _has_flex():
            raise ValueError("backend 'flex' needs torch.nn.attention.flex_attention (torch >= 2.5)")
        return "flex"
    return resolve_backend(device, dtype, backend)


@dataclass
class VarlenPrefixLM:
    """The two attention calls of a prefix-LM layer over packed samples.

    `prefix(q, k, v)`: prefix-axis tensors [P, heads, dim] -> [P, heads, dim], bidirectional.
    `suffix(q, k_prefix, v_prefix, k, v)`: suffix queries [S, heads, dim] against their sample's
    prefix keys and the causal suffix keys -> [S, heads, dim]. The `cpu` backend's gather plans
    and flex's block masks are built on first use and reused by every layer.
    """

    layout: PrefixLMLayout
    backend: str = "auto"
    _plans: dict[str, Any] = field(default_factory=dict, repr=False)

    def _chosen(self, q: torch.Tensor) -> str:
        return resolve_prefix_lm_backend(q.device, q.dtype, self.backend)

    def prefix(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        lay = self.layout
        chosen = self._chosen(q)
        if chosen == "flex":
            return self._flex(q, k, v, "prefix")
        plan = self._plan("prefix", lay.cu_prefix, lay.cu_prefix, False, q.device) if chosen == "cpu" else None
        return varlen_attention(
            q, k, v, lay.cu_prefix, lay.cu_prefix, lay.max_prefix, lay.max_prefix, backend=chosen, plan=plan
        )

    def suffix(
        self, q: torch.Tensor, k_prefix: torch.Tensor, v_prefix: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        lay = self.layout
        kj, vj = lay.joint(k_prefix, k), lay.joint(v_prefix, v)
        chosen = self._chosen(q)
        if chosen == "flex":
            return self._flex(q, kj, vj, "suffix")
        plan = self._plan("suffix", lay.cu_suffix, lay.cu_seqlens, True, q.device) if chosen == "cpu" else None
        return varlen_attention(
            q,
            kj.to(q.dtype),
            vj.to(q.dtype),
            lay.cu_suffix,
            lay.cu_seqlens,
            lay.max_suffix,
            lay.max_seqlen,
            causal=True,  # bottom-right: suffix query j sees keys <= prefix_len + j
            backend=chosen,
            plan=plan,
        )

    def _plan(
        self, name: str, cu_q: torch.Tensor, cu_k: torch.Tensor, causal: bool, device: torch.device
    ) -> VarlenPlan:
        if name not in self._plans:
            self._plans[name] = plan_varlen(cu_q, cu_k, device, causal=causal)
        plan: VarlenPlan = self._plans[name]
        return plan

    def _flex(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, name: str) -> torch.Tensor:
        flex_attention = _flex_function(q.device.type)
        mask = self._plans.get("flex_" + name)
        if mask is None:
            mask = self._plans["flex_" + name] = _flex_block_mask(self.layout, name, q.device)
        # [1, heads, tokens, dim]; a query with no allowed key comes back as zeros, as on the other paths
        out = cast(
            torch.Tensor,
            flex_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], block_mask=mask),
        )
        return out[0].transpose(0, 1)


@lru_cache(maxsize=2)
def _flex_function(device_type: str) -> Any:
    """flex_attention, compiled on CUDA (fused block-sparse kernels; dynamic shapes, since every batch
    has its own lengths). Elsewhere its eager reference, which has no backward on the CPU."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=True) if device_type == "cuda" else flex_attention


def _flex_block_mask(layout: PrefixLMLayout, name: str, device: torch.device) -> Any:
    """flex_attention's block mask of the prefix call or the suffix call of `layout`."""
    from torch.nn.attention.flex_attention import create_block_mask

    lay = layout
    joint_len = (lay.cu_seqlens[1:] - lay.cu_seqlens[:-1]).long().to(device)
    n = joint_len.shape[0]
    ids = torch.arange(n, device=device)
    if name == "prefix":
        plen = lay.prefix_lengths.to(device)
        total = int(plen.sum())
        q_sample = k_sample = torch.repeat_interleave(ids, plen, output_size=total)

        def prefix_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return q_sample[q_idx] == k_sample[kv_idx]

        return create_block_mask(prefix_mod, None, None, total, total, device=str(device))
    slen = lay.suffix_lengths.to(device)
    sq = int(slen.sum())
    sk = int(joint_len.sum())
    q_sample = torch.repeat_interleave(ids, slen, output_size=sq)
    k_sample = torch.repeat_interleave(ids, joint_len, output_size=sk)
    q_pos = torch.arange(sq, device=device) - lay.cu_suffix.long().to(device)[q_sample]  # rank within the suffix
    k_pos = torch.arange(sk, device=device) - lay.cu_seqlens.long().to(device)[k_sample]  # joint position
    plen = lay.prefix_lengths.to(device)

    def suffix_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        same = q_sample[q_idx] == k_sample[kv_idx]
        return same & (k_pos[kv_idx] <= plen[q_sample[q_idx]] + q_pos[q_idx])

    return create_block_mask(suffix_mod, None, None, sq, sk, device=str(device))


@dataclass
class DensePrefixLM:
    """The padded baseline: prefixes as an [n, Lp] grid with a key padding mask, suffixes [n, Ls].

    `prefix(q, k, v)` takes [n, Lp, heads, dim]; `suffix(q, k_prefix, v_prefix, k, v)` takes
    suffix tensors [n, Ls, heads, dim] and the prefix grid's keys and values. Every suffix has the
    same length Ls here (pi0's action horizon).
    """

    prefix_mask: torch.Tensor  # bool [n, Lp], True on real prefix tokens

    def prefix(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        mask = self.prefix_mask[:, None, None, :]
        return _sdpa(q, k, v, mask)

    def suffix(
        self, q: torch.Tensor, k_prefix: torch.Tensor, v_prefix: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        ls = q.shape[1]
        causal = torch.ones(ls, ls, dtype=torch.bool, device=q.device).tril()
        mask = torch.cat(
            [self.prefix_mask[:, None, :].expand(-1, ls, -1), causal[None].expand(q.shape[0], -1, -1)], dim=2
        )
        kj = torch.cat([k_prefix.to(q.dtype), k], dim=1)
        vj = torch.cat([v_prefix.to(q.dtype), v], dim=1)
        return _sdpa(q, kj, vj, mask[:, None])


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SDPA over [B, L, heads, dim]; rows whose mask allows no key are zeros (not NaN)."""
    has_key = mask.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask | ~has_key
    )
    out = out * has_key.to(out.dtype)
    return out.transpose(1, 2)
