"""robolake.rl: asynchronous RL fine-tuning of the flow-matching policy on Ray actors.

Environment workers (several environments each) ask a generation server for action chunks; the
server batches observations dynamically and samples chunks with a stochastic Euler sampler whose
log-probabilities are exact; a learner consumes finished episode pieces as a stream of
micro-batches, optimises a clipped, group-relative policy gradient and publishes weights by
version. `mode="sync"` runs the same actors in lockstep. Environments, observations and the
`Policy` interface are the closed-loop contract of `robolake.sim.contract` (numpy only), shared
with the evaluator and the recorder; Meta-World environments come from `robolake.sim` (the
`robolake[sim]` extra); `PointReachEnv` is a tiny built-in environment.

The names below resolve on first use, so that importing `robolake.rl.options` (which the CLI
does at start-up) does not import torch and Ray.
"""

from __future__ import annotations

from robolake._lazy import lazy_attributes

_EXPORTS: dict[str, str] = {
    "Chains": "robolake.rl.sampler",
    "Env": "robolake.sim.contract",
    "EnvFactory": "robolake.sim.contract",
    "GenerationConfig": "robolake.rl.config",
    "LatencyProfile": "robolake.rl.config",
    "LearnerConfig": "robolake.rl.config",
    "ModelPolicy": "robolake.rl.policy",
    "ModelPolicyFactory": "robolake.rl.policy",
    "Observation": "robolake.sim.contract",
    "Pipeline": "robolake.rl.pipeline",
    "PointReachEnv": "robolake.rl.env",
    "PointReachFactory": "robolake.rl.env",
    "Policy": "robolake.sim.contract",
    "PolicyFactory": "robolake.rl.policy",
    "RLConfig": "robolake.rl.config",
    "RLResult": "robolake.rl.pipeline",
    "Resources": "robolake.rl.config",
    "SamplerConfig": "robolake.rl.config",
    "StepResult": "robolake.sim.contract",
    "TrainablePolicy": "robolake.rl.policy",
    "chain_log_prob": "robolake.rl.sampler",
    "draw_noise": "robolake.rl.sampler",
    "run_reference": "robolake.rl.reference",
    "run_rl": "robolake.rl.pipeline",
    "sample_chains": "robolake.rl.sampler",
    "success_curve": "robolake.rl.pipeline",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
