"""Shared test fixtures: one Ray per session, the shared real dataset, tiny synthetic data."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

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
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
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
