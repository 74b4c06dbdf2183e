"""The public API stays type-checked (mypy over robolake/, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_mypy_is_clean() -> None:
    pytest.importorskip("mypy")
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "mypy", "robolake"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
