"""A real multi-node run: ingest and pack on a Ray cluster of a head and two worker nodes.

Each run happens in its own process (`robolake.bench.scale --child-cluster`), so the cluster never
meets the session's Ray (`ray_session`). The cluster run must use more than one node, and its lake
and shards must hold exactly what a one-node run writes (content digests of every table), on a
local directory and on the local S3-compatible server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import moto_s3, run_child_cluster

pytestmark = pytest.mark.slow


def _run(work: Path, nodes: int, src: Path, s3_endpoint: str | None = None) -> dict[str, Any]:
    return run_child_cluster(work, nodes, src, *(["--s3-endpoint", s3_endpoint] if s3_endpoint else []))


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
    with moto_s3() as (_, options):
        src = tmp_path / "src"
        multi = _run(tmp_path / "s3multi", 3, src, options["aws_endpoint"])
        single = _run(tmp_path / "s3single", 1, src, options["aws_endpoint"])
        _check(multi, single)
