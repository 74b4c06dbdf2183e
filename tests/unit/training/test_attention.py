from __future__ import annotations

import math

import pytest
import torch

from robolake.schemas.varlen import cu_seqlens_from_lengths
from robolake.training import padded_attention, plan_varlen, resolve_backend, varlen_attention

HEADS, DIM = 2, 8


def cu(lengths: list[int]) -> torch.Tensor:
    return torch.from_numpy(cu_seqlens_from_lengths(lengths))


def reference(q, k, v, lq: list[int], lk: list[int], causal: bool = False) -> torch.Tensor:
    """Naive per-sample attention with explicit softmax (the definition)."""
    out = torch.zeros_like(q)
    cq, ck = cu(lq).tolist(), cu(lk).tolist()
    for i in range(len(lq)):
        if lq[i] == 0 or lk[i] == 0:
            continue
        qi, ki, vi = q[cq[i] : cq[i + 1]], k[ck[i] : ck[i + 1]], v[ck[i] : ck[i + 1]]
        scores = torch.einsum("qhd,khd->hqk", qi, ki) / math.sqrt(DIM)
        if causal:
            allowed = torch.arange(lk[i])[None, :] <= torch.arange(lq[i])[:, None] + (lk[i] - lq[i])
            scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        out[cq[i] : cq[i + 1]] = torch.einsum("hqk,khd->qhd", probs, vi)
    return out


def make(lq: list[int], lk: list[int], seed: int = 0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(lq), HEADS, DIM, generator=g, dtype=dtype, requires_grad=True)
    k = torch.randn(sum(lk), HEADS, DIM, generator=g, dtype=dtype, requires_grad=True)
    v = torch.randn(sum(lk), HEADS, DIM, generator=g, dtype=dtype, requires_grad=True)
    return q, k, v


def check(lq: list[int], lk: list[int], causal: bool = False) -> None:
    q, k, v = make(lq, lk)
    out = varlen_attention(q, k, v, cu(lq), cu(lk), max(lq), max(lk), causal=causal, backend="cpu")
    ref = reference(q, k, v, lq, lk, causal)
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-9)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(ref, (q, k, v), grad)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize(
    "lengths",
    [[5, 3, 7, 3, 5, 1], [13], [1, 1, 1], [2, 9, 2, 9, 31]],
    ids=["odd", "single", "ones", "repeats"],
)
def test_self_attention_matches_reference(lengths: list[int]) -> None:
    check(lengths, lengths)


def test_cross_attention_matches_reference() -> None:
    # action side: 5 tokens per sample; backbone side: varied lengths
    check([5, 5, 5, 5], [12, 3, 12, 7])


def test_zero_length_segments() -> None:
    check([0, 4, 3, 0, 2], [0, 4, 3, 0, 2])  # empty samples in self-attention
    check([3, 0, 2, 4], [5, 6, 0, 1])  # empty q, and a q segment with no keys -> zeros


def test_q_without_keys_outputs_zeros() -> None:
    q, k, v = make([3, 2], [4, 0])
    out = varlen_attention(q, k, v, cu([3, 2]), cu([4, 0]), 3, 4, backend="cpu")
    assert torch.count_nonzero(out[3:]) == 0


def test_causal_self_and_cross() -> None:
    check([5, 3, 5, 1], [5, 3, 5, 1], causal=True)
    check([3, 6, 2], [5, 2, 2], causal=True)  # bottom-right alignment, incl. rows with no key


def test_float32_close_to_reference() -> None:
    lq = [7, 19, 7, 4]
    q, k, v = make(lq, lq, dtype=torch.float32)
    out = varlen_attention(q, k, v, cu(lq), cu(lq), 19, 19)
    torch.testing.assert_close(out, reference(q, k, v, lq, lq), rtol=1e-5, atol=1e-5)


def test_exact_plan_groups_equal_lengths() -> None:
    lq = [4, 9, 4, 4, 9]
    plan = plan_varlen(cu(lq), cu(lq), group_cost=0)
    assert sorted((g.len_q, g.size) for g in plan.groups) == [(4, 3), (9, 2)]
    assert plan.padding_fraction == 0.0 and all(g.mask is None for g in plan.groups)
    q, k, v = make(lq, lq)
    a = varlen_attention(q, k, v, cu(lq), cu(lq), 9, 9, plan=plan)
    torch.testing.assert_close(a, reference(q, k, v, lq, lq))


@pytest.mark.parametrize("group_cost", [0.0, 50.0, 1e9])
@pytest.mark.parametrize("causal", [False, True])
def test_every_grouping_is_exact(group_cost: float, causal: bool) -> None:
    lq, lk = [3, 7, 0, 5, 2, 7, 1, 4], [6, 7, 2, 5, 0, 9, 1, 4]
    q, k, v = make(lq, lk, seed=4)
    plan = plan_varlen(cu(lq), cu(lk), causal=causal, group_cost=group_cost)
    if group_cost == 1e9:
        assert len(plan.groups) == 1 and plan.padding_fraction > 0
    out = varlen_attention(q, k, v, cu(lq), cu(lk), 7, 9, causal=causal, plan=plan)
    ref = reference(q, k, v, lq, lk, causal)
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-9)
    grad = torch.randn_like(out)
    for a, b in zip(
        torch.autograd.grad(out, (q, k, v), grad),
        torch.autograd.grad(ref, (q, k, v), grad),
        strict=True,
    ):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-9)


def test_all_segments_empty() -> None:
    q, k, v = make([0, 2], [3, 0])
    out = varlen_attention(q, k, v, cu([0, 2]), cu([3, 0]), 2, 3)
    assert out.shape == (2, HEADS, DIM) and torch.count_nonzero(out) == 0


def test_validation_errors() -> None:
    q, k, v = make([3, 2], [3, 2])
    with pytest.raises(ValueError, match="unknown attention backend"):
        varlen_attention(q, k, v, cu([3, 2]), cu([3, 2]), 3, 3, backend="nope")
    with pytest.raises(ValueError, match="needs fp16/bf16 tensors on CUDA"):
        varlen_attention(q, k, v, cu([3, 2]), cu([3, 2]), 3, 3, backend="torch_varlen")
    with pytest.raises(ValueError, match="boundaries cover"):
        varlen_attention(q, k, v, cu([3, 3]), cu([3, 3]), 3, 3)
    with pytest.raises(ValueError, match="segment count"):
        varlen_attention(q, k, v, cu([3, 2]), cu([5]), 3, 5)
    with pytest.raises(ValueError, match="non-decreasing"):
        plan_varlen(torch.tensor([0, 3, 2], dtype=torch.int32), torch.tensor([0, 3, 2], dtype=torch.int32))


def test_auto_backend_on_cpu_is_exact_path() -> None:
    assert resolve_backend(torch.device("cpu"), torch.bfloat16, "auto") == "cpu"


def test_padded_attention_matches_varlen() -> None:
    lengths = [6, 2, 4]
    q, k, v = make(lengths, lengths)
    packed = varlen_attention(q, k, v, cu(lengths), cu(lengths), 6, 6)
    L = max(lengths)
    mask = torch.arange(L)[None, :] < torch.tensor(lengths)[:, None]
    starts = cu(lengths)[:-1].long()
    index = (starts[:, None] + torch.arange(L)).clamp(max=sum(lengths) - 1)
    out = padded_attention(q[index], k[index], v[index], mask)
    torch.testing.assert_close(out[mask], packed)


def test_padded_attention_sample_without_keys_is_zero() -> None:
    q = torch.randn(2, 3, HEADS, DIM)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    out = padded_attention(q, q, q, mask)
    assert torch.isfinite(out).all() and torch.count_nonzero(out[1]) == 0
