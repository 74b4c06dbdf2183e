"""`bench scale --sections verbs`: every everyday verb on lakes of 1k, 10k and 100k episodes.

The question is whether a verb's cost follows what it is asked (a page, a tag of 100 episodes,
ten deletions) or the size of the lake. Lakes are written the way users write them: a synthetic
LeRobot v3.0 source (one 7-DoF arm, one 16x16 camera, `steps` steps an episode; 200 gives a
DROID-sized 20M steps at 100k; `SOURCE_PARTS` datasets written in parallel, 100 episodes a data
file and a video file, each episode's video copied from a few clips encoded once) ingested by
`ingest` itself, and cached in the work directory (a `.built` marker says a source or a lake is
complete; the lake's holds what its build cost: the source's wall and CPU seconds, ingest's, and
ingest's episodes a second).

Each verb is run on every lake in turn, `repeats` times (1k, 10k, [100k], 1k, 10k, ...; interleaved so
that a noisy neighbour hits every size alike); the figure per size is the median and its range,
and the ratio of the largest lake over 1k is the median of the per-round ratios with their range.
A verb is *metadata* when its work does not grow with the lake (it must stay flat: ratio <= 2);
the verbs that must read every episode (full `check`, the plan, the lake stream's start-up that
plans the lake first, `doctor`, `lineage` listing every episode's source, the viewer's index read
by its first page) report throughput in episodes per second instead, and their ratio is expected
to follow the lake. `check --quick` is one of them, if the lightest: a check of a version must
see every data file it names (a stat each: 49 fragments a table at 100k against one at 1k) and
every episode id (duplicates), though it reads no data file of steps or media.

Verbs, as the CLI runs them (library calls, in this process, so interpreter start-up is not
counted):

- `info`: `robolake info` (missing files listing, summary, quality counts).
- `check`: `check_lake` of the newest version (first round only: it reads every row of every
  table, see `ONCE`); `check_quick`: `--quick` (files and their sizes, row totals, a sample of the
  record).
- `select`, `delete`: drop 10 episodes (by `source_episode_index`), then the lake is restored
  to where it was (`restore_version`, untimed). `tag`: `tag_selection` of 100 episodes.
  `diff`: the select's version against the one before it.
- `view_lake_first_byte`, `view_episodes_first_byte`: a fresh viewer app (its caches empty, as
  after `robolake view` starts) and the first byte of `/` and `/episodes`; `view_api_versions`:
  `/api/versions` (what each version added and removed); `view_api_first_page`: the table's
  first page, which reads the viewer's index of every episode (once per process: a throughput
  verb); `view_api_deep_page`: then the last page sorted by steps, a sort not asked for before.
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


# The source is written as this many LeRobot v3.0 datasets of one embodiment, by as many
# processes at once (the writer's video encoding is most of a build's CPU); each holds
# `EPISODES_PER_FILE` episodes a data file and a video file, as real v3.0 datasets do.
SOURCE_PARTS = 2
EPISODES_PER_FILE = 100
# Each episode's video is copied from one of this many clips per episode length, encoded once
# (`SyntheticConfig.video_pool`): encoding 20M frames would be most of the build (~0.15 ms a
# frame at 16x16), and ingest reads copied packets as it reads encoded ones.
VIDEO_POOL = 2
# Episodes an ingest task handles: a 100k lake is written as ~50 fragments a table, fewer than
# the 64 that would make the commit compact it, and each data file is read once.
INGEST_EPISODES_PER_TASK = 2048


def write_part(src: str, part: int, episodes: int, steps: int) -> None:
    """One part of the source (run in a process of its own by `build_source`)."""
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    generate_synthetic(
        os.path.join(src, f"part-{part}"),
        SyntheticConfig(
            seed=episodes * SOURCE_PARTS + part,
            episodes_per_embodiment=episodes,
            min_length=max(2, steps - steps // 10),
            max_length=steps + steps // 10,
            image_size=16,
            version="v3.0",
            episodes_per_file=EPISODES_PER_FILE,
            embodiments=("single_arm_7dof",),
            video_pool=VIDEO_POOL,
        ),
    )


def build_source(work: str, episodes: int, steps: int) -> tuple[str, dict[str, float]]:
    """The synthetic LeRobot v3.0 source of `episodes` episodes (cached: a `.built` marker) and what
    writing it cost (`wall_s`, `cpu_s` over its processes), kept in the marker for a cached one
    (zeros for a source built before the marker held it)."""
    import json
    import resource
    import shutil
    import subprocess
    import sys

    src = os.path.join(work, f"src-{episodes}-{steps}-p{SOURCE_PARTS}-f{EPISODES_PER_FILE}-v{VIDEO_POOL}")
    marker = os.path.join(src, ".built")
    if os.path.exists(marker):
        with open(marker) as f:
            text = f.read()
        return src, (json.loads(text) if text else {"wall_s": 0.0, "cpu_s": 0.0})
    if os.path.exists(src):  # a build killed half-way: start it again
        shutil.rmtree(src)
    counts = [episodes // SOURCE_PARTS + (p < episodes % SOURCE_PARTS) for p in range(SOURCE_PARTS)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # Plain child processes (not multiprocessing): nothing of this process (Ray, threads, its
    # __main__) is copied or re-imported.
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from robolake.bench._scale_verbs import write_part; "
                "write_part(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))",
                src,
                str(p),
                str(n),
                str(steps),
            ]
        )
        for p, n in enumerate(counts)
    ]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"writing the synthetic source {src} failed (exit codes {codes}); see the output above")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    cost = {"wall_s": time.perf_counter() - t0, "cpu_s": cpu}
    with open(marker, "w") as f:
        json.dump(cost, f)
    return src, cost


def build_ingested_lake(work: str, episodes: int, steps: int) -> str:
    """A lake of `episodes` synthetic episodes of about `steps` steps, written by `ingest` (cached)."""
    return build_ingested_lake_timed(work, episodes, steps)[0]


def build_ingested_lake_timed(work: str, episodes: int, steps: int) -> tuple[str, dict[str, Any]]:
    """`build_ingested_lake`, and what the build cost: the source's writing and ingest's, each in
    wall and CPU seconds (ingest's CPU over this process and its Ray workers), and episodes a
    second of ingest; empty when the lake was cached."""
    import json
    import shutil

    from robolake.lake import IngestConfig, ingest

    lake = os.path.join(work, f"lake-{episodes}-{steps}-p{SOURCE_PARTS}-f{EPISODES_PER_FILE}-v{VIDEO_POOL}")
    marker = os.path.join(lake, ".built")
    if os.path.exists(marker):
        with open(marker) as f:
            text = f.read()
        return lake, (json.loads(text) if text else {})
    src, source_cost = build_source(work, episodes, steps)
    if os.path.exists(lake):  # a build killed half-way: start it again
        shutil.rmtree(lake)
    cpu0, kids0, t0 = time.process_time(), _children_cpu(), time.perf_counter()
    result = ingest(src, lake, IngestConfig(episodes_per_task=INGEST_EPISODES_PER_TASK))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0 + _children_cpu() - kids0
    cost = {
        "source_wall_s": source_cost["wall_s"],
        "source_cpu_s": source_cost["cpu_s"],
        "ingest_wall_s": wall,
        "ingest_cpu_s": cpu,
        "ingest_episodes_per_s": result.ingested / wall,
        "ingest_episodes_per_cpu_s": result.ingested / max(cpu, 1e-9),
        "ingest_execution": result.execution,
        "episodes_per_file": EPISODES_PER_FILE,
        "episodes_per_task": INGEST_EPISODES_PER_TASK,
    }
    with open(marker, "w") as f:
        json.dump(cost, f)
    return lake, cost


def _children_cpu() -> float:
    """CPU seconds of this process's descendants alive now (Ray's raylet and workers); ingest on
    Ray runs its stages there, off this process's clock."""
    try:
        import psutil
    except ImportError:
        return 0.0
    total = 0.0
    for c in psutil.Process().children(recursive=True):
        try:
            t = c.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            continue
    return total


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
        out["view_api_first_page"] = _get(server.url + "/api/episodes?offset=0&limit=50")
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


# Verbs that read every row of every table (about 15 ms an episode here): timed in the first
# round only, or a 100k round would take an hour.
ONCE = ("check", "doctor")


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
    if r == 0:
        timed("doctor", lambda: doctor(lake_uri))
    return t


def verbs(work: str, sizes: dict[str, int], steps: int, repeats: int) -> dict[str, Any]:
    """Build (or reuse) a lake per size and time every verb on each, rounds interleaved."""
    from robolake.lake import Lake

    lakes: dict[str, str] = {}
    build_s: dict[str, float] = {}
    build: dict[str, dict[str, Any]] = {}
    for name, n in sizes.items():
        t0 = time.perf_counter()
        lakes[name], build[name] = build_ingested_lake_timed(work, n, steps)
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
        lake_info[name] = {
            "episodes": lake.count("episodes"),
            "steps": lake.count("steps"),
            "build_s": build_s[name],  # 0-ish when cached: `build` says what it cost when it was built
            "build": build[name],
        }
    return {"verbs": out, "lakes": lake_info, "ratio_key": key, "repeats": repeats, "steps_per_episode": steps}
