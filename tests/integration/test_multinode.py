"""A real multi-node run: ingest and pack on a Ray cluster of a head and two worker nodes.

Each run happens in its own process (`robolake.bench.scale --child-cluster`), so the cluster never
meets the session's Ray (`ray_session`). The cluster run must use more than one node, and its lake
and shards must hold exactly what a one-node run writes (content digests of every table), on a
local directory and on the local S3-compatible server.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def _run(work: Path, nodes: int, src: Path, s3_endpoint: str | None = None) -> dict[str, Any]:
    args = [sys.executable, "-m", "robolake.bench.scale", "--child-cluster", str(work), "--nodes", str(nodes), "--src", str(src)]
    if s3_endpoint:
        args += ["--s3-endpoint", s3_endpoint]
    env = dict(os.environ, RAY_ENABLE_UV_RUN_RUNTIME_ENV="0", SVT_LOG="1")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHILD_RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    return dict(json.loads(lines[-1][len("CHILD_RESULT "):]))


def _check(multi: dict[str, Any], single: dict[str, Any]) -> None:
    assert multi["nodes"] == 3 and single["nodes"] == 1
    assert multi["nodes_used"] >= 2, multi["tasks_per_node"]
    assert set(multi["digest"]) == {"episodes", "steps", "media", "embodiments", "quarantine", "shards"}
    assert multi["digest"] == single["digest"]


def test_cluster_matches_one_node(tmp_path: Path) -> None:
    src = tmp_path / "src"
    multi = _run(tmp_path / "multi", 3, src)
    single = _run(tmp_path / "single", 1, src)
    _check(multi, single)


def test_cluster_on_object_store(tmp_path: Path) -> None:
    server_mod = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    boto3 = pytest.importorskip("boto3")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                     region_name="us-east-1").create_bucket(Bucket="robolake")
        src = tmp_path / "src"
        multi = _run(tmp_path / "s3multi", 3, src, endpoint)
        single = _run(tmp_path / "s3single", 1, src, endpoint)
        _check(multi, single)
    finally:
        server.stop()
