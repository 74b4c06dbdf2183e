"""What an RL run leaves behind: metrics plots and a checkpoint the evaluator can load.

The fine-tuned weights are written as a checkpoint in the trainer's format (safetensors weights,
JSON beside them), carrying the initial checkpoint's model config, policy card (`extra`) and
lineage, so `robolake eval --checkpoint OUT` scores the RL policy exactly as it scored the
behaviour-cloned one and `robolake lineage OUT` traces it to the same episodes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robolake.plots import _pyplot

__all__ = ["plot_comparison", "plot_run", "save_policy_checkpoint"]


def plot_run(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], path: str | os.PathLike[str]) -> str:
    """Four panels: success vs env steps, env steps/s over time, idle fraction per component, staleness."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    curve = summary.get("success_curve") or []
    ax = axes[0][0]
    if curve:
        ax.plot([c[0] for c in curve], [c[1] for c in curve], marker="o")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("success rate (episodes finished in bin)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("success")
    t = [r["t"] for r in rows]
    axes[0][1].plot(t, [r["env_steps_per_s"] for r in rows], label="env steps/s")
    axes[0][1].plot(t, [r["learner_samples_per_s"] for r in rows], label="learner samples/s")
    axes[0][1].set_xlabel("seconds")
    axes[0][1].set_title("throughput")
    axes[0][1].legend()
    for comp in ("env", "generation", "learner"):
        axes[1][0].plot(t, [r["idle_fraction"][comp] for r in rows], label=comp)
    axes[1][0].set_ylim(-0.05, 1.05)
    axes[1][0].set_xlabel("seconds")
    axes[1][0].set_title("idle fraction (cumulative)")
    axes[1][0].legend()
    axes[1][1].plot(t, [r["staleness_mean"] for r in rows], label="mean staleness (versions)")
    axes[1][1].set_ylabel("versions")
    axes[1][1].set_xlabel("seconds")
    axes[1][1].set_title("staleness")
    counts = axes[1][1].twinx()
    counts.plot(t, [r["dropped_stale"] for r in rows], color="C1", label="stale chunks dropped")
    counts.plot(t, [r["corrected_stale"] for r in rows], color="C2", label="stale chunks corrected")
    counts.set_ylabel("chunks")
    axes[1][1].legend(loc="upper left")
    counts.legend(loc="lower right")
    fig.suptitle(f"robolake rl ({summary.get('mode')}): {summary.get('env_steps_per_s', 0):.0f} env steps/s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_comparison(runs: Mapping[str, Mapping[str, Any]], path: str | os.PathLike[str]) -> str:
    """Success vs env steps and env steps/s for several runs (e.g. async and sync)."""
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for name, s in runs.items():
        curve = s.get("success_curve") or []
        if curve:
            ax1.plot([c[0] for c in curve], [c[1] for c in curve], marker="o", label=name)
    ax1.set_xlabel("environment steps")
    ax1.set_ylabel("success rate")
    ax1.set_ylim(-0.05, 1.05)
    ax1.legend()
    ax1.set_title("sample efficiency")
    names = list(runs)
    ax2.bar(names, [runs[n]["env_steps_per_s"] for n in names])
    ax2.tick_params(axis="x", labelrotation=20)
    ax2.set_ylabel("env steps / s")
    ax2.set_title("throughput")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def save_policy_checkpoint(
    init: str | None, weights: Mapping[str, Any], out_dir: str | os.PathLike[str], step: int
) -> Path:
    """Write `weights` as checkpoint `out_dir/step_{step:08d}/`, with `init`'s extra (model config,
    policy card) and lineage, through the trainer's checkpoint writer (safetensors and JSON).

    Raises:
        FileNotFoundError: `init` names no checkpoint.
        LegacyCheckpointError: `init` is a pickled checkpoint that must be converted first.
    """
    from robolake.training.checkpoint import read_checkpoint, write_checkpoint

    extra: dict[str, Any] = {}
    lineage = None
    if init is not None:
        source = read_checkpoint(init)  # JSON only: its tensors are not needed here
        extra, lineage = source.extra, source.lineage
    extra["rl_init"] = init
    return write_checkpoint(
        out_dir, step=step, tensors={"model": dict(weights)}, meta={"extra": extra, "lineage": lineage}
    )
