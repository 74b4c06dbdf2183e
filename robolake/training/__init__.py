"""robolake.training: varlen attention, the thin GR00T-style model, FP8 converters, the trainer."""

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
from robolake.training.config import BYTE_VOCAB, ModelConfig
from robolake.training.distributed import DistInfo, setup_distributed, teardown_distributed
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
    "CheckpointState",
    "DistInfo",
    "FP8Conversion",
    "FP8Recipe",
    "Float8WeightOnlyLinear",
    "GrootModel",
    "ModelConfig",
    "ModelOutput",
    "TrainConfig",
    "TrainResult",
    "TrainState",
    "VarlenPlan",
    "apply_fp8",
    "available_backends",
    "build_optimizer",
    "build_scheduler",
    "fp8_training_supported",
    "latest_checkpoint",
    "linear_weight_bytes",
    "load_checkpoint",
    "padded_attention",
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
