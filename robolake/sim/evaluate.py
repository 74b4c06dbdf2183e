"""Closed-loop evaluation: success per task, with a ceiling and a floor measured in the same run.

A policy trained through robolake is judged the way robot-learning users judge one: run it in the
simulator from initial scenes it never saw (seeds from `EVAL_SEEDS`, disjoint from the
demonstrations' `TRAIN_SEEDS`) and count successes, the environment's own flag. Beside it, on the
same tasks and the same seeds, run the scripted expert (the ceiling: what the demonstrations
could teach) and two floors, uniform random actions and the training data's mean action (what a
policy that learned nothing scores); `floor` per task is the better of the two.

Success rates come with Wilson 95% score intervals, which stay inside [0, 1] and behave at 0/n and
n/n, where the normal approximation collapses to a zero-width interval. Episode lengths and
closed-loop actions/s (all environments together, policy time included) are reported too.

`evaluate_checkpoint` is what `robolake eval` and the demo run: it writes the JSON result, a bar
plot of success per task (policy, expert, floor, with the intervals) and a few rollout GIFs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robolake.sim.policy import ExpertPolicy, MeanActionPolicy, Policy, RandomPolicy
from robolake.sim.rollout import (
    EnvPool,
    EpisodeResult,
    EpisodeSpec,
    RolloutConfig,
    RolloutResult,
    rollout,
)
from robolake.sim.tasks import DEFAULT_TASKS, EVAL_SEEDS, episode_seed, resolve_tasks

__all__ = [
    "EvalConfig",
    "eval_specs",
    "evaluate_checkpoint",
    "evaluate_policy",
    "plot_success",
    "summarize",
    "wilson_interval",
    "write_gif",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """One evaluation.

    Attributes:
        tasks: Task short names.
        episodes: Episodes per task (each policy runs the same seeds).
        seed: Run seed; episode seeds come from `EVAL_SEEDS` with it.
        rollout: Workers, environments per worker, replanning horizon, rendering.
        videos: Rollout GIFs kept per task for the evaluated policy.
        baselines: Also run the expert and the floors.
        num_inference_steps: Euler steps of a learned policy (None: the model's default).
        noise_scale: Starting-noise scale of a learned policy's flow (0: deterministic chunks,
            the default; 1: samples of the learned distribution; see `LearnedPolicy`).
    """

    tasks: tuple[str, ...] = DEFAULT_TASKS
    episodes: int = 10
    seed: int = 0
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    videos: int = 1
    baselines: bool = True
    num_inference_steps: int | None = None
    noise_scale: float = 0.0

    def __post_init__(self) -> None:
        if self.noise_scale < 0:
            raise ValueError(f"noise_scale must be >= 0, got {self.noise_scale}")
        if self.episodes < 1 or self.videos < 0:
            raise ValueError(f"need episodes >= 1 and videos >= 0, got {self.episodes}, {self.videos}")
        resolve_tasks(self.tasks)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% for z = 1.96); (0, 1) when n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def eval_specs(tasks: Sequence[str], episodes: int, seed: int, videos: int = 0) -> list[EpisodeSpec]:
    """Evaluation episodes: `episodes` seeds per task from EVAL_SEEDS, the first `videos` recorded."""
    return [
        EpisodeSpec(t.name, episode_seed(EVAL_SEEDS, seed, i, k), record_video=k < videos)
        for i, t in enumerate(resolve_tasks(list(tasks)))
        for k in range(episodes)
    ]


def summarize(result: RolloutResult) -> dict[str, Any]:
    """Per-task success rate, Wilson 95% interval and lengths; overall mean and throughput."""
    by_task: dict[str, list[EpisodeResult]] = {}
    for e in result.episodes:
        by_task.setdefault(e.task, []).append(e)
    tasks: dict[str, Any] = {}
    for name, eps in by_task.items():
        k, n = sum(e.success for e in eps), len(eps)
        lo, hi = wilson_interval(k, n)
        ok = [e.steps for e in eps if e.success]
        tasks[name] = {
            "success_rate": k / n,
            "successes": k,
            "episodes": n,
            "ci95": [lo, hi],
            "mean_length": float(np.mean([e.steps for e in eps])),
            "mean_length_success": float(np.mean(ok)) if ok else None,
        }
    return {
        "tasks": tasks,
        "mean_success": float(np.mean([t["success_rate"] for t in tasks.values()])),
        "actions_per_s": result.actions_per_s,
        "env_steps": result.env_steps,
        "wall_s": result.wall_s,
        "policy_calls": result.policy_calls,
        "mean_batch": result.mean_batch,
    }


def _baselines(
    specs: list[EpisodeSpec], config: EvalConfig, floors: Mapping[str, Policy] | None, pool: EnvPool
) -> dict[str, Any]:
    plain = [dataclasses.replace(s, record_video=False) for s in specs]
    base: dict[str, Any] = {"expert": summarize(rollout(ExpertPolicy(), plain, config.rollout, pool=pool))}
    for name, floor in (floors or {"random": RandomPolicy(seed=config.seed)}).items():
        base[name] = summarize(rollout(floor, plain, config.rollout, pool=pool))
    return base


def evaluate_policy(
    policy: Policy,
    config: EvalConfig,
    *,
    floors: Mapping[str, Policy] | None = None,
) -> tuple[dict[str, Any], RolloutResult]:
    """Run `policy` (and, with `config.baselines`, the expert and `floors`) on the same seeds.

    Returns:
        (result JSON, the policy's rollout). The JSON holds {"tasks": {TASK: {"success_rate",
        "episodes", "ci95", ...}}, "mean_success", "expert_mean_success", "floor_mean_success",
        "baselines": {name: summary}, "config": ...}.
    """
    specs = eval_specs(config.tasks, config.episodes, config.seed, config.videos)
    with EnvPool(config.tasks, config.rollout) as pool:  # one start-up for the policy and every baseline
        main = rollout(policy, specs, config.rollout, pool=pool)
        base = _baselines(specs, config, floors, pool) if config.baselines else None
    out = summarize(main)
    out["policy"] = policy.name
    out["config"] = {
        "tasks": list(config.tasks),
        "episodes": config.episodes,
        "seed": config.seed,
        "replan": config.rollout.replan,
        "noise_scale": config.noise_scale,
        "num_workers": config.rollout.num_workers,
        "envs_per_worker": config.rollout.envs_per_worker,
        "image_size": config.rollout.env.image_size,
        "camera": config.rollout.env.camera,
        "eval_seeds": [s.seed for s in specs],
    }
    if base is not None:
        out["baselines"] = base
        floor_names = [n for n in base if n != "expert"]
        out["floor"] = {
            t: max(base[f]["tasks"][t]["success_rate"] for f in floor_names) for t in out["tasks"]
        }
        out["expert_mean_success"] = base["expert"]["mean_success"]
        out["floor_mean_success"] = float(np.mean(list(out["floor"].values())))
        out["below_floor"] = [t for t, v in out["tasks"].items() if v["success_rate"] < out["floor"][t]]
    return out, main


def write_gif(frames: np.ndarray, path: str, *, fps: int = 20, scale: int = 4) -> str:
    """Write uint8 [T, H, W, 3] frames as an animated GIF, upscaled `scale` x (nearest)."""
    import imageio.v3 as iio

    big = np.repeat(np.repeat(np.asarray(frames, np.uint8), scale, axis=1), scale, axis=2)
    iio.imwrite(path, big, extension=".gif", duration=1000 / fps, loop=0)
    return path


def plot_success(result: Mapping[str, Any], path: str) -> str:
    """Bar plot of success per task: policy, expert and floor, with Wilson 95% intervals."""
    from robolake.plots import _pyplot

    plt = _pyplot()
    tasks = list(result["tasks"])
    series: list[tuple[str, dict[str, Any]]] = [("policy", result["tasks"])]
    base = result.get("baselines", {})
    for name in base:
        series.append((name, base[name]["tasks"]))
    x = np.arange(len(tasks))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(tasks)), 4))
    for i, (name, per) in enumerate(series):
        rates = np.array([per[t]["success_rate"] for t in tasks])
        lo = np.array([per[t]["ci95"][0] for t in tasks])
        hi = np.array([per[t]["ci95"][1] for t in tasks])
        ax.bar(x + (i - (len(series) - 1) / 2) * width, rates, width, label=name,
               yerr=np.stack([rates - lo, hi - rates]), capsize=3)  # fmt: skip
    ax.set_xticks(x)
    ax.set_xticklabels(tasks)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate (95% Wilson CI)")
    n = result["tasks"][tasks[0]]["episodes"] if tasks else 0
    ax.set_title(f"closed-loop success, {n} episodes per task (unseen seeds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def evaluate_checkpoint(
    checkpoint: str,
    config: EvalConfig | None = None,
    *,
    out_dir: str | None = None,
    json_path: str | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Evaluate a trained checkpoint (file, checkpoints dir or run dir) in closed loop.

    Writes, when `out_dir` is given: eval.json, success.png and rollout GIFs under videos/;
    `json_path` overrides where the JSON goes.

    Raises:
        FileNotFoundError: no checkpoint at `checkpoint`.
        ValueError: the checkpoint lacks its model config or policy card.
    """
    from robolake.sim.env import EMBODIMENT
    from robolake.sim.learned import LearnedPolicy, resolve_checkpoint

    config = config or EvalConfig()
    policy = LearnedPolicy.from_checkpoint(
        checkpoint, num_steps=config.num_inference_steps, noise_scale=config.noise_scale, seed=config.seed, device=device
    )
    mean_action = policy.normalizer.stats[EMBODIMENT].action.mean
    floors = {"random": RandomPolicy(seed=config.seed), "mean-action": MeanActionPolicy(mean_action)}
    result, main = evaluate_policy(policy, config, floors=floors)
    result["checkpoint"] = str(resolve_checkpoint(checkpoint))
    if out_dir:
        os.makedirs(os.path.join(out_dir, "videos"), exist_ok=True)
        videos = []
        for e in main.episodes:
            if e.frames is not None:
                name = f"{e.task}_seed{e.seed}_{'success' if e.success else 'fail'}.gif"
                videos.append(write_gif(e.frames, os.path.join(out_dir, "videos", name)))
        result["videos"] = videos
        result["plot"] = plot_success(result, os.path.join(out_dir, "success.png"))
    path = json_path or (os.path.join(out_dir, "eval.json") if out_dir else None)
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
        result["json"] = path
    return result
