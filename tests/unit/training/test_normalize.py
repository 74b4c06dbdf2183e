"""Normalizer and PolicyCard: the packer's formulas, undone exactly; cards survive JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robolake.lake.stats.norm import NormStats, VectorStats
from robolake.training.normalize import Normalizer, PolicyCard


def _stats(rng: np.random.Generator) -> NormStats:
    return NormStats(
        state=VectorStats.of(rng.normal(2.0, 3.0, (200, 5))), action=VectorStats.of(rng.uniform(-1, 1, (200, 4)))
    )


@pytest.mark.parametrize("mode", ["mean_std", "min_max", "q01_q99"])
def test_action_roundtrip_and_packer_formula(mode: str) -> None:
    rng = np.random.default_rng(0)
    stats = _stats(rng)
    norm = Normalizer(stats={"arm": stats}, mode=mode)
    a = rng.uniform(-1, 1, (7, 16, 4)).astype(np.float32)
    z = norm.normalize_action(a, "arm")
    np.testing.assert_allclose(z, stats.action.normalize(a, mode))  # the packer's own formula
    np.testing.assert_allclose(norm.unnormalize_action(z, "arm"), a, atol=1e-5)
    s = rng.normal(2.0, 3.0, (5,)).astype(np.float32)
    np.testing.assert_allclose(norm.normalize_state(s, "arm"), stats.state.normalize(s, mode))


def test_unknown_embodiment_names_the_known_ones() -> None:
    norm = Normalizer(stats={"arm": _stats(np.random.default_rng(1))})
    with pytest.raises(KeyError, match="arm"):
        norm.normalize_state(np.zeros(5), "humanoid")


def test_policy_card_json_roundtrip() -> None:
    stats = _stats(np.random.default_rng(2))
    card = PolicyCard(
        embodiments=["arm", "sawyer"],
        normalization="mean_std",
        stats={"sawyer": stats.to_json()},
        pack_spec={"horizon": 16},
        state_dims={"sawyer": 5},
        action_dims={"sawyer": 4},
        lake_uri="/tmp/lake",
        lake_version=3,
    )
    back = PolicyCard.from_json(json.loads(json.dumps(card.to_json())))
    assert back == card
    assert back.embodiment_id("sawyer") == 1
    np.testing.assert_allclose(back.normalizer().stats["sawyer"].action.mean, stats.action.mean)
    with pytest.raises(ValueError, match="stats"):
        PolicyCard.from_json({"embodiments": [], "normalization": "mean_std", "pack_spec": {}})
