"""Mixture specs: what share of an epoch each embodiment, task, source, tag or split contributes.

`MixSpec` is the typed mixture a user writes (`embodiment=gr1:0.5,*:0.5`, or a JSON/YAML file);
`load_mix` reads one. Binding a spec to a sample index and drawing epochs from it is `mix.py`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from robolake.lake import DEFAULT_MAX_READ_BYTES
from robolake.storage import parse_json, parse_yaml, read_document

__all__ = ["MAX_EPOCH_SAMPLES", "MAX_EPOCH_SIZE", "MIX_KEYS", "REST", "SHARES", "MixSpec", "load_mix"]

MIX_KEYS = ("embodiment", "task", "source", "tag", "split")
SHARES = ("samples", "tokens")
REST = "*"
# One epoch's plan holds a few int64 per sample drawn: at most the read budget (2 GB) of them. A token
# epoch is bounded again when it is bound to a lake (`mix.bind_mixture`), by its shortest sample.
MAX_EPOCH_SAMPLES = DEFAULT_MAX_READ_BYTES // 8
MAX_EPOCH_SIZE = MAX_EPOCH_SAMPLES * 4096  # tokens: samples times the longest sample packing allows


@dataclass(frozen=True, kw_only=True)
class MixSpec:
    """A weighted mixture of a lake's episodes, grouped by one key.

    Attributes:
        key: What groups episodes: `embodiment`, `task` (the instruction), `source` (the
            episode metadata's `source`, 'recorded' when absent; rollouts say 'rollout'), `tag`
            (a lake tag's episodes) or `split` (the tag `split:NAME`).
        weights: (value, weight) pairs in order; `*` stands for every episode no other value
            names. Weights are relative (normalised to sum to 1); 0 leaves a group out.
            Episodes that no value names (and no `*`) are left out too.
        share: What a weight is a share of: `samples` or `tokens` (backbone tokens).
        epoch_size: Samples (or tokens, with share="tokens") one epoch draws; None draws as many
            as the mixture's groups hold together.
    """

    key: Literal["embodiment", "task", "source", "tag", "split"]
    weights: tuple[tuple[str, float], ...]
    share: Literal["samples", "tokens"] = "samples"
    epoch_size: int | None = None

    def __post_init__(self) -> None:
        if self.key not in MIX_KEYS:
            raise ValueError(
                f"mixture key must be one of {MIX_KEYS}, got {self.key!r} (write e.g. 'embodiment=gr1:0.5,*:0.5')"
            )
        if self.share not in SHARES:
            raise ValueError(f"mixture share must be 'samples' or 'tokens', got {self.share!r}")
        weights = tuple((str(v), float(w)) for v, w in self.weights)
        object.__setattr__(self, "weights", weights)
        if not weights:
            raise ValueError("a mixture needs at least one value:weight entry, e.g. 'embodiment=gr1:0.5,*:0.5'")
        values = [v for v, _ in weights]
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            raise ValueError(f"mixture names {dupes} more than once; give each value one weight")
        for v, w in weights:
            if not v:
                raise ValueError("a mixture value is empty; write value:weight")
            if not math.isfinite(w) or w < 0:
                raise ValueError(f"mixture weight of {v!r} must be a finite number >= 0, got {w}")
        total = sum(w for _, w in weights)
        if not math.isfinite(total):
            raise ValueError("mixture weights sum to more than a float holds; weights are relative: scale them down")
        if total <= 0:
            raise ValueError("mixture weights sum to 0; give at least one value a positive weight")
        if self.epoch_size is not None:
            if isinstance(self.epoch_size, bool) or not isinstance(self.epoch_size, int) or self.epoch_size < 1:
                raise ValueError(f"mixture epoch_size must be a whole number >= 1 or None, got {self.epoch_size!r}")
            if self.epoch_size > MAX_EPOCH_SIZE:
                raise ValueError(
                    f"mixture epoch_size {self.epoch_size:,} is more than robolake plans in one epoch "
                    f"({MAX_EPOCH_SIZE:,}); give a smaller epoch_size (or leave it out: an epoch of everything)"
                )

    @property
    def normalized(self) -> tuple[tuple[str, float], ...]:
        """(value, weight / sum of weights) pairs, in order."""
        total = sum(w for _, w in self.weights)
        return tuple((v, w / total) for v, w in self.weights)

    def to_text(self) -> str:
        """The `--mix` form (`key=v:w,...`; share and epoch size are separate options)."""
        return f"{self.key}=" + ",".join(f"{v}:{w:g}" for v, w in self.weights)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "weights": [[v, w] for v, w in self.weights],
            "share": self.share,
            "epoch_size": self.epoch_size,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MixSpec:
        """The inverse of `to_json`; also reads the YAML/JSON file form (`weights` as a mapping).

        Raises:
            ValueError: a field is missing or invalid.
        """
        if not isinstance(d, Mapping):
            raise ValueError(
                f"a mixture is a mapping with key, weights and optionally share and epoch_size; got {type(d).__name__}"
            )
        unknown = sorted(set(d) - {"key", "weights", "share", "epoch_size"})
        if unknown:
            raise ValueError(f"unknown mixture fields {unknown}; a mixture has key, weights, share and epoch_size")
        if "key" not in d or "weights" not in d:
            raise ValueError(
                "a mixture needs `key` (embodiment, task, source, tag or split) and `weights` (value: weight)"
            )
        raw = d["weights"]
        pairs: list[tuple[str, float]]
        if isinstance(raw, Mapping):
            pairs = [(str(v), _weight(v, w)) for v, w in raw.items()]
        elif isinstance(raw, Sequence) and not isinstance(raw, str):
            pairs = []
            for item in raw:
                if not (isinstance(item, Sequence) and len(item) == 2) or isinstance(item, str):
                    raise ValueError(f"mixture weights entry {item!r} is not a [value, weight] pair")
                pairs.append((str(item[0]), _weight(item[0], item[1])))
        else:
            raise ValueError(f"mixture weights must map value -> weight, got {raw!r}")
        return cls(key=d["key"], weights=tuple(pairs), share=d.get("share", "samples"), epoch_size=_size(d))

    @classmethod
    def parse(cls, text: str, *, share: str = "samples", epoch_size: int | None = None) -> MixSpec:
        """Parse `key=value:weight,value:weight,...` (the `--mix` form).

        Raises:
            ValueError: the text is malformed (the message shows the expected form).
        """
        form = "write KEY=VALUE:WEIGHT,..., e.g. 'embodiment=gr1:0.5,so101:0.3,*:0.2'"
        key, sep, rest = text.strip().partition("=")
        if not sep or not rest.strip():
            raise ValueError(f"mixture {text!r} has no KEY=...; {form}")
        pairs: list[tuple[str, float]] = []
        for part in rest.split(","):
            value, colon, w = part.strip().rpartition(":")
            if not colon or not value.strip():
                raise ValueError(f"mixture entry {part.strip()!r} is not VALUE:WEIGHT; {form}")
            pairs.append((value.strip(), _weight(value.strip(), w.strip())))
        return cls(key=key.strip(), weights=tuple(pairs), share=share, epoch_size=epoch_size)  # type: ignore[arg-type]


def _size(d: Mapping[str, Any]) -> int | None:
    """A file's `epoch_size`: a whole number (1e6 is fine), never inf, NaN, text or a fraction."""
    size = d.get("epoch_size")
    if size is None or (isinstance(size, int) and not isinstance(size, bool)):
        return size
    if isinstance(size, float) and math.isfinite(size) and size.is_integer():
        return int(size)
    raise ValueError(f"mixture epoch_size must be a whole number >= 1, got {size!r}")


def _weight(value: Any, w: Any) -> float:
    try:
        return float(w)
    except (TypeError, ValueError):
        raise ValueError(f"mixture weight of {value!r} is {w!r}, not a number") from None


def load_mix(arg: str, *, share: str | None = None, epoch_size: int | None = None) -> MixSpec:
    """A MixSpec from `--mix`: the inline form, or a `.yaml`/`.yml`/`.json` file for long mixtures.

    A file holds `key`, `weights` (value: weight), and optionally `share` and `epoch_size`;
    `share` and `epoch_size` given here override the file's.

    Raises:
        FileNotFoundError: `arg` names a mixture file that does not exist.
        ValueError: the mixture is malformed.
    """
    if arg.endswith((".yaml", ".yml", ".json")):
        if not os.path.isfile(arg):
            raise FileNotFoundError(
                f"mixture file {arg} does not exist; pass a path, or the inline form 'embodiment=gr1:0.5,*:0.5'"
            )
        text = read_document(arg, "mixture file")
        d = (
            parse_json(text, f"mixture file {arg}")
            if arg.endswith(".json")
            else parse_yaml(text, f"mixture file {arg}")
        )
        spec = MixSpec.from_json(d)
    else:
        spec = MixSpec.parse(arg)
    return MixSpec(
        key=spec.key,
        weights=spec.weights,
        share=share or spec.share,  # type: ignore[arg-type]
        epoch_size=epoch_size if epoch_size is not None else spec.epoch_size,
    )
