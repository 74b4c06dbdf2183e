"""Token-length model: how many backbone tokens one sample becomes, computed over Arrow columns.

Packing needs every sample's length before any pixel is decoded, so the length is a function of
cheap metadata only:

    length = num_views * tokens_per_view + text_tokens + state_tokens
             + history_steps * tokens_per_history_step

`num_views` comes from the embodiment (1-3 cameras), `text_tokens` from the instruction. The
default text tokenizer is byte-level UTF-8 (`ByteTokenizer`): a string of b bytes becomes b tokens
plus its special tokens, so the lengths of a million instructions are one
`pyarrow.compute.binary_length` call, no Python loop. Any object with `encode(str)` may be passed
instead (a Hugging Face tokenizer, say); then each distinct instruction is tokenized once (robot
datasets repeat a handful of task strings across millions of steps) and the counts are mapped back
through a dictionary encoding.

`max_text_tokens` optionally caps the text part. This is the only truncation in the packers, it
applies to instructions only (never to views, state or history). Whoever tokenizes the text for
the model must apply the same cap; `TokenLengthConfig.encode_text` does both in one place so that
the lengths packed here and the tokens loaded later cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "ByteTokenizer",
    "TextTokenizer",
    "TokenLengthConfig",
    "sample_lengths",
    "text_token_lengths",
]


@runtime_checkable
class TextTokenizer(Protocol):
    """Anything that turns an instruction into token ids."""

    def encode(self, text: str) -> Sequence[int] | np.ndarray: ...


@dataclass(frozen=True, kw_only=True)
class ByteTokenizer:
    """Byte-level UTF-8 tokenizer: id = byte + `num_special`; ids below that are special tokens.

    Attributes:
        num_special: Ids reserved for special tokens (0 = PAD, 1 = BOS, 2 = EOS, 3 = UNK by
            default). Byte b becomes id `b + num_special`.
        add_bos: Prepend BOS (id 1) to every instruction.
        add_eos: Append EOS (id 2) to every instruction.
    """

    num_special: int = 4
    add_bos: bool = True
    add_eos: bool = False

    PAD = 0
    BOS = 1
    EOS = 2

    def __post_init__(self) -> None:
        if self.num_special < 3:
            raise ValueError(f"num_special must be >= 3 (PAD, BOS, EOS), got {self.num_special}")

    @property
    def vocab_size(self) -> int:
        return 256 + self.num_special

    @property
    def num_added(self) -> int:
        """Special tokens added to every instruction."""
        return int(self.add_bos) + int(self.add_eos)

    def encode(self, text: str) -> np.ndarray:
        """int64 token ids of `text`."""
        body = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64) + self.num_special
        parts = ([np.array([self.BOS])] if self.add_bos else []) + [body]
        if self.add_eos:
            parts.append(np.array([self.EOS]))
        return np.concatenate(parts).astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class TokenLengthConfig:
    """How a sample's metadata becomes its backbone token length.

    Attributes:
        tokens_per_view: Tokens one camera view becomes (e.g. 256 for a 16x16 patch grid).
        tokenizer: Text tokenizer; `ByteTokenizer()` by default (vectorised lengths).
        max_text_tokens: Cap on text tokens per sample (instructions only are truncated), or None.
        state_tokens: Tokens for the proprioceptive state.
        history_steps: Past steps fed to the backbone.
        tokens_per_history_step: Tokens per past step.
    """

    tokens_per_view: int = 256
    tokenizer: TextTokenizer = field(default_factory=ByteTokenizer)
    max_text_tokens: int | None = None
    state_tokens: int = 1
    history_steps: int = 0
    tokens_per_history_step: int = 1

    def __post_init__(self) -> None:
        if self.tokens_per_view < 1:
            raise ValueError(f"tokens_per_view must be >= 1, got {self.tokens_per_view}")
        if not callable(getattr(self.tokenizer, "encode", None)):
            raise ValueError(f"tokenizer must have an encode(str) method, got {type(self.tokenizer).__name__}")
        if self.max_text_tokens is not None and self.max_text_tokens < 0:
            raise ValueError(f"max_text_tokens must be >= 0 or None, got {self.max_text_tokens}")
        for name in ("state_tokens", "history_steps", "tokens_per_history_step"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    @property
    def fixed_tokens(self) -> int:
        """Tokens every sample has regardless of views and text (state + history)."""
        return self.state_tokens + self.history_steps * self.tokens_per_history_step

    def encode_text(self, text: str | None) -> np.ndarray:
        """int64 token ids of one instruction, capped at `max_text_tokens` (None counts as "")."""
        ids = np.asarray(self.tokenizer.encode(text or ""), dtype=np.int64)
        return ids if self.max_text_tokens is None else ids[: self.max_text_tokens]


def _as_string_array(text: pa.Array | pa.ChunkedArray | Sequence[str | None]) -> pa.Array:
    arr = text if isinstance(text, (pa.Array, pa.ChunkedArray)) else pa.array(text, type=pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        if pa.types.is_null(arr.type) or pa.types.is_string_view(arr.type):
            arr = arr.cast(pa.string())
        else:
            raise ValueError(f"text must be a string column, got {arr.type}")
    return arr


def text_token_lengths(
    text: pa.Array | pa.ChunkedArray | Sequence[str | None], config: TokenLengthConfig
) -> np.ndarray:
    """int64 text-token count of each instruction (a null instruction counts as "").

    Byte-level: one vectorised `binary_length`. Other tokenizers: each distinct string once.

    Raises:
        ValueError: `text` is not a string column.
    """
    arr = _as_string_array(text)
    tok = config.tokenizer
    if isinstance(tok, ByteTokenizer):
        nbytes = pc.fill_null(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False)
        counts = nbytes.astype(np.int64) + tok.num_added
    else:
        enc = pc.fill_null(arr, "").dictionary_encode()
        uniq = enc.dictionary.to_pylist()
        per_unique = np.fromiter((len(tok.encode(s)) for s in uniq), dtype=np.int64, count=len(uniq))
        counts = per_unique[enc.indices.to_numpy(zero_copy_only=False)]
    if config.max_text_tokens is not None:
        counts = np.minimum(counts, config.max_text_tokens)
    return counts


def sample_lengths(
    num_views: pa.Array | pa.ChunkedArray | np.ndarray | Sequence[int],
    text: pa.Array | pa.ChunkedArray | Sequence[str | None],
    config: TokenLengthConfig,
) -> np.ndarray:
    """Backbone token length of each sample, vectorised over the columns.

    Args:
        num_views: Camera views of each sample (integers >= 0, no nulls).
        text: Instruction of each sample (string column; null counts as "").
        config: The length model.

    Returns:
        int64 [n]: `num_views * tokens_per_view + text_tokens + state + history` tokens.

    Raises:
        ValueError: the columns differ in length, `num_views` has nulls or negative values, or
            `text` is not a string column.
    """
    if isinstance(num_views, (pa.Array, pa.ChunkedArray)):
        if num_views.null_count:
            raise ValueError(f"num_views has {num_views.null_count} nulls; fill them before packing")
        views = np.asarray(num_views.to_numpy(zero_copy_only=False))
    else:
        views = np.asarray(num_views)
    if views.ndim != 1 or (views.size and not np.issubdtype(views.dtype, np.integer)):
        raise ValueError(f"num_views must be a 1-D integer column, got {views.dtype} {views.shape}")
    views = views.astype(np.int64, copy=False)
    if views.size and views.min() < 0:
        raise ValueError(f"num_views must be >= 0, got {int(views.min())} at sample {int(views.argmin())}")
    text_tokens = text_token_lengths(text, config)
    if text_tokens.shape != views.shape:
        raise ValueError(f"num_views has {views.size} samples but text has {text_tokens.size}; pass aligned columns")
    return views * config.tokens_per_view + text_tokens + config.fixed_tokens
