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

Where the time goes (profiled on the 2-core machine, 48 episodes, 16 px frames): the local side
reads from the OS page cache, so a random `take` of 4 shard rows costs 2.7 ms; on moto it costs
29 ms, because Lance fetches a take as several ranged GETs (one per column page) and each round
trip to moto is about 4.5 ms of Python. An epoch of the shard loader is about 7 GETs a batch;
the lake stream's about 20 (state and action as two takes of the steps table, frames, and it
reopens the steps, media and access tables, a HEAD and a GET of each manifest, for every batch:
`SequenceMaterializer.rows` calls `lance.dataset` per batch; caching the opened datasets per
process nearly doubles its S3 rate here). More loader workers or prefetch raise the shard
loader's S3 rate only to about 700-800 samples/s: moto's request rate on the shared cores is
the ceiling, while the local side runs at 2,500-4,500. Tiny frames make local decoding almost
free, so I/O is all there is to compare; at training frame sizes decoding is a larger share
on both sides and the ratio rises.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from robolake.bench._common import Stopwatch, Timing, cpu_seconds, interleave, two_clock_ratios

__all__ = ["s3_section"]

BUCKET = "robolake"
TARGET = 0.8
CAVEAT = (
    "moto is a single-process Python server on the same cores as the loader, so the ratio is a lower bound "
    "on what a real S3 endpoint gives"
)


@contextlib.contextmanager
def _moto_server() -> Iterator[tuple[Any, dict[str, str], int]]:
    """moto's S3 server in a subprocess on a free local port, with a bucket: (a boto3 client, the
    Lance/fsspec storage options that reach it, the server's pid)."""
    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
            proc.pid,
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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


def _epoch(source: str, opts: dict[str, str] | None, spec: Any, moto_pid: int) -> tuple[Timing, int, float]:
    """One globally shuffled epoch of `source` (a pack, or a lake with `spec`): timing, samples and
    the CPU seconds the S3 server spent meanwhile (its share of the two cores)."""
    from robolake.loaders import LoaderConfig, open_batches

    # Workers in-process (num_workers=0): the shard loader's reads are then as serial as they can
    # be, the case where a request's latency shows most; the lake stream has its own thread pool.
    config = LoaderConfig(sequences_per_batch=4, image_size=16, shuffle=True, num_workers=0)
    samples = 0
    server = cpu_seconds(moto_pid)
    with Stopwatch(exclude=(moto_pid,)) as sw:
        for batch in open_batches(source, config, rank=0, world_size=1, storage_options=opts, spec=spec):
            samples += len(batch.sample_keys)
    return sw.timing, samples, cpu_seconds(moto_pid) - server


def _loader(runs: dict[str, list[tuple[Timing, int, float]]], name: str) -> dict[str, Any]:
    local, s3 = runs[f"{name}_local"], runs[f"{name}_s3"]
    ratios = two_clock_ratios(
        [t for t, _, _ in local],
        [t for t, _, _ in s3],
        target_applies_to="wall",
        slow_work=[float(n) for _, n, _ in local],
        fast_work=[float(n) for _, n, _ in s3],
    )
    return {
        "s3_over_local": ratios,
        "samples_local": [n for _, n, _ in local],
        "samples_s3": [n for _, n, _ in s3],
        "samples_per_s_local": [n / t.wall_s for t, n, _ in local],
        "samples_per_s_s3": [n / t.wall_s for t, n, _ in s3],
        "local": [t.as_dict() for t, _, _ in local],
        "s3": [t.as_dict() for t, _, _ in s3],
        # The server's CPU over the S3 run's wall time: near 1.0, moto's one Python process is
        # the bottleneck (a core spent parsing requests), not the loader.
        "server_busy": [c / t.wall_s for t, _, c in s3],
    }


def s3_section(work: str, *, quick: bool = True, repeats: int = 3, episodes: int | None = None) -> dict[str, Any]:
    """Samples/s of the shard loader and the lake stream (global shuffle) from S3 over local disk.

    Args:
        work: A scratch directory (the lake and the pack are written, and cached, under it).
        quick: A lake of 48 episodes of about 20 steps instead of 400 of about 50.
        repeats: Counted (local, s3) rounds per loader, after one warm-up round.
        episodes: Episodes of the lake instead of `quick`'s (tests use a handful).

    Returns:
        {"s3_over_local": the lowest of the loaders' wall medians (None when moto is missing),
        "loaders": per loader its ratios on both clocks with their ranges, samples and timings,
        "caveat", "target"}; with moto missing, {"s3_over_local": None, "skipped": why}.
    """
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError as e:
        return {
            "s3_over_local": None,
            "skipped": f"moto S3 server not importable ({e}): install moto[server] and boto3",
        }
    n, steps = (episodes, 20) if episodes is not None else ((48, 20) if quick else (400, 50))
    lake, packed, spec = _build(work, n, steps)
    with _moto_server() as (client, opts, pid):
        copied = _upload(client, lake, "lake") + _upload(client, packed, "packed")
        remote_lake, remote_packed = f"s3://{BUCKET}/lake", f"s3://{BUCKET}/packed"
        arms: dict[str, Callable[[], tuple[Timing, int, float]]] = {
            "shards_local": lambda: _epoch(packed, None, None, pid),
            "shards_s3": lambda: _epoch(remote_packed, opts, None, pid),
            "lake_stream_local": lambda: _epoch(lake, None, spec, pid),
            "lake_stream_s3": lambda: _epoch(remote_lake, opts, spec, pid),
        }
        runs = interleave(arms, repeats=repeats, warmup=1)
    loaders = {name: _loader(runs, name) for name in ("shards", "lake_stream")}
    return {
        "s3_over_local": min(v["s3_over_local"]["median"] for v in loaders.values()),
        "shard_loader_workers": 0,
        "image_size": 16,
        "target": TARGET,
        "target_applies_to": "wall",
        "loaders": loaders,
        "episodes": n,
        "bytes_copied": copied,
        "repeats": repeats,
        "caveat": CAVEAT,
    }
