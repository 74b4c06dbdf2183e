"""Variable-length attention: one interface, several backends chosen at run time.

A packed batch lays n samples end to end on one token axis; `cu_seqlens` marks where each starts.
Attention must never cross a boundary, and it must not pay for tokens that are not there. A dense
[T, T] block-diagonal mask would be correct but costs O(T^2) memory and compute, which is exactly
the waste packing removes, so no backend here builds one.

Backends:

- `flash`: `flash_attn.flash_attn_varlen_func`, CUDA, fp16/bf16, when flash-attn is installed.
- `torch_varlen`: PyTorch's own `torch.nn.attention.varlen.varlen_attn` (flash kernels shipped with
  torch), CUDA, fp16/bf16.
- `cpu`: an exact path that runs anywhere (CPU or CUDA, any float dtype). Segments with the same
  (len_q, len_k) are gathered into one [G, heads, L, D] stack through index tensors, attended with
  a single `F.scaled_dot_product_attention` call, and scattered back. A batch of n samples costs
  one kernel call per distinct length pair rather than one per sample, and the plan (the gather
  indices) is built once per batch and reused by every layer through `plan=`.

`auto` picks flash, then torch_varlen, on CUDA with a half-precision input, and `cpu` otherwise.

Self-attention passes the same boundaries for q and k. Cross-attention passes different ones: the
action tokens of sample i (boundaries `cu_seqlens_q`) attend only to sample i's backbone tokens
(`cu_seqlens_k`). A q segment whose k segment is empty outputs zeros, on every backend.

`causal=True` follows flash-attn's convention: the mask is aligned to the bottom-right corner, so
query i of a segment sees keys j <= i + (len_k - len_q); for self-attention that is the usual
lower triangle.

`padded_attention` is the dense baseline ([B, L, heads, D] with a key padding mask) that the padded
layout uses; it computes on every padded slot, which is what packing is measured against.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "ATTENTION_BACKENDS",
    "VarlenPlan",
    "available_backends",
    "padded_attention",
    "plan_varlen",
    "resolve_backend",
    "varlen_attention",
]

ATTENTION_BACKENDS = ("auto", "flash", "torch_varlen", "cpu")
_HALF = (torch.float16, torch.bfloat16)


@lru_cache(maxsize=1)
def _has_flash_attn() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


@lru_cache(maxsize=1)
def _has_torch_varlen() -> bool:
    return importlib.util.find_spec("torch.nn.attention.varlen") is not None


def available_backends(device: torch.device | str = "cpu") -> tuple[str, ...]:
    """Backends that can run on `device` in this environment (`cpu` always can)."""
    found = []
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        if _has_flash_attn():
            found.append("flash")
        if _has_torch_varlen():
            found.append("torch_varlen")
    found.append("cpu")
    return tuple(found)


def resolve_backend(device: torch.device, dtype: torch.dtype, backend: str = "auto") -> str:
    """The concrete backend `varlen_attention` uses for inputs on `device` with `dtype`.

    Raises:
        ValueError: `backend` is not one of ATTENTION_BACKENDS, or a CUDA backend was asked for
            with inputs it cannot take (not on CUDA, or not fp16/bf16).
        ImportError: `flash` was asked for and flash-attn is not installed.
    """
    if backend not in ATTENTION_BACKENDS:
        raise ValueError(f"unknown attention backend {backend!r}; choose one of {ATTENTION_BACKENDS}")
    if backend == "auto":
        if device.type == "cuda" and dtype in _HALF:
            if _has_flash_attn():
                return "flash"
            if _has_torch_varlen():
                return "torch_varlen"
        return "cpu"
    if backend in ("flash", "torch_varlen"):
        if device.type != "cuda" or dtype not in _HALF:
            raise ValueError(
                f"backend {backend!r} needs fp16/bf16 tensors on CUDA, got {dtype} on {device}; "
                "use backend='cpu' (exact, any device) or 'auto'"
            )
        if backend == "flash" and not _has_flash_attn():
            raise ImportError("backend 'flash' needs flash-attn: pip install 'robolake[gpu]'")
        if backend == "torch_varlen" and not _has_torch_varlen():
            raise ImportError("backend 'torch_varlen' needs torch>=2.10 (torch.nn.attention.varlen)")
    return backend


@dataclass(frozen=True)
class _Group:
    len_q: int
    len_k: int
    q_index: torch.Tensor  # int64 [G, len_q], packed q token of each slot
    k_index: torch.Tensor | None  # int64 [G, len_k]; None when the whole k axis is one contiguous view
    contiguous: bool  # q_index covers the whole q axis in order ([G*len_q] == arange)


@dataclass(frozen=True)
class VarlenPlan:
    """Gather indices for the `cpu` backend, built once per batch by `plan_varlen`.

    Attributes:
        groups: One entry per distinct non-empty (len_q, len_k) pair.
        total_q: Tokens on the q axis.
        total_k: Tokens on the k axis.
        num_segments: Number of segments (n).
    """

    groups: tuple[_Group, ...]
    total_q: int
    total_k: int
    num_segments: int


def _check_cu(name: str, cu: np.ndarray) -> None:
    if cu.ndim != 1 or cu.size < 1 or cu[0] != 0 or (np.diff(cu) < 0).any():
        raise ValueError(f"{name} must be a 1-D non-decreasing vector starting at 0, got {cu.tolist()[:8]}...")


def plan_varlen(
    cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, device: torch.device | str | None = None
) -> VarlenPlan:
    """Group the segments of a varlen batch by (len_q, len_k) for the `cpu` backend.

    Reads the boundaries on the host once (one device sync on CUDA); reuse the plan across layers.

    Raises:
        ValueError: the boundaries are malformed or disagree in segment count.
    """
    cq = cu_seqlens_q.detach().cpu().numpy().astype(np.int64)
    ck = cu_seqlens_k.detach().cpu().numpy().astype(np.int64)
    _check_cu("cu_seqlens_q", cq)
    _check_cu("cu_seqlens_k", ck)
    if cq.size != ck.size:
        raise ValueError(f"cu_seqlens_q has {cq.size - 1} segments but cu_seqlens_k has {ck.size - 1}")
    dev = torch.device(device) if device is not None else cu_seqlens_q.device
    lq, lk = np.diff(cq), np.diff(ck)
    n = lq.size
    groups: list[_Group] = []
    if n:
        key = lq * (int(lk.max()) + 1) + lk
        uniq, inverse = np.unique(key, return_inverse=True)
        for g in range(uniq.size):
            members = np.flatnonzero(inverse == g)
            len_q, len_k = int(lq[members[0]]), int(lk[members[0]])
            if len_q == 0 or len_k == 0:
                continue  # empty q: nothing to compute; empty k: rows stay zero
            q_idx = cq[members][:, None] + np.arange(len_q)[None, :]
            k_idx = ck[members][:, None] + np.arange(len_k)[None, :]
            contiguous = members.size == n and q_idx[0, 0] == 0 and cq[-1] == members.size * len_q
            k_contig = members.size == n and ck[-1] == members.size * len_k
            groups.append(
                _Group(
                    len_q=len_q,
                    len_k=len_k,
                    q_index=torch.from_numpy(q_idx).to(dev),
                    k_index=None if k_contig else torch.from_numpy(k_idx).to(dev),
                    contiguous=bool(contiguous),
                )
            )
    return VarlenPlan(groups=tuple(groups), total_q=int(cq[-1]), total_k=int(ck[-1]), num_segments=n)


def _causal_mask(len_q: int, len_k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Bottom-right aligned causal mask [len_q, len_k] and, if some rows see no key, a row keep mask."""
    i = torch.arange(len_q, device=device)[:, None]
    j = torch.arange(len_k, device=device)[None, :]
    mask = j <= i + (len_k - len_q)
    if len_q <= len_k:
        return mask, None
    keep = mask.any(dim=1)
    return mask | ~keep[:, None], keep  # empty rows attend everything, then get zeroed


def _cpu_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: VarlenPlan, causal: bool, scale: float | None
) -> torch.Tensor:
    total, heads, dim = q.shape
    parts, index = [], []
    for g in plan.groups:
        if g.contiguous:
            qg = q.view(-1, g.len_q, heads, dim)
        else:
            qg = q[g.q_index]
        if g.k_index is None:
            kg, vg = k.view(-1, g.len_k, heads, dim), v.view(-1, g.len_k, heads, dim)
        else:
            kg, vg = k[g.k_index], v[g.k_index]
        mask, keep = None, None
        is_causal = causal and g.len_q == g.len_k
        if causal and g.len_q != g.len_k:
            mask, keep = _causal_mask(g.len_q, g.len_k, q.device)
        o = F.scaled_dot_product_attention(
            qg.transpose(1, 2), kg.transpose(1, 2), vg.transpose(1, 2),
            attn_mask=mask, is_causal=is_causal, scale=scale,
        ).transpose(1, 2)  # [G, len_q, heads, dim]
        if keep is not None:
            o = o * keep[None, :, None, None].to(o.dtype)
        if g.contiguous:
            return o.reshape(total, heads, dim)
        parts.append(o.reshape(-1, heads, dim))
        index.append(g.q_index.reshape(-1))
    out = q.new_zeros(total, heads, dim)
    if not parts:
        return out
    return out.index_copy(0, torch.cat(index), torch.cat(parts))


def _zero_rows_without_keys(
    out: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor
) -> torch.Tensor:
    """Zero the q rows whose k segment is empty, without a host sync."""
    lq = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).long()
    has_k = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]) > 0
    per_row = torch.repeat_interleave(has_k, lq, output_size=out.shape[0])
    return out * per_row[:, None, None].to(out.dtype)


def varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool = False,
    backend: str = "auto",
    *,
    scale: float | None = None,
    plan: VarlenPlan | None = None,
) -> torch.Tensor:
    """Attention within segments of a packed token axis.

    Args:
        q: [total_q, heads, head_dim].
        k: [total_k, heads, head_dim].
        v: [total_k, heads, head_dim].
        cu_seqlens_q: int32 [n+1] boundaries of the q segments.
        cu_seqlens_k: int32 [n+1] boundaries of the k segments (same tensor for self-attention).
        max_seqlen_q: Longest q segment.
        max_seqlen_k: Longest k segment.
        causal: Bottom-right aligned causal mask within each segment.
        backend: One of ATTENTION_BACKENDS.
        scale: Softmax scale; 1/sqrt(head_dim) when None.
        plan: A `plan_varlen` result for these boundaries (cpu backend); built here when None.

    Returns:
        [total_q, heads, head_dim]; zeros for q rows whose k segment is empty.

    Raises:
        ValueError: shapes disagree, or the backend cannot take these inputs.
        ImportError: the requested backend's package is missing.
    """
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(f"q, k, v must be [tokens, heads, head_dim], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape != v.shape or q.shape[1:] != k.shape[1:]:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} disagree in heads/head_dim")
    if cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise ValueError(f"cu_seqlens_q {tuple(cu_seqlens_q.shape)} and cu_seqlens_k {tuple(cu_seqlens_k.shape)} differ in segment count")
    chosen = resolve_backend(q.device, q.dtype, backend)
    if chosen == "cpu":
        plan = plan if plan is not None else plan_varlen(cu_seqlens_q, cu_seqlens_k, q.device)
        if plan.total_q != q.shape[0] or plan.total_k != k.shape[0]:
            raise ValueError(
                f"boundaries cover {plan.total_q} q / {plan.total_k} k tokens but q has {q.shape[0]} "
                f"and k has {k.shape[0]}"
            )
        return _cpu_varlen(q, k, v, plan, causal, scale)
    cu_q, cu_k = cu_seqlens_q.to(torch.int32), cu_seqlens_k.to(torch.int32)
    if chosen == "flash":
        from flash_attn import flash_attn_varlen_func

        out = flash_attn_varlen_func(
            q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k,
            dropout_p=0.0, softmax_scale=scale, causal=causal,
        )
    else:
        from torch.nn.attention.varlen import varlen_attn

        out = varlen_attn(
            q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k,
            scale=scale, window_size=(-1, 0) if causal else (-1, -1),
        )
    return _zero_rows_without_keys(out, cu_q, cu_k)


def padded_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """Dense attention over a padded layout.

    Args:
        q: [B, Lq, heads, head_dim].
        k: [B, Lk, heads, head_dim].
        v: [B, Lk, heads, head_dim].
        key_padding_mask: bool [B, Lk], True on real keys; None when nothing is padded.
        scale: Softmax scale; 1/sqrt(head_dim) when None.

    Returns:
        [B, Lq, heads, head_dim]; rows of a sample with no real key are zeros. Rows of padded
        queries hold finite values that callers ignore.

    Raises:
        ValueError: shapes disagree.
    """
    if q.ndim != 4 or k.shape != v.shape or k.ndim != 4 or q.shape[0] != k.shape[0]:
        raise ValueError(f"q, k, v must be [B, L, heads, head_dim], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    mask, keep = None, None
    if key_padding_mask is not None:
        if key_padding_mask.shape != k.shape[:2]:
            raise ValueError(f"key_padding_mask {tuple(key_padding_mask.shape)} must be [B, Lk] = {tuple(k.shape[:2])}")
        keep = key_padding_mask.any(dim=1)  # [B]
        mask = (key_padding_mask | ~keep[:, None])[:, None, None, :]
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, scale=scale
    ).transpose(1, 2)
    if keep is not None:
        out = out * keep[:, None, None, None].to(out.dtype)
    return out
