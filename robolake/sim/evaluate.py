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
With `record_to` it also writes every episode of the policy into a lake (`record_to_lake.py`):
observations, executed actions, the policy's chunks, rewards, success, seed and checkpoint, as
episodes tagged `source=rollout` (and `meta.seed_range = 'eval'`: train on them and these seeds
are no longer unseen, so evaluate on another `--seed`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
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
    "success_figure",
    "summarize",
    "wilson_interval",
    "write_gif",
]

log = logging.getLogger(__name__)
ProgressFn = Callable[[str, int, int], None]  # progress(which policy, episodes finished, episodes)


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


def _stage(progress: ProgressFn | None, name: str) -> Callable[[int, int], None] | None:
    return None if progress is None else functools.partial(progress, name)


def _baselines(
    specs: list[EpisodeSpec],
    config: EvalConfig,
    floors: Mapping[str, Policy] | None,
    pool: EnvPool,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    plain = [dataclasses.replace(s, record_video=False, record_steps=False) for s in specs]
    expert = rollout(ExpertPolicy(), plain, config.rollout, pool=pool, progress=_stage(progress, "expert"))
    base: dict[str, Any] = {"expert": summarize(expert)}
    for name, floor in (floors or {"random": RandomPolicy(seed=config.seed)}).items():
        base[name] = summarize(rollout(floor, plain, config.rollout, pool=pool, progress=_stage(progress, name)))
    return base


def evaluate_policy(
    policy: Policy,
    config: EvalConfig,
    *,
    floors: Mapping[str, Policy] | None = None,
    progress: ProgressFn | None = None,
    record_steps: bool = False,
) -> tuple[dict[str, Any], RolloutResult]:
    """Run `policy` (and, with `config.baselines`, the expert and `floors`) on the same seeds.

    `progress(name, done, total)` hears from each rollout in turn: "policy", "expert", then each floor.
    `record_steps` keeps every step of the policy's episodes (frames, states, rewards, chunks).

    Returns:
        (result JSON, the policy's rollout). The JSON holds {"tasks": {TASK: {"success_rate",
        "episodes", "ci95", ...}}, "mean_success", "expert_mean_success", "floor_mean_success",
        "baselines": {name: summary}, "config": ...}.
    """
    specs = eval_specs(config.tasks, config.episodes, config.seed, config.videos)
    mine = [dataclasses.replace(s, record_steps=True) for s in specs] if record_steps else specs
    with EnvPool(config.tasks, config.rollout) as pool:  # one start-up for the policy and every baseline
        main = rollout(policy, mine, config.rollout, pool=pool, progress=_stage(progress, "policy"))
        base = _baselines(specs, config, floors, pool, progress) if config.baselines else None
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
        out["floor"] = {t: max(base[f]["tasks"][t]["success_rate"] for f in floor_names) for t in out["tasks"]}
        out["expert_mean_success"] = base["expert"]["mean_success"]
        out["floor_mean_success"] = float(np.mean(list(out["floor"].values())))
        out["below_floor"] = [t for t, v in out["tasks"].items() if v["success_rate"] < out["floor"][t]]
    return out, main


BANNER_COLOURS = {True: (20, 140, 40), False: (190, 30, 30)}  # success green, failure red


def _banner(frames: np.ndarray, text: str, success: bool) -> np.ndarray:
    """`frames` with a band on top, green on success and red on failure, holding `text`."""
    from PIL import Image, ImageDraw

    height = 14
    band = Image.new("RGB", (frames.shape[2], height), BANNER_COLOURS[success])
    ImageDraw.Draw(band).text((4, 2), text, fill=(255, 255, 255))
    top = np.broadcast_to(np.asarray(band, np.uint8), (frames.shape[0], height, frames.shape[2], 3))
    return np.concatenate([top, frames], axis=1)


def write_gif(
    frames: np.ndarray,
    path: str,
    *,
    fps: int = 20,
    scale: int = 4,
    caption: str | None = None,
    success: bool | None = None,
) -> str:
    """Write uint8 [T, H, W, 3] frames as an animated GIF, upscaled `scale` x (nearest).

    With `success`, every frame carries a band on top saying how the episode ended (green
    "success", red "failure", then `caption`), so a GIF seen on its own says what it shows.
    """
    import imageio.v3 as iio

    big = np.repeat(np.repeat(np.asarray(frames, np.uint8), scale, axis=1), scale, axis=2)
    if success is not None:
        big = _banner(big, " ".join(p for p in ("success" if success else "failure", caption) if p), success)
    iio.imwrite(path, big, extension=".gif", duration=1000 / fps, loop=0)
    return path


def success_figure(result: Mapping[str, Any]) -> Any:
    """Bars of success per task: policy, expert and floors, with Wilson 95% intervals.

    The legend sits right of the axes and a 0.00 bar shows as a stub on the axis
    (`robolake.plots`), so a floor at zero is visibly zero, not missing.
    """
    from robolake.plots import _pyplot, mark_zero_bars, outside_legend

    plt = _pyplot()
    tasks = list(result["tasks"])
    series: list[tuple[str, dict[str, Any]]] = [("policy", result["tasks"])]
    base = result.get("baselines", {})
    for name in base:
        series.append((name, base[name]["tasks"]))
    x = np.arange(len(tasks))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(tasks)), 4))
    ax.set_ylim(0, 1.05)
    for i, (name, per) in enumerate(series):
        rates = np.array([per[t]["success_rate"] for t in tasks])
        lo = np.array([per[t]["ci95"][0] for t in tasks])
        hi = np.array([per[t]["ci95"][1] for t in tasks])
        bars = ax.bar(
            x + (i - (len(series) - 1) / 2) * width,
            rates,
            width,
            label=name,
            yerr=np.stack([rates - lo, hi - rates]),
            capsize=3,
        )
        mark_zero_bars(ax, bars)
    ax.set_xticks(x)
    ax.set_xticklabels(tasks)
    ax.set_ylabel("success rate (95% Wilson CI)")
    n = result["tasks"][tasks[0]]["episodes"] if tasks else 0
    ax.set_title(f"closed-loop success, {n} episodes per task (unseen seeds)")
    outside_legend(ax, fontsize=8)
    fig.tight_layout()
    return fig


def plot_success(result: Mapping[str, Any], path: str) -> str:
    """`success_figure` saved to `path`."""
    from robolake.plots import save_figure

    return save_figure(success_figure(result), path)


def evaluate_checkpoint(
    checkpoint: str,
    config: EvalConfig | None = None,
    *,
    out_dir: str | None = None,
    json_path: str | None = None,
    device: str = "cpu",
    progress: ProgressFn | None = None,
    record_to: str | None = None,
) -> dict[str, Any]:
    """Evaluate a trained checkpoint (file, checkpoints dir or run dir) in closed loop.

    Writes, when `out_dir` is given: eval.json, success.png and rollout GIFs under videos/ (each
    says on its frames whether the episode succeeded); `json_path` overrides where the JSON goes.
    `progress(name, done, total)` hears from the policy's rollout and each baseline's. With
    `record_to` (a lake URI, created if missing), every episode of the policy is written into it
    as a rollout episode (`result["recorded"]` says what landed).

    Raises:
        FileNotFoundError: no checkpoint at `checkpoint`.
        ValueError: the checkpoint lacks its model config or policy card, or the lake at
            `record_to` has another spec of the embodiment.
    """
    from robolake.sim.env import EMBODIMENT
    from robolake.sim.learned import LearnedPolicy, resolve_checkpoint

    config = config or EvalConfig()
    policy = LearnedPolicy.from_checkpoint(
        checkpoint,
        num_steps=config.num_inference_steps,
        noise_scale=config.noise_scale,
        seed=config.seed,
        device=device,
    )
    mean_action = policy.normalizer.stats[EMBODIMENT].action.mean
    floors = {"random": RandomPolicy(seed=config.seed), "mean-action": MeanActionPolicy(mean_action)}
    result, main = evaluate_policy(policy, config, floors=floors, progress=progress, record_steps=record_to is not None)
    result["checkpoint"] = str(resolve_checkpoint(checkpoint))
    result["family"] = policy.config.family  # the model family the checkpoint was trained as
    if record_to is not None:
        from robolake.sim.record_to_lake import record_rollouts, rollout_origin

        acted = {
            "replan": config.rollout.replan,
            "noise_scale": config.noise_scale,
            "num_inference_steps": config.num_inference_steps,
            "eval_seed": config.seed,
        }
        origin = rollout_origin(
            checkpoint, producer="eval", run=os.path.abspath(out_dir) if out_dir else "eval", policy=acted
        )
        wrote = record_rollouts(record_to, main, origin, config.rollout.env, info={"seed_range": "eval"})
        result["recorded"] = {
            "lake": wrote.lake_uri,
            "lake_version": wrote.lake_version,
            "written": wrote.written,
            "skipped": wrote.skipped,
            "successes": wrote.successes,
            "steps": wrote.steps,
        }
    gifs = {
        (s.task, s.seed)
        for s in eval_specs(config.tasks, config.episodes, config.seed, config.videos)
        if s.record_video
    }
    if out_dir:
        os.makedirs(os.path.join(out_dir, "videos"), exist_ok=True)
        videos = []
        for e in main.episodes:
            if e.frames is not None and (e.task, e.seed) in gifs:  # recorded episodes keep frames too
                name = f"{e.task}_seed{e.seed}_{'success' if e.success else 'fail'}.gif"
                caption = f"{e.task}, {e.steps} steps"
                videos.append(
                    write_gif(e.frames, os.path.join(out_dir, "videos", name), caption=caption, success=e.success)
                )
        result["videos"] = videos
        result["plot"] = plot_success(result, os.path.join(out_dir, "success.png"))
    path = json_path or (os.path.join(out_dir, "eval.json") if out_dir else None)
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
        result["json"] = path
    return result
