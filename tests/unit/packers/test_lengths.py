"""Token-length model: vectorised byte-level lengths, custom tokenizers, validation."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robolake.packers.lengths import (
    ByteTokenizer,
    TextTokenizer,
    TokenLengthConfig,
    sample_lengths,
    text_token_lengths,
)


class WordTokenizer:
    """A stand-in for a real tokenizer that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, text: str) -> list[int]:
        self.calls += 1
        return [len(w) for w in text.split()]


def test_byte_tokenizer_encodes_utf8_bytes_after_special_ids() -> None:
    tok = ByteTokenizer()
    ids = tok.encode("aé")
    assert ids.dtype == np.int64
    assert ids.tolist() == [ByteTokenizer.BOS, ord("a") + 4, 0xC3 + 4, 0xA9 + 4]
    assert ByteTokenizer(add_bos=False, add_eos=True).encode("").tolist() == [ByteTokenizer.EOS]
    assert int(tok.encode("\xff" * 3).max()) < tok.vocab_size
    assert isinstance(tok, TextTokenizer)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.text(max_size=40)), max_size=30),
    st.integers(1, 300),
    st.integers(0, 8),
    st.integers(0, 4),
    st.one_of(st.none(), st.integers(0, 20)),
)
def test_byte_level_lengths_match_per_sample_encoding(
    texts: list[str | None], tpv: int, state: int, history: int, cap: int | None
) -> None:
    config = TokenLengthConfig(tokens_per_view=tpv, state_tokens=state, history_steps=history, max_text_tokens=cap)
    views = np.arange(len(texts)) % 4
    got = sample_lengths(views, pa.array(texts, type=pa.string()), config)
    want = [v * tpv + len(config.encode_text(t)) + state + history for v, t in zip(views.tolist(), texts, strict=True)]
    assert got.dtype == np.int64 and got.tolist() == want


def test_custom_tokenizer_runs_once_per_distinct_instruction() -> None:
    tok = WordTokenizer()
    config = TokenLengthConfig(tokens_per_view=64, tokenizer=tok, state_tokens=2)
    texts = ["pick the cube", "open drawer", None, "pick the cube"] * 250
    lengths = sample_lengths(pa.array([1, 2, 3, 1] * 250, type=pa.int32()), pa.array(texts), config)
    assert lengths[:4].tolist() == [64 + 3 + 2, 128 + 2 + 2, 192 + 0 + 2, 64 + 3 + 2]
    assert tok.calls == 3  # "pick the cube", "open drawer", "" (the null)


def test_accepts_chunked_large_string_and_plain_sequences() -> None:
    config = TokenLengthConfig(tokens_per_view=10, state_tokens=0)
    chunked = pa.chunked_array([pa.array(["ab"], pa.large_string()), pa.array(["abc"], pa.large_string())])
    views = pa.chunked_array([pa.array([1]), pa.array([2])])
    assert sample_lengths(views, chunked, config).tolist() == [10 + 3, 20 + 4]
    assert sample_lengths([1, 2], ["ab", "abc"], config).tolist() == [13, 24]


def test_text_cap_truncates_text_only() -> None:
    config = TokenLengthConfig(tokens_per_view=100, state_tokens=5, max_text_tokens=4)
    assert text_token_lengths(["a" * 50, "ab"], config).tolist() == [4, 3]
    assert sample_lengths([3, 3], ["a" * 50, "ab"], config).tolist() == [309, 308]
    assert len(config.encode_text("a" * 50)) == 4


def test_vectorised_on_a_million_rows() -> None:
    config = TokenLengthConfig()
    task = "pick up the red block and place it in the bin"
    lengths = sample_lengths(np.full(1_000_000, 2), pa.array([task] * 1_000_000), config)
    assert lengths.shape == (1_000_000,)
    assert int(lengths[-1]) == 2 * 256 + len(task) + 1 + 1  # views + bytes + BOS + state


@pytest.mark.parametrize(
    ("views", "text", "match"),
    [
        ([1, 2], ["a"], "num_views has 2 samples but text has 1"),
        (pa.array([1, None]), ["a", "b"], "num_views has 1 nulls"),
        ([1, -1], ["a", "b"], "num_views must be >= 0"),
        ([1.0, 2.0], ["a", "b"], "integer column"),
        ([1], pa.array([3]), "text must be a string column"),
    ],
)
def test_bad_columns_are_value_errors(views, text, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sample_lengths(views, text, TokenLengthConfig())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tokens_per_view": 0}, "tokens_per_view"),
        ({"max_text_tokens": -1}, "max_text_tokens"),
        ({"state_tokens": -1}, "state_tokens"),
        ({"history_steps": -2}, "history_steps"),
        ({"tokenizer": object()}, "encode"),
    ],
)
def test_config_is_validated(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TokenLengthConfig(**kwargs)
