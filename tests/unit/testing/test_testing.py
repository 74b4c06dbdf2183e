"""robolake.testing: the package never imports its tests, and the benchmark's fixtures are real.

An installed wheel has no tests/ to import, so each check runs in a fresh interpreter outside
the checkout with `tests` made unimportable (`sys.modules["tests"] = None`): any import of it,
at import time or at run time, fails the check.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import robolake

HEAVY = ("PIL", "av", "h5py", "rosbags", "mcap", "lance")
# `import tests...`, `from tests... import`, or a dotted name "tests.x" handed to importlib.
TESTS_IMPORT = re.compile(r"^\s*(from|import)\s+tests\b|[\"']tests\.\w", re.MULTILINE)


def _run_without_tests(tmp_path: Path, body: str) -> dict:
    """Run `body` (which sets `result`) without tests/ importable; return `result` and what loaded."""
    code = (
        "import json, sys\n"
        "sys.modules['tests'] = None  # any `import tests...` now raises ImportError\n"
        "before = set(sys.modules)\n"
        f"{body}\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "loaded = sorted(m for m, v in sys.modules.items() if v is not None "
        "and (m == 'tests' or m.startswith('tests.')))\n"
        f"print(json.dumps({{'result': result, 'tests': loaded, 'heavy': sorted(new & set({list(HEAVY)!r}))}}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_package_source_never_imports_tests():
    root = Path(robolake.__file__).parent
    offenders = [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*.py"))
        if TESTS_IMPORT.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


@pytest.mark.parametrize("module", ["robolake.testing", "robolake.bench.ingest"])
def test_imports_without_tests(tmp_path: Path, module: str):
    got = _run_without_tests(tmp_path, f"import {module}\nresult = None")
    assert got["tests"] == []
    if module == "robolake.testing":  # cheap: each writer imports its format's library when it runs
        assert got["heavy"] == []


def test_sources_import_no_reader_libraries(tmp_path: Path):
    # Registering every format reads no file; the readers import av, h5py, rosbags and mcap
    # only when they read.
    got = _run_without_tests(tmp_path, "import robolake.lake.sources\nresult = None")
    assert not set(got["heavy"]) & {"av", "h5py", "rosbags", "mcap"}, got["heavy"]


def test_bench_fixtures_are_read_by_their_format(tmp_path: Path):
    body = """
from pathlib import Path
from robolake.bench.ingest import _fixtures
from robolake.lake.sources import discover_readers
result = {}
for row, (fmt, _what, build) in _fixtures(quick=True).items():
    d = Path(row.replace(" ", "_").replace("(", "").replace(")", "")).absolute()
    d.mkdir()
    build(d)
    readers = discover_readers(str(d), format=fmt)
    result[row] = [fmt, sorted(r.format_name for r in readers), sum(len(r.discover()) for r in readers)]
"""
    got = _run_without_tests(tmp_path, body)
    assert got["tests"] == []
    assert set(got["result"]) >= {
        "lerobot",
        "hdf5",
        "rlds",
        "ros2 (sqlite3)",
        "ros2 (mcap)",
        "ros2-file",
        "ros1",
        "mcap",
    }
    for row, (fmt, names, episodes) in got["result"].items():
        assert names and {n.split("-")[0] for n in names} == {fmt.split("-")[0]}, (row, names)
        assert episodes >= 3, (row, episodes)
