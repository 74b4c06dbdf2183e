"""Scale and storage: frame layouts against the source video, flat ingest cost, bounded plan
memory, lake/shard sizes, and a run on a three-node Ray cluster.

- `media_layouts` (`bench.media`): per layout (the record, its h264 access copy, `--frames
  jpeg`, `--frames h264`) and per data set (synthetic h264, synthetic AV1 LeRobot v3.0, the real
  GR00T data where ../shared is present, any `--data PATH`): lake bytes over the source's video
  bytes, bit-exactness and PSNR against the source decode (every frame), random frames one a
  call and 64 a call against mp4 seek-and-decode (3 paired runs, median and range), and pack
  seconds. `media` is the default layout's (the record's) share of it; without `--quick` it
  also holds issue 15's per-frame codec candidates (`candidates`).
- `ingest_seconds`: 20 successive ingests of equally sized datasets into one lake.
- `plan_peak_rss_mb`: peak RSS of a fresh driver process planning a simulated sample index of
  1M, 10M and 100M samples (per-range plans on Ray tasks), next to planning it all on the
  driver (1M, 10M) as before.
- `sizes`: shard bytes over lake media bytes (the JPEG lake), packed at the lake's frame size
  and as a training rendition (`--image-size`).
- `multi_node`: ingest + pack on `ray.cluster_utils.Cluster` (head + two workers, each with its
  own resources), nodes that ran tasks, and whether lake and shards equal a one-node run's.

- `node_loss` (issue 26): ingest + pack on three nodes, a worker node removed (SIGKILL) in the
  middle of ingest's load stage and of pack's write stage and a fresh node added each time,
  then the Ray Data loader over the shards losing a worker after its first batch; paired with
  no-loss runs. `node_loss.identical`: every run's lake and shards equal a one-node run's;
  `loss_over_no_loss`: wall time of ingest + pack, median and range of the pairs.
- `verbs` (issue 26, `bench._scale_verbs`): every everyday verb on lakes of 1k, 10k and, without
  `--quick`, 100k episodes written by ingest; `verbs.<verb>.ratio_100k_over_1k` (`ratio_10k_over_1k`
  with `--quick`), metadata verbs flagged `flat` at <= 2x. Runs `node_loss` too.
- `elastic` (issue 26): resume on another world size, from `bench._elastic`.
- `s3` (issue 26): the shard loader and the lake stream with a global shuffle, from a local moto
  S3 server over local disk (`bench._s3_loader`); `s3_over_local`: the lower of the two loaders'
  median samples/s ratios (target >= 0.8; a lower bound: moto shares the loader's cores).

`--sections media` runs the layouts alone (with `--quick`, a few minutes).
`robolake bench scale --sections elastic,verbs --json out.json` is issue 26's run.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import io
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar, cast

import numpy as np

from robolake.bench._common import machine, print_table, write_json
from robolake.bench._media_reads import shared_data

T = TypeVar("T")

LAYOUT = (
    "record (default): the source video's own packets, bit-exact; opt-in lossy --frames jpeg (q80) and --frames h264 "
    "(key-referenced GOP 16); a derived h264 access copy (see robolake.lake.media.frames)"
)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float(10 * np.log10(255.0**2 / max(mse, 1e-12)))


def _source_episodes(root: str, decode: bool = True) -> tuple[list[list[np.ndarray]], int, list[str]]:
    import av

    vids = sorted(glob.glob(os.path.join(root, "**", "videos", "**", "*.mp4"), recursive=True))
    eps = []
    for v in vids if decode else []:
        with av.open(v) as c:
            eps.append([f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])])
    return eps, sum(os.path.getsize(v) for v in vids), vids


def _pil_codec(fmt: str, **kw: Any) -> Any:
    from PIL import Image

    def enc(x: np.ndarray) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(x).save(buf, format=fmt, **kw)
        return buf.getvalue()

    return enc


def _pil_decode(b: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))


def _h264_gop(xs: list[np.ndarray], gop: int, crf: int) -> list[bytes]:
    import av

    ctx = av.CodecContext.create("libx264", "w")
    ctx.width, ctx.height = xs[0].shape[1], xs[0].shape[0]
    ctx.pix_fmt = "yuv420p"
    ctx.time_base = Fraction(1, 20)
    ctx.options = {
        "crf": str(crf),
        "preset": "medium",
        "x264-params": (
            f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0:repeat-headers=1:rc-lookahead=0:sync-lookahead=0"
        ),
    }
    out: list[bytes] = []
    for i, x in enumerate(xs):
        fr = av.VideoFrame.from_ndarray(x, format="rgb24").reformat(format="yuv420p")
        fr.pts = i
        out += [bytes(p) for p in ctx.encode(fr)]
    out += [bytes(p) for p in ctx.encode(None)]
    return out


def _h264_read(packets: list[bytes]) -> np.ndarray:
    import av

    ctx = av.CodecContext.create("h264", "r")
    frames = []
    for p in packets:
        frames += ctx.decode(av.Packet(p))
    frames += ctx.decode(None)
    return frames[-1].to_ndarray(format="rgb24")


def _candidates(eps: list[list[np.ndarray]], src_bytes: int, reads: int) -> list[dict[str, Any]]:
    frames = [x for e in eps for x in e]
    n = len(frames)
    rng = random.Random(0)
    sub = [frames[i] for i in sorted(rng.sample(range(n), min(n, 200)))]
    out = []
    for name, enc in (
        ("jpeg q50", _pil_codec("JPEG", quality=50, optimize=True)),
        ("jpeg q80", _pil_codec("JPEG", quality=80, optimize=True)),
        ("jpeg q90", _pil_codec("JPEG", quality=90, optimize=True)),
        ("webp q50", _pil_codec("WEBP", quality=50, method=4)),
        ("webp q75", _pil_codec("WEBP", quality=75, method=4)),
        ("avif q50", _pil_codec("AVIF", quality=50, speed=8)),
    ):
        data = [enc(x) for x in sub]
        t0 = time.perf_counter()
        for i in range(reads):
            _pil_decode(data[i % len(data)])
        out.append(
            {
                "layout": name,
                "bytes_per_frame": float(np.mean([len(d) for d in data])),
                "over_source": float(np.mean([len(d) for d in data])) * n / src_bytes,
                "psnr_db": float(np.mean([_psnr(_pil_decode(d), x) for d, x in zip(data, sub, strict=True)])),
                "decode_ms": (time.perf_counter() - t0) / reads * 1e3,
            }
        )
    from robolake.lake import KeyframeEncoder, decode_row

    # The --video-frames h264 layout: every frame predicted from its GOP's keyframe alone.
    data, keys = [], []
    for e in eps:
        enc = KeyframeEncoder(e[0].shape[0], e[0].shape[1])
        for j, x in enumerate(e):
            data.append(enc.add(x))
            keys.append(len(data) - 1 - j % enc.gop)
    picks = [rng.randrange(n) for _ in range(reads)]
    t0 = time.perf_counter()
    for i in picks:
        decode_row(data[i], enc.encoding, data[keys[i]] if keys[i] != i else None)
    dec_s = time.perf_counter() - t0
    ps = [
        _psnr(decode_row(data[i], enc.encoding, data[keys[i]] if keys[i] != i else None), frames[i]) for i in picks[:60]
    ]
    out.append(
        {
            "layout": f"h264 key-referenced GOP {enc.gop} (--video-frames h264)",
            "bytes_per_frame": sum(map(len, data)) / n,
            "over_source": sum(map(len, data)) / src_bytes,
            "psnr_db": float(np.mean(ps)),
            "decode_ms": dec_s / reads * 1e3,
        }
    )
    for gop in (1, 4):
        packets: list[bytes] = []
        starts: list[int] = []
        for e in eps:
            starts.append(len(packets))
            packets += _h264_gop(e, gop, 23)
        offs = np.cumsum([0] + [len(e) for e in eps])
        picks = [rng.randrange(n) for _ in range(max(20, reads // 10))]
        ps, t0 = [], time.perf_counter()
        for i in picks:
            k = int(np.searchsorted(offs, i, side="right") - 1)
            j = i - int(offs[k])
            s = int(offs[k]) + (j // gop) * gop
            ps.append(_psnr(_h264_read(packets[s : i + 1]), frames[i]))
        bpf = sum(map(len, packets)) / n
        out.append(
            {
                "layout": f"h264 GOP {gop} crf 23, P from the previous frame",
                "bytes_per_frame": bpf,
                "over_source": bpf * n / src_bytes,
                "psnr_db": float(np.mean(ps)),
                "decode_ms": (time.perf_counter() - t0) / len(picks) * 1e3,
            }
        )
    return out


def _sizes(lake_uri: str, work: str, image_size: int) -> dict[str, Any]:
    import lance

    from robolake.lake import Lake
    from robolake.packers import PackSpec, TokenLengthConfig, pack

    lake = Lake.open(lake_uri)
    media_bytes = sum(
        len(b) for batch in lake.dataset("media").to_batches(columns=["data"]) for b in batch.column("data").to_pylist()
    )
    tokens = TokenLengthConfig(tokens_per_view=64, state_tokens=0)
    out: dict[str, Any] = {"lake_media_bytes": media_bytes, "rendition_size": image_size}
    for name, size in (("full", None), ("rendition", image_size)):
        uri = os.path.join(work, f"shards-{name}")
        pack(lake, PackSpec(max_tokens=2048, horizon=16, tokens=tokens, image_size=size), uri, overwrite=True)
        frames = lance.dataset(os.path.join(uri, "shards.lance")).to_table(columns=["frames"])["frames"]
        shard_bytes = sum(len(f) for row in frames.to_pylist() for f in row)
        out[f"shard_frame_bytes_{name}"] = shard_bytes
        out[f"shards_over_lake_media_{name}"] = shard_bytes / media_bytes
    return out


# ----------------------------------------------------------------------------------- ingest series


def _ingest_series(work: str, n: int) -> list[float]:
    from robolake.lake import ingest
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    srcs = []
    for i in range(n):
        p = os.path.join(work, f"series-src-{i}")
        generate_synthetic(
            p, SyntheticConfig(seed=1000 + i, episodes_per_embodiment=2, min_length=40, max_length=60, image_size=32)
        )
        srcs.append(p)
    uri = os.path.join(work, "series-lake")
    seconds = []
    for p in srcs:
        t0 = time.perf_counter()
        ingest(p, uri)
        seconds.append(time.perf_counter() - t0)
    return seconds


# ---------------------------------------------------------------------------------- plan memory


def simulated_index(num_samples: int, steps_per_episode: int = 200) -> Any:
    """A SampleIndex of `num_samples` samples without a lake (lengths drawn per episode)."""
    import pyarrow as pa

    from robolake.packers.samples import SampleIndex

    e = -(-num_samples // steps_per_episode)
    per_ep = np.full(e, steps_per_episode, dtype=np.int64)
    per_ep[-1] = num_samples - steps_per_episode * (e - 1)
    rng = np.random.default_rng(0)
    return SampleIndex(
        episodes=pa.table({"episode_id": pa.array([f"ep{i:09d}" for i in range(e)])}),
        sample_start=np.concatenate([[0], np.cumsum(per_ep)]).astype(np.int64),
        step_stride=1,
        episode_length=rng.integers(64, 400, e).astype(np.int64),
        step_offset=np.cumsum(np.concatenate([[0], per_ep[:-1]])).astype(np.int64),
        media_offset=np.zeros((e, 1), dtype=np.int64),
        embodiments=("sim",),
    )


def _plan_child(num_samples: int, mode: str, work: str) -> dict[str, Any]:
    """Run in a fresh process: build the index and plan it; report this process's peak RSS."""
    from robolake.packers import PackSpec, TokenLengthConfig
    from robolake.packers.pipeline import _PlanStage, plan_ranges, plan_sequences
    from robolake.ray_tasks import ensure_ray, fan_out

    spec = PackSpec(max_tokens=4096, tokens=TokenLengthConfig(tokens_per_view=64, state_tokens=0))
    if mode == "ranges":
        ensure_ray(num_cpus=2)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    idx = simulated_index(num_samples)
    if mode == "ranges":
        ranges = plan_ranges(idx, spec)
        res = dict(fan_out(_PlanStage(idx, spec, ranges, os.path.join(work, "_plan"), None), len(ranges)))
        sequences = sum(r["num_sequences"] for r in res.values())
    else:
        seqs, _ = plan_sequences(idx, spec)
        sequences = len(seqs)
    return {
        "samples": num_samples,
        "mode": mode,
        "sequences": sequences,
        "seconds": time.perf_counter() - t0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_mb": base,
    }


def _child(args: list[str], timeout: float = 1800) -> dict[str, Any]:
    env = dict(os.environ, RAY_ENABLE_UV_RUN_RUNTIME_ENV="0", SVT_LOG="1")
    proc = subprocess.run(
        [sys.executable, "-m", "robolake.bench.scale", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHILD_RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child {args} failed (rc {proc.returncode}): {proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1][len("CHILD_RESULT ") :]))


# ---------------------------------------------------------------------------------- multi-node


def _table_digest(ds: Any, drop: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for batch in ds.to_batches():
        keep = [c for c in batch.schema.names if c not in drop]
        for col in keep:
            h.update(col.encode())
            h.update(
                json.dumps(batch.column(col).to_pylist(), default=lambda b: hashlib.sha256(b).hexdigest()).encode()
            )
    return h.hexdigest()


def lake_and_shards_digest(
    lake_uri: str, shards_uri: str, storage_options: dict[str, str] | None = None
) -> dict[str, str]:
    """Content digests of every lake table and of the shards (ingest/commit times left out)."""
    import lance

    from robolake.lake import Lake
    from robolake.packers import read_manifest

    lake = Lake.open(lake_uri, storage_options=storage_options)
    out = {
        t: _table_digest(lake.dataset(t), ("ingested_at", "quarantined_at"))
        for t in ("episodes", "steps", "media", "embodiments", "quarantine")
    }
    m = read_manifest(shards_uri, storage_options)
    shards = lance.dataset(
        shards_uri.rstrip("/") + "/shards.lance", version=m.shards_version, storage_options=storage_options
    )
    out["shards"] = _table_digest(shards, ())
    return out


def _task_nodes() -> dict[str, int]:
    """node id -> tasks that ran there, from the task events Ray's GCS keeps (no dashboard needed)."""
    import time as _time

    from ray._private.state import state

    _time.sleep(2.0)  # task events reach the GCS in periodic flushes
    per_node: dict[str, set[bytes]] = {}
    for ev in state._get_all_task_events():
        node = ev.state_updates.node_id.hex() if ev.HasField("state_updates") else ""
        if node:
            per_node.setdefault(node, set()).add(ev.task_id)
    return {n: len(t) for n, t in per_node.items()}


# Faster node-death detection than Ray's defaults (a removed raylet is noticed in about a
# second instead of 15-30): only for the clusters this module starts on one machine.
_CLUSTER_SYSTEM_CONFIG = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 2,
}

# The stages a node is lost in (see `ray_tasks.hold_point`): ingest's load stage (it writes
# fragments) and pack's write stage (it writes shard fragments).
LOSS_STAGES = ("_LoadStage", "_WriteStage")


class _NodeLoss:
    """Loses one worker node in each of `LOSS_STAGES` and adds a fresh one, from a thread.

    For each stage: wait until a task of it, on a worker node, has written its files and holds
    before returning; remove that node (SIGKILL, as a preempted machine goes); add a new node;
    let the stage go on. Records which nodes were lost and added."""

    def __init__(self, cluster: Any, hold_dir: str, workers: list[Any]):
        self.cluster, self.dir, self.workers = cluster, hold_dir, list(workers)
        self.lost: list[str] = []
        self.added: list[str] = []
        self.errors: list[str] = []
        for stage in LOSS_STAGES:
            open(os.path.join(hold_dir, f"hold-{stage}"), "w").close()

    def run_beside(self, job: Callable[[], T]) -> T:
        """Run `job` on a thread while this loses nodes on the main one (Ray starts nodes with
        signal handlers, which only the main thread may install); returns what `job` returned."""
        import threading

        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = job()
            except BaseException as e:  # re-raised on the main thread
                box["error"] = e

        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        self._run(thread)
        thread.join()
        if "error" in box:
            raise box["error"]
        return cast(T, box["result"])

    def _held_on_worker(self, stage: str) -> Any:
        by_id = {w.node_id: w for w in self.workers}
        for name in sorted(os.listdir(self.dir)):
            if name.startswith(f"held-{stage}-"):
                with open(os.path.join(self.dir, name)) as f:
                    node = by_id.get(f.read().strip())
                if node is not None:
                    return node
        return None

    def _run(self, job: Any) -> None:
        try:
            for i, stage in enumerate(LOSS_STAGES):
                node = None
                while node is None:
                    if not job.is_alive():
                        raise RuntimeError(f"the job ended before a task of {stage} held on a worker node")
                    time.sleep(0.05)
                    node = self._held_on_worker(stage)
                self.cluster.remove_node(node, allow_graceful=False)
                self.workers.remove(node)
                self.lost.append(node.node_id)
                fresh = self.cluster.add_node(num_cpus=1, resources={f"added_{i}": 1})
                self.cluster.wait_for_nodes()
                self.workers.append(fresh)
                self.added.append(fresh.node_id)
                open(os.path.join(self.dir, f"go-{stage}"), "w").close()
        except Exception as e:  # reported in the result; the stages then run on without holding
            self.errors.append(f"{type(e).__name__}: {e}")
            for stage in LOSS_STAGES:
                open(os.path.join(self.dir, f"go-{stage}"), "w").close()

    def worked_on(self, node_id: str) -> list[str]:
        """Stages with a task that reached its end on `node_id` (from the hold markers)."""
        out = set()
        for name in os.listdir(self.dir):
            if name.startswith("held-"):
                with open(os.path.join(self.dir, name)) as f:
                    if f.read().strip() == node_id:
                        out.add(name.split("-")[1])
        return sorted(out)


def start_cluster(nodes: int, hold_dir: str | None = None) -> Any:
    """A `ray.cluster_utils.Cluster` of a head and `nodes - 1` workers of one CPU each (fast
    node-death detection); with `hold_dir`, its tasks run `ray_tasks.hold_point` there."""
    from ray.cluster_utils import Cluster

    from robolake.ray_tasks import HOLD_ENV

    if hold_dir is not None:  # before any raylet starts: workers inherit it from their raylet
        os.environ[HOLD_ENV] = hold_dir
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"head": 1},
            "include_dashboard": False,
            "_system_config": _CLUSTER_SYSTEM_CONFIG,
        },
    )
    _unadvertise(cluster.address)
    for i in range(nodes - 1):
        cluster.add_node(num_cpus=1, resources={f"worker_{i}": 1})
    cluster.wait_for_nodes()
    return cluster


def _unadvertise(address: str) -> None:
    """Remove the "latest cluster" file `cluster_utils` writes (for its own unit tests), so that
    another process's bare `ray.init()` on this machine starts its own Ray instead of joining
    this cluster, and fails when it is removed."""
    try:
        from ray._common.utils import reset_ray_address
        from ray._private.utils import read_ray_address

        if read_ray_address() == address:
            reset_ray_address()
    except (ImportError, AttributeError, OSError):  # Ray's internals moved: it only costs the warning
        pass


def cluster_run(
    work: str,
    nodes: int,
    s3_endpoint: str | None = None,
    src: str | None = None,
    *,
    lose_nodes: bool = False,
    stream: bool = False,
    repack: bool = False,
) -> dict[str, Any]:
    """Ingest + pack the same tiny synthetic data on `nodes` Ray nodes (1: one local node with
    the cluster's CPUs); returns nodes that ran tasks, content digests, the lake's versions and
    the seconds ingest + pack took. With `lose_nodes`, a worker node is removed in the middle of
    ingest's load stage and of pack's write stage, and a new one added each time (`_NodeLoss`).
    With `stream`, the Ray Data loader then reads the shards for an epoch (losing a worker node
    after its first batch where `lose_nodes`; `_stream_epoch`). With `repack`, the lake is packed
    once more into the same directory (`overwrite`, another seed): what a driver killed during
    that second pack must leave is the first pack's manifest."""
    import ray

    from robolake.lake import IngestConfig, Lake, check_lake, ingest
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    cluster = None
    loss = None
    if nodes > 1:
        hold_dir = os.path.join(work, "_hold") if lose_nodes else None
        if hold_dir:
            os.makedirs(hold_dir, exist_ok=True)
        cluster = start_cluster(nodes, hold_dir)
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        if hold_dir:
            loss = _NodeLoss(cluster, hold_dir, list(cluster.worker_nodes))
    elif lose_nodes:
        raise ValueError("lose_nodes needs a cluster of at least 2 nodes")
    else:
        ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        opts = None
        if s3_endpoint:
            opts = {
                "aws_endpoint": s3_endpoint,
                "aws_access_key_id": "test",
                "aws_secret_access_key": "test",
                "aws_region": "us-east-1",
                "allow_http": "true",
            }
        root = f"s3://robolake/{os.path.basename(work)}" if opts else work
        src = src or os.path.join(work, "syn")
        if not os.path.isdir(src):
            generate_synthetic(src, SyntheticConfig.tiny(seed=7))
        Lake.create(f"{root}/lake", storage_options=opts)

        def job() -> float:
            t0 = time.perf_counter()
            # execution="ray": ingest's `auto` would run a source this small in the driver process
            ingest(
                src, Lake.open(f"{root}/lake", storage_options=opts), IngestConfig(episodes_per_task=1, execution="ray")
            )
            lake = Lake.open(f"{root}/lake", storage_options=opts)
            spec = PackSpec(max_tokens=512, horizon=4, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
            pack(lake, spec, f"{root}/packed", sequences_per_task=2, execution="ray")
            seconds = time.perf_counter() - t0
            if repack:
                again = dataclasses.replace(spec, seed=spec.seed + 1)
                pack(lake, again, f"{root}/packed", sequences_per_task=2, execution="ray", overwrite=True)
            return seconds

        seconds = job() if loss is None else loss.run_beside(job)
        lake = Lake.open(f"{root}/lake", storage_options=opts)
        used = _task_nodes()
        out: dict[str, Any] = {
            "nodes": len([n for n in ray.nodes() if n["Alive"]]),
            "nodes_used": len(used),
            "tasks_per_node": sorted(used.values()),
            "seconds": seconds,
            "lake_versions": len(lake.versions()),
            "check_ok": check_lake(f"{root}/lake", storage_options=opts).ok,
            "digest": lake_and_shards_digest(f"{root}/lake", f"{root}/packed", opts),
        }
        if stream:
            out["stream"] = _stream_epoch(f"{root}/packed", opts, cluster if lose_nodes else None)
        if loss is not None:
            out["node_loss"] = {
                "lost": len(loss.lost),
                "added": len(loss.added),
                "added_nodes_worked_in": [loss.worked_on(n) for n in loss.added],
                "added_nodes_ran_tasks": [used.get(n, 0) for n in loss.added],
                "errors": loss.errors,
            }
        return out
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()


def _stream_epoch(shards: str, opts: dict[str, str] | None, cluster: Any) -> dict[str, Any]:
    """One epoch of `RayPackedStream` over `shards`; with `cluster`, a worker node is removed
    after the first batch (its in-flight decode tasks and stored blocks are lost). Whether every
    sample of the shards came out exactly once."""
    from collections import Counter

    import lance

    from robolake.loaders import LoaderConfig
    from robolake.loaders.ray_stream import RayPackedStream
    from robolake.packers import read_manifest

    m = read_manifest(shards, opts)
    rows = lance.dataset(shards.rstrip("/") + "/shards.lance", version=m.shards_version, storage_options=opts)
    want: Counter[tuple[str, int]] = Counter()
    for r in rows.to_table(columns=["episode_id", "step_index"]).to_pylist():
        want.update(zip(r["episode_id"], r["step_index"], strict=True))
    got: Counter[tuple[str, int]] = Counter()
    batches, lost_at = 0, None
    stream = RayPackedStream(shards, LoaderConfig(sequences_per_batch=1, shuffle=False), storage_options=opts)
    for batch in stream:
        got.update((str(e), int(t)) for e, t in batch.sample_keys)
        batches += 1
        if cluster is not None and lost_at is None:
            victim = next(iter(cluster.worker_nodes))
            cluster.remove_node(victim, allow_graceful=False)
            lost_at = batches
    return {"batches": batches, "lost_at_batch": lost_at, "exactly_once": got == want, "samples": sum(got.values())}


def _multi_node(work: str) -> dict[str, Any]:
    src = os.path.join(work, "cluster-src")
    multi = _child(["--child-cluster", os.path.join(work, "multi"), "--nodes", "3", "--src", src])
    single = _child(["--child-cluster", os.path.join(work, "single"), "--nodes", "1", "--src", src])
    return {
        "nodes": multi["nodes"],
        "nodes_used": multi["nodes_used"],
        "identical_to_single_node": multi["digest"] == single["digest"],
    }


def node_loss(work: str, pairs: int) -> dict[str, Any]:
    """`pairs` interleaved (no-loss, loss) runs on three nodes, and a one-node run to compare to:
    whether every loss run's lake and shards equal the one-node run's, and the loss run's wall
    time (ingest + pack) over the no-loss run's, median and range."""
    from robolake.bench._common import ratio_summary

    src = os.path.join(work, "loss-src")
    single = _child(["--child-cluster", os.path.join(work, "loss-single"), "--nodes", "1", "--src", src])
    runs: list[dict[str, Any]] = []
    ratios = []
    for i in range(pairs):
        plain = _child(["--child-cluster", os.path.join(work, f"noloss-{i}"), "--nodes", "3", "--src", src])
        lossy = _child(
            ["--child-cluster", os.path.join(work, f"loss-{i}"), "--nodes", "3", "--src", src, "--lose-nodes"]
        )
        ratios.append(lossy["seconds"] / plain["seconds"])
        runs.append({"no_loss": plain, "loss": lossy})
    identical = all(
        r["loss"]["digest"] == single["digest"] and r["no_loss"]["digest"] == single["digest"] for r in runs
    )
    return {
        "identical": identical,
        "lost_nodes": [r["loss"]["node_loss"]["lost"] for r in runs],
        "added_nodes_received_work": all(all(r["loss"]["node_loss"]["added_nodes_ran_tasks"]) for r in runs),
        "lake_versions_equal": all(r["loss"]["lake_versions"] == single["lake_versions"] for r in runs),
        "check_ok": all(r["loss"]["check_ok"] for r in runs),
        "seconds_loss": [r["loss"]["seconds"] for r in runs],
        "seconds_no_loss": [r["no_loss"]["seconds"] for r in runs],
        "loss_over_no_loss": ratio_summary(ratios),
        "errors": [e for r in runs for e in r["loss"]["node_loss"]["errors"]],
    }


# ----------------------------------------------------------------------------------------- run


SECTIONS = ("media", "sizes", "ingest", "plan", "multi_node", "node_loss", "verbs", "elastic", "s3")
DEFAULT_SECTIONS = ("media", "sizes", "ingest", "plan", "multi_node")  # the rest by name (issue 26's run)


def _media(work: str, quick: bool, data: dict[str, str]) -> dict[str, Any]:
    """`media_layouts` (bench.media) and `media`: the default layout (the record) on each data set."""
    from robolake.bench.media import media_layouts

    layouts = media_layouts(os.path.join(work, "media"), quick=quick, data=data)
    record = layouts["record"]
    main = next((m for name, m in record.items() if name.startswith("real")), next(iter(record.values())))
    media: dict[str, Any] = {
        "layout": LAYOUT,
        **record,
        "lake_bytes_over_source": main["lake_bytes_over_source"],
        "bit_exact": main["bit_exact"],
        "psnr_db": main["psnr_db"],
        "random_access_speedup": {n: m["speedup_64_per_call"]["median"] for n, m in record.items()},
        "random_access_speedup_one_per_call": {n: m["speedup_one_per_call"]["median"] for n, m in record.items()},
    }
    if not quick:  # issue 15's per-frame candidates, encoded from the source's own decode
        media["candidates"] = {}
        for name, src in (("synthetic", os.path.join(work, "media", "synthetic-h264")), ("real", shared_data())):
            if src is not None:
                eps, src_bytes, _ = _source_episodes(src)
                media["candidates"][name] = _candidates(eps, src_bytes, 1000)
                del eps
    return {"media": media, "media_layouts": layouts}


def run(
    quick: bool,
    work: str,
    sections: tuple[str, ...] = SECTIONS,
    data: dict[str, str] | None = None,
    save: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every section asked for; `save` is handed the results so far after each section (a run of
    an hour that dies in its last section keeps what the others measured)."""
    from robolake.ray_tasks import ensure_ray

    out: dict[str, Any] = {"machine": machine(), "quick": quick, "layout": LAYOUT, "sections": list(sections)}
    out = _Saving(out, save)
    if "plan" in sections:  # plan memory first, each size in a fresh process (peak RSS is per process)
        sizes = {"1M": 1_000_000, "10M": 10_000_000, "100M": 100_000_000}
        plan: dict[str, Any] = {}
        for name, n in sizes.items():
            plan[name] = _child(
                ["--child-plan", str(n), "--mode", "ranges", "--work", os.path.join(work, f"plan-{name}")]
            )
        driver = {
            name: _child(["--child-plan", str(n), "--mode", "driver", "--work", work])
            for name, n in list(sizes.items())[:2]
        }
        out["plan"] = {"ranges": plan, "all_on_driver": driver}
        out["plan_peak_rss_mb"] = {k: v["peak_rss_mb"] for k, v in plan.items()}
    ensure_ray(num_cpus=2)
    if "media" in sections or "sizes" in sections:
        out.update(_media(work, quick, data or {}))
    if "sizes" in sections:
        first = next(iter(out["media_layouts"]["record"]))
        out["sizes"] = {first: _sizes(os.path.join(work, "media", "set-0", "lake-jpeg"), work, 32)}
        real = [i for i, n in enumerate(out["media_layouts"]["record"]) if n.startswith("real")]
        if real:
            out["sizes"]["real"] = _sizes(os.path.join(work, "media", f"set-{real[0]}", "lake-jpeg"), work, 96)
    if "ingest" in sections:
        series = _ingest_series(work, 20)
        out["ingest_seconds"] = series
        out["ingest_20_over_2"] = series[19] / series[1]
        out["ingest_20_over_median_2_5"] = series[19] / statistics.median(series[1:5])
    if "multi_node" in sections:
        out["multi_node"] = _multi_node(work)
    if "node_loss" in sections or "verbs" in sections:  # node loss comes with the verbs (issue 26's run)
        out["node_loss"] = node_loss(work, 2 if quick else 3)
    if "verbs" in sections:
        out.update(_verbs_section(work, quick))
    if "elastic" in sections:
        out["elastic"] = _elastic_section(work, quick)
    if "s3" in sections or "elastic" in sections:  # the loaders' half of issue 26 reads from S3 too
        out["s3"] = _s3_section(work, quick)
        out["s3_over_local"] = out["s3"]["s3_over_local"]
    return dict(out)


class _Saving(dict):  # type: ignore[type-arg]
    """The results dict, handed to `save` whenever a section's result is set."""

    def __init__(self, first: dict[str, Any], save: Callable[[dict[str, Any]], None] | None):
        super().__init__(first)
        self._save = save

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if self._save is not None:
            self._save(dict(self))

    def update(self, other: Any = (), /, **kw: Any) -> None:
        super().update(other, **kw)
        if self._save is not None:
            self._save(dict(self))


def _verbs_section(work: str, quick: bool) -> dict[str, Any]:
    """`verbs`: every verb on lakes written by ingest, 1k and 10k (and 100k without --quick) episodes."""
    from robolake.bench._scale_verbs import verbs

    sizes = {"1k": 1_000, "10k": 10_000} if quick else {"1k": 1_000, "10k": 10_000, "100k": 100_000}
    # 201 steps an episode: the synthetic lengths are drawn around it, and 100k x 200 fell 1,022 steps
    # short of the 20M the issue asks for
    res = verbs(os.path.join(work, "verbs"), sizes, steps=20 if quick else 201, repeats=3 if quick else 5)
    return {"verbs": res["verbs"], "verb_lakes": {k: v for k, v in res.items() if k != "verbs"}}


def _elastic_section(work: str, quick: bool) -> dict[str, Any]:
    """`elastic`: resume mid-epoch on another world size (`bench._elastic`, the loader half of [26])."""
    from robolake.bench._elastic import elastic_section

    return elastic_section(os.path.join(work, "elastic"), quick=quick)


def _s3_section(work: str, quick: bool) -> dict[str, Any]:
    """`s3`: the loaders' global shuffle from a local S3 server over local disk (`bench._s3_loader`)."""
    from robolake.bench._s3_loader import s3_section

    return s3_section(os.path.join(work, "s3"), quick=quick, repeats=3 if quick else 5)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", help="where to write the results")
    p.add_argument(
        "--quick", action="store_true", help="fewer reads and smaller data (a few minutes with --sections media)"
    )
    p.add_argument(
        "--sections",
        default=",".join(DEFAULT_SECTIONS),
        help=(
            f"comma-separated parts to run, of {', '.join(SECTIONS)} (default: {','.join(DEFAULT_SECTIONS)}); "
            "verbs builds lakes of 1k, 10k and (without --quick) 100k episodes by ingest, and runs node_loss too; "
            "elastic runs s3 too"
        ),
    )
    p.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="PATH",
        help="another source data set for media_layouts (repeatable), e.g. an AV1 LeRobot dataset",
    )
    p.add_argument("--work", default=None, help="scratch directory (default: a new temporary one)")
    p.add_argument("--child-plan", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--mode", default="ranges", help=argparse.SUPPRESS)
    p.add_argument("--child-cluster", default=None, help=argparse.SUPPRESS)
    p.add_argument("--nodes", type=int, default=3, help=argparse.SUPPRESS)
    p.add_argument("--s3-endpoint", default=None, help=argparse.SUPPRESS)
    p.add_argument("--src", default=None, help=argparse.SUPPRESS)
    p.add_argument("--lose-nodes", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--repack", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_plan is not None:
        os.makedirs(args.work, exist_ok=True)
        print("CHILD_RESULT " + json.dumps(_plan_child(args.child_plan, args.mode, args.work)), flush=True)
        return 0
    if args.child_cluster is not None:
        os.makedirs(args.child_cluster, exist_ok=True)
        print(
            "CHILD_RESULT "
            + json.dumps(
                cluster_run(
                    args.child_cluster,
                    args.nodes,
                    args.s3_endpoint,
                    args.src,
                    lose_nodes=args.lose_nodes,
                    stream=args.stream,
                    repack=args.repack,
                )
            ),
            flush=True,
        )
        return 0
    if not args.json:
        p.error("--json PATH is required")
    sections = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        p.error(f"--sections: unknown {unknown}; choose from {', '.join(SECTIONS)}")
    for d in args.data:
        if not os.path.isdir(d):
            p.error(f"--data {d}: no such directory")
    data = {f"--data {os.path.basename(os.path.normpath(d))}": os.path.abspath(d) for d in args.data}
    work = args.work or tempfile.mkdtemp(prefix="robolake-bench-scale-")
    res = run(args.quick, work, sections, data, save=lambda partial: write_json(args.json, partial))
    write_json(args.json, res)
    print_table("robolake bench scale", _rows(res))
    return 0


def _rows(res: dict[str, Any]) -> list[tuple[str, Any]]:
    from robolake.bench.media import table_rows

    rows: list[tuple[str, Any]] = [("default layout", res["layout"])]
    if "media_layouts" in res:
        rows += table_rows(res["media_layouts"])
    for where, cands in res.get("media", {}).get("candidates", {}).items():
        for c in cands:
            rows.append(
                (
                    f"{where} candidate {c['layout']}: x source / dB / decode ms",
                    f"{c['over_source']:.2f} / {c['psnr_db']:.1f} / {c['decode_ms']:.2f}",
                )
            )
    for where, s in res.get("sizes", {}).items():
        rows += [
            (f"{where}: shards/lake media at lake size", s["shards_over_lake_media_full"]),
            (f"{where}: shards/lake media at {s['rendition_size']} px", s["shards_over_lake_media_rendition"]),
        ]
    if "ingest_seconds" in res:
        rows += [
            ("ingest 1..20 seconds", " ".join(f"{x:.2f}" for x in res["ingest_seconds"])),
            ("ingest 20th / 2nd", res["ingest_20_over_2"]),
            ("ingest 20th / median(2nd..5th)", res["ingest_20_over_median_2_5"]),
        ]
    for k, v in res.get("plan", {}).get("ranges", {}).items():
        rows.append((f"plan peak RSS MB, {k} samples (ranges on Ray)", v["peak_rss_mb"]))
    for k, v in res.get("plan", {}).get("all_on_driver", {}).items():
        rows.append((f"plan peak RSS MB, {k} samples (all on driver)", v["peak_rss_mb"]))
    if "multi_node" in res:
        rows += [
            ("multi-node: nodes used", res["multi_node"]["nodes_used"]),
            ("multi-node: identical to one node", str(res["multi_node"]["identical_to_single_node"])),
        ]
    if "node_loss" in res:
        nl = res["node_loss"]
        r = nl["loss_over_no_loss"]
        rows += [
            ("node loss: lake and shards identical to one node", str(nl["identical"])),
            (
                "node loss: added nodes received work / check ok",
                f"{nl['added_nodes_received_work']} / {nl['check_ok']}",
            ),
            ("node loss: wall time over no loss (median, range)", f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"),
        ]
    if "verbs" in res:
        key = res["verb_lakes"]["ratio_key"]
        for verb, v in res["verbs"].items():
            lo, hi = v[f"{key}_range"]
            times = " / ".join(f"{x['median']:.3f}" for k, x in v.items() if k.startswith("seconds_"))
            kind = ("flat" if v["flat"] else "NOT FLAT") if v["metadata"] else "reads the lake"
            rows.append((f"verb {verb}: s per size; {key} ({kind})", f"{times}; {v[key]:.2f} ({lo:.2f}-{hi:.2f})"))
    if "elastic" in res:
        el = res["elastic"]
        rows += [
            ("elastic: exactly once / order unchanged", f"{el.get('exactly_once')} / {el.get('order_unchanged')}"),
            ("elastic: (N, M) cases", " ".join(f"{n}->{m}" for n, m in el.get("cases", []))),
        ]
        r = el.get("resize_first_batch_over_same_size")
        if r:
            rows.append(
                ("elastic: first batch after resize / same size", f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})")
            )
    if "s3" in res:
        rows += _s3_rows(res["s3"])
    return rows


def _s3_rows(s3: dict[str, Any]) -> list[tuple[Any, ...]]:
    if s3.get("s3_over_local") is None:
        return [("s3: loaders from S3 over local disk", s3.get("skipped", "not measured"))]
    rows: list[tuple[Any, ...]] = []
    for name, v in s3["loaders"].items():
        rows.append((f"s3: {name} samples/s, S3 over local", v["s3_over_local"], s3["target"]))
        # near 1.0: moto's one Python process, not the loader, is what the S3 side waits on
        rows.append((f"s3: {name} S3 server CPU / wall (median)", statistics.median(v["server_busy"])))
    rows.append(("s3: s3_over_local (lowest wall median; moto on the same cores)", s3["s3_over_local"], s3["target"]))
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
