"""Lineage: from a checkpoint back to the source file of every episode it trained on.

Every checkpoint `robolake train` writes says what its data was (`run_lineage`, saved by the
trainer in `checkpoint.json`): the source it was handed (a pack output or a lake), the lake URI,
version and tag, and for packed shards the SHA-256 of the pack manifest, its spec and the shards
version; for a lake packed on the fly, the spec and a hash of the tag's episode subset. The
trainer adds each rank's sample ledger (`checkpoint.sample_ledger`: lines, bytes and SHA-256 of
`samples/rank{R}.jsonl` at that step) when samples are recorded.

`trace_lineage(run)` walks the chain back: checkpoint -> pack output (its manifest checked
against the recorded hash) -> lake at the recorded version and tag -> the episodes (the shards'
`episode_id` column, or the tag's subset, or the whole version) -> each episode's source file
(`robolake.lake.where.source_path_of`). A link that no longer holds (the pack re-made since,
a tag moved, a lake version gone) is a note in the report, and the episodes then come from the
next link that still holds, so the answer is never silently another run's data.

URIs are recorded without credentials: storage options never enter a checkpoint, and the
user-info part of a URI (`s3://KEY:SECRET@bucket/...`) is dropped before it is saved.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robolake.lake import Lake
    from robolake.loaders import PackedShards
    from robolake.packers import PackSpec

__all__ = ["EpisodeSource", "LineageReport", "redact_uri", "run_lineage", "trace_lineage"]

_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")


def redact_uri(uri: str) -> str:
    """`uri` without a user-info part (`s3://key:secret@bucket/x` -> `s3://bucket/x`)."""
    return _USERINFO.sub(r"\1", str(uri))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _scope_sha256(episodes: tuple[str, ...] | list[str]) -> str:
    return _sha256("\n".join(sorted(episodes)).encode())


def run_lineage(data: PackedShards | Lake, spec: PackSpec | None = None) -> dict[str, Any]:
    """The lineage record of a run over `data` (packed shards, or a lake packed on the fly with `spec`)."""
    from robolake.loaders import PackedShards
    from robolake.packers.manifest import MANIFEST_NAME
    from robolake.storage import join_uri, read_bytes

    if isinstance(data, PackedShards):
        m = data.manifest
        raw = read_bytes(join_uri(data.root, MANIFEST_NAME), data.storage_options)
        return {
            "source": "pack",
            "pack_uri": redact_uri(data.root),
            "pack_manifest_sha256": _sha256(raw),
            "pack_spec": m.spec,
            "shards_version": m.shards_version,
            "num_samples": m.num_samples,
            "lake_uri": redact_uri(m.lake_uri),
            "lake_version": m.lake_version,
            "lake_tag": m.lake_tag,
        }
    scope = data.scope
    return {
        "source": "lake",
        "lake_uri": redact_uri(data.uri),
        "lake_version": data.version,
        "lake_tag": None if data.tag is None else data.tag.name,
        "lake_scope_episodes": None if scope is None else len(scope),
        "lake_scope_sha256": None if scope is None else _scope_sha256(scope),
        "pack_spec": None if spec is None else spec.to_json(),
    }


@dataclass(frozen=True, kw_only=True)
class EpisodeSource:
    """One episode a checkpoint trained on, and where it came from."""

    episode_id: str
    source_uri: str
    source_format: str
    source_path: str


@dataclass(kw_only=True)
class LineageReport:
    """What `trace_lineage` found.

    Attributes:
        checkpoint: The checkpoint traced.
        step: Its step.
        lineage: The lineage record it holds.
        pack_matches: Whether the pack output's manifest still has the recorded hash (None: not
            trained on a pack output).
        episodes: Every episode it trained on, with its source file, sorted by episode id.
        missing: Episode ids the shards hold that the lake version does not list.
        notes: Links of the chain that no longer hold, and what was used instead.
    """

    checkpoint: str
    step: int
    lineage: dict[str, Any]
    pack_matches: bool | None = None
    episodes: list[EpisodeSource] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "episodes": [asdict(e) for e in self.episodes]}


def trace_lineage(path: str | os.PathLike[str], *, storage_options: dict[str, str] | None = None) -> LineageReport:
    """Walk a checkpoint (file, checkpoints directory or run directory) back to its episodes'
    source files. Reads JSON and table metadata only: no tensor of the checkpoint is loaded.

    Raises:
        FileNotFoundError: no checkpoint at `path`, or its lake is gone.
        ValueError: the checkpoint records no lineage (written before robolake recorded it).
    """
    from robolake.training.checkpoint import read_checkpoint

    ckpt = read_checkpoint(path)
    lineage = ckpt.lineage
    if not lineage or "lake_uri" not in lineage:
        raise ValueError(
            f"checkpoint {ckpt.path} records no lineage (it was written before robolake recorded it); "
            "retrain with `robolake train` to get a checkpoint that can be traced"
        )
    report = LineageReport(checkpoint=str(ckpt.path), step=ckpt.step, lineage=lineage)
    ids = _pack_episodes(lineage, report, storage_options) if lineage.get("source") == "pack" else None
    lake = _open_lake(lineage, report, storage_options, scoped=ids is None)
    if ids is None:
        ids = lake.episode_ids()
    _sources(lake, sorted(set(ids)), report)
    return report


def _pack_episodes(lineage: dict[str, Any], report: LineageReport, opts: dict[str, str] | None) -> list[str] | None:
    """The episode ids of the shards the run read, or None (with a note) where the pack output
    is gone or was re-made since."""
    import lance
    import pyarrow.compute as pc

    from robolake.packers.manifest import MANIFEST_NAME, SHARDS_NAME
    from robolake.storage import exists, join_uri, read_bytes

    root = lineage["pack_uri"]
    manifest = join_uri(root, MANIFEST_NAME)
    if not exists(manifest, opts):
        report.pack_matches = False
        report.notes.append(
            f"the pack output {root} is gone; the episodes are those of the lake version it was packed from"
        )
        return None
    report.pack_matches = _sha256(read_bytes(manifest, opts)) == lineage.get("pack_manifest_sha256")
    if not report.pack_matches:
        report.notes.append(
            f"the pack output {root} was re-made since this run (its manifest hash differs); "
            "the episodes are those of the lake version it was packed from"
        )
        return None
    ds = lance.dataset(join_uri(root, SHARDS_NAME), version=int(lineage["shards_version"]), storage_options=opts)
    column = ds.to_table(columns=["episode_id"])["episode_id"]
    return [str(e) for e in pc.unique(pc.list_flatten(column)).to_pylist()]


def _open_lake(lineage: dict[str, Any], report: LineageReport, opts: dict[str, str] | None, *, scoped: bool) -> Lake:
    """The lake at the recorded version; narrowed to the recorded tag's episodes when `scoped`
    and the tag still names what it named then."""
    from robolake.lake import Lake

    uri, version, tag = lineage["lake_uri"], int(lineage["lake_version"]), lineage.get("lake_tag")
    lake = Lake.open(uri, version=version, storage_options=opts)
    if not scoped or not tag or lineage.get("source") != "lake":
        return lake
    try:
        tagged = Lake.open(uri, tag=tag, storage_options=opts)
    except KeyError:
        report.notes.append(f"tag {tag!r} is gone; the episodes are all of version {version}")
        return lake
    same = tagged.version == version and (
        (tagged.scope is None and lineage.get("lake_scope_sha256") is None)
        or (tagged.scope is not None and _scope_sha256(tagged.scope) == lineage.get("lake_scope_sha256"))
    )
    if not same:
        report.notes.append(f"tag {tag!r} was moved since this run; the episodes are all of version {version}")
        return lake
    return tagged


def _sources(lake: Lake, ids: list[str], report: LineageReport) -> None:
    from robolake.lake import EpisodeFilter, source_path_of

    rows = (
        lake.episodes(
            EpisodeFilter(episode_ids=ids), columns=["episode_id", "source_uri", "source_format", "metadata"]
        ).to_pylist()
        if ids
        else []
    )
    found = {}
    for r in rows:
        try:
            meta = json.loads(r["metadata"] or "{}")
        except json.JSONDecodeError:
            meta = {}
        meta = meta if isinstance(meta, dict) else {}
        found[r["episode_id"]] = EpisodeSource(
            episode_id=r["episode_id"],
            source_uri=r["source_uri"],
            source_format=r["source_format"],
            source_path=source_path_of(r["source_uri"], meta),
        )
    report.episodes = [found[i] for i in ids if i in found]
    report.missing = [i for i in ids if i not in found]
    if report.missing:
        report.notes.append(
            f"{len(report.missing)} episode(s) the shards hold are not in lake version {lake.version} "
            f"(first: {report.missing[0]}); the shards do not come from that version"
        )
