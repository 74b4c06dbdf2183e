"""robolake.training: varlen and prefix-LM attention, the GR00T- and pi0-style models, FP8 converters, the trainer."""

from robolake.training.attention import (
    ATTENTION_BACKENDS,
    VarlenPlan,
    available_backends,
    padded_attention,
    plan_varlen,
    resolve_backend,
    varlen_attention,
)
from robolake.training.checkpoint import (
    CheckpointState,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from robolake.training.config import BYTE_VOCAB, MODEL_FAMILIES, ModelConfig
from robolake.training.distributed import DistInfo, setup_distributed, teardown_distributed
from robolake.training.families import PolicyModel, build_model
from robolake.training.fp8 import (
    Float8WeightOnlyLinear,
    FP8Conversion,
    FP8Recipe,
    apply_fp8,
    fp8_training_supported,
    linear_weight_bytes,
    quantize_weights_fp8,
)
from robolake.training.model import GrootModel, ModelOutput
from robolake.training.pi0 import Pi0Model
from robolake.training.prefix_lm import (
    PREFIX_LM_BACKENDS,
    DensePrefixLM,
    PrefixLMLayout,
    VarlenPrefixLM,
    prefix_lm_layout,
)
from robolake.training.schedule import build_scheduler, warmup_cosine
from robolake.training.trainer import (
    TrainConfig,
    TrainResult,
    TrainState,
    build_optimizer,
    train,
    train_step,
)

__all__ = [
    "ATTENTION_BACKENDS",
    "BYTE_VOCAB",
    "MODEL_FAMILIES",
    "PREFIX_LM_BACKENDS",
    "DensePrefixLM",
    "CheckpointState",
    "DistInfo",
    "FP8Conversion",
    "FP8Recipe",
    "Float8WeightOnlyLinear",
    "GrootModel",
    "ModelConfig",
    "ModelOutput",
    "Pi0Model",
    "PolicyModel",
    "PrefixLMLayout",
    "TrainConfig",
    "TrainResult",
    "TrainState",
    "VarlenPlan",
    "VarlenPrefixLM",
    "apply_fp8",
    "available_backends",
    "build_model",
    "build_optimizer",
    "build_scheduler",
    "fp8_training_supported",
    "latest_checkpoint",
    "linear_weight_bytes",
    "load_checkpoint",
    "padded_attention",
    "prefix_lm_layout",
    "plan_varlen",
    "quantize_weights_fp8",
    "resolve_backend",
    "save_checkpoint",
    "setup_distributed",
    "teardown_distributed",
    "train",
    "train_step",
    "varlen_attention",
    "warmup_cosine",
]
