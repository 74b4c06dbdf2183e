"""The RL options `robolake rl` and `robolake bench rl` share reach the RLConfig they build."""

from __future__ import annotations

import argparse

from robolake.cli import build_parser
from robolake.commands.rl import config_from_args
from robolake.rl.options import add_pipeline_arguments, pipeline_config


def test_shared_options_build_the_pipeline_config():
    p = argparse.ArgumentParser()
    add_pipeline_arguments(p)
    args = p.parse_args(
        [
            "--workers",
            "3",
            "--envs-per-worker",
            "5",
            "--execute-steps",
            "6",
            "--sigma",
            "0.3",
            "--start-noise",
            "0.5",
            "--lr",
            "0.25",
        ]
    )
    c = pipeline_config(args, ("reach",), env_steps=123, log_every_s=5.0)
    assert (c.tasks, c.num_workers, c.envs_per_worker, c.execute_steps, c.env_steps, c.log_every_s) == (
        ("reach",),
        3,
        5,
        6,
        123,
        5.0,
    )
    assert (c.sampler.sigma, c.sampler.start_noise, c.learner.lr) == (0.3, 0.5, 0.25)


def test_defaults_are_the_configs_defaults():
    from robolake.rl.config import LearnerConfig, SamplerConfig

    p = argparse.ArgumentParser()
    add_pipeline_arguments(p)
    c = pipeline_config(p.parse_args([]), ("reach",))
    assert c.sampler == SamplerConfig() and c.learner == LearnerConfig()
    from robolake.rl.config import GenerationConfig

    rl = config_from_args(build_parser().parse_args(["rl", "--out", "x"]), ("reach",))
    assert rl.generation.round_deadline_s == GenerationConfig().round_deadline_s


def test_rl_command_line_reaches_every_config_field(tmp_path):
    args = build_parser().parse_args(
        [
            "rl",
            "--out",
            str(tmp_path),
            "--mode",
            "sync",
            "--steps",
            "77",
            "--seed",
            "4",
            "--lr",
            "0.5",
            "--sigma",
            "0.1",
            "--micro-batch",
            "3",
            "--max-staleness",
            "1",
            "--staleness-mode",
            "correct",
            "--learner-cpus",
            "0.75",
            "--max-batch",
            "8",
            "--deadline-ms",
            "7",
            "--round-deadline-ms",
            "250",
            "--generation-gpus",
            "1",
            "--worker-cpus",
            "0.5",
            "--latency",
            "pareto",
            "--latency-scale-ms",
            "3",
            "--latency-shape",
            "2",
            "--no-learn",
            "--log-every",
            "0.5",
            "--address",
            "ray://head:10001",
            "--workers",
            "1",
        ]
    )
    c = config_from_args(args, ("reach", "push"))
    assert (c.mode, c.env_steps, c.seed, c.tasks, c.num_workers, c.learn, c.log_every_s, c.ray_address) == (
        "sync",
        77,
        4,
        ("reach", "push"),
        1,
        False,
        0.5,
        "ray://head:10001",
    )
    assert (c.learner.lr, c.learner.micro_batch, c.learner.max_staleness, c.learner.staleness_mode) == (
        0.5,
        3,
        1,
        "correct",
    )
    assert c.learner.resources.num_cpus == 0.75 and c.sampler.sigma == 0.1
    assert (c.generation.max_batch, c.generation.deadline_s, c.generation.resources.num_gpus) == (8, 0.007, 1.0)
    assert c.generation.round_deadline_s == 0.25
    assert c.worker_resources.num_cpus == 0.5
    assert (c.latency.kind, c.latency.scale_s, c.latency.shape) == ("pareto", 0.003, 2.0)
