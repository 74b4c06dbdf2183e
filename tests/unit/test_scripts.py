"""scripts/setup.sh installs once and then does nothing while nothing changed; the README flow's
outputs are ignored by git; `.ci/run` runs exactly the README's test command."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Stands in for .venv/bin/python: logs how it was called; `-I -c CHECK` (is .venv current?) succeeds.
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls.log"
exit 0
"""


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(FAKE_PYTHON)
    (bin_dir / "python").chmod(stat.S_IRWXU)
    return root


def _setup(root: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    log = root / ".venv" / "calls.log"
    log.unlink(missing_ok=True)
    res = subprocess.run(
        ["bash", "scripts/setup.sh", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHON": "python3"},
    )
    return res, log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("python3") is None, reason="needs bash and python3")
def test_setup_installs_once_then_does_nothing_until_pyproject_changes(tmp_path):
    root = _checkout(tmp_path)
    res, calls = _setup(root)
    assert res.returncode == 0, res.stderr
    assert any("pip install" in c and "-e .[dev,sim]" in c for c in calls)  # no stamp: the full install
    assert (root / ".venv" / ".robolake-setup").exists()

    res, calls = _setup(root)
    assert res.returncode == 0, res.stderr
    assert not any("pip" in c for c in calls), calls  # current: no pip at all
    assert [c for c in calls if c.startswith("-I -c")], calls  # but it did check the install
    assert ".venv is current" in res.stderr

    with (root / "pyproject.toml").open("a") as f:
        f.write("\n# a new dependency would go here\n")
    res, calls = _setup(root)
    assert any("pip install" in c for c in calls)  # pyproject changed: installs again

    res, calls = _setup(root, "--force")
    assert any("pip install" in c for c in calls)


def test_ci_runs_exactly_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in readme
    assert [line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))] == [
        "bash scripts/test.sh"
    ]


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs git and a checkout")
@pytest.mark.parametrize(
    "path", ["lake/", "packed/", "run/", "run2/", "export/", "demo_out/", "eval_out/", "bench_out/"]
)
def test_the_readme_flow_outputs_are_ignored(path):
    res = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"{path} is not in .gitignore"


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs git and a checkout")
def test_the_package_itself_is_not_ignored():
    for path in ("robolake/cli.py", "scripts/setup.sh", "tests/integration/test_demo.py"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO, timeout=60).returncode == 1, path
