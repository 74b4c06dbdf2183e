"""The test suite's shared fixtures and factories, one pytest plugin (registered in tests/conftest.py).

Tests take fixtures by name and import factories from here (`from tests.fixtures import ...`),
never from a conftest module. Expensive data (the tiny synthetic lake and its packed shards, and Ray
for the tests that ask for `ray_session`) is built once per session. The lake is ingested and packed
in this process (both run without Ray for small inputs), so tests that only need shards never start Ray.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints a banner per encode otherwise

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
PICK_N_PLACE = SHARED_DATA / "gr00t_pick_n_place"


@pytest.fixture(scope="session")
def ray_session():
    """Start Ray once for the whole test session (ray.init costs seconds here)."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    if not ray.is_initialized():
        # "local": this session's own Ray, never a cluster another process advertises on this machine
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def copy_pick_n_place(dst_dir: Path) -> Path:
    """A private, writable copy of the shared GR00T PickNPlace dataset; skips where ../shared is absent."""
    if not PICK_N_PLACE.is_dir():
        pytest.skip(f"shared dataset not found at {PICK_N_PLACE}")
    dst = dst_dir / "gr00t_pick_n_place"
    shutil.copytree(PICK_N_PLACE, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


@pytest.fixture()
def pick_n_place(tmp_path: Path) -> Path:
    return copy_pick_n_place(tmp_path)


@dataclass(frozen=True)
class PackedData:
    syn: Path
    lake: Path
    packed: Path
    num_samples: int
    num_sequences: int


def build_packed(root: Path) -> PackedData:
    from robolake.lake.intake.ingest import ingest
    from robolake.packers.lengths import TokenLengthConfig
    from robolake.packers.pipeline import pack
    from robolake.packers.spec import PackSpec
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    generate_synthetic(root / "syn", SyntheticConfig.tiny())
    ingest(str(root / "syn"), str(root / "lake"))
    spec = PackSpec(max_tokens=1024, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
    m = pack(str(root / "lake"), spec, str(root / "packed"))
    return PackedData(root / "syn", root / "lake", root / "packed", m.num_samples, m.num_sequences)


@pytest.fixture(scope="session")
def packed_data(tmp_path_factory: pytest.TempPathFactory) -> PackedData:
    return build_packed(tmp_path_factory.mktemp("loaders"))


@pytest.fixture()
def packed_copy(packed_data: PackedData, tmp_path: Path) -> Path:
    """A private copy of the pack output, to break."""
    dst = tmp_path / "packed"
    shutil.copytree(packed_data.packed, dst)
    return dst


# (state width, action width) per embodiment id
EMBODIMENTS = {0: (7, 7), 1: (14, 12), 2: (20, 16), 3: (32, 32)}


def random_batch(
    config: Any,
    n: int,
    *,
    seed: int = 0,
    views: list[int] | None = None,
    text_lengths: list[int] | None = None,
    embodiments: list[int] | None = None,
) -> Any:
    """n samples with 1-3 views, instructions of 5-40 bytes and mixed embodiments (for a ModelConfig)."""
    from robolake.schemas.batch import make_packed_batch

    rng = np.random.default_rng(seed)
    views = views if views is not None else rng.integers(1, 4, size=n).tolist()
    text_lengths = text_lengths if text_lengths is not None else rng.integers(5, 41, size=n).tolist()
    embodiments = embodiments if embodiments is not None else rng.integers(0, len(EMBODIMENTS), size=n).tolist()
    horizon, size = config.action_horizon, config.image_size
    pixels = rng.integers(0, 256, size=(int(sum(views)), 3, size, size), dtype=np.uint8)
    text = [rng.integers(0, 256, size=length).astype(np.int64) for length in text_lengths]
    state = [rng.standard_normal(EMBODIMENTS[e][0]).astype(np.float32) for e in embodiments]
    action = [rng.standard_normal((horizon, EMBODIMENTS[e][1])).astype(np.float32) for e in embodiments]
    valid = rng.integers(horizon // 2, horizon + 1, size=n).tolist()
    return make_packed_batch(
        pixels=pixels,
        views_per_sample=views,
        text_ids=text,
        state=state,
        action=action,
        action_valid_steps=valid,
        embodiment_id=embodiments,
        tokens_per_view=config.tokens_per_view,
        max_state_dim=config.max_state_dim,
        max_action_dim=config.max_action_dim,
        sample_keys=tuple((f"ep{seed}", i) for i in range(n)),
    )


@contextmanager
def moto_s3(key_id: str = "test", secret: str = "test") -> Iterator[tuple[Any, dict[str, str]]]:
    """moto's S3 server on 127.0.0.1 with a `robolake` bucket: (a boto3 client, the Lance/fsspec
    storage options that reach it with these credentials). Skips where moto, s3fs or boto3 is missing."""
    server_mod = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    boto3 = pytest.importorskip("boto3")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id=key_id, aws_secret_access_key=secret, region_name="us-east-1"
        )
        client.create_bucket(Bucket="robolake")
        yield (
            client,
            {
                "aws_endpoint": endpoint,
                "aws_access_key_id": key_id,
                "aws_secret_access_key": secret,
                "aws_region": "us-east-1",
                "allow_http": "true",
            },
        )
    finally:
        server.stop()


@pytest.fixture()
def s3_options() -> Iterator[dict[str, str]]:
    """Storage options of a fresh moto S3 server with a `robolake` bucket (see `moto_s3`)."""
    with moto_s3() as (_, options):
        yield options


def child_cluster_args(work: Path, nodes: int, src: Path, *extra: str) -> list[str]:
    """The command line of one run on its own Ray cluster (`robolake.bench.scale --child-cluster`):
    a process of its own, so the cluster never meets the session's Ray (`ray_session`)."""
    import sys

    return [sys.executable, "-m", "robolake.bench.scale", "--child-cluster", str(work), "--nodes", str(nodes)] + [
        "--src",
        str(src),
        *extra,
    ]


def child_cluster_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, RAY_ENABLE_UV_RUN_RUNTIME_ENV="0", SVT_LOG="1", **extra)


def run_child_cluster(work: Path, nodes: int, src: Path, *extra: str) -> dict[str, Any]:
    """Run `child_cluster_args` to the end and return its CHILD_RESULT (asserting it ran cleanly)."""
    import json
    import subprocess

    args = child_cluster_args(work, nodes, src, *extra)
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900, env=child_cluster_env())
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHILD_RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    return dict(json.loads(lines[-1][len("CHILD_RESULT ") :]))
