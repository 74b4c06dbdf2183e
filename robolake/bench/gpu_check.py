"""GPU checks that cannot run on a CPU machine, for both model families: the CUDA attention
backends, bf16 packed (varlen) vs padded (dense SDPA), FP8 vs bf16 training, peak memory. One short
script, prepared to run on a CUDA machine.

Sections (each records an error string instead of stopping the script when it fails):

1. attention: every CUDA varlen backend available (`torch_varlen`, `flash` when installed) on
   bf16 self- and cross-attention, compared with the exact `cpu` path run in float32 on the same
   GPU (max abs error of the output and of dq), plus fwd+bwd time.
2. prefix_lm: pi0's two attention calls (bidirectional prefix, then the expert's queries against
   prefix + causal suffix keys, `training/prefix_lm.py`) on every CUDA backend (`flash`,
   `torch_varlen`, `flex` compiled) against the `cpu` path in float32: the output and dq errors
   show whether a kernel aligns its causal diagonal bottom-right as the suffix call needs.
3. packed_vs_padded/{groot,pi0}: the `small` preset of each family, bf16 autocast, packed vs
   padded vs equal-length limit (the interleaved median protocol of bench_train), with the peak
   memory of each layout.
4. fp8/{groot,pi0}: the `small` preset of each family trained in bf16 vs with FP8 through
   Transformer Engine and torchao (whichever are installed and the GPU supports, compute
   capability >= 8.9): step time, loss and peak memory.

Usage: python -m robolake.bench.gpu_check [--quick] [--json out.json]
Without CUDA it prints why and exits 0 without measuring anything. `--quick` (2-3 minutes on one
H100-class GPU, most of it flex_attention's compile) is the run to make when device time is short.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch

from robolake.bench._common import write_json
from robolake.bench.train import equal_length_twin, make_batch
from robolake.schemas.varlen import cu_seqlens_from_lengths
from robolake.training import (
    MODEL_FAMILIES,
    FP8Recipe,
    ModelConfig,
    TrainConfig,
    TrainState,
    VarlenPrefixLM,
    apply_fp8,
    available_backends,
    build_model,
    build_optimizer,
    build_scheduler,
    fp8_training_supported,
    prefix_lm_layout,
    train_step,
    varlen_attention,
)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn: Callable[[], Any], repeats: int, device: torch.device) -> float:
    """Median milliseconds of fn() on `device` (CUDA events on a GPU, the host clock elsewhere)."""
    for _ in range(2):
        fn()
    _sync(device)
    out = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            out.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            out.append(1000 * (time.perf_counter() - t0))
    return statistics.median(out)


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak_mib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


def _gpu_backends(device: torch.device) -> list[str]:
    return [b for b in available_backends(device) if b != "cpu"]


def check_attention(quick: bool, device: torch.device) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    heads, dim = 16, 64
    lk = rng.integers(20, 400, size=32).tolist()
    cases = {"self": (lk, lk), "cross": ([49] * 32, lk)}
    result: dict[str, Any] = {"backends": _gpu_backends(device)}
    for case, (lq_list, lk_list) in cases.items():
        cu_q = torch.from_numpy(cu_seqlens_from_lengths(lq_list)).to(device)
        cu_k = torch.from_numpy(cu_seqlens_from_lengths(lk_list)).to(device)
        g = torch.Generator(device=device).manual_seed(0)
        q = torch.randn(sum(lq_list), heads, dim, device=device, generator=g)
        k = torch.randn(sum(lk_list), heads, dim, device=device, generator=g)
        v = torch.randn(sum(lk_list), heads, dim, device=device, generator=g)
        args = (cu_q, cu_k, max(lq_list), max(lk_list))
        qr = q.clone().requires_grad_(True)
        ref = varlen_attention(qr, k, v, *args, backend="cpu")
        grad = torch.randn_like(ref)
        (ref_dq,) = torch.autograd.grad(ref, qr, grad)
        ref = ref.detach()
        for backend in ["cpu", *result["backends"]]:
            dtype = torch.float32 if backend == "cpu" else torch.bfloat16
            qb, kb, vb = (t.to(dtype).requires_grad_(True) for t in (q, k, v))
            try:
                out = varlen_attention(qb, kb, vb, *args, backend=backend)  # type: ignore[misc]
                (dq,) = torch.autograd.grad(out, qb, grad.to(dtype))

                def step(qb=qb, kb=kb, vb=vb, backend=backend, dtype=dtype, args=args, grad=grad) -> None:
                    o = varlen_attention(qb, kb, vb, *args, backend=backend)  # type: ignore[misc]
                    o.backward(grad.to(dtype))

                result[f"{case}/{backend}"] = {
                    "max_abs_err_out": float((out.detach().float() - ref).abs().max()),
                    "max_abs_err_dq": float((dq.float() - ref_dq).abs().max()),
                    "fwd_bwd_ms": _time(step, 5 if quick else 20, device),
                }
            except Exception as exc:  # record and keep going: this is a report, not a test
                result[f"{case}/{backend}"] = {"error": f"{type(exc).__name__}: {exc}"}
    return result


def check_prefix_lm(quick: bool, device: torch.device) -> dict[str, Any]:
    """pi0's prefix and suffix calls per backend against the cpu path (float32) on the same device."""
    rng = np.random.default_rng(1)
    heads, dim, n, horizon = 16, 64, 32, 16
    prefix = rng.integers(20, 400, size=n)
    layout = prefix_lm_layout(
        torch.from_numpy(cu_seqlens_from_lengths(prefix + horizon)).to(device), torch.from_numpy(prefix).to(device)
    )
    g = torch.Generator(device=device).manual_seed(0)
    p_total, s_total = int(prefix.sum()), n * horizon
    qp, kp, vp = (torch.randn(p_total, heads, dim, device=device, generator=g) for _ in range(3))
    qs, ks, vs = (torch.randn(s_total, heads, dim, device=device, generator=g) for _ in range(3))

    def both(att: VarlenPrefixLM, tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        a, b, c, d, e, f = tensors
        return att.prefix(a, b, c), att.suffix(d, b, c, e, f)

    ref_in = tuple(t.clone().requires_grad_(True) for t in (qp, kp, vp, qs, ks, vs))
    ref_p, ref_s = both(VarlenPrefixLM(layout, "cpu"), ref_in)
    gp, gs = torch.randn_like(ref_p), torch.randn_like(ref_s)
    ref_dq = torch.autograd.grad((ref_p, ref_s), (ref_in[0], ref_in[3]), (gp, gs))
    ref_p, ref_s = ref_p.detach(), ref_s.detach()
    backends = [*_gpu_backends(device), *(["flex"] if device.type == "cuda" else [])]
    result: dict[str, Any] = {"backends": backends, "samples": n, "prefix_tokens": p_total, "horizon": horizon}
    for backend in ["cpu", *backends]:
        dtype = torch.float32 if backend == "cpu" else torch.bfloat16
        att = VarlenPrefixLM(layout, backend)
        try:
            ins = tuple(t.to(dtype).requires_grad_(True) for t in (qp, kp, vp, qs, ks, vs))
            out_p, out_s = both(att, ins)
            dqp, dqs = torch.autograd.grad((out_p, out_s), (ins[0], ins[3]), (gp.to(dtype), gs.to(dtype)))

            def step(att=att, ins=ins, dtype=dtype) -> None:
                o_p, o_s = both(att, ins)
                torch.autograd.backward((o_p, o_s), (gp.to(dtype), gs.to(dtype)))

            result[backend] = {
                "max_abs_err_prefix": float((out_p.detach().float() - ref_p).abs().max()),
                "max_abs_err_suffix": float((out_s.detach().float() - ref_s).abs().max()),
                "max_abs_err_dq": max(
                    float((dqp.float() - ref_dq[0]).abs().max()), float((dqs.float() - ref_dq[1]).abs().max())
                ),
                "fwd_bwd_ms": _time(step, 5 if quick else 20, device),
            }
        except Exception as exc:
            result[backend] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=3)}
    return result


def _state(model: torch.nn.Module, context: Any, device: torch.device) -> TrainState:
    optimizer = build_optimizer(model, TrainConfig())
    scheduler = build_scheduler(optimizer, warmup_steps=10, total_steps=10_000, min_lr_ratio=0.1)
    return TrainState(model, optimizer, scheduler, torch.Generator(device=device), context, 1.0)


def _autocast(device: torch.device) -> Callable[[], contextlib.AbstractContextManager]:
    if device.type != "cuda":
        return contextlib.nullcontext
    return lambda: torch.autocast("cuda", dtype=torch.bfloat16)


def _stack(*factories: Any) -> Any:
    def make() -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        for f in factories:
            stack.enter_context(f())
        return stack

    return make


def _median_step_ms(
    state: TrainState, batches: list[Any], warmup: int, repeats: int, device: torch.device
) -> dict[str, Any]:
    times, rates, losses = [], [], []
    _reset_peak(device)
    for r in range(warmup + repeats):
        for i, b in enumerate(batches):
            state.generator.manual_seed(r * 1000 + i)
            _sync(device)
            t0 = time.perf_counter()
            loss, _ = train_step(state, b)
            _sync(device)
            dt = time.perf_counter() - t0
            if r >= warmup:
                real = (b.packed if hasattr(b, "packed") else b).total_tokens
                times.append(dt)
                rates.append(real / dt)
                losses.append(float(loss))
    return {
        "step_ms": 1000 * statistics.median(times),
        "effective_tokens_per_s": statistics.median(rates),
        "mean_loss": statistics.mean(losses),
        "peak_mib": _peak_mib(device),
    }


def check_packed_vs_padded(quick: bool, device: torch.device, family: str, preset: str = "small") -> dict[str, Any]:
    config = ModelConfig.preset(preset, family=family)
    rng = np.random.default_rng(0)
    n_batches, samples, warmup, repeats = (2, 32, 2, 3) if quick else (4, 48, 3, 10)
    host = [make_batch(config, samples, rng) for _ in range(n_batches)]
    packed = [b.to(device) for b in host]
    padded = [b.to_padded().to(device) for b in host]  # pad on the host, then move
    limit = [equal_length_twin(config, b, rng).to(device) for b in host]
    torch.manual_seed(0)
    base = build_model(config).to(device)
    out: dict[str, Any] = {"family": family, "preset": preset, "dtype": "bf16-autocast"}
    for name, batches in (("packed", packed), ("padded", padded), ("unpadded_limit", limit)):
        state = _state(copy.deepcopy(base), _autocast(device), device)
        out[name] = _median_step_ms(state, batches, warmup, repeats, device)
        del state
    pad = statistics.mean(p.padding_fraction for p in padded)
    out["padding_fraction"] = pad
    out["speedup_packed_vs_padded"] = out["packed"]["effective_tokens_per_s"] / out["padded"]["effective_tokens_per_s"]
    out["ratio_to_limit"] = out["packed"]["effective_tokens_per_s"] / out["unpadded_limit"]["effective_tokens_per_s"]
    out["target_speedup"] = 0.85 / (1 - pad)
    return out


def check_fp8(quick: bool, device: torch.device, family: str, preset: str = "small") -> dict[str, Any]:
    if not fp8_training_supported(device):
        cap = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
        return {"skipped": f"{device} (compute capability {cap}) has no FP8 tensor cores (needs >= 8.9)"}
    config = ModelConfig.preset(preset, family=family)
    rng = np.random.default_rng(1)
    batches = [make_batch(config, 32 if quick else 48, rng).to(device) for _ in range(2)]
    warmup, repeats = (2, 3) if quick else (3, 10)
    torch.manual_seed(0)
    base = build_model(config).to(device)
    bf16 = _state(copy.deepcopy(base), _autocast(device), device)
    out: dict[str, Any] = {"family": family, "bf16": _median_step_ms(bf16, batches, warmup, repeats, device)}
    del bf16
    for backend in ("te", "torchao"):
        try:
            conv = apply_fp8(copy.deepcopy(base), FP8Recipe(backend=backend))
            state = _state(conv.model, _stack(_autocast(device), conv.forward_context), device)
            res = _median_step_ms(state, batches, warmup, repeats, device)
            res["converted_linears"] = len(conv.converted)
            res["speedup_vs_bf16"] = out["bf16"]["step_ms"] / res["step_ms"]
            out[backend] = res
            del state, conv
        except ImportError as exc:
            out[backend] = {"skipped": str(exc)}
        except Exception as exc:
            out[backend] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=3)}
    return out


def sections(quick: bool, device: torch.device, preset: str = "small") -> dict[str, Callable[[], dict[str, Any]]]:
    """The checks in the order they run, by name (a device and preset other than CUDA/small: dry runs)."""
    out: dict[str, Callable[[], dict[str, Any]]] = {
        "attention": partial(check_attention, quick, device),
        "prefix_lm": partial(check_prefix_lm, quick, device),
    }
    for family in MODEL_FAMILIES:
        out[f"packed_vs_padded/{family}"] = partial(check_packed_vs_padded, quick, device, family, preset)
    for family in MODEL_FAMILIES:
        out[f"fp8/{family}"] = partial(check_fp8, quick, device, family, preset)
    return out


def run(quick: bool) -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {
            "cuda": False,
            "message": "CUDA is not available on this machine; gpu_check measures nothing here",
        }
    device = torch.device("cuda")
    result: dict[str, Any] = {
        "cuda": True,
        "device": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "torch": torch.__version__,
        "quick": quick,
    }
    return run_sections(result, sections(quick, device))


def run_sections(result: dict[str, Any], checks: dict[str, Callable[[], dict[str, Any]]]) -> dict[str, Any]:
    """Run every check into `result`, recording an error and going on when one fails."""
    for name, fn in checks.items():
        t0 = time.perf_counter()
        try:
            result[name] = fn()
        except Exception as exc:
            result[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=5)}
        result[name]["seconds"] = time.perf_counter() - t0
        print(f"  [{name}] done in {result[name]['seconds']:.1f}s", flush=True)
    return result


def _fmt(val: Any) -> str:
    if isinstance(val, dict):
        return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in val.items() if k != "trace")
    return str(val)


def print_table(result: dict[str, Any]) -> None:
    if not result.get("cuda"):
        print(f"gpu_check: {result['message']}")
        return
    print(f"gpu_check on {result['device']} (cc {result['capability']}), torch {result['torch']}")
    for section in ("attention", "prefix_lm"):
        for key, val in result.get(section, {}).items():
            if isinstance(val, dict):
                print(f"  {section} {key:<22} {_fmt(val)}")
            elif key == "error":
                print(f"  {section}: {val}")
    for family in MODEL_FAMILIES:
        pv = result.get(f"packed_vs_padded/{family}", {})
        if not pv:
            continue
        if "error" in pv:
            print(f"  packed_vs_padded {family}: {pv['error']}")
            continue
        for name in ("packed", "padded", "unpadded_limit"):
            r = pv[name]
            peak = "" if r["peak_mib"] is None else f" peak {r['peak_mib']:>8.0f} MiB"
            print(f"  {family:<6} {name:<16} {r['effective_tokens_per_s']:>10.0f} tok/s {r['step_ms']:>8.1f} ms{peak}")
        print(
            f"  {family:<6} padding {pv['padding_fraction']:.3f}  speedup {pv['speedup_packed_vs_padded']:.2f} "
            f"(target {pv['target_speedup']:.2f})  ratio_to_limit {pv['ratio_to_limit']:.2f}"
        )
    for family in MODEL_FAMILIES:
        for name, val in result.get(f"fp8/{family}", {}).items():
            if name not in ("family", "seconds"):
                print(f"  fp8 {family:<6} {name:<8} {_fmt(val)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--json", default=None, help="write the figures to this JSON file")
    p.add_argument(
        "--quick", action="store_true", help="fewer batches and repeats (the run to make on short device time)"
    )
    args = p.parse_args(argv)
    result = run(args.quick)
    print_table(result)
    if args.json is not None:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
