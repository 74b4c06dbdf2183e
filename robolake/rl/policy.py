"""How the RL pipeline talks to a model: observations in, normalised batches, env actions out.

Observations are the closed-loop contract's (`robolake.sim.contract`); what RL adds is the model
side. A `TrainablePolicy` owns a `GrootModel` and the normalisation it was trained with. The
generation server and the learner each build their own from one picklable `PolicyFactory`, so
both see exactly the same batches for the same observations: the learner re-scores the very
chains the server sampled. `ModelPolicy` is the plain implementation: one embodiment, the
training `Normalizer` (none by default), byte-level instruction tokens and views resized by
nearest neighbour, with the batch built by `robolake.training.observation.ObservationBatcher`,
as the evaluator's is. The evaluator's `robolake.sim.learned.LearnedPolicy` is one as it is
(`LearnedPolicyFactory` builds it from a checkpoint).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from robolake.schemas.batch import PackedBatch
from robolake.sim.contract import Observation
from robolake.training.config import ModelConfig
from robolake.training.model import GrootModel
from robolake.training.normalize import Normalizer
from robolake.training.observation import ObservationBatcher

__all__ = ["ModelPolicy", "ModelPolicyFactory", "PolicyFactory", "TrainablePolicy"]


@runtime_checkable
class TrainablePolicy(Protocol):
    """A model plus its input/output conventions (see the module docstring)."""

    model: GrootModel

    def batch(self, observations: Sequence[Observation]) -> PackedBatch:
        """The normalised PackedBatch of `observations` (one sample each, in order)."""
        ...

    def action_mask(self, observations: Sequence[Observation]) -> torch.Tensor:
        """bool [n, max_action_dim]: the action dims each observation's embodiment really has."""
        ...

    def to_env_actions(self, chunks: np.ndarray, observations: Sequence[Observation]) -> list[np.ndarray]:
        """Normalised chunks [n, H, max_action_dim] -> per observation [H, action_dim] in env units."""
        ...


class PolicyFactory(Protocol):
    """Builds a TrainablePolicy inside an actor (must be picklable)."""

    def __call__(self) -> TrainablePolicy: ...


def _resize_views(image: np.ndarray | None, size: int) -> np.ndarray:
    """uint8 [V, size, size, 3] by nearest-neighbour sampling (exact when sizes already match).

    Raises:
        ValueError: the observation was not rendered (ask the environment's `observe()`).
    """
    if image is None:
        raise ValueError("the policy needs camera frames: pass observations from Env.observe(), which renders")
    img = image if image.ndim == 4 else image[None]
    h, w = img.shape[1:3]
    if h == size and w == size:
        return img
    rows = (np.arange(size) * h // size).clip(0, h - 1)
    cols = (np.arange(size) * w // size).clip(0, w - 1)
    return img[:, rows][:, :, cols]


def _no_normalization() -> Normalizer:
    return Normalizer(stats={}, mode="none")


@dataclass
class ModelPolicy:
    """TrainablePolicy over a GrootModel acting for one embodiment.

    Attributes:
        model: The model.
        action_dim: The environment's action width.
        normalizer: The statistics the model was trained with (default: none; model units are
            the environment's).
        embodiment: The normaliser's key of the environment's embodiment.
        embodiment_id: The model's id of that embodiment.
    """

    model: GrootModel
    action_dim: int
    normalizer: Normalizer = field(default_factory=_no_normalization)
    embodiment: str = ""
    embodiment_id: int = 0
    batcher: ObservationBatcher = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.batcher = ObservationBatcher(
            config=self.model.config,
            normalizer=self.normalizer,
            embodiment=self.embodiment,
            embodiment_id=self.embodiment_id,
            action_dim=self.action_dim,
        )

    def batch(self, observations: Sequence[Observation]) -> PackedBatch:
        size = self.model.config.image_size
        return self.batcher.batch(
            [_resize_views(o.image, size) for o in observations],
            [o.state for o in observations],
            [o.instruction for o in observations],
        )

    def action_mask(self, observations: Sequence[Observation]) -> torch.Tensor:
        return self.batcher.action_mask(len(observations))

    def to_env_actions(self, chunks: np.ndarray, observations: Sequence[Observation]) -> list[np.ndarray]:
        return list(self.batcher.unnormalize(chunks[: len(observations)]))


def state_dict_bytes(model: torch.nn.Module) -> bytes:
    """The model's weights serialised (what a factory ships to actors)."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getvalue()


@dataclass(frozen=True, kw_only=True)
class ModelPolicyFactory:
    """PolicyFactory of a `ModelPolicy` from a model config and weights (picklable).

    Attributes:
        model_config: The model's config.
        weights: `state_dict_bytes` of its weights (None: a fresh model, seeded with 0).
        action_dim, normalizer, embodiment, embodiment_id: The `ModelPolicy` fields.
    """

    model_config: ModelConfig
    weights: bytes | None
    action_dim: int
    normalizer: Normalizer = field(default_factory=_no_normalization)
    embodiment: str = ""
    embodiment_id: int = 0

    @classmethod
    def from_model(
        cls,
        model: GrootModel,
        *,
        action_dim: int,
        normalizer: Normalizer | None = None,
        embodiment: str = "",
        embodiment_id: int = 0,
    ) -> ModelPolicyFactory:
        """The factory of `model` with its current weights."""
        norm = _no_normalization() if normalizer is None else normalizer
        return cls(
            model_config=model.config,
            weights=state_dict_bytes(model),
            action_dim=action_dim,
            normalizer=norm,
            embodiment=embodiment,
            embodiment_id=embodiment_id,
        )

    def __call__(self) -> TrainablePolicy:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # a model without weights starts the same in every actor
            model = GrootModel(self.model_config)
        if self.weights is not None:
            state: dict[str, Any] = torch.load(io.BytesIO(self.weights), map_location="cpu", weights_only=True)
            model.load_state_dict(state)
        model.eval()
        return ModelPolicy(model, self.action_dim, self.normalizer, self.embodiment, self.embodiment_id)
