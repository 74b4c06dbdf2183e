"""The manifest next to packed shards: lineage (lake URI and version), spec, seed, counts, fill."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from robolake.packers.spec import PackSpec
from robolake.storage import exists, join_uri, read_json, write_json_atomic

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
        d = dict(d)
        d["rejected"] = [tuple(r) for r in d.get("rejected", [])]
        return cls(**d)


def write_manifest(out_uri: str, manifest: PackManifest, storage_options: dict[str, str] | None = None) -> None:
    write_json_atomic(join_uri(out_uri, MANIFEST_NAME), manifest.to_json(), storage_options)


def read_manifest(out_uri: str, storage_options: dict[str, str] | None = None) -> PackManifest:
    """Read the manifest of packed shards at `out_uri`.

    Raises:
        FileNotFoundError: no manifest: not a pack output, or a pack that never finished.
    """
    path = join_uri(out_uri, MANIFEST_NAME)
    if not exists(path, storage_options):
        raise FileNotFoundError(
            f"{out_uri} has no {MANIFEST_NAME}: it is not the output of `robolake pack`, or that run did not finish"
        )
    return PackManifest.from_json(read_json(path, storage_options))
