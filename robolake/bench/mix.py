"""`robolake bench mix`: weighted mixtures against their targets, per rank, and against unweighted packing.

On a synthetic lake of four embodiments that differ in size and in sample length (1-3 cameras,
short and long instructions) and two sources (recorded, rollout), at least 100,000 samples
(20,000 with `--quick`), written row by row (no video decode: the plan reads metadata only), for
each mixture below and each packer (`bfd`, `window`):

- `max_abs_error`: largest |realised - target| share over the packed epoch (goal: < 0.01), in
  the mixture's unit (samples or tokens), for epochs 0 and 1;
- per-rank shares: the packed sequences dealt to 2, 4 and 8 ranks as the lake stream deals
  them (`Mixture.deal`), as the shard loader deals a mixed pack (`epoch_batches` with the row
  strata the manifest records) and, for comparison, at random (the shard loader's seeded
  shuffle without strata): largest |realised - target| over every rank and group; and the lake
  stream itself (`LakeStream` for 4 ranks, its own plan, epochs 0 and 1);
- `fill`: real tokens over sequence capacity, against the same packer on the lake as it is
  (goal: within 0.005);
- `plan_time`: seconds to plan one epoch with the mixture (bind + draw + pack) over seconds to
  pack the lake as it is, paired runs (unweighted, mixed, ...), median with its range.

Mixtures: `embodiment=gr1:0.5,so101:0.3,*:0.2` by samples and by tokens (gr1 is 10% of the
samples, so it repeats about five times; the rest are subsampled), and
`source=rollout:0.4,recorded:0.6` by samples. Without `--quick` a real `pack` of the first
mixture also runs and its manifest's shares are reported.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.bench._common import machine, print_table, ratio_summary, write_json
from robolake.lake import Lake, encode_frame
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.schemas.tables import schema_for_table

__all__ = ["MIXTURES", "build_mixed_lake", "run", "main"]

# (tag, share of episodes, cameras, state/action width)
_EMBODIMENTS = (("gr1", 0.10, 3, 44), ("so101", 0.25, 2, 6), ("arm7", 0.40, 1, 7), ("aloha", 0.25, 1, 14))
_TASKS = (
    "pick the cube",
    "open the top drawer of the cabinet and put the red block inside it",
    "push",
    "stack the two cups",
)
MIXTURES = (
    ("embodiment=gr1:0.5,so101:0.3,*:0.2", "samples"),
    ("embodiment=gr1:0.5,so101:0.3,*:0.2", "tokens"),
    ("source=rollout:0.4,recorded:0.6", "samples"),
)


def build_mixed_lake(root: str, samples: int, *, seed: int = 0, mean_steps: int = 50) -> str:
    """A lake of about `samples` steps over four embodiments and two sources, written in one
    transaction straight from arrays (tiny shared JPEG frames: packing plans never decode them).

    Episode i is a rollout (`metadata.source = 'rollout'`) when i % 7 == 0; its embodiment is
    drawn with the `_EMBODIMENTS` shares, its length uniformly in [mean_steps/2, 3*mean_steps/2].
    """
    from robolake.lake import accumulate_norm_stats

    rng = np.random.default_rng(seed)
    lake = Lake.create(root)
    frame = encode_frame(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
    lengths: list[int] = []
    while sum(lengths) < samples:
        lengths.append(int(rng.integers(mean_steps // 2, mean_steps * 3 // 2 + 1)))
    which = rng.choice(len(_EMBODIMENTS), size=len(lengths), p=[e[1] for e in _EMBODIMENTS]).tolist()
    ep_rows: list[dict[str, Any]] = []
    media: list[pa.Table] = []
    by_tag: dict[str, list[pa.Table]] = {}
    for i, (n, e) in enumerate(zip(lengths, which, strict=True)):
        tag, _, cams, dim = _EMBODIMENTS[e]
        eid = f"{tag}/{i:07d}"
        cameras = [f"cam{c}" for c in range(cams)]
        ep_rows.append(
            {
                "episode_id": eid,
                "source_uri": f"/data/{tag}",
                "source_format": "synthetic",
                "source_episode_index": i,
                "embodiment": tag,
                "task": _TASKS[i % len(_TASKS)],
                "num_steps": n,
                "fps": 20.0,
                "cameras": cameras,
                "success": bool(i % 3),
                "content_hash": f"{i:064x}",
                "ingested_at": time.time_ns(),
                "metadata": json.dumps({"source": "rollout"} if i % 7 == 0 else {}),
            }
        )
        t = np.arange(n, dtype=np.int32)
        vec = {
            k: pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32) * dim), pa.array(rng.normal(size=n * dim).astype(np.float32))
            )
            for k in ("state", "action")
        }
        by_tag.setdefault(tag, []).append(
            pa.table(
                {
                    "episode_id": pa.array([eid] * n, pa.string()),
                    "embodiment": pa.array([tag] * n, pa.string()),
                    "step_index": pa.array(t),
                    "timestamp": pa.array(t / 20.0),
                    **vec,
                    "task_index": pa.array(np.zeros(n, np.int32)),
                },
                schema=schema_for_table("steps"),
            )
        )
        m = n * cams
        media.append(
            pa.table(
                {
                    "episode_id": pa.array([eid] * m, pa.string()),
                    "camera": pa.array([c for c in cameras for _ in range(n)], pa.string()),
                    "step_index": pa.array(np.tile(t, cams)),
                    "timestamp": pa.array(np.tile(t / 20.0, cams)),
                    "width": pa.array(np.full(m, 8, np.int32)),
                    "height": pa.array(np.full(m, 8, np.int32)),
                    "encoding": pa.array(["jpeg"] * m, pa.string()),
                    "data": pa.array([frame] * m, pa.large_binary()),
                },
                schema=schema_for_table("media"),
            )
        )
    with lake.begin() as tx:
        tx.append_table("episodes", pa.Table.from_pylist(ep_rows, schema=schema_for_table("episodes")))
        tx.append_table("steps", pa.concat_tables([pa.concat_tables(by_tag[t]) for t in sorted(by_tag)]))
        tx.append_table("media", pa.concat_tables(media))
        rows = []
        for tag, _, cams, dim in _EMBODIMENTS:
            if tag not in by_tag:
                continue
            acc = accumulate_norm_stats(pa.concat_tables(by_tag[tag]))
            spec = EmbodimentSpec(
                tag=tag, state_dim=dim, action_dim=dim, cameras=tuple(f"cam{c}" for c in range(cams)), fps=20.0
            )
            rows.append(
                {
                    "embodiment": tag,
                    "spec_json": spec.to_json(),
                    "stats_json": acc.to_json(),
                    "num_episodes": len(by_tag[tag]),
                    "num_steps": acc.state.count,
                }
            )
        tx.overwrite("embodiments", pa.Table.from_pylist(rows, schema=schema_for_table("embodiments")))
        for table in ("episodes", "steps", "media"):
            tx.create_index(table, "episode_id")
        tx.commit("ingest", {"bench": "mix", "samples": int(sum(lengths))})
    return root


def _shares(mixture: Any, index: Any, ids: np.ndarray) -> np.ndarray:
    n, tok = mixture.counts(index, ids)
    got = (tok if mixture.spec.share == "tokens" else n).astype(np.float64)
    return got / max(1.0, got.sum())


def _targets(mixture: Any) -> np.ndarray:
    return np.asarray([w for _, w in mixture.spec.normalized])


def _rank_error(mixture: Any, index: Any, sequences: list[np.ndarray], world: int, epoch: int, how: str) -> float:
    """Largest |share - target| over every rank and group, `sequences` dealt to `world` ranks
    as the lake stream deals them (its canonical order over the sequences' strata, then
    `plan_epoch`, as `LakeStream._epoch_plan`), as the shard loader deals a mixed pack
    (`epoch_batches` with the row strata the manifest records), or at random (the shard
    loader's seeded shuffle without strata)."""
    from robolake.loaders.config import LoaderConfig
    from robolake.loaders.order import canonical_order, plan_epoch
    from robolake.loaders.torch_loader import epoch_batches

    cfg = LoaderConfig(sequences_per_batch=1)
    strata = mixture.strata(index, sequences, 2048) if how != "random" else None
    if how == "lake_stream":
        order = canonical_order(len(sequences), seed=[cfg.seed, epoch, 0x4445], strata=strata)
        plans = [
            plan_epoch(order, start=0, rank=r, world_size=world, per_rank=1, drop_last=False, strata=strata).batches
            for r in range(world)
        ]
    else:
        plans = [
            epoch_batches(len(sequences), epoch=epoch, rank=r, world_size=world, config=cfg, strata=strata)
            for r in range(world)
        ]
    worst = 0.0
    for batches in plans:
        ids = np.concatenate([sequences[i] for i in np.concatenate(batches)])
        worst = max(worst, float(np.abs(_shares(mixture, index, ids) - _targets(mixture)).max()))
    return worst


def _fill(index: Any, sequences: list[np.ndarray], max_tokens: int) -> float:
    tokens = sum(int(index.length_of(q).sum()) for q in sequences)
    return tokens / max(1, len(sequences) * max_tokens)


def _mixture_case(lake: Lake, text: str, share: str, algorithm: str, repeats: int) -> dict[str, Any]:
    from robolake.packers import PackSpec, TokenLengthConfig, build_sample_index
    from robolake.packers.mix import MixSpec
    from robolake.packers.pipeline import mixture_for, plan_sequences

    base = PackSpec(
        max_tokens=2048,
        algorithm=algorithm,  # type: ignore[arg-type]
        window=8192,
        tokens=TokenLengthConfig(tokens_per_view=64, state_tokens=0),
        seed=0,
    )
    spec = dataclasses.replace(base, mix=MixSpec.parse(text, share=share))
    index = build_sample_index(lake, spec)
    plain_s, mixed_s, ratios = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        plain, _ = plan_sequences(index, base)
        t1 = time.perf_counter()
        mixture = mixture_for(lake, index, spec)
        mixed, _ = plan_sequences(index, spec, mixture=mixture)
        t2 = time.perf_counter()
        plain_s.append(t1 - t0)
        mixed_s.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    assert mixture is not None
    targets = _targets(mixture)
    out: dict[str, Any] = {"mix": text, "share": share, "algorithm": algorithm, "samples": index.num_samples}
    for epoch in (0, 1):
        seqs, _ = plan_sequences(index, spec, mixture=mixture, epoch=epoch) if epoch else (mixed, None)
        realised = _shares(mixture, index, np.concatenate(seqs))
        out[f"epoch{epoch}"] = {
            "realised": dict(zip(mixture.values, realised.round(5).tolist(), strict=True)),
            "target": dict(zip(mixture.values, targets.round(5).tolist(), strict=True)),
            "max_abs_error": float(np.abs(realised - targets).max()),
            "per_rank_max_abs_error": {
                how: {str(w): _rank_error(mixture, index, seqs, w, epoch, how) for w in (2, 4, 8)}
                for how in ("lake_stream", "shard_loader", "random")
            },
        }
    report = mixture.report(*mixture.counts(index, np.concatenate(mixed)))
    out["repeats"] = {c["value"]: round(c["repeats"], 3) for c in report["components"]}
    out["fill"] = _fill(index, mixed, spec.max_tokens)
    out["fill_unweighted"] = _fill(index, plain, spec.max_tokens)
    out["fill_delta"] = out["fill"] - out["fill_unweighted"]
    out["plan_s"] = float(np.median(mixed_s))
    out["plan_s_unweighted"] = float(np.median(plain_s))
    out["plan_time_vs_unweighted"] = ratio_summary(ratios)
    return out


def _lake_stream_ranks(lake: Lake, text: str, share: str, world: int) -> dict[str, Any]:
    """Shares each rank of the real lake stream reads in epochs 0 and 1 (plans only: no frames decoded)."""
    from robolake.loaders import LoaderConfig
    from robolake.loaders.lake_stream import LakeStream
    from robolake.packers import PackSpec, TokenLengthConfig
    from robolake.packers.mix import MixSpec

    spec = PackSpec(
        max_tokens=2048,
        algorithm="window",
        tokens=TokenLengthConfig(tokens_per_view=64, state_tokens=0),
        mix=MixSpec.parse(text, share=share),
    )
    cfg = LoaderConfig(sequences_per_batch=4, num_workers=0, image_size=8)
    streams = [LakeStream(lake, spec, cfg, rank=r, world_size=world) for r in range(world)]
    worst: dict[str, float] = {}
    for epoch in (0, 1):
        for s in streams:
            bins, batches = s._plan(epoch)
            ids = np.concatenate([bins[i] for b in batches for i in b])
            assert s.mixture is not None
            err = float(np.abs(_shares(s.mixture, s.index, ids) - _targets(s.mixture)).max())
            worst[f"epoch{epoch}"] = max(worst.get(f"epoch{epoch}", 0.0), err)
    return {"mix": text, "share": share, "world_size": world, "per_rank_max_abs_error": worst}


def _real_pack(lake: Lake, work: str, text: str, share: str) -> dict[str, Any]:
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.packers.mix import MixSpec

    spec = PackSpec(
        max_tokens=2048,
        tokens=TokenLengthConfig(tokens_per_view=64, state_tokens=0),
        mix=MixSpec.parse(text, share=share),
    )
    t0 = time.perf_counter()
    m = pack(lake, spec, os.path.join(work, "packed"), overwrite=True)
    assert m.mixture is not None
    return {
        "mix": text,
        "share": share,
        "seconds": time.perf_counter() - t0,
        "fill": m.fill,
        "num_sequences": m.num_sequences,
        "max_abs_error": m.mixture["max_abs_error"],
        "realised": {c["value"]: c["realised_share"] for c in m.mixture["components"]},
    }


def run(quick: bool, samples: int | None = None) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="robolake-bench-mix-")
    try:
        n = samples or (20_000 if quick else 100_000)
        t0 = time.perf_counter()
        root = build_mixed_lake(os.path.join(work, "lake"), n)
        lake = Lake.open(root)
        out: dict[str, Any] = {
            "machine": machine(),
            "quick": quick,
            "lake_samples": lake.count("steps"),
            "lake_episodes": lake.count("episodes"),
            "build_s": time.perf_counter() - t0,
        }
        repeats = 3 if quick else 5
        out["cases"] = [
            _mixture_case(lake, text, share, alg, repeats) for text, share in MIXTURES for alg in ("bfd", "window")
        ]
        out["lake_stream"] = _lake_stream_ranks(lake, MIXTURES[0][0], MIXTURES[0][1], 2 if quick else 4)
        if not quick:
            out["pack"] = _real_pack(lake, work, *MIXTURES[0])
        cases = out["cases"]
        out["summary"] = {
            "max_abs_error": max(c[f"epoch{e}"]["max_abs_error"] for c in cases for e in (0, 1)),
            **{
                f"per_rank_max_abs_error_{how}": max(
                    max(c[f"epoch{e}"]["per_rank_max_abs_error"][how].values()) for c in cases for e in (0, 1)
                )
                for how in ("lake_stream", "shard_loader", "random")
            },
            "lake_stream_per_rank_max_abs_error": max(out["lake_stream"]["per_rank_max_abs_error"].values()),
            "max_fill_drop": max(0.0, max(-c["fill_delta"] for c in cases)),
            "plan_time_vs_unweighted_median": float(np.median([c["plan_time_vs_unweighted"]["median"] for c in cases])),
        }
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="robolake bench mix", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--quick", action="store_true", help="20,000 samples, 3 pairs, no real pack")
    p.add_argument(
        "--samples", type=int, default=None, help="lake size in samples (default 100,000; 20,000 with --quick)"
    )
    args = p.parse_args(argv)
    res = run(args.quick, args.samples)
    rows: list[tuple[Any, ...]] = []
    for c in res["cases"]:
        name = f"{c['mix']} [{c['share']}, {c['algorithm']}]"
        rows += [
            (f"{name} max |realised - target|", c["epoch0"]["max_abs_error"]),
            *(
                (
                    f"{name} per rank 2/4/8, {how.replace('_', ' ')}",
                    "/".join(f"{v:.4f}" for v in c["epoch0"]["per_rank_max_abs_error"][how].values()),
                )
                for how in ("lake_stream", "shard_loader", "random")
            ),
            (f"{name} fill vs unweighted", f"{c['fill']:.4f} vs {c['fill_unweighted']:.4f}"),
            (f"{name} plan time / unweighted", c["plan_time_vs_unweighted"]),
        ]
    ls = res["lake_stream"]
    rows.append(
        (f"lake stream, {ls['world_size']} ranks, per-rank max error", max(ls["per_rank_max_abs_error"].values()))
    )
    if "pack" in res:
        rows.append(("pack (manifest) max |realised - target|", res["pack"]["max_abs_error"]))
    print_table(f"mixtures on a {res['lake_samples']:,}-sample lake ({res['lake_episodes']:,} episodes)", rows)
    write_json(args.json, res)


if __name__ == "__main__":
    main()
