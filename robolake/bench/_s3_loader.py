"""`bench scale --sections s3`: the loaders' global shuffle from object storage against local disk.

The claim ([26]): the shard loader and the lake stream read from an S3 endpoint with a global
shuffle (`LoaderConfig.shuffle`, a fresh permutation of the whole epoch) at >= 0.8x the samples
per second they reach on local disk. A global shuffle is the hard case for object storage:
every batch is a random `take` over the whole dataset, so each read pays a request's latency
instead of riding one sequential stream.

One small lake is written by `ingest` (the verbs' builder) and packed once; both are copied
byte for byte into a bucket of a local moto S3 server, so the two sides read the same files and
differ only in where they are. Each loader reads one full epoch per run, opened fresh (its
open is part of the epoch), on both sides in turn (local, s3, local, s3 ...; one uncounted
warm-up round first: imports, the OS file cache, Lance's metadata caches). The ratio per round
is s3 samples/s over local samples/s, on the wall clock and on this process's CPU time; the
figure is the median over rounds with its range, and `s3_over_local` is the lowest of the two
loaders' wall medians.

moto runs as a subprocess, excluded from the CPU clock (what the client spends), but it is a
single-process Python server on the same cores as the loader: every request is parsed and
answered in Python, competing for the two cores the loader uses. The ratio is therefore a lower
bound on what a real S3 endpoint (served elsewhere, in parallel) gives.

Where the time went (profiled on the 2-core machine, 48 episodes, 16 px frames): the local side
reads from the OS page cache, so a random `take` of 4 shard rows costs 2.7 ms; on moto it cost
29 ms, because Lance fetches a take as several ranged GETs (one per column page) and each round
trip to moto is about 4.5 ms of Python. An epoch of the shard loader was about 7 GETs a batch
(300 a 42-batch epoch), the lake stream's about 20: 0.19x and 0.17x on the wall clock.

What the loaders do now (`loaders/blocks.py`, the peers' answer): they read whole blocks of rows
(a few large GETs each, fetched concurrently) and keep them in memory. Data that fits half of
`read_cache_bytes` (default 256 MiB; this bench's lake and pack are about 1 MB each at --quick)
is read block by block once, in the background, whatever the shuffle: the uniform per-sample
shuffle is kept and costs one read of each block per process (MosaicML Streaming's default,
which downloads every shard it touches to a local cache). Data larger than that is read
block-locally only under a block shuffle (`LoaderConfig.shuffle_block`, MosaicML's py1b), the
`*_block_shuffle` variants here: their budget is the data's size (so it is not read whole and
blocks come and go), and the JSON's `shuffle` says what each order trades (`window_fraction`:
the share of the epoch each stretch of the order draws from; 1.0 for uniform). The `*_row_by_row`
variants (`read_cache_bytes=0`) are the old path, for reference. The shard loader's block
shuffle needs `torch_loader.epoch_plan` to take `shuffle_block` (`blocks.epoch_order`); until it
does, its variant is skipped and the JSON says so.

What is left is the open. Per epoch the JSON gives moto's requests (counted from its request
log) and CPU seconds. At --quick an epoch of either loader is now 31-39 requests (from 276 for
the shard loader, 114 for the lake stream), nearly all of them the open: the lake's and the
shards' manifests, version documents, the episodes and embodiments tables the sample index
reads. At about 3.4 ms of moto CPU each, answered one after another while the loader waits,
that is 0.1-0.15 s against a local --quick epoch of 0.25-0.35 s, so a --quick epoch cannot
reach 0.8x on the wall clock however few requests its reading makes: measured (3 pairs, load
average 40-100 from other jobs) 0.58x for the shards and 0.47x for the lake stream on the wall,
0.86x and 0.63x on the loader's CPU; the reading alone (`reading_s3_over_local`: from the first
batch asked for to the last, the open left out) 0.78x and 0.84x wall, 0.91x and 0.90x CPU. The
full-size lake (400 episodes of 50 steps, 19,983 samples, 26 MB copied: the same open, 20x the
reading) spreads it: shards 0.92x wall (0.80-1.21) and 0.95x CPU (0.93-1.02), 416 requests an
epoch against 11,139 row by row (0.13x wall, 0.56x CPU); lake stream 1.07x wall (0.82-1.32) and
1.07x CPU (0.94-1.16), 40 requests against 4,263 row by row (0.19x wall, 0.57x CPU). Under a
block shuffle with a budget at the table's size (blocks of a sixteenth of it, 75 KB here; a
window of a quarter of the epoch) the lake stream made 796 requests, 0.55x wall and 0.85x CPU:
small blocks fetched while the stream's threads wait. Wall ratios on this shared machine move
with the load: a side whose work sits in fewer threads gets a smaller share of the cores.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from robolake.bench._common import Stopwatch, Timing, cpu_seconds, interleave, two_clock_ratios

__all__ = ["s3_section"]

BUCKET = "robolake"
TARGET = 0.8
CAVEAT = (
    "moto is a single-process Python server on the same cores as the loader, so the ratio is a lower bound "
    "on what a real S3 endpoint gives"
)


@dataclass(frozen=True)
class _Server:
    """The moto server: its pid and its request log (one line a request)."""

    pid: int
    log: str

    def requests(self) -> int:
        """Requests the server has answered so far."""
        try:
            with open(self.log, "rb") as f:
                return sum(1 for line in f if b'HTTP/1.1"' in line)
        except OSError:
            return 0


@contextlib.contextmanager
def _moto_server() -> Iterator[tuple[Any, dict[str, str], _Server]]:
    """moto's S3 server in a subprocess on a free local port, with a bucket: (a boto3 client, the
    Lance/fsspec storage options that reach it, the server)."""
    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="robolake-moto-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=log,
    )
    try:
        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
        )
        deadline = time.monotonic() + 60
        while True:  # the server takes a second or two to listen
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception as e:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the moto S3 server did not start on {endpoint}: {e}") from e
                time.sleep(0.2)
        yield (
            client,
            {
                "aws_endpoint": endpoint,
                "aws_access_key_id": "test",
                "aws_secret_access_key": "test",
                "aws_region": "us-east-1",
                "allow_http": "true",
            },
            _Server(proc.pid, log.name),
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        os.unlink(log.name)


def _upload(client: Any, local: str, prefix: str) -> int:
    """Copy every file under `local` to s3://BUCKET/prefix/, same relative paths; bytes copied."""
    total = 0
    for dirpath, _, files in os.walk(local):
        for name in files:
            path = os.path.join(dirpath, name)
            key = f"{prefix}/{os.path.relpath(path, local)}"
            client.upload_file(path, BUCKET, key)
            total += os.path.getsize(path)
    return total


def _build(work: str, episodes: int, steps: int) -> tuple[str, str, Any]:
    """The lake (ingested, cached) and its pack (cached), and the spec the lake stream packs with."""
    from robolake.bench._scale_verbs import build_ingested_lake
    from robolake.packers import PackSpec, TokenLengthConfig, pack

    lake = build_ingested_lake(work, episodes, steps)
    spec = PackSpec(algorithm="window", max_tokens=512, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
    packed = os.path.join(work, f"packed-{episodes}-{steps}")
    if not os.path.exists(os.path.join(packed, ".built")):
        pack(lake, spec, packed, overwrite=True)
        open(os.path.join(packed, ".built"), "w").close()
    return lake, packed, spec


@dataclass(frozen=True)
class _Run:
    """One epoch: its timing (open included), its reading alone (open excluded), samples, and
    what the S3 server spent meanwhile."""

    timing: Timing
    reading: Timing
    samples: int
    server_cpu_s: float
    requests: int


def _config(**extra: Any) -> Any:
    from robolake.loaders import LoaderConfig

    # Workers in-process (num_workers=0): the shard loader's reads are then as serial as they can
    # be, the case where a request's latency shows most; the lake stream has its own thread pool.
    return LoaderConfig(sequences_per_batch=4, image_size=16, shuffle=True, num_workers=0, **extra)


def _open(source: str, opts: dict[str, str] | None, spec: Any, config: Any) -> Any:
    from robolake.loaders import LoaderConfig, PackedLoader, open_batches
    from robolake.loaders.shards import open_shards

    if spec is None and config.read_cache_bytes != LoaderConfig().read_cache_bytes:
        # The shard loader opens its shards with the default budget; another one is set on the
        # shards themselves (`PackedShards.with_reads`).
        shards = open_shards(source, storage_options=opts).with_reads(read_cache_bytes=config.read_cache_bytes)
        return PackedLoader(shards, config)
    return open_batches(source, config, rank=0, world_size=1, storage_options=opts, spec=spec)


def _epoch(source: str, opts: dict[str, str] | None, spec: Any, server: _Server, config: Any) -> _Run:
    """One globally shuffled epoch of `source` (a pack, or a lake with `spec`), opened fresh."""
    samples = 0
    cpu, requests = cpu_seconds(server.pid), server.requests()
    with Stopwatch(exclude=(server.pid,)) as whole:
        loader = _open(source, opts, spec, config)
        with Stopwatch(exclude=(server.pid,)) as reading:
            for batch in loader:
                samples += len(batch.sample_keys)
    return _Run(whole.timing, reading.timing, samples, cpu_seconds(server.pid) - cpu, server.requests() - requests)


def _loader(runs: dict[str, list[_Run]], name: str) -> dict[str, Any]:
    local, s3 = runs[f"{name}_local"], runs[f"{name}_s3"]
    work_local, work_s3 = [float(r.samples) for r in local], [float(r.samples) for r in s3]
    return {
        "s3_over_local": two_clock_ratios(
            [r.timing for r in local],
            [r.timing for r in s3],
            target_applies_to="wall",
            slow_work=work_local,
            fast_work=work_s3,
        ),
        # The same epochs from the first batch asked for to the last (every read included, the
        # open left out): the throughput once open, apart from the open's fixed requests.
        "reading_s3_over_local": two_clock_ratios(
            [r.reading for r in local],
            [r.reading for r in s3],
            target_applies_to="wall",
            slow_work=work_local,
            fast_work=work_s3,
        ),
        "samples_local": [r.samples for r in local],
        "samples_s3": [r.samples for r in s3],
        "samples_per_s_local": [r.samples / r.timing.wall_s for r in local],
        "samples_per_s_s3": [r.samples / r.timing.wall_s for r in s3],
        "local": [r.timing.as_dict() for r in local],
        "s3": [r.timing.as_dict() for r in s3],
        "reading_local": [r.reading.as_dict() for r in local],
        "reading_s3": [r.reading.as_dict() for r in s3],
        # The server's CPU over the S3 run's wall time: near 1.0, moto's one Python process is
        # the bottleneck (a core spent parsing requests), not the loader.
        "server_busy": [r.server_cpu_s / r.timing.wall_s for r in s3],
        "server_cpu_s": [r.server_cpu_s for r in s3],
        "requests": [r.requests for r in s3],
        # moto's CPU per epoch over the local epoch's time: what the server takes from the same
        # cores, as a share of what the local side needs for the whole epoch.
        "server_cpu_over_local_wall": [r.server_cpu_s / t.timing.wall_s for r, t in zip(s3, local, strict=True)],
        "server_cpu_over_local_cpu": [r.server_cpu_s / t.timing.cpu_s for r, t in zip(s3, local, strict=True)],
    }


def s3_section(
    work: str, *, quick: bool = True, repeats: int = 3, episodes: int | None = None, variants: bool | None = None
) -> dict[str, Any]:
    """Samples/s of the shard loader and the lake stream (global shuffle) from S3 over local disk.

    Args:
        work: A scratch directory (the lake and the pack are written, and cached, under it).
        quick: A lake of 48 episodes of about 20 steps instead of 400 of about 50.
        repeats: Counted (local, s3) rounds per loader, after one warm-up round.
        episodes: Episodes of the lake instead of `quick`'s (tests use a handful).
        variants: Run the variants too (block shuffles, row by row); default: unless `episodes`
            is given (a test's handful of episodes checks the section, not the variants).

    Returns:
        {"s3_over_local": the lowest of the loaders' wall medians (None when moto is missing),
        "s3_over_local_cpu" the same on the loader's CPU, "reading_s3_over_local(_cpu)" the same
        with the open left out,
        "loaders": per loader (default settings: uniform shuffle, block reads) its ratios on both
        clocks with their ranges, samples, timings, moto's requests and CPU; "variants": the lake
        stream under a block shuffle with a budget below the lake's size, and both loaders row
        by row (the old path); "shuffle": what each variant's order trades; "caveat", "target"};
        with moto missing, {"s3_over_local": None, "skipped": why}.
    """
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError as e:
        return {
            "s3_over_local": None,
            "skipped": f"moto S3 server not importable ({e}): install moto[server] and boto3",
        }
    from robolake.lake import Lake
    from robolake.loaders.blocks import dataset_bytes, shuffle_quality
    from robolake.loaders.shards import open_shards
    from robolake.packers.samples import build_sample_index

    n, steps = (episodes, 20) if episodes is not None else ((48, 20) if quick else (400, 50))
    lake, packed, spec = _build(work, n, steps)
    opened = Lake.open(lake)
    samples = build_sample_index(opened, spec).num_samples
    lake_bytes = max(dataset_bytes(opened.dataset(t)) for t in ("steps", "media"))
    # The block-shuffle variant: a budget at the larger table's size (under twice it, so not read
    # whole: its blocks, a sixteenth of the budget each, come and go), a window of blocks covering
    # about a quarter of the epoch's samples.
    block, window = max(1, samples // 64), 16
    block_config = _config(shuffle_block=block, shuffle_window=window, read_cache_bytes=max(16, lake_bytes))
    # The shard loader's block shuffle likewise: blocks of rows, a budget at the shards' size.
    shards = open_shards(packed)
    rows, shards_bytes = shards.num_rows, dataset_bytes(shards.dataset())
    shard_block, shard_window = max(1, rows // 24), 4
    shard_block_config = _config(
        shuffle_block=shard_block, shuffle_window=shard_window, read_cache_bytes=max(16, shards_bytes)
    )
    default, row_by_row = _config(), _config(read_cache_bytes=0)
    with _moto_server() as (client, opts, server):
        copied = _upload(client, lake, "lake") + _upload(client, packed, "packed")
        remote_lake, remote_packed = f"s3://{BUCKET}/lake", f"s3://{BUCKET}/packed"
        arms: dict[str, Callable[[], _Run]] = {
            "shards_local": lambda: _epoch(packed, None, None, server, default),
            "shards_s3": lambda: _epoch(remote_packed, opts, None, server, default),
            "lake_stream_local": lambda: _epoch(lake, None, spec, server, default),
            "lake_stream_s3": lambda: _epoch(remote_lake, opts, spec, server, default),
            "lake_stream_block_shuffle_local": lambda: _epoch(lake, None, spec, server, block_config),
            "lake_stream_block_shuffle_s3": lambda: _epoch(remote_lake, opts, spec, server, block_config),
            "shards_row_by_row_local": lambda: _epoch(packed, None, None, server, row_by_row),
            "shards_row_by_row_s3": lambda: _epoch(remote_packed, opts, None, server, row_by_row),
            "lake_stream_row_by_row_local": lambda: _epoch(lake, None, spec, server, row_by_row),
            "lake_stream_row_by_row_s3": lambda: _epoch(remote_lake, opts, spec, server, row_by_row),
        }
        if variants is None:
            variants = episodes is None
        if not variants:
            arms = {k: v for k, v in arms.items() if k.rsplit("_", 1)[0] in ("shards", "lake_stream")}
        shard_blocks = variants and _shard_loader_block_shuffles(packed, shard_block_config)
        if shard_blocks:
            arms["shards_block_shuffle_local"] = lambda: _epoch(packed, None, None, server, shard_block_config)
            arms["shards_block_shuffle_s3"] = lambda: _epoch(remote_packed, opts, None, server, shard_block_config)
        runs = interleave(arms, repeats=repeats, warmup=1)
    loaders = {name: _loader(runs, name) for name in ("shards", "lake_stream")}
    names = ["lake_stream_block_shuffle", "shards_row_by_row", "lake_stream_row_by_row"]
    names += ["shards_block_shuffle"] if shard_blocks else []
    measured = {name: _loader(runs, name) for name in names if f"{name}_s3" in runs}
    shard_quality = shuffle_quality(rows, shard_block, shard_window) | {
        "read_cache_bytes": shard_block_config.read_cache_bytes,
        "shards_bytes": shards_bytes,
    }
    return {
        "s3_over_local": min(v["s3_over_local"]["median"] for v in loaders.values()),
        "s3_over_local_cpu": min(v["s3_over_local"]["cpu"]["median"] for v in loaders.values()),
        "reading_s3_over_local": min(v["reading_s3_over_local"]["median"] for v in loaders.values()),
        "reading_s3_over_local_cpu": min(v["reading_s3_over_local"]["cpu"]["median"] for v in loaders.values()),
        "shard_loader_workers": 0,
        "image_size": 16,
        "target": TARGET,
        "target_applies_to": "wall",
        "loaders": loaders,
        "variants": measured,
        "shuffle": {
            "loaders": shuffle_quality(samples, 0, 1) | {"read_cache_bytes": default.read_cache_bytes},
            "lake_stream_block_shuffle": shuffle_quality(samples, block, window)
            | {"read_cache_bytes": block_config.read_cache_bytes, "largest_table_bytes": lake_bytes},
            "row_by_row": shuffle_quality(samples, 0, 1) | {"read_cache_bytes": 0},
            "shards_block_shuffle": shard_quality
            if shard_blocks
            else {"skipped": "the shard loader does not take LoaderConfig.shuffle_block yet (torch_loader.epoch_plan)"},
        },
        "server_cpu_per_request_s": _per_request(list(loaders.values()) + list(measured.values())),
        "episodes": n,
        "bytes_copied": copied,
        "repeats": repeats,
        "caveat": CAVEAT,
    }


def _shard_loader_block_shuffles(packed: str, config: Any) -> bool:
    """Whether the shard loader reads `config`'s block shuffle (its reads follow the config's
    blocks; a loader that ignores `shuffle_block` keeps the shards' own)."""
    from robolake.loaders import PackedLoader

    return PackedLoader(packed, config).shards.block_rows == config.shuffle_block


def _per_request(loaders: list[dict[str, Any]]) -> float | None:
    """moto's CPU seconds per request, the median over every S3 epoch measured."""
    per = [c / r for v in loaders for c, r in zip(v["server_cpu_s"], v["requests"], strict=True) if r]
    return statistics.median(per) if per else None
