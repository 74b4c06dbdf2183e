"""PNG plots for the demo report, `robolake eval` and the notebooks (matplotlib, Agg, imported lazily).

Every chart follows three rules, so a reader never has to guess: the legend sits outside the
axes (to the right), where it cannot hide a bar or a line; a bar of height zero is still drawn, as
a short thick stub on the axis in its series' colour, so "0" reads differently from "not
measured"; and the figure is saved with its legend (`bbox_inches="tight"`). The `*_figure`
functions build a figure and return it (tests measure it); the `plot_*` functions save it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "fill_rates_figure",
    "length_histograms_figure",
    "mark_zero_bars",
    "outside_legend",
    "plot_fill_rates",
    "plot_length_histograms",
    "plot_loss",
    "plot_throughput",
    "save_figure",
    "throughput_figure",
]

ZERO_BAR_LINEWIDTH = 4.0  # points: thick enough to see at the axis, thin enough not to read as a value


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def outside_legend(ax: Any, **kwargs: Any) -> Any:
    """The axes' legend, to the right of the plot area (never over the data)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def mark_zero_bars(ax: Any, bars: Any) -> list[Any]:
    """Draw every zero-height bar of `bars` (a BarContainer) as a stub on the axis in its colour.

    The y axis then starts a little below 0, so the stub is not hidden under the spine.
    """
    stubs = []
    for b in bars:
        if b.get_height() == 0:
            x0, w = b.get_x(), b.get_width()
            (line,) = ax.plot(
                [x0, x0 + w],
                [0, 0],
                color=b.get_facecolor(),
                linewidth=ZERO_BAR_LINEWIDTH,
                solid_capstyle="butt",
                label="_zero_bar",
            )
            stubs.append(line)
    if stubs:
        bottom, top = ax.get_ylim()
        ax.set_ylim(min(bottom, -0.02 * top), top)
    return stubs


def save_figure(fig: Any, path: str) -> str:
    """Save `fig` (legend outside the axes included) as a PNG and close it."""
    plt = _pyplot()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def length_histograms_figure(
    lengths: Mapping[str, np.ndarray], *, title: str = "sample length (backbone tokens) per embodiment"
) -> Any:
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
        ax.hist(
            values,
            bins=bins,
            histtype="step",
            linewidth=1.8,
            linestyle=styles[i % len(styles)],
            label=f"{name} (n={len(values)})",
        )
    ax.set_xlabel("tokens per sample")
    ax.set_ylabel("samples")
    ax.set_title(title)
    outside_legend(ax)
    fig.tight_layout()
    return fig


def plot_length_histograms(
    lengths: Mapping[str, np.ndarray], path: str, *, title: str = "sample length (backbone tokens) per embodiment"
) -> str:
    """`length_histograms_figure` saved to `path`."""
    return save_figure(length_histograms_figure(lengths, title=title), path)


def fill_rates_figure(fills: Mapping[str, float], padded_fill: float, *, padded_label: str = "padded") -> Any:
    """Bar chart: real-token fraction of each packing algorithm against padded batches."""
    plt = _pyplot()
    names = [*fills.keys(), padded_label]
    values = [*fills.values(), padded_fill]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bars = ax.bar(names, values, color=["tab:green"] * len(fills) + ["tab:red"])
    for b, v in zip(bars, values, strict=True):
        ax.text(b.get_x() + b.get_width() / 2, v + 0.01, f"{v:.3f}", ha="center")
    ax.set_ylim(0, 1.1)
    mark_zero_bars(ax, bars)
    ax.set_ylabel("real tokens / tokens computed")
    ax.set_title("fill rate: packing vs padding")
    fig.tight_layout()
    return fig


def plot_fill_rates(fills: Mapping[str, float], padded_fill: float, path: str, *, padded_label: str = "padded") -> str:
    """`fill_rates_figure` saved to `path`."""
    return save_figure(fill_rates_figure(fills, padded_fill, padded_label=padded_label), path)


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
    outside_legend(ax)
    fig.tight_layout()
    return save_figure(fig, path)


def throughput_figure(
    values: Mapping[str, float], *, ylabel: str = "effective tokens / s", title: str = "packed vs padded throughput"
) -> Any:
    """Bar chart of throughputs (effective tokens/s, samples/s, ...)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bars = ax.bar(list(values), list(values.values()), color="tab:blue")
    for b, v in zip(bars, values.values(), strict=True):
        ax.text(b.get_x() + b.get_width() / 2, v, f"{v:,.0f}", ha="center", va="bottom")
    mark_zero_bars(ax, bars)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_throughput(
    values: Mapping[str, float],
    path: str,
    *,
    ylabel: str = "effective tokens / s",
    title: str = "packed vs padded throughput",
) -> str:
    """`throughput_figure` saved to `path`."""
    return save_figure(throughput_figure(values, ylabel=ylabel, title=title), path)
