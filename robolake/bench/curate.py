"""`robolake bench curate`: curation verbs against rewriting the lake, and compaction.

- `verbs`: on a synthetic lake of 10,000 episodes (2,000 with `--quick`; 20 steps of a 7-joint
  arm and one 64x64 JPEG camera each), seconds for `select` (keep 90%), `delete` (10% of what is
  left, by a step aggregate), `split` (val 0.1, stratified by task) and `trim` (the first 3 steps
  of every episode, `--where-steps "step < 3"`), each against what a team without the verbs
  does: rewrite a new lake holding the same episodes (read the kept rows of every table, write
  them through the same transaction; for trim, every episode, as LeRobot's edit tool rewrites
  the dataset for each change). Paired runs (verb, rewrite, verb,
  rewrite, ...) on fresh copies of the lake; the ratio is rewrite seconds over verb seconds,
  median with its min-max. `bytes_added` is what each verb added to the lake directory (it
  should be metadata-sized against the lake's bytes).
- `compaction`: a lake built by 50 small ingests (each its own fragments, as ingest writes
  them; 20 with `--quick`), then `optimize`: fragments per table, 500 random frames through
  `FrameReader.read_many` and `pack` of the lake, before and after, paired the same way.
"""

from __future__ import annotations

import argparse
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

__all__ = ["build_lake", "run", "main"]

_TASKS = ("pick the cube", "open the drawer", "push the block", "stack the cups", "wipe the table")


def _du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def build_lake(root: str, episodes: int, *, ingests: int = 1, steps: int = 20, seed: int = 0) -> str:
    """A synthetic lake of `episodes` episodes written by `ingests` transactions (one fragment set each)."""
    from robolake.lake import accumulate_norm_stats

    rng = np.random.default_rng(seed)
    lake = Lake.create(root)
    frames = [encode_frame(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)) for _ in range(16)]
    spec = EmbodimentSpec(tag="arm7", state_dim=7, action_dim=7, cameras=("front",), fps=20.0)
    all_steps: list[pa.Table] = []
    per = -(-episodes // ingests)
    landed = 0
    for k in range(ingests):
        ids = range(k * per, min(episodes, (k + 1) * per))
        ep_rows, st_rows, md_rows = [], [], []
        for i in ids:
            eid = f"arm7/{i:06d}-{i * 2654435761 % (1 << 32):08x}"
            n = int(rng.integers(steps // 2, steps * 3 // 2 + 1))
            ep_rows.append(
                {
                    "episode_id": eid,
                    "source_uri": f"/data/rig{i % 4}",
                    "source_format": "synthetic",
                    "source_episode_index": i,
                    "embodiment": "arm7",
                    "task": _TASKS[i % len(_TASKS)],
                    "num_steps": n,
                    "fps": 20.0,
                    "cameras": ["front"],
                    "success": bool(i % 3),
                    "content_hash": f"{i:064x}",
                    "ingested_at": time.time_ns(),
                    "metadata": "{}",
                }
            )
            state = rng.normal(size=(n, 7)).astype(np.float32)
            action = (state + rng.normal(scale=0.1, size=(n, 7))).astype(np.float32) * (4.0 if i % 10 == 0 else 1.0)
            for t in range(n):
                st_rows.append(
                    {
                        "episode_id": eid,
                        "embodiment": "arm7",
                        "step_index": t,
                        "timestamp": t / 20.0,
                        "state": state[t].tolist(),
                        "action": action[t].tolist(),
                        "task_index": 0,
                    }
                )
                md_rows.append(
                    {
                        "episode_id": eid,
                        "camera": "front",
                        "step_index": t,
                        "timestamp": t / 20.0,
                        "width": 64,
                        "height": 64,
                        "encoding": "jpeg",
                        # distinct bytes per frame (after the JPEG's end marker, which decoders
                        # ignore), so Lance stores them as a camera's frames are stored, not
                        # as a dictionary of 16 values
                        "data": frames[(i + t) % len(frames)] + i.to_bytes(4, "big") + t.to_bytes(4, "big"),
                    }
                )
        landed += len(ep_rows)
        steps_tbl = pa.Table.from_pylist(st_rows, schema=schema_for_table("steps"))
        all_steps.append(steps_tbl.select(["state", "action"]))
        with lake.begin() as tx:
            tx.append_table("episodes", pa.Table.from_pylist(ep_rows, schema=schema_for_table("episodes")))
            tx.append_table("steps", steps_tbl)
            tx.append_table("media", pa.Table.from_pylist(md_rows, schema=schema_for_table("media")))
            acc = accumulate_norm_stats(pa.concat_tables(all_steps))
            tx.overwrite(
                "embodiments",
                pa.Table.from_pylist(
                    [
                        {
                            "embodiment": "arm7",
                            "spec_json": spec.to_json(),
                            "stats_json": acc.to_json(),
                            "num_episodes": landed,
                            "num_steps": acc.state.count,
                        }
                    ],
                    schema=schema_for_table("embodiments"),
                ),
            )
            for table in ("episodes", "steps", "media"):
                tx.create_index(table, "episode_id")
            tx.commit("ingest", {"bench": "curate", "ingest": k})
        lake = lake.refresh()
    return root


def rewrite(src: str, dst: str, keep: list[str]) -> None:
    """What a team without curation verbs does: a new lake holding `keep`, every row copied."""
    from robolake.lake import sql_in

    lake = Lake.open(src)
    new = Lake.create(dst)
    chunks = [keep[i : i + 2000] for i in range(0, len(keep), 2000)]
    with new.begin() as tx:
        for table in ("episodes", "steps", "media"):
            for c in chunks:
                tx.append_table(table, lake.to_arrow(table, where=sql_in("episode_id", c)))
        tx.overwrite("embodiments", lake.to_arrow("embodiments"))
        tx.commit("rewrite", {})


def _verbs(work: str, episodes: int, repeats: int) -> dict[str, Any]:
    from robolake import curate

    base = build_lake(os.path.join(work, "base"), episodes)
    lake_bytes = _du(base)
    out: dict[str, Any] = {"episodes": episodes, "lake_bytes": lake_bytes}
    keep_where = "source_episode_index % 10 != 3"
    ops = {
        "select": lambda d: curate.select(d, keep_where, reason="bench"),
        "delete": lambda d: curate.delete(d, where="max(abs(action)) > 6", reason="bench"),
        "split": lambda d: curate.split(d, curate.SplitConfig(val=0.1, stratify=("task",), seed=0)),
        "trim": lambda d: curate.trim(d, curate.TrimSpec(where_steps="step < 3", reason="bench")),
    }
    for name, op in ops.items():
        ratios, verb_s, rewrite_s, added = [], [], [], []
        for r in range(repeats):
            d = os.path.join(work, f"{name}-{r}")
            shutil.copytree(base, d)
            before = _du(d)
            t0 = time.perf_counter()
            res = op(d)
            tv = time.perf_counter() - t0
            added.append(_du(d) - before)
            kept = Lake.open(d, tag="split:train").episode_ids() if name == "split" else Lake.open(d).episode_ids()
            t0 = time.perf_counter()
            rewrite(base, os.path.join(work, f"{name}-rewrite-{r}"), kept)
            tr = time.perf_counter() - t0
            verb_s.append(tv)
            rewrite_s.append(tr)
            ratios.append(tr / tv)
            shutil.rmtree(d)
            shutil.rmtree(os.path.join(work, f"{name}-rewrite-{r}"))
            del res
        out[name] = {
            "seconds": float(np.median(verb_s)),
            "rewrite_seconds": float(np.median(rewrite_s)),
            "speedup_vs_rewrite": ratio_summary(ratios),
            "bytes_added": int(np.median(added)),
            "bytes_added_over_lake": float(np.median(added)) / lake_bytes,
        }
    return out


def _compaction(work: str, ingests: int, repeats: int) -> dict[str, Any]:
    from robolake import curate
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.ray_tasks import ensure_ray

    ensure_ray(num_cpus=2)
    src = build_lake(os.path.join(work, "many"), ingests * 40, ingests=ingests)
    compacted = os.path.join(work, "compacted")
    shutil.copytree(src, compacted)
    report = curate.optimize(compacted)
    rng = np.random.default_rng(0)
    lake = Lake.open(src)
    rows = lake.to_arrow("media", columns=["episode_id", "camera", "step_index"]).to_pylist()
    keys = [
        (r["episode_id"], r["camera"], r["step_index"])
        for r in (rows[i] for i in rng.choice(len(rows), 500, replace=False))
    ]
    spec = PackSpec(max_tokens=1024, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))

    def read(path: str) -> float:
        t0 = time.perf_counter()
        Lake.open(path).frames().read_many(keys)
        return time.perf_counter() - t0

    def packed(path: str, r: int) -> float:
        t0 = time.perf_counter()
        pack(path, spec, os.path.join(work, f"packed-{os.path.basename(path)}-{r}"))
        return time.perf_counter() - t0

    reads, packs = [], []
    for r in range(repeats):
        reads.append(read(src) / read(compacted))
        packs.append(packed(src, r) / packed(compacted, r))
    return {
        "ingests": ingests,
        "fragments": {t: list(v) for t, v in report.fragments.items()},
        "read_many_speedup": ratio_summary(reads),
        "pack_speedup": ratio_summary(packs),
    }


def run(quick: bool) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="robolake-bench-curate-")
    try:
        return {
            "machine": machine(),
            "quick": quick,
            "verbs": _verbs(work, 2000 if quick else 10000, 3 if quick else 5),
            "compaction": _compaction(work, 20 if quick else 50, 3 if quick else 5),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="robolake bench curate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--quick", action="store_true", help="2,000 episodes, 20 ingests, 3 pairs")
    args = p.parse_args(argv)
    res = run(args.quick)
    v = res["verbs"]
    rows: list[tuple[Any, ...]] = []
    for name in ("select", "delete", "split", "trim"):
        rows += [
            (f"{name} seconds", v[name]["seconds"]),
            (f"{name} vs rewrite", v[name]["speedup_vs_rewrite"]),
            (f"{name} bytes added / lake", v[name]["bytes_added_over_lake"]),
        ]
    print_table(f"curation verbs on {v['episodes']:,} episodes ({v['lake_bytes'] / 1e6:.1f} MB lake)", rows)
    c = res["compaction"]
    print_table(
        f"compaction of a {c['ingests']}-ingest lake",
        [
            *((f"{t} fragments before/after", f"{b} -> {a}") for t, (b, a) in c["fragments"].items()),
            ("read_many 500 frames, after/before", c["read_many_speedup"]),
            ("pack, after/before", c["pack_speedup"]),
        ],
    )
    write_json(args.json, res)


if __name__ == "__main__":
    main()
