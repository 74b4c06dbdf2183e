"""`robolake.cli.main`: dispatch, the one-line error, `--debug`, and commands on tiny real inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robolake.cli import main

REPO = str(Path(__file__).resolve().parents[3])


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)


def test_a_user_error_is_one_line_and_exit_code_2(tmp_path, capsys):
    missing = str(tmp_path / "no-lake")
    assert main(["info", missing]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and captured.out == ""
    assert lines[0].startswith(f"robolake info: {missing} is not a robolake lake")
    assert lines[0].endswith("(run with --debug for a traceback)") and "Traceback" not in captured.err


def test_debug_shows_the_traceback_wherever_it_is_on_the_line(tmp_path):
    missing = str(tmp_path / "no-lake")
    res = _python("import sys; from robolake.cli import main; sys.exit(main(sys.argv[1:]))", "info", missing, "--debug")
    assert res.returncode == 1
    assert "Traceback (most recent call last)" in res.stderr
    assert f"FileNotFoundError: {missing} is not a robolake lake" in res.stderr
    assert "run with --debug" not in res.stderr


def test_unknown_options_are_refused_outside_bench(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["info", str(tmp_path), "--data", "x"])
    assert e.value.code == 2 and "unrecognized arguments: --data x" in capsys.readouterr().err


def test_ingest_of_nothing_readable_fails_in_one_line_before_ray_starts(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.txt").write_text("not a recording")
    lake = tmp_path / "lake"
    code = (
        "import sys; from robolake.cli import main; rc = main(sys.argv[1:]); ray = sys.modules.get('ray'); "
        "print(rc, bool(ray is not None and ray.is_initialized()))"
    )
    res = _python(code, "ingest", str(src), str(lake), "--no-progress")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["2", "False"]  # exit code 2, and Ray never started
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"robolake ingest: no dataset found under {src}: found 1 .txt file(s)")
    assert not lake.exists()  # nor was the lake created


def test_info_json_on_a_tiny_lake(packed_data, capsys):
    from robolake.lake import Lake

    assert main(["info", str(packed_data.lake), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    lake = Lake.open(str(packed_data.lake))
    assert d["version"] == lake.version and len(d["versions"]) == d["num_versions"] >= 1
    assert d["tables"]["episodes"]["rows"] == lake.count("episodes") > 0
    assert sum(e["episodes"] for e in d["embodiments"].values()) == lake.count("episodes")
    assert [v["operation"] for v in d["versions"]][-1] == "ingest"


def test_info_prints_the_summary_table(packed_data, capsys):
    from robolake.lake import Lake

    lake = Lake.open(str(packed_data.lake))
    assert main(["info", str(packed_data.lake)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"lake {lake.uri}  version {lake.version} ")
    assert "  table " in out and "  episodes " in out and "quarantine: empty" in out
