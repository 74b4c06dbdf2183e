"""pack(): a lake -> packed shards, on Ray Data, with lineage.

The flow is sample index -> plan -> materialise -> write:

1. The sample index (`samples.py`) reads only metadata: the episodes table and the key columns
   of steps and media, pinned to the lake version being packed.
2. The plan assigns samples to packed sequences. Samples are shuffled with the seed first, so
   that equal-length neighbours (consecutive steps of one episode) spread over many sequences,
   then packed with the chosen algorithm (`binpack.py`), and the sequences are shuffled again,
   because best-fit emits them ordered by size.
3. Ray Data maps over groups of sequences: each task gathers its rows with Lance `take`,
   builds `PackedRow`s (`materialize.py`) and writes them as Lance fragments of
   `<out>/shards.lance`.
4. The driver appends all fragments in plan order with one commit and then writes
   `<out>/manifest.json`, which marks the output complete.

Same lake version + spec + seed => the same plan, the same rows in the same order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import lance
import numpy as np
import pyarrow as pa

from robolake.lake.lake import Lake
from robolake.lake.storage import exists, join_uri, normalize_uri
from robolake.lake.transaction import commit_fragments, fragments_from_json, fragments_to_json
from robolake.packers.binpack import best_fit_decreasing, first_fit_decreasing
from robolake.packers.manifest import MANIFEST_NAME, SHARDS_NAME, PackManifest, write_manifest
from robolake.packers.materialize import SequenceMaterializer
from robolake.packers.samples import SampleIndex, build_sample_index
from robolake.packers.spec import PackSpec
from robolake.packers.window import WindowPacker
from robolake.ray_tasks import chunk, ensure_ray, fan_out
from robolake.schemas.packed import packed_schema

__all__ = ["pack", "plan_sequences", "padded_fill", "materializer_for"]

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]


def padded_fill(lengths: np.ndarray, batch_size: int) -> float:
    """Real-token fraction if `lengths` (in this order) were padded per batch of `batch_size`."""
    if len(lengths) == 0:
        return 0.0
    b = max(1, int(batch_size))
    n = (len(lengths) + b - 1) // b * b
    padded = np.zeros(n, dtype=np.int64)
    padded[: len(lengths)] = lengths
    grid = padded.reshape(-1, b)
    counts = np.minimum(b, len(lengths) - np.arange(grid.shape[0]) * b)
    return float(lengths.sum() / (grid.max(1) * counts).sum())


def plan_sequences(index: SampleIndex, spec: PackSpec) -> tuple[list[np.ndarray], np.ndarray]:
    """Assign the samples of `index` to packed sequences.

    Returns:
        (sequences, rejected): sample ids of each packed sequence, in training order; sample ids
        rejected for being longer than `spec.max_tokens` (only with on_oversize="reject").

    Raises:
        ValueError: a sample is longer than max_tokens and on_oversize="error"; the message
            names its episode and step.
    """
    oversize = np.flatnonzero(index.length > spec.max_tokens)
    if oversize.size and spec.on_oversize == "error":
        (eid, step), = index.keys(oversize[:1])
        raise ValueError(
            f"sample (episode {eid}, step {step}) has {int(index.length[oversize[0]])} tokens, more than "
            f"max_tokens={spec.max_tokens} ({oversize.size} such samples); raise --max-tokens, shorten the "
            "instruction with tokens.max_text_tokens, or pass on_oversize='reject' to record and skip them"
        )
    rng = np.random.default_rng(spec.seed)
    perm = rng.permutation(index.num_samples)
    lengths = index.length[perm]
    if spec.algorithm == "bfd":
        plan = best_fit_decreasing(lengths, spec.max_tokens, on_oversize="reject")
    elif spec.algorithm == "ffd":
        plan = first_fit_decreasing(lengths, spec.max_tokens, on_oversize="reject")
    else:
        plan = WindowPacker(max_tokens=spec.max_tokens, window=spec.window, seed=spec.seed, on_oversize="reject").pack_lengths(lengths)
    sequences = [perm[plan.bin(b)] for b in range(plan.num_bins)]
    if spec.algorithm != "window":  # the window packer already emits in a seeded shuffled order
        sequences = [sequences[i] for i in rng.permutation(len(sequences))]
    return sequences, perm[plan.rejected]


def materializer_for(lake: Lake, index: SampleIndex, spec: PackSpec) -> SequenceMaterializer:
    return SequenceMaterializer(
        index=index,
        spec=spec,
        steps_uri=lake.table_uri("steps"),
        steps_version=lake.version_info.tables["steps"],
        media_uri=lake.table_uri("media"),
        media_version=lake.version_info.tables["media"],
        stats={tag: lake.norm_stats(tag) for tag in index.embodiments},
        storage_options=lake.storage_options,
    )


class _WriteStage:
    def __init__(self, mat: SequenceMaterializer, groups: list[list[int]], sequences: list[np.ndarray], shards_uri: str, opts: dict[str, str] | None):
        self.mat, self.groups, self.sequences, self.uri, self.opts = mat, groups, sequences, shards_uri, opts

    def __call__(self, index: int) -> dict[str, Any]:
        seqs = self.groups[index]
        table = self.mat.rows([self.sequences[i] for i in seqs], seqs)
        frags = lance.fragment.write_fragments(table, self.uri, schema=packed_schema(), storage_options=self.opts)
        return {"frags": fragments_to_json(frags), "n": len(seqs)}


def pack(
    lake: Lake | str,
    spec: PackSpec | None = None,
    out: str = "packed",
    *,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    sequences_per_task: int = 64,
) -> PackManifest:
    """Pack `lake` into shards at `out` (`shards.lance` + `manifest.json`).

    Args:
        lake: A Lake (at the version to pack) or its URI (newest version).
        spec: The pack spec.
        out: Output directory or object-store prefix.
        overwrite: Replace an existing pack output at `out`.
        progress: Called as progress("pack", sequences_done, sequences_total).
        sequences_per_task: Packed sequences one Ray task materialises and writes.

    Returns:
        The manifest written next to the shards.

    Raises:
        FileExistsError: `out` already holds a pack output and `overwrite` is False.
        ValueError: nothing to pack, or an oversize sample with on_oversize="error".
    """
    t0 = time.perf_counter()
    spec = spec or PackSpec()
    if isinstance(lake, str):
        lake = Lake.open(lake)
    out = normalize_uri(out)
    opts = lake.storage_options
    if exists(join_uri(out, MANIFEST_NAME), opts) and not overwrite:
        raise FileExistsError(f"{out} already holds packed shards; pass overwrite=True (--overwrite) to replace them")
    ensure_ray()
    index = build_sample_index(lake, spec)
    sequences, rejected = plan_sequences(index, spec)
    mat = materializer_for(lake, index, spec)

    shards_uri = join_uri(out, SHARDS_NAME)
    schema = packed_schema()
    base = lance.write_dataset(pa.Table.from_pylist([], schema=schema), shards_uri, schema=schema, mode="overwrite", storage_options=opts).version
    groups = chunk(list(range(len(sequences))), sequences_per_task)
    results: dict[int, dict[str, Any]] = {}
    done = 0
    for group, res in fan_out(_WriteStage(mat, groups, sequences, shards_uri, opts), len(groups)):
        results[group] = res
        done += int(res["n"])
        if progress:
            progress("pack", done, len(sequences))
    frags = fragments_from_json([f for g in sorted(results) for f in results[g]["frags"]])
    version = commit_fragments(shards_uri, frags, read_version=base, storage_options=opts)

    packed_ids = np.concatenate(sequences) if sequences else np.zeros(0, np.int64)
    total = int(index.length[packed_ids].sum())
    per_seq = len(packed_ids) / max(1, len(sequences))
    rng = np.random.default_rng(spec.seed)
    manifest = PackManifest(
        lake_uri=lake.uri,
        lake_version=lake.version,
        spec=spec.to_json(),
        seed=spec.seed,
        embodiments=list(index.embodiments),
        num_samples=int(len(packed_ids)),
        num_sequences=len(sequences),
        total_tokens=total,
        fill=total / max(1, len(sequences) * spec.max_tokens),
        padded_fill=padded_fill(index.length[rng.permutation(packed_ids)], round(per_seq)),
        rejected=[(e, s, int(index.length[i])) for i, (e, s) in zip(rejected, index.keys(rejected), strict=True)],
        shards_version=version,
        seconds=time.perf_counter() - t0,
    )
    write_manifest(out, manifest, opts)
    return manifest
