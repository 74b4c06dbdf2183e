"""The command-line options `robolake rl` and `robolake bench rl` share, and the RLConfig they make."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from robolake.rl.config import LearnerConfig, RLConfig, SamplerConfig

__all__ = ["add_pipeline_arguments", "pipeline_config"]


def add_pipeline_arguments(p: argparse.ArgumentParser) -> None:
    """The options `robolake rl` and `robolake bench rl` share: actors, chunks, sampler noise, learning rate."""
    p.add_argument("--workers", type=int, default=2, help="environment worker actors")
    p.add_argument("--envs-per-worker", type=int, default=4, help="environments per worker")
    p.add_argument("--execute-steps", type=int, default=8, help="actions executed per chunk (replanning horizon)")
    p.add_argument("--sigma", type=float, default=0.2, help="noise std per Euler step (normalised action units)")
    p.add_argument(
        "--start-noise",
        type=float,
        default=0.0,
        help="scale of each chain's starting noise (0: start where the evaluator does)",
    )
    p.add_argument("--lr", type=float, default=1e-5, help="learner learning rate")


def pipeline_config(
    args: argparse.Namespace, tasks: tuple[str, ...], *, learner: LearnerConfig | None = None, **fields: Any
) -> RLConfig:
    """An RLConfig from the options `add_pipeline_arguments` added, `learner` (its lr from `--lr`) and
    the other RLConfig `fields` (mode, env_steps, seed, ...)."""
    return RLConfig(
        tasks=tasks,
        num_workers=args.workers,
        envs_per_worker=args.envs_per_worker,
        execute_steps=args.execute_steps,
        sampler=SamplerConfig(sigma=args.sigma, start_noise=args.start_noise),
        learner=dataclasses.replace(learner or LearnerConfig(), lr=args.lr),
        **fields,
    )
