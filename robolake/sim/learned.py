"""A trained robolake checkpoint as a `Policy`: observations in, action chunks in robot units out.

`LearnedPolicy.build_batch` turns a list of observations into the same `PackedBatch` the trainer
saw: the frame JPEG-encoded as the lake stores it and decoded at the model's size as the loader
decodes it, then `robolake.training.observation.ObservationBatcher` (the batch builder RL's plain
policy uses too) with the pack spec's tokenizer, the lake's state statistics and the embodiment
id the pack gave the embodiment. `act` runs one `get_action` on that
batch (one forward pass for every environment of a tick), keeps the embodiment's action width
and undoes the normalisation, so the chunk is in the units the environment takes. Everything it
needs besides the weights comes from the checkpoint (`extra["model_config"]` and the policy card,
`training/normalize.py`), so a checkpoint copied to another machine acts the same. A checkpoint
is read by `robolake.training.checkpoint`, which never unpickles (safetensors and JSON), so
evaluating someone else's checkpoint cannot run their code.

`build_batch` and `model` are public so that RL (robolake.rl) can score log-probabilities of
chunks on exactly the inputs the policy acted on: `batch`, `action_mask` and `to_env_actions`
make a LearnedPolicy RL's trainable policy as it is (`robolake.rl.policy.TrainablePolicy`), and
`LearnedPolicyFactory` builds one inside an actor.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robolake.lake import decode_frame, encode_frame
from robolake.schemas.batch import PackedBatch
from robolake.sim.contract import Observation, Policy
from robolake.sim.env import EMBODIMENT
from robolake.training.config import ModelConfig
from robolake.training.normalize import POLICY_CARD_KEY, PolicyCard
from robolake.training.observation import ObservationBatcher

__all__ = ["LearnedPolicy", "LearnedPolicyFactory", "resolve_checkpoint"]


def resolve_checkpoint(path: str | os.PathLike[str]) -> Path:
    """The checkpoint `path` names: a checkpoint directory, a checkpoints directory or a run
    directory (its newest checkpoint), or a legacy `.pt` file (`training.checkpoint.resolve_checkpoint`).

    Raises:
        FileNotFoundError: no checkpoint there.
    """
    from robolake.training.checkpoint import resolve_checkpoint as resolve

    return resolve(path)


class LearnedPolicy(Policy):
    """A trained model of either family (GrootModel, Pi0Model) with its policy card.

    Args:
        model: The trained model (eval mode is set here).
        card: What the data looked like (statistics, embodiments, pack spec).
        embodiment: Embodiment tag of the environments it acts in.
        num_steps: Euler steps of `get_action` (the model's default when None).
        noise_scale: Scale of the flow's starting noise. 1.0 samples the learned action
            distribution (what RL explores with); 0.0 integrates from the noise mean, one
            deterministic chunk per observation. A tiny policy trained on noisy demonstrations
            acts more precisely near 0 (measured on push + pick-place, 20 episodes each: 0.65
            mean success at 0.0 and at 0.5 against 0.50 at 1.0), which is why evaluation
            defaults to 0 (`EvalConfig.noise_scale`).
        seed: Seed of the flow-matching noise.
        device: Where the model runs.
    """

    name = "policy"
    needs_images = True

    def __init__(
        self,
        model: Any,
        card: PolicyCard,
        *,
        embodiment: str = EMBODIMENT,
        num_steps: int | None = None,
        noise_scale: float = 1.0,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        if noise_scale < 0:
            raise ValueError(f"noise_scale must be >= 0, got {noise_scale}")
        from robolake.packers.spec import PackSpec

        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.config: ModelConfig = model.config
        self.card = card
        self.embodiment = embodiment
        self.normalizer = card.normalizer()
        self.action_dim = card.action_dims.get(embodiment) or int(
            self.normalizer.stats[embodiment].action.mean.shape[0]
        )
        self.batcher = ObservationBatcher(
            config=self.config,
            normalizer=self.normalizer,
            embodiment=embodiment,
            embodiment_id=card.embodiment_id(embodiment),
            action_dim=self.action_dim,
            tokens=PackSpec.from_json(card.pack_spec).tokens,
        )
        self.chunk_size = self.config.action_horizon
        self.num_steps = num_steps
        self.noise_scale = noise_scale
        self.generator = torch.Generator(self.device).manual_seed(seed)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike[str], **kwargs: Any) -> LearnedPolicy:
        """Load a policy from a checkpoint file, checkpoints directory or run directory.

        Raises:
            FileNotFoundError: no checkpoint at `path`.
            LegacyCheckpointError: a pickled checkpoint of an older robolake that must be
                converted first (`robolake convert-checkpoint RUN --trust`; nothing is unpickled).
            ValueError: the checkpoint has no model config or policy card (written before they
                were saved: retrain with `robolake train`).
        """
        from robolake.training.checkpoint import read_checkpoint
        from robolake.training.families import build_model

        ckpt = read_checkpoint(path)  # JSON and safetensors: loading never unpickles
        extra = ckpt.extra
        if "model_config" not in extra or POLICY_CARD_KEY not in extra:
            raise ValueError(
                f"checkpoint {ckpt.path} lacks the model config or the policy card (normalisation statistics); "
                "it predates them: retrain with `robolake train` to get a checkpoint a policy can act from"
            )
        model = build_model(ModelConfig(**extra["model_config"]))  # the family the checkpoint was trained as
        model.load_state_dict(ckpt.model_state())
        return cls(model, PolicyCard.from_json(extra[POLICY_CARD_KEY]), **kwargs)

    def _view(self, image: np.ndarray | None) -> np.ndarray:
        """uint8 [1, size, size, 3]: the (first) frame as the model saw frames in training."""
        if image is None:
            raise ValueError("LearnedPolicy needs camera frames: create the environments with render_images=True")
        if image.ndim == 4:
            image = image[0]
        size = self.config.image_size
        if image.shape[:2] != (size, size):
            # The frame takes the training path: JPEG as the lake stores it, then the loader's
            # decode at the model's size (DCT-domain downscale, then bilinear).
            image = decode_frame(encode_frame(np.ascontiguousarray(image)), size=(size, size))
        return image[None]

    def build_batch(self, observations: Sequence[Observation]) -> PackedBatch:
        """The PackedBatch of `observations` (one sample and one view each), on the model's device."""
        batch = self.batcher.batch(
            [self._view(o.image) for o in observations],
            [o.state for o in observations],
            [o.instruction for o in observations],
        )
        return batch.to(self.device)

    def unnormalize(self, chunks: torch.Tensor) -> np.ndarray:
        """Model-unit chunks [n, H, max_action_dim] -> robot units [n, H, action_dim], clipped to [-1, 1]."""
        return np.clip(self.batcher.unnormalize(chunks.float().cpu().numpy()), -1.0, 1.0)

    @torch.no_grad()
    def act(self, observations: Sequence[Observation]) -> np.ndarray:
        if not observations:
            return np.zeros((0, self.chunk_size, self.action_dim), np.float32)
        batch = self.build_batch(observations)
        c = self.config
        shape = (len(observations), c.action_horizon, c.max_action_dim)
        noise = torch.randn(shape, generator=self.generator, device=self.device) * self.noise_scale
        chunks = self.model.get_action(batch, self.num_steps, noise=noise)
        return self.unnormalize(chunks)

    # -- RL's trainable side (robolake.rl.policy.TrainablePolicy) ---------------------------------

    def batch(self, observations: Sequence[Observation]) -> PackedBatch:
        """`build_batch` on the CPU (where RL's actors exchange batches)."""
        return self.build_batch(observations).to("cpu")

    def action_mask(self, observations: Sequence[Observation]) -> torch.Tensor:
        """bool [n, max_action_dim]: the action dims the embodiment really has."""
        mask: torch.Tensor = self.batcher.action_mask(len(observations))
        return mask

    def to_env_actions(self, chunks: np.ndarray, observations: Sequence[Observation]) -> list[np.ndarray]:
        """Normalised chunks [n, H, max_action_dim] -> per observation [H, action_dim] in env units."""
        out = self.unnormalize(torch.from_numpy(np.asarray(chunks)))
        return [np.asarray(a, np.float32) for a in out]


@dataclass(frozen=True)
class LearnedPolicyFactory:
    """Builds `LearnedPolicy.from_checkpoint(checkpoint)` (picklable: RL's actors each build one).

    Attributes:
        checkpoint: A checkpoint directory, checkpoints directory or run directory.
    """

    checkpoint: str

    def __call__(self) -> LearnedPolicy:
        return LearnedPolicy.from_checkpoint(self.checkpoint)
