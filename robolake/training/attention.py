"""Variable-length attention: one interface, several backends chosen at run time.

A packed batch lays n samples end to end on one token axis; `cu_seqlens` marks where each starts.
Attention must never cross a boundary, and it must not pay for tokens that are not there. A dense
[T, T] block-diagonal mask would be correct but costs O(T^2) memory and compute, which is exactly
the waste packing removes, so no backend here builds one.

Backends:

- `flash`: `flash_attn.flash_attn_varlen_func`, CUDA, fp16/bf16, when flash-attn is installed.
- `torch_varlen`: PyTorch's own `torch.nn.attention.varlen.varlen_attn` (flash kernels shipped with
  torch), CUDA, fp16/bf16.
- `cpu`: an exact path that runs anywhere (CPU or CUDA, any float dtype). Segments are sorted by
  (len_q, len_k) and cut into a few runs; each run is gathered into one [G, heads, L, D] stack
  through index tensors, attended with a single `F.scaled_dot_product_attention` call, and
  scattered back. A run's shorter segments are padded to its longest with masked keys, which is
  still exact (a masked score is exactly zero after softmax) and is what flash kernels do with
  their tiles anyway. Where to cut is a small dynamic program over the sorted lengths that
  trades padded score entries against kernel calls (`plan_varlen(group_cost=...)`;
  `group_cost=0` gives one group per distinct length pair and no padding at all). All gathers
  go through one index per tensor and one split, so autograd's backward is one scatter and one
  concatenation rather than one full-size scatter per group. The plan is built once per batch
  and reused by every layer through `plan=`.

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
    size: int  # segments in the group
    len_q: int  # padded q length of the group (its longest q segment)
    len_k: int  # padded k length (its longest k segment)
    mask: torch.Tensor | None  # bool [G or 1, 1, len_q, len_k], True where a score is kept
    keep: torch.Tensor | None  # [G, len_q, 1, 1] zeroing real q rows that see no key (causal)
    is_causal: bool  # let SDPA build the (square, unpadded) causal mask itself


@dataclass(frozen=True)
class VarlenPlan:
    """Gather/scatter indices for the `cpu` backend, built once per batch by `plan_varlen`.

    Attributes:
        groups: Segments attended by one SDPA call each, in slot order.
        q_slots: int64 [Sq], the q token each slot of the grouped layout reads (0 on padding).
        k_slots: int64 [Sk], the k token each slot reads.
        q_inverse: int64 [total_q], the slot holding each q token (Sq: a zero row).
        total_q: Tokens on the q axis.
        total_k: Tokens on the k axis.
        padding_fraction: Share of score entries spent on padding (0 for exact grouping).
    """

    groups: tuple[_Group, ...]
    q_slots: torch.Tensor
    k_slots: torch.Tensor
    q_inverse: torch.Tensor
    total_q: int
    total_k: int
    padding_fraction: float


def _check_cu(name: str, cu: np.ndarray) -> None:
    if cu.ndim != 1 or cu.size < 1 or cu[0] != 0 or (np.diff(cu) < 0).any():
        raise ValueError(f"{name} must be a 1-D non-decreasing vector starting at 0, got {cu.tolist()[:8]}...")


def _partition(lq: np.ndarray, lk: np.ndarray, count: np.ndarray, group_cost: float) -> list[tuple[int, int]]:
    """Split the (lq, lk)-sorted distinct pairs into contiguous runs minimising the sum over runs
    of (segments x padded len_q x padded len_k + group_cost); exact groups when group_cost == 0."""
    u = lq.size
    if group_cost <= 0:
        return [(i, i + 1) for i in range(u)]
    best = np.zeros(u + 1)
    cut = np.zeros(u + 1, dtype=np.int64)
    csum = np.concatenate([[0], np.cumsum(count)])
    for j in range(u):
        kmax = np.maximum.accumulate(lk[: j + 1][::-1])[::-1]  # max lk over i..j, for every i
        cost = best[: j + 1] + (csum[j + 1] - csum[: j + 1]) * lq[j] * kmax + group_cost
        i = int(np.argmin(cost))
        best[j + 1], cut[j + 1] = cost[i], i
    runs, j = [], u
    while j > 0:
        runs.append((int(cut[j]), j))
        j = int(cut[j])
    return runs[::-1]


def plan_varlen(
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    device: torch.device | str | None = None,
    *,
    causal: bool = False,
    group_cost: float = 2048.0,
) -> VarlenPlan:
    """Group the segments of a varlen batch for the `cpu` backend.

    Segments are sorted by (len_q, len_k) and cut into runs; each run becomes one SDPA call on a
    [G, heads, len_q, len_k] stack, padded to the run's longest segment with masked keys (masked
    scores are exactly zero after softmax, so the result is exact). The cut minimises
    sum(G * len_q * len_k + group_cost): `group_cost` is what one extra kernel call is worth in
    score entries. `group_cost=0` gives one group per distinct (len_q, len_k), with no padding.

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
    if group_cost < 0:
        raise ValueError(f"group_cost must be >= 0, got {group_cost}")
    dev = torch.device(device) if device is not None else cu_seqlens_q.device
    lq_all, lk_all = np.diff(cq), np.diff(ck)
    live = np.flatnonzero((lq_all > 0) & (lk_all > 0))  # empty q: nothing; empty k: zero rows
    order = live[np.lexsort((lk_all[live], lq_all[live]))]
    pairs, first, counts = np.unique(
        np.stack([lq_all[order], lk_all[order]]), axis=1, return_index=True, return_counts=True
    )
    runs = _partition(pairs[0], pairs[1], counts, group_cost)
    starts = np.concatenate([first, [order.size]])
    groups, q_slots, k_slots = [], [], []
    q_inverse = np.full(int(cq[-1]), -1, dtype=np.int64)
    used = 0
    slot_q = 0
    for a, b in runs:
        members = order[starts[a] : starts[b]]
        g, mq, mk = members.size, int(lq_all[members].max()), int(lk_all[members].max())
        lq, lk = lq_all[members], lk_all[members]
        ar_q, ar_k = np.arange(mq), np.arange(mk)
        q_valid = ar_q[None, :] < lq[:, None]
        k_valid = ar_k[None, :] < lk[:, None]
        q_slots.append(np.where(q_valid, cq[members][:, None] + ar_q, 0).reshape(-1))
        k_slots.append(np.where(k_valid, ck[members][:, None] + ar_k, 0).reshape(-1))
        rows = slot_q + np.arange(g)[:, None] * mq + ar_q
        q_inverse[(cq[members][:, None] + ar_q)[q_valid]] = rows[q_valid]
        slot_q += g * mq
        used += int((lq * lk).sum())
        uniform = bool((lq == mq).all() and (lk == mk).all())
        mask = keep = None
        is_causal = causal and uniform and mq == mk
        if causal and not is_causal:
            allowed = ar_k[None, None, :] <= ar_q[None, :, None] + (lk - lq)[:, None, None]
            scores = allowed & k_valid[:, None, :]
            has_key = scores.any(axis=2)  # [G, mq]
            scores |= ~has_key[:, :, None] & k_valid[:, None, :]  # rows with no key: attend, then zero
            mask = torch.from_numpy(scores[:, None]).to(dev)
            if not has_key[q_valid].all():
                keep = torch.from_numpy(has_key[:, :, None, None].astype(np.float32)).to(dev)
        elif not uniform:
            mask = torch.from_numpy(k_valid[:, None, None, :]).to(dev)
        groups.append(_Group(g, mq, mk, mask, keep, is_causal))
    total_slots = sum(gr.size * gr.len_q * gr.len_k for gr in groups)
    q_inverse[q_inverse < 0] = slot_q  # tokens with no key (or in no group) read the zero row

    def cat(parts: list[np.ndarray]) -> torch.Tensor:
        return torch.from_numpy(np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)).to(dev)

    return VarlenPlan(
        groups=tuple(groups),
        q_slots=cat(q_slots),
        k_slots=cat(k_slots),
        q_inverse=torch.from_numpy(q_inverse).to(dev),
        total_q=int(cq[-1]),
        total_k=int(ck[-1]),
        padding_fraction=1.0 - used / total_slots if total_slots else 0.0,
    )


def _cpu_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: VarlenPlan, scale: float | None
) -> torch.Tensor:
    heads, dim = q.shape[1:]
    # One gather per input and one split: autograd turns them into one scatter and one cat.
    qs = q[plan.q_slots].split([g.size * g.len_q for g in plan.groups])
    kslots = [g.size * g.len_k for g in plan.groups]
    ks, vs = k[plan.k_slots].split(kslots), v[plan.k_slots].split(kslots)
    outs = []
    for g, qg, kg, vg in zip(plan.groups, qs, ks, vs, strict=True):
        o = F.scaled_dot_product_attention(
            qg.view(g.size, g.len_q, heads, dim).transpose(1, 2),
            kg.view(g.size, g.len_k, heads, dim).transpose(1, 2),
            vg.view(g.size, g.len_k, heads, dim).transpose(1, 2),
            attn_mask=g.mask,
            is_causal=g.is_causal,
            scale=scale,
        ).transpose(1, 2)  # [G, len_q, heads, dim]
        if g.keep is not None:
            o = o * g.keep.to(o.dtype)
        outs.append(o.reshape(-1, heads, dim))
    outs.append(q.new_zeros(1, heads, dim))  # the zero row for q tokens that see no key
    return torch.cat(outs)[plan.q_inverse]


def _zero_rows_without_keys(out: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor) -> torch.Tensor:
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
        plan: A `plan_varlen` result for these boundaries and `causal` (cpu backend); built here
            when None.

    Returns:
        [total_q, heads, head_dim]; zeros for q rows whose k segment is empty.

    Raises:
        ValueError: shapes disagree, or the backend cannot take these inputs.
        ImportError: the requested backend's package is missing.
    """
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(
            f"q, k, v must be [tokens, heads, head_dim], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape != v.shape or q.shape[1:] != k.shape[1:]:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} disagree in heads/head_dim")
    if cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise ValueError(
            f"cu_seqlens_q {tuple(cu_seqlens_q.shape)} and cu_seqlens_k {tuple(cu_seqlens_k.shape)} "
            "differ in segment count"
        )
    chosen = resolve_backend(q.device, q.dtype, backend)
    if chosen == "cpu":
        plan = plan if plan is not None else plan_varlen(cu_seqlens_q, cu_seqlens_k, q.device, causal=causal)
        if plan.total_q != q.shape[0] or plan.total_k != k.shape[0]:
            raise ValueError(
                f"boundaries cover {plan.total_q} q / {plan.total_k} k tokens but q has {q.shape[0]} "
                f"and k has {k.shape[0]}"
            )
        return _cpu_varlen(q, k, v, plan, scale)
    cu_q, cu_k = cu_seqlens_q.to(torch.int32), cu_seqlens_k.to(torch.int32)
    if chosen == "flash":
        from flash_attn import flash_attn_varlen_func

        out = flash_attn_varlen_func(
            q,
            k,
            v,
            cu_q,
            cu_k,
            max_seqlen_q,
            max_seqlen_k,
            dropout_p=0.0,
            softmax_scale=scale,
            causal=causal,
        )
    else:
        from torch.nn.attention.varlen import varlen_attn

        out = varlen_attn(
            q,
            k,
            v,
            cu_q,
            cu_k,
            max_seqlen_q,
            max_seqlen_k,
            scale=scale,
            window_size=(-1, 0) if causal else (-1, -1),
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
        raise ValueError(
            f"q, k, v must be [B, L, heads, head_dim], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
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
