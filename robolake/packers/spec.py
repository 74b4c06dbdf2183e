"""PackSpec: everything that decides what a packing run produces (with the lake version and seed).

`to_json` is what the manifest records and `from_json` reads it back, so code holding packed
shards gets the typed spec (`manifest.pack_spec.horizon`) instead of string-keyed lookups.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from robolake.lake import EpisodeFilter
from robolake.packers.history import HISTORY_WIDTH, HistorySpec
from robolake.packers.lengths import ByteTokenizer, TextTokenizer, TokenLengthConfig
from robolake.packers.mixspec import MixSpec

__all__ = ["PackSpec", "ALGORITHMS", "NORMALIZATIONS"]

logger = logging.getLogger(__name__)

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
        image_size: Side in pixels of the square frames written into the shards (the model's
            input size: a training rendition, so the loader decodes small images and never
            resizes), or None to keep the lake's frames as they are.
        mix: A weighted mixture of the selected episodes (by embodiment, task, source or tag;
            `packers/mix.py`), or None to pack each sample once.
        history: Streams whose messages in a window before each sample's time the sample carries
            as backbone tokens, one per message (`packers/history.py`; `pack --history`).
        history_width: Values per history token (a stream's values are padded to it).
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
    image_size: int | None = None
    mix: MixSpec | None = None
    history: tuple[HistorySpec, ...] = ()
    history_width: int = HISTORY_WIDTH

    def __post_init__(self) -> None:
        if len({h.stream for h in self.history}) != len(self.history):
            raise ValueError(f"a history stream is given twice: {[h.stream for h in self.history]}")
        if not 1 <= self.history_width <= 1024:
            raise ValueError(f"history_width must be between 1 and 1024, got {self.history_width}")
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
        if self.image_size is not None and not 8 <= self.image_size <= 4096:
            raise ValueError(f"image_size must be between 8 and 4096 pixels or None, got {self.image_size}")

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
            "where_filter": None if self.where is None else _filter_to_json(self.where),
            "image_size": self.image_size,
            # Only when set: a spec without a mixture keeps the digest it always had (loader states).
            **({} if self.mix is None else {"mix": self.mix.to_json()}),
            **(
                {"history": [h.to_json() for h in self.history], "history_width": self.history_width}
                if self.history
                else {}
            ),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], *, tokenizer: TextTokenizer | None = None) -> PackSpec:
        """The PackSpec that `to_json` described (the inverse of `to_json`).

        Args:
            d: A `to_json` dict (e.g. `PackManifest.spec`).
            tokenizer: The text tokenizer, needed only when the spec used one other than the
                built-in byte tokenizer (a JSON record cannot hold an arbitrary tokenizer).

        Raises:
            ValueError: a field is missing, or the spec used a custom tokenizer and none is passed.
        """
        try:
            tok = d["tokens"]
            tok_desc = tok["tokenizer"]
            if tokenizer is None:
                if tok_desc.get("type") != "byte":
                    raise ValueError(
                        f"the spec used tokenizer {tok_desc.get('type')!r}: pass it as "
                        "PackSpec.from_json(d, tokenizer=...)"
                    )
                tokenizer = ByteTokenizer(
                    num_special=int(tok_desc["num_special"]),
                    add_bos=bool(tok_desc["add_bos"]),
                    add_eos=bool(tok_desc["add_eos"]),
                )
            max_text = tok.get("max_text_tokens")
            tokens = TokenLengthConfig(
                tokens_per_view=int(tok["tokens_per_view"]),
                tokenizer=tokenizer,
                max_text_tokens=None if max_text is None else int(max_text),
                state_tokens=0,
                history_steps=0,
            )
            where_json = d.get("where_filter")
            if where_json is None and d.get("where") is not None:
                # Manifests written before `where_filter` existed hold only the SQL text, which
                # cannot be parsed back into a filter; the shards themselves are unaffected.
                logger.warning("pack spec records its episode filter as SQL only (%s); where=None", d["where"])
            image_size = d.get("image_size")
            mix = d.get("mix")
            return cls(
                max_tokens=int(d["max_tokens"]),
                algorithm=d["algorithm"],
                window=int(d["window"]),
                horizon=int(d["horizon"]),
                step_stride=int(d["step_stride"]),
                action_stride=int(d["action_stride"]),
                tokens=tokens,
                normalization=d["normalization"],
                seed=int(d["seed"]),
                on_oversize=d["on_oversize"],
                where=None if where_json is None else EpisodeFilter(**where_json),
                image_size=None if image_size is None else int(image_size),
                mix=None if mix is None else MixSpec.from_json(mix),
                history=tuple(HistorySpec.from_json(h) for h in d.get("history", [])),
                history_width=int(d.get("history_width", HISTORY_WIDTH)),
            )
        except KeyError as e:
            raise ValueError(f"pack spec JSON lacks field {e.args[0]!r}; was it written by PackSpec.to_json?") from e


def _filter_to_json(where: EpisodeFilter) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(where):
        v = getattr(where, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out
