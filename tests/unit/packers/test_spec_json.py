"""PackSpec.from_json is the inverse of to_json; the manifest exposes the typed spec."""

from __future__ import annotations

import pytest

from robolake.lake.query import EpisodeFilter
from robolake.packers.lengths import ByteTokenizer, TokenLengthConfig
from robolake.packers.manifest import PackManifest
from robolake.packers.spec import PackSpec


def _spec(**kw: object) -> PackSpec:
    tokens = TokenLengthConfig(
        tokens_per_view=16, state_tokens=0, max_text_tokens=7, tokenizer=ByteTokenizer(num_special=5, add_eos=True)
    )
    base: dict[str, object] = {"max_tokens": 300, "algorithm": "window", "window": 99, "horizon": 8, "tokens": tokens}
    return PackSpec(**(base | kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"where": EpisodeFilter(embodiment="g1", success=True, episode_ids=["a", "b"]), "image_size": 96},
        {"normalization": "q01_q99", "seed": 3, "step_stride": 2, "action_stride": 3, "on_oversize": "reject"},
    ],
)
def test_round_trip(kw: dict[str, object]) -> None:
    spec = _spec(**kw)
    assert PackSpec.from_json(spec.to_json()) == spec


def test_manifest_pack_spec_is_typed() -> None:
    spec = _spec(image_size=64)
    m = PackManifest(
        lake_uri="x",
        lake_version=1,
        spec=spec.to_json(),
        seed=0,
        embodiments=[],
        num_samples=0,
        num_sequences=0,
        total_tokens=0,
        fill=0.0,
        padded_fill=0.0,
    )
    assert m.pack_spec.horizon == 8 and m.pack_spec.image_size == 64
    assert PackManifest.from_json(m.to_json()).pack_spec == spec


def test_old_manifest_without_new_fields_reads() -> None:
    d = _spec().to_json()
    del d["image_size"], d["where_filter"]
    assert PackSpec.from_json(d).image_size is None


def test_custom_tokenizer_must_be_passed() -> None:
    class Words:
        def encode(self, text: str) -> list[int]:
            return [len(w) for w in text.split()]

    spec = PackSpec(tokens=TokenLengthConfig(tokens_per_view=4, state_tokens=0, tokenizer=Words()))
    with pytest.raises(ValueError, match="tokenizer=..."):
        PackSpec.from_json(spec.to_json())
    tok = Words()
    assert PackSpec.from_json(spec.to_json(), tokenizer=tok).tokens.tokenizer is tok


def test_missing_field_names_it() -> None:
    d = _spec().to_json()
    del d["horizon"]
    with pytest.raises(ValueError, match="horizon"):
        PackSpec.from_json(d)


def test_image_size_validated() -> None:
    with pytest.raises(ValueError, match="image_size"):
        PackSpec(image_size=2)
