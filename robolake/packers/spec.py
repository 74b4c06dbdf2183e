"""PackSpec: everything that decides what a packing run produces (with the lake version and seed)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from robolake.lake.query import EpisodeFilter
from robolake.packers.lengths import ByteTokenizer, TokenLengthConfig

__all__ = ["PackSpec", "ALGORITHMS", "NORMALIZATIONS"]

ALGORITHMS = ("bfd", "ffd", "window")
NORMALIZATIONS = ("mean_std", "min_max", "q01_q99", "none")


@dataclass(frozen=True, kw_only=True)
class PackSpec:
    """How to turn a lake into packed sequences.

    Attributes:
        max_tokens: Capacity of one packed sequence, in backbone tokens.
        algorithm: `bfd` (best-fit-decreasing, global), `ffd` (first-fit-decreasing, global) or
            `window` (bounded-window streaming packer).
        window: Samples the window packer holds at once.
        horizon: H, actions per sample (t..t+H-1; past the episode end the last action repeats).
        step_stride: Every k-th step of an episode starts a sample (1 = every step).
        action_stride: Spacing of the H actions in steps (1 = consecutive).
        tokens: The token-length model (tokens per view, tokenizer, text cap). The built-in model
            puts only views and text in the backbone, so state/history tokens must be 0.
        normalization: How state and action are normalised with the lake's statistics.
        seed: Seed of the sample shuffle and of the window packer.
        on_oversize: `error` (raise, naming the sample) or `reject` (record it in the manifest).
        where: Which episodes to pack; None packs all.
    """

    max_tokens: int = 4096
    algorithm: Literal["bfd", "ffd", "window"] = "bfd"
    window: int = 8192
    horizon: int = 16
    step_stride: int = 1
    action_stride: int = 1
    tokens: TokenLengthConfig = field(default_factory=lambda: TokenLengthConfig(tokens_per_view=64, state_tokens=0))
    normalization: Literal["mean_std", "min_max", "q01_q99", "none"] = "mean_std"
    seed: int = 0
    on_oversize: Literal["error", "reject"] = "error"
    where: EpisodeFilter | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")
        for name in ("horizon", "step_stride", "action_stride"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.tokens.fixed_tokens != 0:
            raise ValueError(
                "the built-in model keeps state out of the backbone: use TokenLengthConfig(state_tokens=0, "
                f"history_steps=0), got {self.tokens.fixed_tokens} fixed tokens per sample"
            )
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}")
        if self.on_oversize not in ("error", "reject"):
            raise ValueError(f"on_oversize must be 'error' or 'reject', got {self.on_oversize!r}")

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description (the manifest's record of the spec)."""
        tok = self.tokens
        tokenizer = tok.tokenizer
        return {
            "max_tokens": self.max_tokens,
            "algorithm": self.algorithm,
            "window": self.window,
            "horizon": self.horizon,
            "step_stride": self.step_stride,
            "action_stride": self.action_stride,
            "tokens": {
                "tokens_per_view": tok.tokens_per_view,
                "max_text_tokens": tok.max_text_tokens,
                "tokenizer": dataclasses.asdict(tokenizer) | {"type": "byte"}
                if isinstance(tokenizer, ByteTokenizer)
                else {"type": type(tokenizer).__qualname__},
            },
            "normalization": self.normalization,
            "seed": self.seed,
            "on_oversize": self.on_oversize,
            "where": None if self.where is None else self.where.to_sql(),
        }
