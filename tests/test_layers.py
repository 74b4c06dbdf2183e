"""The tree's walls hold: the import-linter contracts in pyproject.toml, and ruff's format and lint.

The contracts (layers, the lake's facade, the model's batch contract, no cycles, private modules)
are checked on the tree as it is, and on a copy with a planted violation, which must fail: a
contract that cannot fail protects nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("importlinter")
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def test_import_contracts_are_kept() -> None:
    proc = _lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        ("robolake/schemas/_planted.py", "import robolake.commands\n", "Layers run one way"),
        ("robolake/loaders/planted.py", "from robolake.lake.protocol import lease\n", "facade"),
        ("robolake/training/planted.py", "import robolake.training.model\nimport robolake.loaders\n", "cycles"),
        ("robolake/training/dit_extra.py", "", "batch contract"),
    ],
)
def test_a_planted_violation_fails(tmp_path: Path, module: str, source: str, contract: str) -> None:
    shutil.copytree(REPO / "robolake", tmp_path / "robolake", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    if module.endswith("dit_extra.py"):  # the model itself reaching for the data stack
        dit = tmp_path / "robolake/training/dit.py"
        dit.write_text(dit.read_text() + "\nimport robolake.packers  # noqa\n")
    else:
        (tmp_path / module).write_text(source)
    if contract == "cycles":  # a module the model imports, importing back into the loaders
        (tmp_path / "robolake/loaders/planted_back.py").write_text("import robolake.training.planted\n")
    proc = _lint_imports(tmp_path)
    assert proc.returncode != 0, proc.stdout
    broken = proc.stdout.split("Broken contracts")[-1]
    assert contract in broken, proc.stdout


def test_ruff_format_and_lint_are_clean() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    fmt = subprocess.run(
        [ruff, "format", "--check", "robolake", "tests", "scripts"], cwd=REPO, capture_output=True, text=True
    )
    assert fmt.returncode == 0, "run `ruff format robolake tests scripts`:\n" + fmt.stdout + fmt.stderr
    lint = subprocess.run([ruff, "check", "robolake", "tests", "scripts"], cwd=REPO, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
