"""The model families that train on one batch contract, and the one place a config becomes a model.

`ModelConfig.family` names the family; `build_model` is how the trainer, the policies that load a
checkpoint (whose `model_config` carries the family) and the benchmarks build one, so a new family
is one entry here. Checkpoints written before families existed have no `family` and load as GR00T.
"""

from __future__ import annotations

from robolake.training.config import MODEL_FAMILIES, ModelConfig
from robolake.training.model import GrootModel
from robolake.training.pi0 import Pi0Model

__all__ = ["MODEL_FAMILIES", "PolicyModel", "build_model"]

PolicyModel = GrootModel | Pi0Model


def build_model(config: ModelConfig) -> PolicyModel:
    """A fresh model of `config.family` ("groot": `GrootModel`, "pi0": `Pi0Model`)."""
    if config.family == "pi0":
        return Pi0Model(config)
    return GrootModel(config)
