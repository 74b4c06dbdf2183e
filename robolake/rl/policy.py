"""How the RL pipeline talks to a model: observations in, normalised batches, env actions out.

A `Policy` owns a `GrootModel` and the normalisation it was trained with. The generation server
and the learner each build their own from one picklable `PolicyFactory`, so both see exactly the
same batches for the same observations: the learner re-scores the very chains the server
sampled. `ModelPolicy` is the plain implementation (mean/std normalisation of state and action,
byte-level instruction tokens, one embodiment); `robolake.rl.sim_policy` adapts the simulator
suite's checkpoint loader to it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from robolake.packers.lengths import ByteTokenizer
from robolake.rl.env import Observation
from robolake.schemas.batch import PackedBatch, make_packed_batch
from robolake.training.config import ModelConfig
from robolake.training.model import GrootModel

__all__ = ["ModelPolicy", "ModelPolicyFactory", "Normalizer", "Policy", "PolicyFactory"]


@runtime_checkable
class Policy(Protocol):
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
    """Builds a Policy inside an actor (must be picklable)."""

    def __call__(self) -> Policy: ...


@dataclass(frozen=True)
class Normalizer:
    """Mean/std normalisation of state and action (the lake's statistics)."""

    state_mean: np.ndarray
    state_std: np.ndarray
    action_mean: np.ndarray
    action_std: np.ndarray

    @classmethod
    def identity(cls, state_dim: int, action_dim: int) -> Normalizer:
        return cls(np.zeros(state_dim, np.float32), np.ones(state_dim, np.float32), np.zeros(action_dim, np.float32), np.ones(action_dim, np.float32))

    def state(self, s: np.ndarray) -> np.ndarray:
        return ((np.asarray(s, np.float32) - self.state_mean) / np.maximum(self.state_std, 1e-6)).astype(np.float32)

    def unaction(self, a: np.ndarray) -> np.ndarray:
        return (np.asarray(a, np.float32) * self.action_std + self.action_mean).astype(np.float32)

    def action(self, a: np.ndarray) -> np.ndarray:
        return ((np.asarray(a, np.float32) - self.action_mean) / np.maximum(self.action_std, 1e-6)).astype(np.float32)


def _resize_views(image: np.ndarray, size: int) -> np.ndarray:
    """uint8 [V, size, size, 3] by nearest-neighbour sampling (exact when sizes already match)."""
    img = image if image.ndim == 4 else image[None]
    h, w = img.shape[1:3]
    if h == size and w == size:
        return img
    rows = (np.arange(size) * h // size).clip(0, h - 1)
    cols = (np.arange(size) * w // size).clip(0, w - 1)
    return img[:, rows][:, :, cols]


@dataclass
class ModelPolicy:
    """Policy over a GrootModel with mean/std normalisation and one embodiment id."""

    model: GrootModel
    normalizer: Normalizer
    embodiment_id: int = 0
    tokenizer: ByteTokenizer = field(default_factory=ByteTokenizer)
    _text_cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def _text(self, instruction: str) -> np.ndarray:
        ids = self._text_cache.get(instruction)
        if ids is None:
            ids = self._text_cache[instruction] = self.tokenizer.encode(instruction)
        return ids

    def batch(self, observations: Sequence[Observation]) -> PackedBatch:
        c = self.model.config
        views = [_resize_views(o.image, c.image_size) for o in observations]
        a_dim = self.normalizer.action_mean.shape[0]
        return make_packed_batch(
            pixels=np.concatenate(views) if views else np.zeros((0, c.image_size, c.image_size, 3), np.uint8),
            views_per_sample=[v.shape[0] for v in views],
            text_ids=[self._text(o.instruction) for o in observations],
            state=[self.normalizer.state(o.state) for o in observations],
            action=[np.zeros((c.action_horizon, a_dim), np.float32) for _ in observations],
            action_valid_steps=[c.action_horizon] * len(observations),
            embodiment_id=[self.embodiment_id] * len(observations),
            tokens_per_view=c.tokens_per_view,
            max_state_dim=c.max_state_dim,
            max_action_dim=c.max_action_dim,
        )

    def action_mask(self, observations: Sequence[Observation]) -> torch.Tensor:
        mask = torch.zeros(len(observations), self.model.config.max_action_dim, dtype=torch.bool)
        mask[:, : self.normalizer.action_mean.shape[0]] = True
        return mask

    def to_env_actions(self, chunks: np.ndarray, observations: Sequence[Observation]) -> list[np.ndarray]:
        a_dim = self.normalizer.action_mean.shape[0]
        return [self.normalizer.unaction(chunks[i, :, :a_dim]) for i in range(len(observations))]


def state_dict_bytes(model: torch.nn.Module) -> bytes:
    """The model's weights serialised (what a factory ships to actors)."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getvalue()


@dataclass(frozen=True)
class ModelPolicyFactory:
    """PolicyFactory of a `ModelPolicy` from a model config, weights and a normaliser (picklable)."""

    model_config: ModelConfig
    weights: bytes | None
    normalizer: Normalizer
    embodiment_id: int = 0

    @classmethod
    def from_model(cls, model: GrootModel, normalizer: Normalizer, embodiment_id: int = 0) -> ModelPolicyFactory:
        return cls(model.config, state_dict_bytes(model), normalizer, embodiment_id)

    def __call__(self) -> Policy:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # a model without weights starts the same in every actor
            model = GrootModel(self.model_config)
        if self.weights is not None:
            state: dict[str, Any] = torch.load(io.BytesIO(self.weights), map_location="cpu", weights_only=True)
            model.load_state_dict(state)
        model.eval()
        return ModelPolicy(model, self.normalizer, self.embodiment_id)
