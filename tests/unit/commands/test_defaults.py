"""The defaults of `robolake pack` and `robolake train` work together, for every model preset."""

from __future__ import annotations

import pytest

from robolake.cli import build_parser
from robolake.commands.pack import DEFAULT_TOKENS_PER_VIEW, spec_from_args
from robolake.training.config import _PRESETS, ModelConfig
from robolake.training.sizing import fit_model_config


def test_pack_defaults_are_what_every_preset_accepts():
    spec = spec_from_args(build_parser().parse_args(["pack", "lake/", "packed/"]))
    assert spec.tokens.tokens_per_view == DEFAULT_TOKENS_PER_VIEW
    for name in _PRESETS:
        base = ModelConfig.preset(name)
        # what `robolake train --shards packed/ --preset NAME` sizes from the shards' manifest
        fitted = fit_model_config(
            base,
            tokens_per_view=spec.tokens.tokens_per_view,
            horizon=spec.horizon,
            max_state_dim=44,
            max_action_dim=32,
            num_embodiments=3,
            max_seqlen=spec.max_tokens,
        )
        assert fitted.tokens_per_view == DEFAULT_TOKENS_PER_VIEW, name
        assert (fitted.image_size // fitted.patch_size) ** 2 >= fitted.tokens_per_view, name


@pytest.mark.parametrize("preset", sorted(_PRESETS))
def test_train_defaults_on_a_lake_fit_each_preset(preset):
    # `robolake train --lake LAKE --preset P` packs on the fly at the preset's own tokens per view
    args = build_parser().parse_args(["train", "--lake", "lake/", "--out", "run/", "--preset", preset])
    base = ModelConfig.preset(args.preset)
    fit_model_config(
        base,
        tokens_per_view=base.tokens_per_view,
        horizon=base.action_horizon,
        max_state_dim=44,
        max_action_dim=32,
        num_embodiments=3,
        max_seqlen=args.max_tokens,
    )


def test_the_old_pack_default_was_refused_by_tiny():
    # the defect: 64 tokens a view (the old pack default) is more than tiny's 16 patches
    with pytest.raises(ValueError, match="raise image_size or lower patch_size"):
        fit_model_config(
            ModelConfig.preset("tiny"),
            tokens_per_view=64,
            horizon=16,
            max_state_dim=8,
            max_action_dim=8,
            num_embodiments=1,
            max_seqlen=4096,
        )
