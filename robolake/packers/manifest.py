"""The manifest next to packed shards: lineage (lake URI and version), spec, seed, counts, fill."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from robolake.packers.spec import PackSpec
from robolake.storage import ensure_within, exists, join_uri, read_json, write_json_atomic

__all__ = ["PackManifest", "read_manifest", "write_manifest", "MANIFEST_NAME", "SHARDS_NAME", "LineageError"]

MANIFEST_NAME = "manifest.json"
SHARDS_NAME = "shards.lance"


class LineageError(ValueError):
    """Packed shards do not belong to the lake (or version) they are used with."""


@dataclass(frozen=True, kw_only=True)
class PackManifest:
    """What a pack run produced and from what.

    Attributes:
        lake_uri: The lake packed.
        lake_version: The lake version read.
        lake_tag: The tag the lake was opened at (a split, a selection), if any.
        spec: The PackSpec as JSON.
        seed: The seed (also in `spec`).
        embodiments: Embodiment tags in id order.
        num_samples: Samples packed.
        num_sequences: Packed sequences (shard rows).
        total_tokens: Real tokens in all sequences.
        fill: total_tokens / (num_sequences * max_tokens).
        padded_fill: Fraction of real tokens had the same samples been padded to each batch's
            longest sample, with as many samples per batch as the average packed sequence holds.
        rejected: (episode_id, step, length) of samples longer than max_tokens, when rejected.
        shards_version: Lance version of the shards dataset.
        created_at: Unix seconds.
        seconds: Wall time of the run.
        mixture: With a mixture (`spec["mix"]`): per group its weight, target and realised share,
            pool, quota, samples and tokens drawn and repeats (`Mixture.report`), and each row's
            stratum (`row_strata`: the shard loader deals rows to ranks by it); None without.
            `num_samples` then counts repeats.
    """

    lake_uri: str
    lake_version: int
    spec: dict[str, Any]
    seed: int
    embodiments: list[str]
    num_samples: int
    num_sequences: int
    total_tokens: int
    fill: float
    padded_fill: float
    rejected: list[tuple[str, int, int]] = field(default_factory=list)
    lake_tag: str | None = None
    shards_version: int = 0
    created_at: float = field(default_factory=time.time)
    seconds: float = 0.0
    mixture: dict[str, Any] | None = None

    @property
    def pack_spec(self) -> PackSpec:
        """The typed PackSpec this pack ran with.

        Raises:
            ValueError: the spec used a custom tokenizer (use `PackSpec.from_json(manifest.spec,
                tokenizer=...)`).
        """
        return PackSpec.from_json(self.spec)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PackManifest:
        """The manifest a JSON document holds.

        Raises:
            ValueError: a field is missing or of the wrong type (a document robolake did not
                write), in one line naming the field.
        """
        if not isinstance(d, dict):
            raise ValueError(f"a pack manifest is a JSON object, not {type(d).__name__}")
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}  # a newer robolake's extra fields
        missing = sorted(k for k in _REQUIRED if k not in d)
        if missing:
            raise ValueError(f"missing field(s) {', '.join(map(repr, missing))} in a pack manifest")
        for key, kinds in _TYPES.items():
            if key in d and not _is(d[key], kinds):
                raise ValueError(f"field {key!r} of a pack manifest holds {_short(d[key])}, not {kinds[0].__name__}")
        for key in _COUNTS:
            if key in d and not 0 <= d[key] < 2**63:
                raise ValueError(f"field {key!r} of a pack manifest is {_short(d[key])}, out of range")
        d = dict(d)
        rejected = d.get("rejected", [])
        if not all(isinstance(r, list) and len(r) == 3 for r in rejected):
            raise ValueError("field 'rejected' of a pack manifest is not a list of (episode_id, step, length)")
        d["rejected"] = [tuple(r) for r in rejected]
        return cls(**d)


_REQUIRED = ("lake_uri", "lake_version", "spec", "seed", "embodiments", "num_samples", "num_sequences")
_COUNTS = ("lake_version", "seed", "num_samples", "num_sequences", "total_tokens", "shards_version")
_TYPES: dict[str, tuple[type, ...]] = {
    "lake_uri": (str,),
    "spec": (dict,),
    "embodiments": (list,),
    "rejected": (list,),
    "lake_tag": (str, type(None)),
    "mixture": (dict, type(None)),
    **{k: (int,) for k in _COUNTS},
    **{k: (float, int) for k in ("fill", "padded_fill", "created_at", "seconds")},
}


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def write_manifest(out_uri: str, manifest: PackManifest, storage_options: dict[str, str] | None = None) -> None:
    write_json_atomic(join_uri(out_uri, MANIFEST_NAME), manifest.to_json(), storage_options)


def read_manifest(out_uri: str, storage_options: dict[str, str] | None = None) -> PackManifest:
    """Read the manifest of packed shards at `out_uri`.

    Raises:
        FileNotFoundError: no manifest: not a pack output, or a pack that never finished.
        OutsideRootError: the manifest is a symlink out of `out_uri` (never followed).
        ValueError: it is not a pack manifest robolake wrote (one line naming the file).
    """
    path = join_uri(out_uri, MANIFEST_NAME)
    if not exists(path, storage_options):
        raise FileNotFoundError(
            f"{out_uri} has no {MANIFEST_NAME}: it is not the output of `robolake pack`, or that run did not finish"
        )
    ensure_within(out_uri, path)
    doc = read_json(path, storage_options)
    try:
        return PackManifest.from_json(doc)
    except ValueError as e:
        raise ValueError(f"{path}: {e}; re-run `robolake pack` to write it again") from None
