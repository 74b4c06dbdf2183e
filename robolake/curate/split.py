"""`split`: deterministic train/validation/test splits, stored as tags.

A split assigns every episode of one lake version to exactly one of `train`, `val` and `test`
and stores each part as a tag (`split:train`, `split:val`, `split:test`) naming that version and
its episode ids. Nothing is copied and the lake does not change: `pack`, `train`, `export` and
`open_batches` read a part with `--split val` (or `Lake.open(uri, tag="split:val")`).

Assignment is a pure function of (episode ids, grouping, strata, fractions, seed):

- episodes are grouped (`by="episode"`: each on its own; `by="source"`: every episode of one
  source file together, so two windows of one recording never land on both sides);
- groups are stratified by the named columns (`task`, `embodiment`, ...), and within each
  stratum ordered by sha256(seed, group key), an order independent of table order, row
  layout or Python's hash seed;
- each stratum gives round(n * val) groups to val and round(n * test) to test, the rest to
  train. A stratum whose share would round to zero is refused, naming it: a task with no
  validation episode makes the validation figure silently lie about that task.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from robolake.lake import Lake, Tag, TagExistsError, create_tag_set, read_tag

__all__ = ["SplitConfig", "SplitResult", "split", "SPLIT_PARTS", "split_tag"]

SPLIT_PARTS = ("train", "val", "test")
_STRATA = ("task", "embodiment", "source_format", "source_uri", "success")


def split_tag(part: str) -> str:
    """The tag name of split part `part` (`split:val`)."""
    if part not in SPLIT_PARTS:
        raise ValueError(f"--split {part!r}: the parts are {', '.join(SPLIT_PARTS)}")
    return f"split:{part}"


@dataclass(frozen=True, kw_only=True)
class SplitConfig:
    """How to split.

    Attributes:
        val: Fraction of each stratum's groups for validation.
        test: Fraction for test (0: no test part).
        by: "episode" (each episode a group) or "source" (episodes of one source file together).
        stratify: Episode columns whose combinations each get their share.
        seed: Seed of the order within each stratum.
    """

    val: float = 0.1
    test: float = 0.0
    by: str = "episode"
    stratify: tuple[str, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.val < 1.0 or not 0.0 <= self.test < 1.0 or self.val + self.test >= 1.0:
            raise ValueError(f"--val {self.val} and --test {self.test} must be in [0, 1) and leave some for train")
        if self.val == 0.0 and self.test == 0.0:
            raise ValueError("a split needs --val or --test above 0")
        if self.by not in ("episode", "source"):
            raise ValueError(f"--by {self.by!r}: split by 'episode' or 'source'")
        object.__setattr__(self, "stratify", tuple(self.stratify))
        for c in self.stratify:
            if c not in _STRATA:
                raise ValueError(f"--stratify {c!r}: stratify by {', '.join(_STRATA)}")


@dataclass(frozen=True, kw_only=True)
class SplitResult:
    """The parts of a split (episode ids per part) and the tags that hold them."""

    version: int
    parts: dict[str, tuple[str, ...]]
    tags: tuple[Tag, ...]
    strata: dict[str, dict[str, int]] = field(default_factory=dict)


def _order(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}\x00{key}".encode()).hexdigest()


def assign(
    rows: Sequence[dict[str, Any]], config: SplitConfig
) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    """Episode rows -> (part -> episode ids, stratum -> part -> group count). Pure."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        key = r["episode_id"] if config.by == "episode" else _source_key(r)
        groups.setdefault(key, []).append(r)
    strata: dict[str, list[str]] = {}
    for key, members in groups.items():
        values = {json.dumps([m.get(c) for c in config.stratify], default=str) for m in members}
        if len(values) > 1:
            raise ValueError(
                f"source {key!r} holds episodes of several strata ({', '.join(sorted(values))}); "
                "split --by episode, or stratify by fewer columns"
            )
        strata.setdefault(values.pop(), []).append(key)
    parts: dict[str, list[str]] = {p: [] for p in SPLIT_PARTS}
    counts: dict[str, dict[str, int]] = {}
    for stratum, keys in sorted(strata.items()):
        keys.sort(key=lambda k: _order(config.seed, k))
        n = len(keys)
        n_val, n_test = round(n * config.val), round(n * config.test)
        label = _describe(stratum, config.stratify)
        for part, frac, k in (("val", config.val, n_val), ("test", config.test, n_test)):
            if frac > 0 and k == 0:
                raise ValueError(
                    f"{label} has {n} {'episodes' if config.by == 'episode' else 'source files'}: "
                    f"{frac:g} of them rounds to none for {part}; raise --{part}, or stratify by fewer columns"
                )
        if n_val + n_test >= n:
            raise ValueError(
                f"{label} has {n} groups: val {n_val} + test {n_test} leaves none to train on; lower --val/--test"
            )
        chosen = {"val": keys[:n_val], "test": keys[n_val : n_val + n_test], "train": keys[n_val + n_test :]}
        counts[label] = {p: len(v) for p, v in chosen.items()}
        for part, group_keys in chosen.items():
            for key in group_keys:
                parts[part].extend(row["episode_id"] for row in groups[key])
    return {p: sorted(v) for p, v in parts.items()}, counts


def _source_key(row: dict[str, Any]) -> str:
    from robolake.lake import source_path_of

    try:
        meta = json.loads(row.get("metadata") or "{}")
    except json.JSONDecodeError:
        meta = {}
    return source_path_of(row["source_uri"], meta if isinstance(meta, dict) else {})


def _describe(stratum: str, columns: tuple[str, ...]) -> str:
    if not columns:
        return "the lake"
    values = json.loads(stratum)
    return ", ".join(f"{c} {v!r}" for c, v in zip(columns, values, strict=True))


def split(
    lake: Lake | str,
    config: SplitConfig,
    *,
    replace: bool = False,
    storage_options: dict[str, str] | None = None,
) -> SplitResult:
    """Split the lake's newest version (or the version `lake` is at) and store the parts as tags.

    Raises:
        ValueError: a stratum too small for its share, or an invalid config; no tag is written.
        TagExistsError: split tags exist and `replace` is False.
    """
    lake = lake if isinstance(lake, Lake) else Lake.open(lake, storage_options=storage_options)
    if lake.scope is not None:
        raise ValueError(f"{lake!r} is a subset (tag {lake.tag.name!r}); split the lake's version itself")  # type: ignore[union-attr]
    columns = sorted({"episode_id", "source_uri", "metadata", *config.stratify})
    rows = lake.episodes(columns=columns).to_pylist()
    if not rows:
        raise ValueError(f"lake {lake.uri} version {lake.version} has no episodes to split")
    parts, counts = assign(rows, config)
    wanted = [
        p for p in SPLIT_PARTS if p == "train" or (p == "val" and config.val > 0) or (p == "test" and config.test > 0)
    ]
    if not replace:
        for p in wanted:
            try:
                old = read_tag(lake.uri, split_tag(p), lake.storage_options)
            except KeyError:
                continue
            raise TagExistsError(
                f"lake {lake.uri} is already split (tag {old.name!r} names version {old.version}); "
                "pass --replace to re-split"
            )
    reason = json.dumps(
        {
            "val": config.val,
            "test": config.test,
            "by": config.by,
            "stratify": list(config.stratify),
            "seed": config.seed,
        }
    )
    # One publish for every part: a killed split leaves all its tags or none, all naming one version.
    made = create_tag_set(
        lake.uri,
        "split",
        lake.version,
        {p: parts[p] for p in wanted},
        operation="split",
        reason=reason,
        replace=replace,
        storage_options=lake.storage_options,
    )
    tags = tuple(made)
    return SplitResult(version=lake.version, parts={p: tuple(parts[p]) for p in wanted}, tags=tags, strata=counts)
