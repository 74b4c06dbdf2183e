"""robolake.rl: asynchronous RL fine-tuning of the flow-matching policy on Ray actors.

Environment workers (several environments each) ask a generation server for action chunks; the
server batches observations dynamically and samples chunks with a stochastic Euler sampler whose
log-probabilities are exact; a learner consumes finished episode pieces as a stream of
micro-batches, optimises a clipped, group-relative policy gradient and publishes weights by
version. `mode="sync"` runs the same actors in lockstep. Meta-World environments come from
`robolake.sim` (the `robolake[sim]` extra); `PointReachEnv` is a tiny built-in environment.
"""

from robolake.rl.config import (
    GenerationConfig,
    LatencyProfile,
    LearnerConfig,
    Resources,
    RLConfig,
    SamplerConfig,
)
from robolake.rl.env import (
    Env,
    EnvFactory,
    Observation,
    PointReachEnv,
    PointReachFactory,
    StepResult,
)
from robolake.rl.pipeline import Pipeline, RLResult, run_rl, success_curve
from robolake.rl.policy import ModelPolicy, ModelPolicyFactory, Policy, PolicyFactory
from robolake.rl.reference import run_reference
from robolake.rl.sampler import Chains, chain_log_prob, draw_noise, sample_chains

__all__ = [
    "Chains",
    "Env",
    "EnvFactory",
    "GenerationConfig",
    "LatencyProfile",
    "LearnerConfig",
    "ModelPolicy",
    "ModelPolicyFactory",
    "Observation",
    "Pipeline",
    "PointReachEnv",
    "PointReachFactory",
    "Policy",
    "PolicyFactory",
    "RLConfig",
    "RLResult",
    "Resources",
    "SamplerConfig",
    "StepResult",
    "chain_log_prob",
    "draw_noise",
    "run_reference",
    "run_rl",
    "sample_chains",
    "success_curve",
]
