"""`bench scale --sections verbs`: every everyday verb on lakes of 1k, 10k and 100k episodes.

The question is whether a verb's cost follows what it is asked (a page, a tag of 100 episodes,
ten deletions) or the size of the lake. Lakes are written the way users write them: a synthetic
LeRobot v3.0 source (one 7-DoF arm, one 16x16 camera, `steps` steps an episode; 200 gives a
DROID-sized 20M steps at 100k) ingested by `ingest` itself, and cached in the work directory
(a `.built` marker says a lake is complete).

Each verb is run on every lake in turn, `repeats` times (1k, 10k, [100k], 1k, 10k, ...; interleaved so
that a noisy neighbour hits every size alike); the figure per size is the median and its range,
and the ratio of the largest lake over 1k is the median of the per-round ratios with their range.
A verb is *metadata* when its work does not grow with the lake (it must stay flat: ratio <= 2);
the verbs that must read every episode (full `check`, the plan, the lake stream's start-up that
plans the lake first, `doctor`, `lineage` listing every episode's source) report throughput in
episodes per second instead, and their ratio is expected to follow the lake.

Verbs, as the CLI runs them (library calls, in this process, so interpreter start-up is not
counted):

- `info`: `robolake info` (missing files listing, summary, quality counts).
- `check`, `check_quick`: `check_lake` of the newest version, full and `--quick` (first round
  only: both read every signal of every episode, see `ONCE`).
- `select`, `delete`: drop 10 episodes (by `source_episode_index`), then the lake is restored
  to where it was (`restore_version`, untimed). `tag`: `tag_selection` of 100 episodes.
  `diff`: the select's version against the one before it.
- `view_lake_first_byte`, `view_episodes_first_byte`: a fresh viewer app (its caches empty, as
  after `robolake view` starts) and the first byte of `/` and `/episodes`; `view_api_versions`:
  `/api/versions`; `view_api_deep_page`: `/api/episodes` at the last page, sorted by steps.
- `lineage`: `trace_lineage` of a checkpoint recording the lake (every episode's source file).
- `open_batches_first_batch`: `open_batches` on the lake (packed on the fly) to its first batch.
- `pack_plan`: sample index + plan of the whole lake (no shard written).
- `doctor`: `robolake doctor` from the stored quality.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from robolake.bench._common import ratio_summary

__all__ = ["METADATA_VERBS", "build_ingested_lake", "verbs"]

# Verbs whose work does not grow with the lake: 100k over 1k must stay <= 2x.
METADATA_VERBS = (
    "info",
    "check_quick",
    "select",
    "delete",
    "tag",
    "diff",
    "view_lake_first_byte",
    "view_episodes_first_byte",
    "view_api_versions",
    "view_api_deep_page",
)
FLAT_AT_MOST = 2.0


def build_ingested_lake(work: str, episodes: int, steps: int) -> str:
    """A lake of `episodes` synthetic episodes of about `steps` steps, written by `ingest` (cached)."""
    from robolake.lake import ingest
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    lake = os.path.join(work, f"lake-{episodes}-{steps}")
    if os.path.exists(os.path.join(lake, ".built")):
        return lake
    src = os.path.join(work, f"src-{episodes}-{steps}")
    for stale in (src, lake):  # a build killed half-way: start it again
        if os.path.exists(stale):
            import shutil

            shutil.rmtree(stale)
    generate_synthetic(
        src,
        SyntheticConfig(
            seed=episodes,
            episodes_per_embodiment=episodes,
            min_length=max(2, steps - steps // 10),
            max_length=steps + steps // 10,
            image_size=16,
            version="v3.0",
            episodes_per_file=4,  # the v3.0 reader reads a whole data file per episode: keep files small
            embodiments=("single_arm_7dof",),
        ),
    )
    ingest(src, lake)
    open(os.path.join(lake, ".built"), "w").close()
    return lake


def _get(url: str) -> float:
    """Seconds to the first byte of the body of `url` (the rest is read and dropped)."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        r.read(1)
        first = time.perf_counter() - t0
        r.read()
    return first


def _view(lake_uri: str) -> dict[str, float]:
    from robolake.lake import Lake
    from robolake.view.app import create_app
    from robolake.view.server import ViewServer

    lake = Lake.open(lake_uri)
    n = lake.count("episodes")
    out = {}
    with ViewServer(create_app(lake), port=0) as server:  # a fresh app: nothing cached yet
        out["view_lake_first_byte"] = _get(server.url + "/")
        out["view_episodes_first_byte"] = _get(server.url + "/episodes")
        out["view_api_versions"] = _get(server.url + "/api/versions")
        out["view_api_deep_page"] = _get(server.url + f"/api/episodes?sort=num_steps&offset={max(0, n - 50)}&limit=50")
    return out


def _checkpoint(work: str, lake_uri: str) -> str:
    """A checkpoint directory whose lineage records the lake (as `robolake train` on the lake would)."""
    from robolake.lake import Lake
    from robolake.training.checkpoint import write_checkpoint
    from robolake.training.lineage import run_lineage

    run = os.path.join(work, f"run-{os.path.basename(lake_uri)}")
    if not os.path.isdir(run):
        meta = {
            "step": 1,
            "optimizer": None,
            "scheduler": None,
            "rng": None,
            "loaders": None,
            "extra": {},
            "lineage": run_lineage(Lake.open(lake_uri)),
        }
        write_checkpoint(run, step=1, tensors={}, meta=meta)
    return run


# Verbs that read every signal of every episode (about 15 ms an episode here): timed in the first
# round only, or a 100k round would take an hour.
ONCE = ("check", "check_quick")


def _round(work: str, lake_uri: str, r: int) -> dict[str, float]:
    """Every verb once on `lake_uri` (those in `ONCE` only in round 0); seconds per verb."""
    from robolake import curate
    from robolake.lake import Lake, check_lake, doctor, missing_files, quality_counts, restore_version
    from robolake.loaders import LoaderConfig, open_batches
    from robolake.packers import PackSpec, TokenLengthConfig
    from robolake.packers.pipeline import plan_ranges, plan_sequences
    from robolake.packers.samples import build_sample_index
    from robolake.training.lineage import trace_lineage

    t: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = fn()
        t[name] = time.perf_counter() - t0
        return out

    def info() -> None:
        lake = Lake.open(lake_uri)
        missing_files(lake.uri, lake.version_info, lake.storage_options)
        lake.summary()
        quality_counts(lake)

    timed("info", info)
    if r == 0:
        timed("check", lambda: check_lake(lake_uri))
        timed("check_quick", lambda: check_lake(lake_uri, quick=True))
    base_lake = Lake.open(lake_uri)
    base, n = base_lake.version, base_lake.count("episodes")
    d, tagged = min(10, n // 4), min(100, n // 2)  # fixed work at every size (smaller on toy lakes)
    timed("select", lambda: curate.select(lake_uri, f"source_episode_index >= {d}", reason="bench"))
    selected = Lake.open(lake_uri).version
    timed("diff", lambda: curate.diff(Lake.open(lake_uri, version=base), Lake.open(lake_uri, version=selected)))
    restore_version(lake_uri, base)
    timed(
        "delete",
        lambda: curate.delete(
            lake_uri, where=f"source_episode_index >= {d} and source_episode_index < {2 * d}", reason="b"
        ),
    )
    restore_version(lake_uri, base)
    timed("tag", lambda: curate.tag_selection(lake_uri, f"source_episode_index < {tagged}", f"bench-{r}", replace=True))
    t.update(_view(lake_uri))
    run = _checkpoint(work, lake_uri)
    timed("lineage", lambda: trace_lineage(run))
    spec = PackSpec(max_tokens=1024, horizon=4, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))

    def first_batch() -> None:
        stream_spec = dataclasses.replace(spec, algorithm="window")
        src = open_batches(lake_uri, LoaderConfig(sequences_per_batch=2), spec=stream_spec, rank=0, world_size=1)
        next(iter(src))

    timed("open_batches_first_batch", first_batch)

    def plan() -> None:
        lake = Lake.open(lake_uri)
        index = build_sample_index(lake, spec)
        if len(plan_ranges(index, spec)) == 1:
            plan_sequences(index, spec)

    timed("pack_plan", plan)
    timed("doctor", lambda: doctor(lake_uri))
    return t


def verbs(work: str, sizes: dict[str, int], steps: int, repeats: int) -> dict[str, Any]:
    """Build (or reuse) a lake per size and time every verb on each, rounds interleaved."""
    from robolake.lake import Lake

    lakes: dict[str, str] = {}
    build_s: dict[str, float] = {}
    for name, n in sizes.items():
        t0 = time.perf_counter()
        lakes[name] = build_ingested_lake(work, n, steps)
        build_s[name] = time.perf_counter() - t0
    _view(lakes[next(iter(lakes))])  # imports and the server's first start, paid once and untimed
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in sizes}
    for r in range(repeats):
        for name, uri in lakes.items():
            rounds[name].append(_round(work, uri, r))
    names = list(sizes)
    small, big = names[0], names[-1]
    key = f"ratio_{big}_over_{small}"
    out: dict[str, Any] = {}
    for verb in rounds[small][0]:
        per = {s: [x[verb] for x in rounds[s] if verb in x] for s in names}
        entry: dict[str, Any] = {
            "metadata": verb in METADATA_VERBS,
            **{f"seconds_{s}": {"median": statistics.median(v), "min": min(v), "max": max(v)} for s, v in per.items()},
        }
        summary = ratio_summary([b / max(a, 1e-9) for a, b in zip(per[small], per[big], strict=True)])
        entry[key] = summary["median"]
        entry[f"{key}_range"] = [summary["min"], summary["max"]]
        if verb in METADATA_VERBS:
            entry["flat"] = summary["median"] <= FLAT_AT_MOST
        else:  # what reads every episode says how fast it does so
            entry["episodes_per_s"] = {s: sizes[s] / statistics.median(per[s]) for s in names}
        out[verb] = entry
    lake_info = {}
    for name, uri in lakes.items():
        lake = Lake.open(uri)
        lake_info[name] = {"episodes": lake.count("episodes"), "steps": lake.count("steps"), "build_s": build_s[name]}
    return {"verbs": out, "lakes": lake_info, "ratio_key": key, "repeats": repeats, "steps_per_episode": steps}
