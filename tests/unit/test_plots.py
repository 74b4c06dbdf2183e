"""The report's charts are legible: legends never cover data, zero bars are visible, GIFs say how
the episode ended (robolake.plots, robolake.sim.evaluate's success plot and rollout GIFs)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from robolake.plots import (  # noqa: E402
    fill_rates_figure,
    length_histograms_figure,
    plot_fill_rates,
    throughput_figure,
)
from robolake.sim.evaluate import success_figure, write_gif  # noqa: E402


def _result(rates: dict[str, list[float]]) -> dict:
    tasks = ["reach", "push", "pick-place", "drawer-open", "button-press"]

    def per(values: list[float]) -> dict:
        return {
            t: {"success_rate": v, "ci95": [max(0.0, v - 0.2), min(1.0, v + 0.2)], "episodes": 10}
            for t, v in zip(tasks, values, strict=True)
        }

    return {
        "tasks": per(rates["policy"]),
        "baselines": {k: {"tasks": per(v)} for k, v in rates.items() if k != "policy"},
    }


RESULT = _result(
    {
        "policy": [1.0, 0.9, 0.3, 1.0, 1.0],
        "expert": [1.0] * 5,
        "random": [0.0] * 5,
        "mean-action": [0.1, 0.0, 0.0, 0.0, 0.0],
    }
)


def _overlaps(fig) -> list[str]:
    """Data artists (bars, lines) whose drawn box meets the legend's box."""
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend()
    if legend is None:
        return []
    box = legend.get_window_extent()
    hits = []
    for artist in [*ax.patches, *ax.lines]:
        extent = artist.get_window_extent()
        if extent.width > 0 and extent.height > 0 and extent.overlaps(box):
            hits.append(f"{type(artist).__name__} {artist.get_label()}")
    return hits


def test_the_success_legend_covers_no_bar():
    fig = success_figure(RESULT)
    assert fig.axes[0].get_legend() is not None
    assert _overlaps(fig) == []


def test_the_length_legend_covers_no_bar():
    rng = np.random.default_rng(0)
    lengths = {
        "reach": rng.integers(28, 32, 500),
        "push": rng.integers(36, 40, 500),
        "pick-place": rng.integers(30, 45, 500),
    }
    fig = length_histograms_figure(lengths, title="t")
    assert _overlaps(fig) == []


def _zero_stubs(fig) -> list:
    return [line for line in fig.axes[0].lines if line.get_label() == "_zero_bar"]


def test_a_zero_success_bar_is_drawn():
    fig = success_figure(RESULT)
    fig.canvas.draw()
    ax = fig.axes[0]
    stubs = _zero_stubs(fig)
    assert len(stubs) == 5 + 4  # random on every task, mean-action on four
    bottom = ax.get_ylim()[0]
    for stub in stubs:
        assert stub.get_ydata()[0] == 0 > bottom  # above the axis line, not hidden under it
        assert stub.get_window_extent().width > 5 and stub.get_linewidth() >= 3


def test_zero_bars_in_the_other_charts_are_drawn():
    assert len(_zero_stubs(fill_rates_figure({"bfd": 0.9, "ffd": 0.0}, 0.0))) == 2
    assert len(_zero_stubs(throughput_figure({"packed": 120.0, "padded": 0.0}))) == 1
    assert _zero_stubs(throughput_figure({"packed": 120.0, "padded": 80.0})) == []


def test_a_saved_chart_keeps_its_outside_legend(tmp_path):
    from PIL import Image

    path = plot_fill_rates({"bfd": 0.98}, 0.84, str(tmp_path / "fill.png"))
    assert Image.open(path).size[0] > 300


@pytest.mark.parametrize(("success", "colour"), [(True, (20, 140, 40)), (False, (190, 30, 30))])
def test_a_rollout_gif_says_how_it_ended(tmp_path, success, colour):
    import imageio.v3 as iio

    frames = np.full((3, 16, 16, 3), 128, np.uint8)
    path = write_gif(frames, str(tmp_path / "r.gif"), scale=4, caption="push, 57 steps", success=success)
    back = np.asarray(iio.imread(path, index=None))
    assert back.shape[1] == 64 + 14 and back.shape[2] == 64  # a 14-pixel band on top of the frames
    band = back[0, :14].reshape(-1, 3)
    share = np.mean(np.all(np.abs(band.astype(int) - colour) <= 12, axis=1))
    assert share > 0.6  # mostly the band's colour...
    assert np.any(np.all(band > 200, axis=1))  # ...with white text on it
    assert np.all(np.abs(back[0, 14:].astype(int) - 128) <= 12)  # the frames below are untouched
