"""From what a policy observes to the model's input, and from the model's chunks back to commands.

A policy acting in an environment (closed-loop evaluation in `robolake.sim`, RL in `robolake.rl`)
must feed the model the `PackedBatch` the trainer fed it: one sample per observation, the state
normalised with the training statistics (`Normalizer`), the instruction as the pack's text tokens,
the embodiment's id, and a zero action chunk whose width marks the embodiment's action dims. On
the way out, chunks are cut to that width and un-normalised. `ObservationBatcher` does both, for
sim/ and rl/ alike (it lives in training/, which both import and which imports neither).
Resizing frames stays with the caller: the evaluator decodes them as the loader does, RL's plain
policy samples nearest neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from robolake.packers.lengths import TokenLengthConfig
from robolake.schemas.batch import PackedBatch, make_packed_batch
from robolake.training.config import ModelConfig
from robolake.training.normalize import Normalizer

__all__ = ["ObservationBatcher"]


@dataclass(frozen=True, kw_only=True)
class ObservationBatcher:
    """Observations of one embodiment -> `PackedBatch`; model-unit chunks -> robot units.

    Attributes:
        config: The model's config (image size, tokens per view, horizon, padded widths).
        normalizer: The training statistics (`Normalizer(stats={}, mode="none")`: none).
        embodiment: Embodiment tag of the observations (the normaliser's key).
        embodiment_id: The model's id of that embodiment.
        action_dim: The embodiment's action width.
        tokens: The pack's text tokenizer and cap (`PackSpec.tokens`; the byte tokenizer by default).
    """

    config: ModelConfig
    normalizer: Normalizer
    embodiment: str
    embodiment_id: int
    action_dim: int
    tokens: TokenLengthConfig = field(default_factory=TokenLengthConfig)
    _text_ids: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 1 <= self.action_dim <= self.config.max_action_dim:
            raise ValueError(
                f"action_dim must be in 1..max_action_dim={self.config.max_action_dim}, got {self.action_dim}; "
                "build the model with a max_action_dim that holds the embodiment's actions"
            )

    def text_ids(self, instruction: str) -> np.ndarray:
        """int64 token ids of `instruction` (each distinct instruction is tokenised once)."""
        ids = self._text_ids.get(instruction)
        if ids is None:
            ids = self._text_ids[instruction] = self.tokens.encode_text(instruction)
        return ids

    def batch(
        self, views: Sequence[np.ndarray], states: Sequence[np.ndarray], instructions: Sequence[str]
    ) -> PackedBatch:
        """The PackedBatch of n observations (one sample each, in order), on the CPU.

        Args:
            views: Per observation, uint8 [V, image_size, image_size, 3] camera views.
            states: Per observation, the state vector in the robot's units.
            instructions: Per observation, the language instruction.

        Raises:
            ValueError: the sequences differ in length, or a state is wider than `max_state_dim`.
        """
        c, n = self.config, len(views)
        return make_packed_batch(
            pixels=np.concatenate(views) if n else np.zeros((0, c.image_size, c.image_size, 3), np.uint8),
            views_per_sample=[v.shape[0] for v in views],
            text_ids=[self.text_ids(t) for t in instructions],
            state=[self.normalizer.normalize_state(s, self.embodiment) for s in states],
            action=[np.zeros((c.action_horizon, self.action_dim), np.float32)] * n,
            action_valid_steps=[c.action_horizon] * n,
            embodiment_id=[self.embodiment_id] * n,
            tokens_per_view=c.tokens_per_view,
            max_state_dim=c.max_state_dim,
            max_action_dim=c.max_action_dim,
        )

    def action_mask(self, n: int) -> torch.Tensor:
        """bool [n, max_action_dim]: True on the embodiment's action dims."""
        mask = torch.zeros(n, self.config.max_action_dim, dtype=torch.bool)
        mask[:, : self.action_dim] = True
        return mask

    def unnormalize(self, chunks: np.ndarray) -> np.ndarray:
        """Model-unit chunks [..., max_action_dim] -> robot units [..., action_dim] (a new float32 array)."""
        return self.normalizer.unnormalize_action(chunks[..., : self.action_dim], self.embodiment)
