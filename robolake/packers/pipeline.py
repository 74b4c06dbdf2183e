"""pack(): a lake -> packed shards, on Ray Data (small lakes in this process), with lineage.

The flow is sample index -> plan -> materialise -> write:

1. The sample index (`samples.py`) reads only metadata: the episodes table and the key columns
   of steps and media, pinned to the lake version being packed.
2. The plan (`plan.py`, Ray-free, shared with the lake stream) assigns samples to packed
   sequences. With a mixture (`spec.mix`), the samples are first the mixture's draw for the
   epoch (`epoch_samples`, the one mixture step, which the lake stream runs too; `mix.py`):
   groups repeated or subsampled to their shares. Samples are shuffled with the seed, so that
   equal-length neighbours (consecutive steps of one episode) spread over many sequences, then
   packed with the chosen algorithm (`binpack.py`), and the sequences are shuffled again,
   because best-fit emits them ordered by size.
3. Recorded videos (the lake's record layout) are decoded in a stage of their own: Ray Data
   maps over groups of episode-cameras, each task decodes whole streams in one pass and writes
   the rendition of every sample step to a scratch table `<out>/_renditions.lance`, so each
   stream is decoded once in the whole pack (`materialize.py` says why). Only the episodes the
   plan packs are decoded, and the scratch table is removed once the shards are committed.
4. Ray Data maps over groups of sequences: each task gathers its rows with Lance `take`
   (recorded frames from the scratch table), builds `PackedRow`s (`materialize.py`) and writes
   them as Lance fragments of `<out>/shards.lance`.
5. The driver appends all fragments in plan order with one commit and then writes
   `<out>/manifest.json`, which marks the output complete.

Same lake version + spec + seed => the same plan, the same rows in the same order.

Small lakes do not wait for Ray: starting a local Ray costs seconds, more than packing a few
thousand samples. Below `LOCAL_BELOW_SAMPLES` samples with no Ray running in this process
(`execution="auto"`; a Ray already started is used), or with `execution="local"`, the same stage
objects run in this process, chunk after chunk, with the same JSON round trip of their results
(`ray_tasks.fan_out(local=True)`), and the driver commits as it does after Ray. The plan is made
before any stage runs and does not depend on where they run, so the shards hold the same rows in
the same order either way; only the fragments they are cut into differ.

Bounded driver memory. Up to `PLAN_RANGE_SAMPLES` samples the plan is made on the driver
(8 bytes a sample plus the packer's working arrays). Above it, the episodes are dealt into
ranges of about that many samples by a seeded shuffle, and each range is planned in its own Ray
task, which writes its sequences to `<out>/_plan/range-NNNNN.npz` and returns only counts; the
write tasks read their slice of a range's plan from there. The driver then holds the per-episode
sample index and a few numbers per range, whatever the sample count (measured by
`robolake bench scale`: `plan_peak_rss_mb`). A packed sequence only mixes samples of one range,
a random tenth-of-a-percent of the lake's episodes or more, and the loader shuffles sequences
across ranges every epoch. With a mixture, each range draws its part of every global quota
(`Mixture.split`), so the shares hold over the whole pack.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

import lance
import numpy as np
import pyarrow as pa

from robolake.lake import (
    Lake,
    commit_fragments,
    fragments_from_json,
    fragments_to_json,
    load_streams,
    write_fragments,
)
from robolake.packers.manifest import MANIFEST_NAME, SHARDS_NAME, PackManifest, write_manifest
from robolake.packers.materialize import RENDITION_SCHEMA, SequenceMaterializer, counted_decodes, materializer_for
from robolake.packers.mix import Mixture
from robolake.packers.plan import (
    PLAN_RANGE_SAMPLES,
    epoch_samples,
    mixture_for,
    padded_fill,
    plan_ranges,
    plan_sequences,
    window_sequences,
)
from robolake.packers.samples import SampleIndex, build_sample_index
from robolake.packers.spec import PackSpec
from robolake.ray_tasks import chunk, cluster_cpus, ensure_ray, fan_out, ray_running
from robolake.schemas.packed import packed_schema
from robolake.storage import ensure_within, exists, filesystem, join_uri, normalize_uri

# The planning helpers live in `plan.py` (Ray-free, shared with the lake stream); they are
# re-exported here, where they were first defined, so that `robolake.packers.pipeline` imports hold.
__all__ = [
    "pack",
    "Execution",
    "LOCAL_BELOW_SAMPLES",
    "plan_sequences",
    "window_sequences",
    "epoch_samples",
    "plan_ranges",
    "padded_fill",
    "materializer_for",
    "mixture_for",
    "PLAN_RANGE_SAMPLES",
]

LOCAL_BELOW_SAMPLES = 10_000  # `execution="auto"` packs fewer samples in this process (with no Ray running)
RENDITIONS_NAME = "_renditions.lance"  # pack's scratch table: renditions of recorded streams
DECODE_TASKS_PER_CPU = 4  # decode-stage tasks per CPU at most (balance against Ray's per-task cost)

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]
Execution = Literal["auto", "local", "ray"]


def _plan_path(plan_dir: str, r: int) -> str:
    return join_uri(plan_dir, f"range-{r:05d}.npz")


class _PlanStage:
    """Plan one range of episodes and write its sequences to the plan directory."""

    def __init__(
        self,
        index: SampleIndex,
        spec: PackSpec,
        ranges: list[np.ndarray],
        plan_dir: str,
        opts: dict[str, str] | None,
        mixtures: list[Mixture] | None = None,
    ):
        self.index, self.spec, self.ranges, self.dir, self.opts, self.mixtures = (
            index,
            spec,
            ranges,
            plan_dir,
            opts,
            mixtures,
        )

    def __call__(self, r: int) -> dict[str, Any]:
        idx = self.index
        samples = idx.samples_of_episodes(self.ranges[r])
        mixture = None if self.mixtures is None else self.mixtures[r]
        sequences, rejected = plan_sequences(idx, self.spec, samples, seed=[self.spec.seed, r], mixture=mixture)
        flat = np.concatenate(sequences) if sequences else np.zeros(0, np.int64)
        bounds = np.concatenate([[0], np.cumsum([len(q) for q in sequences])]).astype(np.int64)
        path = _plan_path(self.dir, r)
        fs = filesystem(path, self.opts)
        fs.makedirs(self.dir, exist_ok=True)  # a no-op on object stores
        with fs.open(path, "wb") as f:
            np.savez(f, flat=flat, bounds=bounds)
        lengths = idx.length_of(flat)
        per_seq = len(flat) / max(1, len(sequences))
        real = int(lengths.sum())
        pf = padded_fill(lengths[np.random.default_rng([self.spec.seed, r, 1]).permutation(len(flat))], round(per_seq))
        counts = ([], []) if mixture is None else tuple(c.tolist() for c in mixture.counts(idx, flat))
        strata = [] if mixture is None else mixture.strata(idx, sequences, self.spec.max_tokens).tolist()
        return {
            "num_sequences": len(sequences),
            "num_samples": int(len(flat)),
            "total_tokens": real,
            "padded_tokens": real / pf if pf > 0 else 0.0,
            "rejected": rejected.tolist(),
            "mix_counts": counts,
            "strata": strata,
            "episodes": np.unique(idx.episode_of(flat)).tolist(),
        }


def _load_plan(path: str, opts: dict[str, str] | None) -> tuple[np.ndarray, np.ndarray]:
    with filesystem(path, opts).open(path, "rb") as f:
        z = np.load(f)
        return z["flat"], z["bounds"]


def _passes(counted: Counter[tuple[str, str]]) -> list[list[Any]]:
    """[episode_id, camera, n] of `counted_decodes` (JSON-able)."""
    return [[e, c, n] for (e, c), n in sorted(counted.items())]


class _DecodeStage:
    """Decode a group of recorded streams, each whole in one pass, into the scratch table."""

    def __init__(
        self, mat: SequenceMaterializer, groups: list[list[tuple[int, int]]], uri: str, opts: dict[str, str] | None
    ):
        self.mat, self.groups, self.uri, self.opts = mat, groups, uri, opts

    def __call__(self, index: int) -> dict[str, Any]:
        mat, group = self.mat, self.groups[index]
        media = lance.dataset(mat.media_uri, version=mat.media_version, storage_options=self.opts)
        streams_ds = (
            None
            if mat.streams_uri is None
            else lance.dataset(mat.streams_uri, version=mat.streams_version, storage_options=self.opts)
        )
        ids = mat.index.episodes["episode_id"]
        streams = load_streams(streams_ds, [str(ids[e].as_py()) for e, _ in group])
        frags: list[str] = []
        counts: list[int] = []
        with counted_decodes() as counted:
            for e, c in group:  # written stream by stream: a task holds one stream's renditions at a time
                frames = mat.render_stream(media, streams, e, c)
                table = pa.table({"data": pa.array(frames, pa.binary())}, schema=RENDITION_SCHEMA)
                frags += fragments_to_json(write_fragments(self.uri, table, RENDITION_SCHEMA, self.opts))
                counts.append(len(frames))
        return {"frags": frags, "counts": counts, "passes": _passes(counted)}


def _decode_groups(frames: np.ndarray, num_groups: int) -> list[list[int]]:
    """Stream positions dealt into `num_groups` groups of about equal frames (longest first, each
    to the lightest group), the heaviest group first so it starts first."""
    load = np.zeros(num_groups, dtype=np.int64)
    groups: list[list[int]] = [[] for _ in range(num_groups)]
    for i in np.argsort(-frames, kind="stable").tolist():
        g = int(np.argmin(load))
        groups[g].append(i)
        load[g] += int(frames[i])
    return [sorted(groups[g]) for g in np.argsort(-load, kind="stable").tolist() if groups[g]]


def _remove(uri: str, opts: dict[str, str] | None) -> None:
    fs = filesystem(uri, opts)
    if fs.exists(uri):
        fs.rm(uri, recursive=True)


def _render_recorded(
    mat: SequenceMaterializer,
    episodes: np.ndarray,
    out: str,
    opts: dict[str, str] | None,
    progress: ProgressFn | None,
    local: bool = False,
) -> tuple[SequenceMaterializer, list[list[Any]]]:
    """The decode stage: every recorded stream of `episodes` (rows) that has no access copy,
    decoded once into `<out>/_renditions.lance`; returns the materializer that reads it and the
    decode passes the stage made ([episode_id, camera, n])."""
    idx = mat.index
    if idx.recorded is None or not len(episodes):
        return mat, []
    todo = idx.recorded & (idx.media_offset >= 0)
    if idx.access_offset is not None:
        todo &= idx.access_offset < 0
    used = np.zeros(idx.num_episodes, dtype=bool)
    used[np.asarray(episodes, dtype=np.int64)] = True
    todo &= used[:, None]
    pairs = [(int(e), int(c)) for e, c in np.argwhere(todo).tolist()]  # episode by episode, cameras in order
    if not pairs:
        return mat, []
    stride = int(idx.step_stride)
    num_steps = idx.episodes["num_steps"].to_numpy()
    frames = np.asarray([(int(num_steps[e]) + stride - 1) // stride for e, _ in pairs], dtype=np.int64)
    cpus = cluster_cpus(local)
    groups = [[pairs[i] for i in g] for g in _decode_groups(frames, min(len(pairs), DECODE_TASKS_PER_CPU * cpus))]
    uri = join_uri(out, RENDITIONS_NAME)
    _remove(uri, opts)  # what a killed pack left
    base = lance.write_dataset(
        pa.Table.from_pylist([], schema=RENDITION_SCHEMA),
        uri,
        schema=RENDITION_SCHEMA,
        mode="overwrite",
        storage_options=opts,
    ).version
    results: dict[int, dict[str, Any]] = {}
    for g, res in fan_out(_DecodeStage(mat, groups, uri, opts), len(groups), local=local):
        results[g] = res
        if progress:
            progress("decode", sum(len(groups[k]) for k in results), len(pairs))
    version = commit_fragments(
        uri,
        fragments_from_json([f for g in range(len(groups)) for f in results[g]["frags"]]),
        read_version=base,
        storage_options=opts,
    )
    offset = np.full(todo.shape, -1, dtype=np.int64)
    row = 0
    for g in range(len(groups)):  # fragments were committed group by group, stream by stream
        for (e, c), n in zip(groups[g], results[g]["counts"], strict=True):
            offset[e, c] = row
            row += int(n)
    rendered = dataclasses.replace(mat, rendered_uri=uri, rendered_version=version, rendered_offset=offset)
    return rendered, [p for g in range(len(groups)) for p in results[g]["passes"]]


class _WriteStage:
    def __init__(
        self,
        mat: SequenceMaterializer,
        groups: list[list[int]],
        sequences: list[np.ndarray],
        shards_uri: str,
        opts: dict[str, str] | None,
    ):
        self.mat, self.groups, self.sequences, self.uri, self.opts = mat, groups, sequences, shards_uri, opts

    def __call__(self, index: int) -> dict[str, Any]:
        seqs = self.groups[index]
        with counted_decodes() as counted:  # none: the decode stage made every recorded frame
            table = self.mat.rows([self.sequences[i] for i in seqs], seqs)
        frags = write_fragments(self.uri, table, packed_schema(), self.opts)
        return {"frags": fragments_to_json(frags), "n": len(seqs), "passes": _passes(counted)}


class _RangeWriteStage:
    """Materialise sequences [lo, hi) of one range's plan (read from the plan directory)."""

    def __init__(
        self,
        mat: SequenceMaterializer,
        groups: list[tuple[int, int, int, int]],
        plan_dir: str,
        shards_uri: str,
        opts: dict[str, str] | None,
    ):
        self.mat, self.groups, self.dir, self.uri, self.opts = mat, groups, plan_dir, shards_uri, opts

    def __call__(self, index: int) -> dict[str, Any]:
        r, lo, hi, first_seq = self.groups[index]
        flat, bounds = _load_plan(_plan_path(self.dir, r), self.opts)
        bins = [flat[bounds[i] : bounds[i + 1]] for i in range(lo, hi)]
        with counted_decodes() as counted:
            table = self.mat.rows(bins, list(range(first_seq, first_seq + hi - lo)))
        frags = write_fragments(self.uri, table, packed_schema(), self.opts)
        return {"frags": fragments_to_json(frags), "n": hi - lo, "passes": _passes(counted)}


def _pack_ranges(
    index: SampleIndex,
    spec: PackSpec,
    ranges: list[np.ndarray],
    mat: SequenceMaterializer,
    out: str,
    shards_uri: str,
    opts: dict[str, str] | None,
    sequences_per_task: int,
    progress: ProgressFn | None,
    mixture: Mixture | None = None,
    local: bool = False,
) -> tuple[list[str], dict[str, Any]]:
    """Plan each range on a Ray task (in turn here, with `local`), then materialise; returns
    (fragments JSON, totals)."""
    plan_dir = join_uri(out, "_plan")
    mixtures = None if mixture is None else mixture.split(index, ranges, spec.max_tokens)
    stage = _PlanStage(index, spec, ranges, plan_dir, opts, mixtures)
    planned: dict[int, dict[str, Any]] = dict(fan_out(stage, len(ranges), local=local))
    num_sequences = sum(p["num_sequences"] for p in planned.values())
    per_task = max(1, min(sequences_per_task, -(-num_sequences // (2 * cluster_cpus(local)))))
    groups: list[tuple[int, int, int, int]] = []
    first = 0
    for r in range(len(ranges)):
        n = int(planned[r]["num_sequences"])
        groups += [(r, lo, min(n, lo + per_task), first + lo) for lo in range(0, n, per_task)]
        first += n
    used = np.unique(np.asarray([e for p in planned.values() for e in p["episodes"]], dtype=np.int64))
    mat, passes = _render_recorded(mat, used, out, opts, progress, local)
    results: dict[int, dict[str, Any]] = {}
    done = 0
    for g, res in fan_out(_RangeWriteStage(mat, groups, plan_dir, shards_uri, opts), len(groups), local=local):
        results[g] = res
        done += int(res["n"])
        if progress:
            progress("pack", done, first)
    fs = filesystem(plan_dir, opts)
    if fs.exists(plan_dir):
        fs.rm(plan_dir, recursive=True)
    totals: dict[str, Any] = {
        "num_sequences": first,
        "num_samples": sum(int(p["num_samples"]) for p in planned.values()),
        "total_tokens": sum(int(p["total_tokens"]) for p in planned.values()),
        "padded_tokens": sum(float(p["padded_tokens"]) for p in planned.values()),
        "rejected": np.asarray([i for r in range(len(ranges)) for i in planned[r]["rejected"]], dtype=np.int64),
        "passes": passes + [p for g in sorted(results) for p in results[g]["passes"]],
    }
    if mixture is not None:
        totals["mixture"] = mixture.report(
            np.sum([planned[r]["mix_counts"][0] for r in range(len(ranges))], axis=0),
            np.sum([planned[r]["mix_counts"][1] for r in range(len(ranges))], axis=0),
        ) | {"row_strata": [x for r in range(len(ranges)) for x in planned[r]["strata"]]}
    return [f for g in sorted(results) for f in results[g]["frags"]], totals


def pack(
    lake: Lake | str,
    spec: PackSpec | None = None,
    out: str = "packed",
    *,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    sequences_per_task: int = 64,
    plan_range_samples: int = PLAN_RANGE_SAMPLES,
    execution: Execution = "auto",
) -> PackManifest:
    """Pack `lake` into shards at `out` (`shards.lance` + `manifest.json`).

    Args:
        lake: A Lake (at the version to pack) or its URI (newest version).
        spec: The pack spec.
        out: Output directory or object-store prefix.
        overwrite: Replace an existing pack output at `out`.
        progress: Called as progress("pack", sequences_done, sequences_total).
        sequences_per_task: Packed sequences one Ray task materialises and writes.
        plan_range_samples: Above this many samples the plan is made per range of episodes on
            Ray tasks (bounded driver memory; see the module essay).
        execution: Where the stages run: `ray` (Ray Data tasks, on a local Ray or the one already
            started), `local` (this process, chunk after chunk: the same stages, plan and shards),
            or `auto`: local below `LOCAL_BELOW_SAMPLES` samples when this process has no Ray
            running, else Ray (a Ray already started costs nothing more to use).

    Returns:
        The manifest written next to the shards.

    Raises:
        FileExistsError: `out` already holds a pack output and `overwrite` is False.
        FileNotFoundError: the lake version references data files that are gone.
        ValueError: nothing to pack, an oversize sample with on_oversize="error", or an unknown
            `execution`.
    """
    if execution not in ("auto", "local", "ray"):
        raise ValueError(f"execution must be auto, local or ray, got {execution!r}")
    t0 = time.perf_counter()
    spec = spec or PackSpec()
    if isinstance(lake, str):
        lake = Lake.open(lake)
    from robolake.lake import missing_files

    missing = missing_files(lake.uri, lake.version_info, lake.storage_options)
    if missing:  # otherwise a worker fails later with Lance's raw "Not found"
        raise FileNotFoundError(
            f"lake {lake.uri} version {lake.version} references {len(missing)} data file(s) that do not exist "
            f"(first: {missing[0]}); run `robolake check {lake.uri}` for what to do"
        )
    out = normalize_uri(out)
    opts = lake.storage_options
    if exists(join_uri(out, MANIFEST_NAME), opts) and not overwrite:
        raise FileExistsError(f"{out} already holds packed shards; pass overwrite=True (--overwrite) to replace them")
    index = build_sample_index(lake, spec)
    local = execution == "local" or (
        execution == "auto" and index.num_samples < LOCAL_BELOW_SAMPLES and not ray_running()
    )
    if not local:
        ensure_ray()
    log.info("pack %s: %d samples, %s", out, index.num_samples, "in this process" if local else "on Ray")
    mixture = mixture_for(lake, index, spec)  # before anything is written: a value naming nothing fails here
    mat = materializer_for(lake, index, spec)
    ranges = plan_ranges(index, spec, plan_range_samples)
    mix_report: dict[str, Any] | None = None
    sequences: list[np.ndarray] = []
    rejected = np.zeros(0, np.int64)
    if len(ranges) == 1:  # plan first: an oversize sample fails before anything is written
        sequences, rejected = plan_sequences(index, spec, mixture=mixture)
        if mixture is not None:
            mix_report = mixture.report(
                *mixture.counts(index, np.concatenate(sequences) if sequences else np.zeros(0, np.int64))
            )
            mix_report["row_strata"] = mixture.strata(
                index, sequences, spec.max_tokens
            ).tolist()  # the shard loader's deal
    try:  # the scratch table of renditions goes however the run ends (a killed run's, at the next run's start)
        return _pack_stages(
            lake,
            spec,
            index,
            mixture,
            mat,
            out,
            ranges,
            mix_report,
            sequences,
            rejected,
            t0,
            progress,
            sequences_per_task,
            local,
        )
    finally:
        _remove(join_uri(out, RENDITIONS_NAME), opts)


def _pack_stages(
    lake: Lake,
    spec: PackSpec,
    index: SampleIndex,
    mixture: Mixture | None,
    mat: SequenceMaterializer,
    out: str,
    ranges: list[np.ndarray],
    mix_report: dict[str, Any] | None,
    sequences: list[np.ndarray],
    rejected: np.ndarray,
    t0: float,
    progress: ProgressFn | None,
    sequences_per_task: int,
    local: bool,
) -> PackManifest:
    """pack() past the plan (of one range; several are planned here): decode, write, commit, manifest."""
    opts = lake.storage_options
    shards_uri = ensure_within(out, join_uri(out, SHARDS_NAME))  # a shards.lance linked elsewhere: never written
    schema = packed_schema()
    if len(ranges) == 1:  # decoded before the shards are touched: a damaged stream fails with them as they were
        packed_ids = np.concatenate(sequences) if sequences else np.zeros(0, np.int64)
        mat, passes = _render_recorded(mat, np.unique(index.episode_of(packed_ids)), out, opts, progress, local)
    base = lance.write_dataset(
        pa.Table.from_pylist([], schema=schema), shards_uri, schema=schema, mode="overwrite", storage_options=opts
    ).version
    if len(ranges) > 1:
        frag_json, totals = _pack_ranges(
            index, spec, ranges, mat, out, shards_uri, opts, sequences_per_task, progress, mixture, local
        )
        num_sequences, num_samples, total = totals["num_sequences"], totals["num_samples"], totals["total_tokens"]
        padded = total / totals["padded_tokens"] if totals["padded_tokens"] else 0.0
        rejected = totals["rejected"]
        mix_report = totals.get("mixture")
        passes = totals["passes"]
    else:
        groups = chunk(list(range(len(sequences))), sequences_per_task, local=local)
        results: dict[int, dict[str, Any]] = {}
        done = 0
        for group, res in fan_out(_WriteStage(mat, groups, sequences, shards_uri, opts), len(groups), local=local):
            results[group] = res
            done += int(res["n"])
            if progress:
                progress("pack", done, len(sequences))
        frag_json = [f for g in sorted(results) for f in results[g]["frags"]]
        passes += [p for g in sorted(results) for p in results[g]["passes"]]
        packed_lengths = index.length_of(packed_ids)
        num_sequences, num_samples, total = len(sequences), int(len(packed_ids)), int(packed_lengths.sum())
        per_seq = len(packed_ids) / max(1, len(sequences))
        rng = np.random.default_rng(spec.seed)
        padded = padded_fill(packed_lengths[rng.permutation(len(packed_ids))], round(per_seq))
    version = commit_fragments(shards_uri, fragments_from_json(frag_json), read_version=base, storage_options=opts)
    log.info(
        "pack %s: %d decode passes over recorded streams",
        out,
        sum(int(n) for _, _, n in passes),
        extra={"decode_passes": [tuple(p) for p in passes]},
    )

    rejected_lengths = index.length_of(rejected)
    manifest = PackManifest(
        lake_uri=lake.uri,
        lake_version=lake.version,
        lake_tag=None if lake.tag is None else lake.tag.name,
        spec=spec.to_json(),
        seed=spec.seed,
        embodiments=list(index.embodiments),
        num_samples=num_samples,
        num_sequences=num_sequences,
        total_tokens=total,
        fill=total / max(1, num_sequences * spec.max_tokens),
        padded_fill=padded,
        rejected=[(e, s, int(n)) for n, (e, s) in zip(rejected_lengths, index.keys(rejected), strict=True)],
        shards_version=version,
        seconds=time.perf_counter() - t0,
        mixture=mix_report,
    )
    write_manifest(out, manifest, opts)
    return manifest
