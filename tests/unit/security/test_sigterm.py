"""SIGTERM during an ingest on Ray is one line saying what state the lake is in: not Ray's crash
dump, not a traceback (the issue's bomb run printed Ray's dump when it was stopped)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.mark.slow
def test_sigterm_mid_ingest_on_ray_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "src"
    generate_synthetic(
        src, SyntheticConfig.tiny(embodiments=("single_arm_7dof",), episodes_per_embodiment=2, image_size=16)
    )
    gate = tmp_path / "gate"
    gate.mkdir()
    env = {**os.environ, "ROBOLAKE_FAULT": f"fragments_written:pause={gate}"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "robolake.cli",
            "ingest",
            str(src),
            str(tmp_path / "lake"),
            "--ray-address",
            "local",
            "--no-progress",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not (gate / "fragments_written.reached").exists():  # a wait for a state, not a timing assertion
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the ingest never reached its fragments_written phase"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("robolake ingest: terminated"), err
