"""GPU checks that cannot run on a CPU machine: CUDA attention backends, bf16 packed vs padded,
and FP8 training throughput. One short script, prepared to run on a CUDA machine.

Sections (each records an error string instead of stopping the script when it fails):

1. attention: every CUDA varlen backend available (`torch_varlen`, `flash` when installed) on
   bf16 self- and cross-attention, compared with the exact `cpu` path run in float32 on the same
   GPU (max abs error of the output and of dq), plus fwd+bwd time.
2. packed_vs_padded: the `small` preset, bf16 autocast, packed vs padded vs equal-length limit,
   the same interleaved median protocol as bench_train.
3. fp8: the `small` preset trained in bf16 vs with FP8 through Transformer Engine and torchao
   (whichever are installed and the GPU supports, compute capability >= 8.9), step time and loss.

Usage: python -m robolake.bench.gpu_check [--quick] [--json out.json]
Without CUDA it prints why and exits 0 without measuring anything.
"""

from __future__ import annotations

import contextlib
import copy
import statistics
import sys
import time
import traceback
from typing import Any

import numpy as np
import torch

from robolake.bench._common import bench_arguments, write_json
from robolake.bench.train import equal_length_twin, make_batch  # noqa: E402
from robolake.schemas.varlen import cu_seqlens_from_lengths  # noqa: E402
from robolake.training import (  # noqa: E402
    FP8Recipe,
    GrootModel,
    ModelConfig,
    TrainConfig,
    TrainState,
    apply_fp8,
    available_backends,
    build_optimizer,
    build_scheduler,
    fp8_training_supported,
    train_step,
    varlen_attention,
)


def _time_cuda(fn: Any, repeats: int) -> float:
    """Median milliseconds of fn() on the GPU."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end))
    return statistics.median(out)


def check_attention(quick: bool) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    heads, dim = 16, 64
    lk = rng.integers(20, 400, size=32).tolist()
    cases = {"self": (lk, lk), "cross": ([49] * 32, lk)}
    result: dict[str, Any] = {"backends": [b for b in available_backends("cuda") if b != "cpu"]}
    for case, (lq_list, lk_list) in cases.items():
        cu_q = torch.from_numpy(cu_seqlens_from_lengths(lq_list)).cuda()
        cu_k = torch.from_numpy(cu_seqlens_from_lengths(lk_list)).cuda()
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(sum(lq_list), heads, dim, device="cuda", generator=g)
        k = torch.randn(sum(lk_list), heads, dim, device="cuda", generator=g)
        v = torch.randn(sum(lk_list), heads, dim, device="cuda", generator=g)
        args = (cu_q, cu_k, max(lq_list), max(lk_list))
        qr = q.clone().requires_grad_(True)
        ref = varlen_attention(qr, k, v, *args, backend="cpu")
        grad = torch.randn_like(ref)
        (ref_dq,) = torch.autograd.grad(ref, qr, grad)
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
                    "max_abs_err_out": float((out.float() - ref).abs().max()),
                    "max_abs_err_dq": float((dq.float() - ref_dq).abs().max()),
                    "fwd_bwd_ms": _time_cuda(step, 5 if quick else 20),
                }
            except Exception as exc:  # record and keep going: this is a report, not a test
                result[f"{case}/{backend}"] = {"error": f"{type(exc).__name__}: {exc}"}
    return result


def _gpu_state(model: torch.nn.Module, context: Any) -> TrainState:
    optimizer = build_optimizer(model, TrainConfig())
    scheduler = build_scheduler(optimizer, warmup_steps=10, total_steps=10_000, min_lr_ratio=0.1)
    return TrainState(model, optimizer, scheduler, torch.Generator(device="cuda"), context, 1.0)


def _bf16() -> contextlib.AbstractContextManager:
    return torch.autocast("cuda", dtype=torch.bfloat16)


def _stack(*factories: Any) -> Any:
    def make() -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        for f in factories:
            stack.enter_context(f())
        return stack

    return make


def _median_step_ms(state: TrainState, batches: list[Any], warmup: int, repeats: int) -> dict[str, float]:
    times, rates, losses = [], [], []
    for r in range(warmup + repeats):
        for i, b in enumerate(batches):
            state.generator.manual_seed(r * 1000 + i)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss, _ = train_step(state, b)
            torch.cuda.synchronize()
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
    }


def check_packed_vs_padded(quick: bool) -> dict[str, Any]:
    config = ModelConfig.preset("small")
    rng = np.random.default_rng(0)
    n_batches, samples, warmup, repeats = (2, 32, 2, 3) if quick else (4, 48, 3, 10)
    host = [make_batch(config, samples, rng) for _ in range(n_batches)]
    packed = [b.to("cuda") for b in host]
    padded = [b.to_padded().to("cuda") for b in host]  # pad on the host, then move
    limit = [equal_length_twin(config, b, rng).to("cuda") for b in host]
    torch.manual_seed(0)
    base = GrootModel(config).cuda()
    out: dict[str, Any] = {"preset": "small", "dtype": "bf16-autocast"}
    for name, batches in (("packed", packed), ("padded", padded), ("unpadded_limit", limit)):
        out[name] = _median_step_ms(_gpu_state(copy.deepcopy(base), _bf16), batches, warmup, repeats)
    pad = statistics.mean(p.padding_fraction for p in padded)
    out["padding_fraction"] = pad
    out["speedup_packed_vs_padded"] = out["packed"]["effective_tokens_per_s"] / out["padded"]["effective_tokens_per_s"]
    out["ratio_to_limit"] = out["packed"]["effective_tokens_per_s"] / out["unpadded_limit"]["effective_tokens_per_s"]
    out["target_speedup"] = 0.85 / (1 - pad)
    return out


def check_fp8(quick: bool) -> dict[str, Any]:
    if not fp8_training_supported("cuda"):
        return {"skipped": f"compute capability {torch.cuda.get_device_capability()} < (8, 9): no FP8 tensor cores"}
    config = ModelConfig.preset("small")
    rng = np.random.default_rng(1)
    batches = [make_batch(config, 32 if quick else 48, rng).to("cuda") for _ in range(2)]
    warmup, repeats = (2, 3) if quick else (3, 10)
    torch.manual_seed(0)
    base = GrootModel(config).cuda()
    out: dict[str, Any] = {"bf16": _median_step_ms(_gpu_state(copy.deepcopy(base), _bf16), batches, warmup, repeats)}
    for backend in ("te", "torchao"):
        try:
            conv = apply_fp8(copy.deepcopy(base), FP8Recipe(backend=backend))
            state = _gpu_state(conv.model, _stack(_bf16, conv.forward_context))
            res = _median_step_ms(state, batches, warmup, repeats)
            res["converted_linears"] = len(conv.converted)
            res["speedup_vs_bf16"] = out["bf16"]["step_ms"] / res["step_ms"]
            out[backend] = res
        except ImportError as exc:
            out[backend] = {"skipped": str(exc)}
        except Exception as exc:
            out[backend] = {
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc(limit=3),
            }
    return out


def run(quick: bool) -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {
            "cuda": False,
            "message": "CUDA is not available on this machine; gpu_check measures nothing here",
        }
    result: dict[str, Any] = {
        "cuda": True,
        "device": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "torch": torch.__version__,
    }
    for name, fn in (
        ("attention", check_attention),
        ("packed_vs_padded", check_packed_vs_padded),
        ("fp8", check_fp8),
    ):
        t0 = time.perf_counter()
        try:
            result[name] = fn(quick)
        except Exception as exc:
            result[name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc(limit=5),
            }
        result[name]["seconds"] = time.perf_counter() - t0
    return result


def print_table(result: dict[str, Any]) -> None:
    if not result.get("cuda"):
        print(f"gpu_check: {result['message']}")
        return
    print(f"gpu_check on {result['device']} (cc {result['capability']}), torch {result['torch']}")
    att = result["attention"]
    for key, val in att.items():
        if isinstance(val, dict):
            print(
                f"  attention {key:<22} "
                + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in val.items())
            )
    pv = result["packed_vs_padded"]
    if "error" in pv:
        print(f"  packed_vs_padded: {pv['error']}")
    else:
        for name in ("packed", "padded", "unpadded_limit"):
            print(f"  {name:<16} {pv[name]['effective_tokens_per_s']:>10.0f} tok/s {pv[name]['step_ms']:>8.1f} ms")
        print(
            f"  padding {pv['padding_fraction']:.3f}  speedup {pv['speedup_packed_vs_padded']:.2f} "
            f"(target {pv['target_speedup']:.2f})  ratio_to_limit {pv['ratio_to_limit']:.2f}"
        )
    for name, val in result["fp8"].items():
        print(f"  fp8 {name:<8} {val}")


def main(argv: list[str] | None = None) -> int:
    args = bench_arguments(__doc__, argv, quick_help="fewer batches and repeats", json_required=False)
    result = run(args.quick)
    print_table(result)
    if args.json is not None:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
