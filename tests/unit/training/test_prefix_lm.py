"""Prefix-LM attention: the layout, every CPU path against a dense per-sample float64 reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robolake.schemas.varlen import cu_seqlens_from_lengths
from robolake.training import DensePrefixLM, VarlenPrefixLM, prefix_lm_layout

HEADS, DIM = 2, 8


def _random_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sample lengths and prefix lengths with the edge cases: an empty prefix, an empty suffix, an empty sample."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 9))
    lengths = rng.integers(1, 40, size=n)
    prefix = np.minimum(lengths, rng.integers(0, 40, size=n))
    prefix[0] = 0  # suffix only
    prefix[1] = lengths[1]  # prefix only
    lengths[2] = prefix[2] = 0  # nothing at all
    return lengths, prefix


def _reference(q, k, v, lengths, prefix):
    """Per sample, dense attention with the definition spelled out: query p sees key j iff j < prefix or j <= p."""
    out = torch.zeros_like(q)
    start = 0
    for length, p in zip(lengths.tolist(), prefix.tolist(), strict=True):
        s = slice(start, start + length)
        pos = torch.arange(length)
        allowed = (pos[None, :] < p) | (pos[None, :] <= pos[:, None])
        scores = torch.einsum("qhd,khd->hqk", q[s], k[s]) / DIM**0.5
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out[s] = torch.einsum("hqk,khd->qhd", weights, v[s])
        start += length
    return out


def _split(layout, x):
    """Joint-axis rows -> (prefix-axis rows, suffix-axis rows)."""
    inverse = torch.empty_like(layout.joint_index)
    inverse[layout.joint_index] = torch.arange(layout.joint_index.shape[0])
    prefix_total = int(layout.cu_prefix[-1])
    return x[inverse[:prefix_total]], x[inverse[prefix_total:]]


def _run(attend, layout, q, k, v):
    (qp, qs), (kp, ks), (vp, vs) = _split(layout, q), _split(layout, k), _split(layout, v)
    return layout.joint(attend.prefix(qp, kp, vp), attend.suffix(qs, kp, vp, ks, vs))


def test_layout_of_a_small_batch() -> None:
    lay = prefix_lm_layout(torch.tensor([0, 5, 8, 12], dtype=torch.int32), torch.tensor([2, 3, 0]))
    assert lay.cu_prefix.tolist() == [0, 2, 5, 5]
    assert lay.cu_suffix.tolist() == [0, 3, 3, 7]
    assert (lay.max_prefix, lay.max_suffix, lay.max_seqlen) == (3, 4, 5)
    # joint order: sample 0's prefix rows 0-1 then its suffix rows 5+0..2, sample 1's prefix 2-4, sample 2's suffix
    assert lay.joint_index.tolist() == [0, 1, 5, 6, 7, 2, 3, 4, 8, 9, 10, 11]
    mask = lay.dense_mask()
    assert mask[0, :5].tolist() == [True, True, False, False, False]  # a prefix query sees only the prefix
    assert mask[3, :5].tolist() == [True, True, True, True, False]  # suffix query 1 sees the prefix and suffix 0..1
    assert not mask[:5, 5:].any() and not mask[5:, :5].any()  # nothing crosses a sample boundary


@pytest.mark.parametrize("seed", range(4))
def test_cpu_path_is_exact_against_the_dense_reference(seed: int) -> None:
    lengths, prefix = _random_case(seed)
    lay = prefix_lm_layout(torch.from_numpy(cu_seqlens_from_lengths(lengths)), torch.from_numpy(prefix))
    g = torch.Generator().manual_seed(seed)
    total = int(lengths.sum())
    q, k, v = (torch.randn(total, HEADS, DIM, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(3))
    ref = _reference(q, k, v, lengths, prefix)
    out = _run(VarlenPrefixLM(lay, "cpu"), lay, q, k, v)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    grad = torch.randn(ref.shape, dtype=torch.float64, generator=g)
    want = torch.autograd.grad(ref, (q, k, v), grad)
    got = torch.autograd.grad(out, (q, k, v), grad)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_the_layout_mask_is_the_reference_definition() -> None:
    lengths, prefix = _random_case(7)
    lay = prefix_lm_layout(torch.from_numpy(cu_seqlens_from_lengths(lengths)), torch.from_numpy(prefix))
    total = int(lengths.sum())
    q = torch.zeros(total, HEADS, DIM, dtype=torch.float64)
    k = torch.zeros_like(q)
    # equal scores: each query averages exactly the keys it may see; compare with the mask's row counts
    values = torch.randn(total, HEADS, DIM, dtype=torch.float64)
    out = _run(VarlenPrefixLM(lay, "cpu"), lay, q, k, values)
    m = lay.dense_mask().to(torch.float64)
    want = torch.einsum("qk,khd->qhd", m / m.sum(1, keepdim=True).clamp(min=1), values)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-12)


def test_flex_reference_matches_on_cpu() -> None:
    pytest.importorskip("torch.nn.attention.flex_attention")
    lengths, prefix = _random_case(3)
    lay = prefix_lm_layout(torch.from_numpy(cu_seqlens_from_lengths(lengths)), torch.from_numpy(prefix))
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(int(lengths.sum()), HEADS, DIM, dtype=torch.float64, generator=g) for _ in range(3))
    with pytest.warns(UserWarning, match="without torch.compile"):
        out = _run(VarlenPrefixLM(lay, "flex"), lay, q, k, v)
    torch.testing.assert_close(out, _reference(q, k, v, lengths, prefix), rtol=0, atol=1e-12)


def test_dense_padded_baseline_matches_on_real_tokens() -> None:
    rng = np.random.default_rng(1)
    n, horizon = 5, 4
    prefix = rng.integers(1, 12, size=n)
    lengths = prefix + horizon
    lay = prefix_lm_layout(torch.from_numpy(cu_seqlens_from_lengths(lengths)), torch.from_numpy(prefix))
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(int(lengths.sum()), HEADS, DIM, dtype=torch.float64, generator=g) for _ in range(3))
    want = _reference(q, k, v, lengths, prefix)
    (qp, qs), (kp, ks), (vp, vs) = _split(lay, q), _split(lay, k), _split(lay, v)
    lp = int(prefix.max())
    mask = torch.arange(lp)[None, :] < torch.from_numpy(prefix)[:, None]
    index = torch.from_numpy(np.concatenate([[0], np.cumsum(prefix)[:-1]]))[:, None] + torch.arange(lp)
    index = torch.where(mask, index, torch.zeros_like(index))

    def grid(x):
        return x[index] * mask[..., None, None]

    dense = DensePrefixLM(mask)
    out_p = dense.prefix(grid(qp), grid(kp), grid(vp))[mask]
    out_s = dense.suffix(
        qs.unflatten(0, (n, horizon)), grid(kp), grid(vp), ks.unflatten(0, (n, horizon)), vs.unflatten(0, (n, horizon))
    )
    torch.testing.assert_close(lay.joint(out_p, out_s.flatten(0, 1)), want, rtol=0, atol=1e-12)


def test_layout_refuses_a_prefix_longer_than_its_sample() -> None:
    with pytest.raises(ValueError, match="prefix length must lie in 0..its sample's length"):
        prefix_lm_layout(torch.tensor([0, 3, 5], dtype=torch.int32), torch.tensor([4, 1]))
    with pytest.raises(ValueError, match=r"need cu_seqlens \[n\+1\] and prefix_lengths \[n\]"):
        prefix_lm_layout(torch.tensor([0, 3, 5], dtype=torch.int32), torch.tensor([1]))


def test_unknown_backend_is_refused() -> None:
    lay = prefix_lm_layout(torch.tensor([0, 3], dtype=torch.int32), torch.tensor([1]))
    q = torch.zeros(1, HEADS, DIM)
    with pytest.raises(ValueError, match="unknown prefix-LM attention backend 'nope'"):
        VarlenPrefixLM(lay, "nope").prefix(q, q, q)
