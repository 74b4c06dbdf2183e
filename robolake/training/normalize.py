"""Normalisation between a robot's units and the model's, and the policy card a checkpoint carries.

Training data is normalised when it is packed: every state and action vector goes through its
embodiment's statistics from the lake (`lake/stats.py`, mean/std by default, or min/max or
q01/q99 to [-1, 1]), so the model learns in normalised units. A policy acting in the world must
do the same on the way in (state) and undo it on the way out (action chunks); with any other
statistics, or none, the model sees inputs it never trained on and commands motions in the wrong
units. `Normalizer` holds those statistics per embodiment and applies the same formulas as the
packer (`VectorStats.normalize` / `unnormalize`), so training and acting cannot drift apart.

A checkpoint is only usable by someone who knows all of what decided the training inputs.
`PolicyCard` is that record, written into every checkpoint's `extra["policy"]`: the statistics,
the normalisation mode, the embodiments in id order (the model's category-specific layers are
indexed by that id), the pack spec (horizon, tokens per view, text tokenizer) and the lake and
version the statistics came from. `policy_card_from_pack` builds it from a `robolake pack` output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robolake.lake import NormStats

__all__ = ["Normalizer", "PolicyCard", "policy_card_from_lake", "policy_card_from_pack", "POLICY_CARD_KEY"]

POLICY_CARD_KEY = "policy"


@dataclass(frozen=True, kw_only=True)
class Normalizer:
    """Per-embodiment state/action normalisation, identical to the packer's.

    Every method returns a new float32 array (mode "none" too), never a view of its input.

    Attributes:
        stats: Statistics per embodiment tag.
        mode: "mean_std", "min_max", "q01_q99" or "none".
    """

    stats: Mapping[str, NormStats]
    mode: str = "mean_std"

    def __post_init__(self) -> None:
        if self.mode not in ("mean_std", "min_max", "q01_q99", "none"):
            raise ValueError(f"normalization mode must be mean_std, min_max, q01_q99 or none, got {self.mode!r}")

    def _get(self, embodiment: str) -> NormStats:
        if embodiment not in self.stats:
            raise KeyError(f"no normalisation statistics for embodiment {embodiment!r}; have {sorted(self.stats)}")
        return self.stats[embodiment]

    def normalize_state(self, state: np.ndarray, embodiment: str) -> np.ndarray:
        """State in model units (last axis = state dims)."""
        x = np.asarray(state, dtype=np.float32)
        return x.copy() if self.mode == "none" else self._get(embodiment).state.normalize(x, self.mode)

    def normalize_action(self, action: np.ndarray, embodiment: str) -> np.ndarray:
        """Actions in model units (last axis = action dims)."""
        x = np.asarray(action, dtype=np.float32)
        return x.copy() if self.mode == "none" else self._get(embodiment).action.normalize(x, self.mode)

    def unnormalize_action(self, action: np.ndarray, embodiment: str) -> np.ndarray:
        """Model-unit actions back in the robot's units (last axis = action dims)."""
        x = np.asarray(action, dtype=np.float32)
        return x.copy() if self.mode == "none" else self._get(embodiment).action.unnormalize(x, self.mode)


@dataclass(frozen=True, kw_only=True)
class PolicyCard:
    """What a trained policy needs to act, beside its weights and model config.

    Attributes:
        embodiments: Embodiment tags in id order (`embodiment_id` = position).
        normalization: The pack's normalisation mode.
        stats: Statistics per embodiment tag, as `NormStats.to_json` strings.
        pack_spec: The `PackSpec.to_json` of the training data (horizon, tokens, tokenizer).
        state_dims: State width per embodiment tag.
        action_dims: Action width per embodiment tag.
        lake_uri: Lake the statistics came from.
        lake_version: Its version.
    """

    embodiments: list[str]
    normalization: str
    stats: dict[str, str]
    pack_spec: dict[str, Any]
    state_dims: dict[str, int] = field(default_factory=dict)
    action_dims: dict[str, int] = field(default_factory=dict)
    lake_uri: str = ""
    lake_version: int = 0

    def normalizer(self) -> Normalizer:
        return Normalizer(stats={k: NormStats.from_json(v) for k, v in self.stats.items()}, mode=self.normalization)

    def embodiment_id(self, embodiment: str) -> int:
        """Raises: KeyError naming the known embodiments."""
        if embodiment not in self.embodiments:
            raise KeyError(f"the policy was not trained on embodiment {embodiment!r}; it knows {self.embodiments}")
        return self.embodiments.index(embodiment)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PolicyCard:
        """Raises: ValueError when a field is missing."""
        try:
            return cls(
                embodiments=list(d["embodiments"]),
                normalization=str(d["normalization"]),
                stats={str(k): str(v) for k, v in d["stats"].items()},
                pack_spec=dict(d["pack_spec"]),
                state_dims={str(k): int(v) for k, v in d.get("state_dims", {}).items()},
                action_dims={str(k): int(v) for k, v in d.get("action_dims", {}).items()},
                lake_uri=str(d.get("lake_uri", "")),
                lake_version=int(d.get("lake_version", 0)),
            )
        except KeyError as e:
            raise ValueError(
                f"policy card lacks field {e.args[0]!r}; was the checkpoint written by robolake train?"
            ) from e


def policy_card_from_pack(pack_uri: str, storage_options: dict[str, str] | None = None) -> PolicyCard:
    """The policy card of a model trained on the packed shards at `pack_uri`.

    Statistics are read from the lake the shards were packed from, at the version recorded in
    their manifest (the statistics the packer normalised with).

    Raises:
        FileNotFoundError: `pack_uri` is not a pack output, or its lake is gone.
    """
    from robolake.lake import Lake
    from robolake.packers.manifest import read_manifest

    manifest = read_manifest(pack_uri, storage_options)
    lake = Lake.open(manifest.lake_uri, version=manifest.lake_version, storage_options=storage_options)
    specs = lake.embodiments()
    stats = {tag: lake.norm_stats(tag).to_json() for tag in manifest.embodiments}
    return PolicyCard(
        embodiments=list(manifest.embodiments),
        normalization=str(manifest.spec.get("normalization", "mean_std")),
        stats=stats,
        pack_spec=json.loads(json.dumps(manifest.spec)),
        state_dims={t: specs[t].state_dim for t in manifest.embodiments if t in specs},
        action_dims={t: specs[t].action_dim for t in manifest.embodiments if t in specs},
        lake_uri=manifest.lake_uri,
        lake_version=manifest.lake_version,
    )


def policy_card_from_lake(lake: Any, spec: Any) -> PolicyCard:
    """The policy card of a model trained straight from `lake` (a `Lake`) with pack spec `spec`.

    Embodiments are in the order the on-the-fly packer numbers them (sorted tags).
    """
    specs = lake.embodiments()
    tags = sorted(specs)
    return PolicyCard(
        embodiments=tags,
        normalization=spec.normalization,
        stats={t: lake.norm_stats(t).to_json() for t in tags},
        pack_spec=json.loads(json.dumps(spec.to_json())),
        state_dims={t: specs[t].state_dim for t in tags},
        action_dims={t: specs[t].action_dim for t in tags},
        lake_uri=str(lake.uri),
        lake_version=int(lake.version),
    )
