"""Packed vs padded training throughput on the same samples, and weight-only FP8 fidelity, per model family.

Claim measured: packing (varlen attention, no padding) trains on real tokens at close to the rate
of an ideal batch whose samples all have the same length, and beats padding by about the padding
factor 1 / (1 - padding_fraction).

Three layouts run the same training step on the same model (tiny preset, CPU):

- `packed`: PackedBatch, varlen attention.
- `padded`: `to_padded()` of the same batches, dense attention with a key padding mask; every
  Linear, MLP and attention also computes on the padded slots, exactly as a padded trainer does.
- `unpadded_limit`: batches with the same number of samples and (nearly) the same number of
  real tokens, all samples of equal length: no padding and nothing for varlen to do.

Steps are interleaved across layouts (A B C for every batch, so machine noise hits all three
alike) after a warm-up. Each repeat's rate per layout is its real tokens over its summed step
time, on both clocks of `_common.py`: wall time and the process's CPU time. The trainer runs on
one torch thread, so a step's CPU time is the compute it did, and another program on the
machine hardly moves it; the wall clock of the same step stretches whenever that program holds
the core. The ratios (packed / padded, packed / limit) are taken within each repeat, and their
targets apply to the CPU-time ratio (`target_applies_to: "cpu"`), with the wall-clock ratio
beside it: on a quiet machine the two agree, on a loaded one only the CPU ratio stays within
+-15% of its median. Sample lengths follow a realistic mixture: 1-3 camera views and
instructions of 5-120 bytes with a long tail (log-normal, median ~22).

A fourth case, `history`, gives every sample native-rate stream history beside its cameras
(`pack --history`): a 1 kHz force-torque window of 50 ms and a 200 Hz IMU window of 100 ms, as
many messages as were recorded (jitter and dropped messages vary the count; samples near an
episode's start, before a stream began, hold fewer), and compares packed with padded on them.

`--family pi0` measures the pi0-style model (`training/pi0.py`) on the same batches and protocol:
packed, its prefix (backbone tokens + state) attends bidirectionally per sample and its action
expert attends to the prefix and causally among itself through two varlen calls; padded, the
prefix is a [n, max_seqlen + 1] grid with a key padding mask, so it pays for padding exactly as
GR00T's padded backbone does, while its expert ([n, H] per sample) has no padding in either layout.

Usage: robolake bench train [--family groot|pi0] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import sys
import time
from typing import Any, cast

import numpy as np
import torch

from robolake.bench._common import RatioSummary, machine, ratio_summary, spread, write_json
from robolake.schemas.batch import PackedBatch, PaddedBatch, make_packed_batch
from robolake.training import (
    MODEL_FAMILIES,
    ModelConfig,
    PolicyModel,
    TrainConfig,
    TrainState,
    build_model,
    build_optimizer,
    build_scheduler,
    linear_weight_bytes,
    quantize_weights_fp8,
    train_step,
)

EMBODIMENTS = ((7, 7), (14, 12), (20, 16), (32, 32))  # (state width, action width)


def make_batch(
    config: ModelConfig,
    n: int,
    rng: np.random.Generator,
    *,
    views: list[int] | None = None,
    text_lengths: list[int] | None = None,
) -> PackedBatch:
    """n random samples with the benchmark's length mixture (or the given views/text lengths)."""
    if views is None:
        views = rng.choice([1, 2, 3], size=n, p=[0.4, 0.35, 0.25]).tolist()
    if text_lengths is None:
        text_lengths = np.clip(np.round(rng.lognormal(np.log(22), 0.7, size=n)), 5, 120).astype(int).tolist()
    emb = rng.integers(0, len(EMBODIMENTS), size=n).tolist()
    h, size = config.action_horizon, config.image_size
    return make_packed_batch(
        pixels=rng.integers(0, 256, size=(int(sum(views)), 3, size, size), dtype=np.uint8),
        views_per_sample=views,
        text_ids=[rng.integers(0, 256, size=t) for t in text_lengths],
        state=[rng.standard_normal(EMBODIMENTS[e][0]).astype(np.float32) for e in emb],
        action=[rng.standard_normal((h, EMBODIMENTS[e][1])).astype(np.float32) for e in emb],
        action_valid_steps=rng.integers(h // 2, h + 1, size=n).tolist(),
        embodiment_id=emb,
        tokens_per_view=config.tokens_per_view,
        max_state_dim=config.max_state_dim,
        max_action_dim=config.max_action_dim,
    )


HISTORY_STREAMS = ((1000.0, 0.05), (200.0, 0.1))  # (rate Hz, window s): force-torque, IMU
HISTORY_WIDTH = 16


def make_history_batch(config: ModelConfig, n: int, rng: np.random.Generator) -> PackedBatch:
    """`make_batch` samples that also carry the recorded messages of `HISTORY_STREAMS` in their windows."""
    base = make_batch(config, n, rng)
    history = []
    for _ in range(n):
        vals, dts, ids = [], [], []
        early = rng.random() < 0.15  # near the episode start: the stream began inside the window
        for k, (hz, window) in enumerate(HISTORY_STREAMS):
            full = int(hz * window)
            count = int(rng.integers(0, full + 1)) if early else int(rng.binomial(full, 0.92))
            dts.append(-np.sort(rng.uniform(0, window, count)).astype(np.float32)[::-1])
            vals.append(rng.standard_normal((count, HISTORY_WIDTH)).astype(np.float32))
            ids.append(np.full(count, k, np.int64))
        history.append((np.concatenate(vals), np.concatenate(dts), np.concatenate(ids)))
    views = base.views_per_sample.numpy()
    return make_packed_batch(
        pixels=base.pixels,
        views_per_sample=views,
        text_ids=[t.numpy() for t in torch.split(base.text_ids, base.text_lengths.tolist())],
        state=[base.state[i].numpy() for i in range(n)],
        action=[base.action[i].numpy() for i in range(n)],
        action_valid_steps=base.action_mask.any(-1).sum(-1).numpy(),
        embodiment_id=base.embodiment_id.numpy(),
        tokens_per_view=config.tokens_per_view,
        max_state_dim=config.max_state_dim,
        max_action_dim=config.max_action_dim,
        history=history,
        history_width=HISTORY_WIDTH,
    )


def equal_length_twin(config: ModelConfig, batch: PackedBatch, rng: np.random.Generator) -> PackedBatch:
    """Same sample count and ~same real tokens as `batch`, every sample the same length."""
    n, tpv = batch.num_samples, config.tokens_per_view
    length = round(batch.total_tokens / n)
    views = max(1, min(3, (length - 1) // tpv))
    return make_batch(config, n, rng, views=[views] * n, text_lengths=[length - views * tpv] * n)


def _state(config: ModelConfig, seed: int) -> TrainState:
    torch.manual_seed(seed)
    model = build_model(config)
    optimizer = build_optimizer(model, TrainConfig())
    scheduler = build_scheduler(optimizer, warmup_steps=10, total_steps=10_000, min_lr_ratio=0.1)
    return TrainState(model, optimizer, scheduler, torch.Generator(), contextlib.nullcontext, 1.0)


def measure(
    config: ModelConfig,
    layouts: dict[str, list[Any]],
    *,
    warmup: int,
    repeats: int,
    seed: int = 0,
    state_factory: Any = None,
    sync: Any = None,
) -> dict[str, dict[str, Any]]:
    """Real-token rate per layout and repeat on both clocks, steps interleaved (A B C, A B C, ...).

    Each repeat runs every batch once per layout; a layout's rate in a repeat is its real tokens
    over its summed step time (a total over a total), on the wall clock and on this process's
    CPU time (`time.process_time`: the trainer's own work, all its threads). Returns per layout
    the median rates, the per-repeat rates and the median step time on each clock.
    """
    make_state = state_factory or (lambda: _state(config, seed))
    states = {name: make_state() for name in layouts}
    times: dict[str, list[float]] = {name: [] for name in layouts}
    cpu_times: dict[str, list[float]] = {name: [] for name in layouts}
    per_repeat: dict[str, list[float]] = {name: [] for name in layouts}
    per_repeat_cpu: dict[str, list[float]] = {name: [] for name in layouts}
    for r in range(warmup + repeats):
        tokens = dict.fromkeys(layouts, 0)
        seconds = dict.fromkeys(layouts, 0.0)
        cpu_seconds = dict.fromkeys(layouts, 0.0)
        for i in range(len(next(iter(layouts.values())))):
            for name, batches in layouts.items():
                batch = batches[i]
                real = (batch.packed if isinstance(batch, PaddedBatch) else batch).total_tokens
                states[name].generator.manual_seed(r * 1000 + i)
                if sync:
                    sync()
                c0, t0 = time.process_time(), time.perf_counter()
                train_step(states[name], batch)
                if sync:
                    sync()
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                tokens[name] += real
                seconds[name] += dt
                cpu_seconds[name] += dc
                if r >= warmup:
                    times[name].append(dt)
                    cpu_times[name].append(dc)
        if r >= warmup:
            for name in layouts:
                per_repeat[name].append(tokens[name] / seconds[name])
                per_repeat_cpu[name].append(tokens[name] / max(cpu_seconds[name], 1e-9))
    return {
        name: {
            "effective_tokens_per_s": statistics.median(per_repeat[name]),
            "effective_tokens_per_s_repeats": per_repeat[name],
            "effective_tokens_per_cpu_s": statistics.median(per_repeat_cpu[name]),
            "effective_tokens_per_cpu_s_repeats": per_repeat_cpu[name],
            "step_ms": 1000 * statistics.median(times[name]),
            "step_cpu_ms": 1000 * statistics.median(cpu_times[name]),
        }
        for name in layouts
    }


def paired(timing: dict[str, dict[str, Any]], a: str, b: str, clock: str = "wall") -> RatioSummary:
    """Median and spread of a/b over the repeats (each repeat measured both in the same pass).

    `clock` is "wall" (tokens per second) or "cpu" (tokens per CPU second).
    """
    key = "effective_tokens_per_s_repeats" if clock == "wall" else "effective_tokens_per_cpu_s_repeats"
    ra, rb = timing[a][key], timing[b][key]
    return ratio_summary([x / y for x, y in zip(ra, rb, strict=True)])


def two_clocks(timing: dict[str, dict[str, Any]], a: str, b: str) -> dict[str, Any]:
    """a/b on both clocks; the targets apply to the CPU-time ratio (see the module notes)."""
    cpu = paired(timing, a, b, "cpu")
    return {"wall": paired(timing, a, b, "wall"), "cpu": cpu, "target_applies_to": "cpu", "median": cpu["median"]}


# Both action heads start with zero residual branches (dit.py, pi0.py), so an untrained model's
# actions skip most of its Linears and its FP8 error says little (pi0's is exactly 0); a few steps
# make every branch carry signal before the weights are quantised.
FP8_TRAIN_STEPS = 20


def _trained(config: ModelConfig, batches: list[PackedBatch], steps: int) -> PolicyModel:
    """A fresh model of `config` after `steps` training steps on `batches` (cycled)."""
    state = _state(config, seed=0)
    for i in range(steps):
        state.generator.manual_seed(i)
        train_step(state, batches[i % len(batches)])
    return cast(PolicyModel, state.model)


def fp8_fidelity(model: PolicyModel, batch: PackedBatch) -> dict[str, float]:
    """Weight bytes and action error of the weight-only FP8 policy against fp32 (and bf16)."""
    model = model.eval()
    noise = torch.randn(batch.action.shape, generator=torch.Generator().manual_seed(0))
    ref = model.get_action(batch, noise=noise)
    bf16 = build_model(model.config).eval()
    bf16.load_state_dict(model.state_dict())
    bf16 = cast(PolicyModel, bf16.to(torch.bfloat16))
    fp8 = cast(PolicyModel, quantize_weights_fp8(model))  # float8 weights, float32 compute
    fp8_bf16 = cast(PolicyModel, quantize_weights_fp8(bf16))  # float8 weights, bf16 everything else (deployment)
    a_bf16 = bf16.get_action(batch, noise=noise).float()
    a_fp8 = fp8.get_action(batch, noise=noise)
    a_fp8_bf16 = fp8_bf16.get_action(batch, noise=noise).float()

    def total_bytes(m: torch.nn.Module) -> int:
        return sum(t.numel() * t.element_size() for t in [*m.parameters(), *m.buffers()])

    def rel(a: torch.Tensor) -> float:
        return float((a - ref).norm() / ref.norm())

    return {
        "weight_bytes_ratio_vs_bf16": linear_weight_bytes(fp8) / linear_weight_bytes(bf16),
        "model_bytes_ratio_vs_bf16": total_bytes(fp8_bf16) / total_bytes(bf16),
        "action_rel_error": rel(a_fp8),
        "action_rel_error_fp8_bf16_compute": rel(a_fp8_bf16),
        "action_rel_error_bf16": rel(a_bf16),
    }


def run(quick: bool, threads: int | None = 1, family: str = "groot") -> dict[str, Any]:
    """Run the benchmark; returns the figures as a JSON-ready dict.

    Args:
        quick: Fewer batches and repeats.
        family: The model family measured ("groot" or "pi0"; `MODEL_FAMILIES`).
        threads: torch intra-op threads while measuring (restored afterwards); None keeps the
            current setting. One thread by default: on a shared machine, multi-threaded CPU
            kernels stall at every barrier when another process holds a core, which drowns the
            FLOP difference being measured in scheduling noise.
    """
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _run(quick, family)
    finally:
        torch.set_num_threads(previous)


def _run(quick: bool, family: str) -> dict[str, Any]:
    config = ModelConfig.preset("tiny", family=family)
    rng = np.random.default_rng(0)
    n_batches, samples, warmup, repeats = (3, 64, 1, 7) if quick else (6, 64, 2, 10)
    packed = [make_batch(config, samples, rng) for _ in range(n_batches)]
    padded = [b.to_padded() for b in packed]
    limit = [equal_length_twin(config, b, rng) for b in packed]
    timing = measure(
        config,
        {"packed": packed, "padded": padded, "unpadded_limit": limit},
        warmup=warmup,
        repeats=repeats,
    )
    pad = statistics.mean(p.padding_fraction for p in padded)
    speedup_summary = two_clocks(timing, "packed", "padded")
    ratio_summary_ = two_clocks(timing, "packed", "unpadded_limit")
    speedup, ratio = speedup_summary["median"], ratio_summary_["median"]
    targets = {"ratio_to_limit": 0.85, "speedup_packed_vs_padded": 0.85 / (1.0 - pad)}
    fp8 = fp8_fidelity(_trained(config, packed, FP8_TRAIN_STEPS), packed[0])
    hconfig = dataclasses.replace(
        config, history_streams=len(HISTORY_STREAMS), history_width=HISTORY_WIDTH, max_positions=1024
    )
    h_packed = [make_history_batch(hconfig, samples, rng) for _ in range(max(2, n_batches // 2))]
    h_padded = [b.to_padded() for b in h_packed]
    h_timing = measure(hconfig, {"packed": h_packed, "padded": h_padded}, warmup=warmup, repeats=repeats)
    h_pad = statistics.mean(p.padding_fraction for p in h_padded)
    h_speedup = two_clocks(h_timing, "packed", "padded")
    history = {
        "streams": [{"rate_hz": hz, "window_s": w} for hz, w in HISTORY_STREAMS],
        "history_tokens_per_sample": statistics.mean(float(b.history_lengths.float().mean()) for b in h_packed),
        "real_tokens_per_batch": statistics.mean(b.total_tokens for b in h_packed),
        **h_timing,
        "padding_fraction": h_pad,
        "speedup_packed_vs_padded": h_speedup["median"],
        "speedup_packed_vs_padded_spread": h_speedup,
        "target": 0.85 / (1.0 - h_pad),
    }
    return {
        "machine": machine(),
        "preset": "tiny",
        "family": family,
        "device": "cpu",
        "threads": torch.get_num_threads(),
        "quick": quick,
        "batches": n_batches,
        "samples_per_batch": samples,
        "real_tokens_per_batch": statistics.mean(b.total_tokens for b in packed),
        "limit_tokens_per_batch": statistics.mean(b.total_tokens for b in limit),
        **timing,
        "padding_fraction": pad,
        "speedup_packed_vs_padded": speedup,
        "speedup_packed_vs_padded_spread": speedup_summary,
        "ratio_to_limit": ratio,
        "ratio_to_limit_spread": ratio_summary_,
        "targets": targets,
        "target_applies_to": "cpu",
        "meets_targets": {
            "ratio_to_limit": ratio >= targets["ratio_to_limit"],
            "speedup_packed_vs_padded": speedup >= targets["speedup_packed_vs_padded"],
        },
        "fp8": fp8,
        "history": history,
    }


def print_table(result: dict[str, Any]) -> None:
    print(
        f"bench_train: family={result.get('family', 'groot')} preset={result['preset']} device={result['device']} "
        f"threads={result['threads']} "
        f"samples/batch={result['samples_per_batch']} real tokens/batch={result['real_tokens_per_batch']:.0f}"
    )
    print(f"{'layout':<16}{'tokens/s':>12}{'tokens/cpu-s':>14}{'step ms':>10}{'cpu ms':>9}")
    for name in ("packed", "padded", "unpadded_limit"):
        r = result[name]
        print(
            f"{name:<16}{r['effective_tokens_per_s']:>12.0f}{r['effective_tokens_per_cpu_s']:>14.0f}{r['step_ms']:>10.1f}{r['step_cpu_ms']:>9.1f}"
        )
    t = result["targets"]
    print(f"padding fraction (padded)   {result['padding_fraction']:.3f}")
    for label, key in (
        ("speedup packed vs padded", "speedup_packed_vs_padded"),
        ("packed / unpadded limit", "ratio_to_limit"),
    ):
        flag = "  below target" if result[key] < t[key] else ""
        two = result[key + "_spread"]
        print(
            f"{label:<28}cpu {spread(two['cpu'])}  (target >= {t[key]:.2f}, on CPU time){flag}; "
            f"wall {spread(two['wall'])}"
        )
    h = result["history"]
    print(
        f"with stream history ({h['history_tokens_per_sample']:.0f} history tokens/sample of "
        + ", ".join(f"{s['rate_hz']:g} Hz x {s['window_s']:g} s" for s in h["streams"])
        + f"): padding fraction {h['padding_fraction']:.3f}"
    )
    for name in ("packed", "padded"):
        r = h[name]
        print(
            f"  {name:<14}{r['effective_tokens_per_s']:>12.0f}{r['effective_tokens_per_cpu_s']:>14.0f}"
            f"{r['step_ms']:>10.1f}{r['step_cpu_ms']:>9.1f}"
        )
    flag = "  below target" if h["speedup_packed_vs_padded"] < h["target"] else ""
    two = h["speedup_packed_vs_padded_spread"]
    print(
        f"  speedup packed vs padded  cpu {spread(two['cpu'])}  (target >= {h['target']:.2f}){flag}; "
        f"wall {spread(two['wall'])}"
    )
    f = result["fp8"]
    print(
        f"fp8 weight-only: linear weight bytes vs bf16 {f['weight_bytes_ratio_vs_bf16']:.3f}, "
        f"model bytes vs bf16 {f['model_bytes_ratio_vs_bf16']:.3f}, action rel. error {f['action_rel_error']:.4f} "
        f"(fp8 weights + bf16 compute: {f['action_rel_error_fp8_bf16_compute']:.4f}, "
        f"bf16: {f['action_rel_error_bf16']:.4f})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--json", default=None, help="write the figures to this JSON file")
    p.add_argument("--quick", action="store_true", help="fewer batches and repeats (< 2 minutes)")
    p.add_argument(
        "--family", default="groot", choices=MODEL_FAMILIES, help="the model family trained (default: groot)"
    )
    args = p.parse_args(argv)
    result = run(args.quick, family=args.family)
    print_table(result)
    if args.json is not None:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
