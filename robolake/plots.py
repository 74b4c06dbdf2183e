"""PNG plots for the demo report and the notebooks (matplotlib, Agg backend, imported lazily)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["plot_length_histograms", "plot_fill_rates", "plot_loss", "plot_throughput"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_length_histograms(lengths: Mapping[str, np.ndarray], path: str, *, title: str = "sample length (backbone tokens) per embodiment") -> str:
    """Stepped (unfilled) histograms of sample token lengths, one outline per embodiment.

    Outlines in distinct colours and line styles never blend, so every bar traces back to its
    embodiment in the legend (filled translucent bars mix into colours the legend does not have).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    all_lengths = np.concatenate([np.asarray(v) for v in lengths.values()]) if lengths else np.zeros(1)
    bins = np.linspace(all_lengths.min(), all_lengths.max() + 1, 40)
    styles = ["-", "--", "-.", ":"]
    for i, (name, values) in enumerate(sorted(lengths.items())):
        ax.hist(values, bins=bins, histtype="step", linewidth=1.8, linestyle=styles[i % len(styles)], label=f"{name} (n={len(values)})")
    ax.set_xlabel("tokens per sample")
    ax.set_ylabel("samples")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_fill_rates(fills: Mapping[str, float], padded_fill: float, path: str) -> str:
    """Bar chart: real-token fraction of each packing algorithm against padded batches."""
    plt = _pyplot()
    names = [*fills.keys(), "padded"]
    values = [*fills.values(), padded_fill]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bars = ax.bar(names, values, color=["tab:green"] * len(fills) + ["tab:red"])
    for b, v in zip(bars, values, strict=True):
        ax.text(b.get_x() + b.get_width() / 2, v + 0.01, f"{v:.3f}", ha="center")
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("real tokens / tokens computed")
    ax.set_title("fill rate: packing vs padding")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_loss(
    curves: Mapping[str, Sequence[float]],
    path: str,
    *,
    held_out: Mapping[str, Sequence[tuple[int, float]]] | None = None,
) -> str:
    """Training loss per step, one line per run, with held-out loss points (step, loss) beside them.

    Lower is better on both; the held-out curve shows whether the fit carries over to episodes the
    model never trained on.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, losses in curves.items():
        ax.plot(np.arange(1, len(losses) + 1), losses, label=f"{name} (train)", alpha=0.8)
    for name, points in (held_out or {}).items():
        if points:
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, marker="o", linewidth=2, label=f"{name} (held-out)")
    ax.set_xlabel("step")
    ax.set_ylabel("flow-matching loss (lower is better)")
    ax.set_yscale("log")
    ax.set_title("training and held-out loss")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_throughput(values: Mapping[str, float], path: str, *, ylabel: str = "effective tokens / s", title: str = "packed vs padded throughput") -> str:
    """Bar chart of throughputs (effective tokens/s, samples/s, ...)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bars = ax.bar(list(values), list(values.values()), color="tab:blue")
    for b, v in zip(bars, values.values(), strict=True):
        ax.text(b.get_x() + b.get_width() / 2, v, f"{v:,.0f}", ha="center", va="bottom")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
