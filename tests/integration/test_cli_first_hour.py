"""The mistakes a new user makes get one honest line each, with flags that exist (issue [9])."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robolake.cli import build_parser, main

REPO = str(Path(__file__).resolve().parents[2])


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("robolake ")


def test_every_positional_argument_is_described():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {a.dest}"
        for name, p in sub.choices.items()
        for a in p._actions
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction) and not a.help
    ]
    assert not missing, f"positional arguments without help: {missing}"


def test_oversize_samples_name_the_cli_flags(packed_data, tmp_path, capsys):
    rc = main(["pack", str(packed_data.lake), str(tmp_path / "p"), "--max-tokens", "32", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--max-tokens" in err and "--reject-oversize" in err and "on_oversize" in err
    assert "Traceback" not in err


def test_rejecting_every_sample_exits_non_zero(packed_data, tmp_path, capsys):
    rc = main(
        ["pack", str(packed_data.lake), str(tmp_path / "p"), "--max-tokens", "32", "--reject-oversize", "--no-progress"]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "nothing was packed" in err


def test_pack_says_when_packing_cannot_beat_padding(packed_data, tmp_path, capsys):
    # one view and a capped instruction: every sample has the same length
    rc = main(
        [
            "pack",
            str(packed_data.lake),
            str(tmp_path / "p"),
            "--max-tokens",
            "1000",
            "--tokens-per-view",
            "16",
            "--max-text-tokens",
            "0",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "packing cannot beat" in out or "gains nothing" in out or "suggestion: --max-tokens" in out


def test_rerunning_a_finished_train_says_what_to_do(packed_data, tmp_path, capsys):
    # The README's train line, run twice: the second run says the run is finished and exits 0.
    args = [
        "train",
        "--shards",
        str(packed_data.packed),
        "--out",
        str(tmp_path / "run"),
        "--steps",
        "2",
        "--workers",
        "0",
        "--device",
        "cpu",
        "--no-progress",
    ]
    assert main(args) == 0
    capsys.readouterr()
    rc = main(args)
    captured = capsys.readouterr()
    assert rc == 0 and captured.err == ""
    assert "already finished: trained to step 2" in captured.out and "nothing to do" in captured.out
    assert "--steps N with N > 2" in captured.out and "--fresh" in captured.out
    assert main([*args[:6], "3", *args[7:]]) == 0  # more steps: it resumes from step 2
    assert "trained steps 3..3" in capsys.readouterr().out


def test_pack_defaults_then_train_preset_tiny(packed_data, tmp_path, capsys):
    # `robolake pack LAKE OUT` with no --tokens-per-view, then `robolake train --preset tiny` on it
    out = tmp_path / "packed"
    assert main(["pack", str(packed_data.lake), str(out), "--no-progress"]) == 0
    capsys.readouterr()
    rc = main(
        [
            "train",
            "--shards",
            str(out),
            "--preset",
            "tiny",
            "--steps",
            "1",
            "--out",
            str(tmp_path / "run"),
            "--workers",
            "0",
            "--device",
            "cpu",
            "--no-progress",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "trained steps 1..1" in captured.out and "threads     torch threads" in captured.out


def test_commands_print_only_robolake_lines(packed_data, tmp_path):
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("LANCE_LOG", None)
    res = subprocess.run(
        [sys.executable, "-m", "robolake", "ingest", str(packed_data.syn), str(tmp_path / "lake"), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    noise = ["No existing dataset", "fork-safe", "Token authentication", "Progress bars disabled", "INFO"]
    assert not [n for n in noise if n in res.stderr + res.stdout], res.stderr[-2000:]


def test_bench_runs_from_the_installed_package(capsys, tmp_path):
    from robolake.bench import available

    names = available()
    assert {"ingest", "pack", "load", "train", "e2e"} <= set(names)
    assert main(["bench", "nope", "--json", str(tmp_path / "x.json")]) == 2
    assert "unknown benchmark" in capsys.readouterr().err


def test_bench_passes_its_own_options_through(tmp_path, capsys):
    # `robolake bench rl` hands the options it does not know to robolake.bench.rl's own parser
    with pytest.raises(SystemExit) as e:
        main(["bench", "rl", "--json", str(tmp_path / "rl.json"), "--quick", "--sim", "point", "--workers", "many"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "robolake bench rl: error: argument --workers: invalid int value: 'many'" in err
    assert not (tmp_path / "rl.json").exists()


def test_bench_writes_its_json_where_told(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("gpu_check measures for real on CUDA (minutes)")
    path = tmp_path / "out" / "gpu.json"
    assert main(["bench", "gpu_check", "--json", str(path), "--quick"]) == 0
    assert json.loads(path.read_text())["cuda"] is False
    assert "gpu_check: CUDA is not available" in capsys.readouterr().out
