"""What a CLI user sees when things go wrong early: Ctrl-C during start-up, a closed pipe, a
misspelt command, a wrong data path, a finished run started again (issue [14], round two)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robolake.cli import main

REPO = str(Path(__file__).resolve().parents[3])
_MAIN = "import sys; from robolake.cli import main; sys.exit(main(sys.argv[1:]))"


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("LANCE_LOG", None)  # as a user's shell has it (another test may have turned Lance's log on)
    return env


def _loaded(pid: int, fragment: str) -> bool:
    try:
        return fragment in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc to see when Ray's library is loading")
def test_ctrl_c_while_ray_is_importing_is_one_line(tmp_path):
    # Interrupt the command while `import ray` runs (its _raylet extension is being mapped in):
    # that import used to sit outside the handler and print a full traceback.
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "pack", str(tmp_path / "no-lake"), str(tmp_path / "out")],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not _loaded(proc.pid, "_raylet") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode == 130, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("robolake") and lines[0].endswith("interrupted"), err


def test_a_reader_that_stops_early_ends_the_command_quietly(packed_data):
    # `robolake info --json LAKE | head -0`: the pipe's reader is gone before anything is written.
    read, write = os.pipe()
    os.close(read)
    try:
        res = subprocess.run(
            [sys.executable, "-c", _MAIN, "info", "--json", str(packed_data.lake)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            timeout=300,
        )
    finally:
        os.close(write)
    assert res.stderr == "", res.stderr[-2000:]
    assert res.returncode == 141  # 128 + SIGPIPE, as `cat` reports it


@pytest.mark.parametrize(("typo", "suggestion"), [("trian", "train"), ("ingset", "ingest"), ("evl", "eval")])
def test_a_misspelt_command_gets_a_did_you_mean(typo, suggestion, capsys):
    with pytest.raises(SystemExit) as e:
        main([typo, "--out", "x"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"unknown command {typo!r}; did you mean {suggestion}" in err


def test_a_command_like_nothing_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--debug", "frobnicate"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "unknown command 'frobnicate'; choose one of ingest, info, pack, train" in err


def test_train_refuses_a_path_that_is_no_pack_output_before_drawing_anything(tmp_path, capsys):
    (tmp_path / "notpacked").mkdir()
    rc = main(["train", "--shards", str(tmp_path / "notpacked"), "--out", str(tmp_path / "run"), "--steps", "2"])
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1, err  # no progress bar above the error
    assert "is not a `robolake pack` output" in lines[0] and "robolake pack LAKE" in lines[0] and "--lake" in lines[0]
    assert "Lake.create" not in err and not (tmp_path / "run").exists()


def test_train_says_a_pack_output_given_as_a_lake_is_shards(packed_data, tmp_path, capsys):
    rc = main(["train", "--lake", str(packed_data.packed), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and f"pass it as --shards {packed_data.packed}" in err


def test_eval_names_what_it_wrote():
    from robolake.commands.eval import wrote_line

    result = {"json": "o/eval.json", "plot": "o/success.png", "videos": ["o/videos/a.gif", "o/videos/b.gif"]}
    line = wrote_line(result, "o")
    assert line.startswith("wrote o/eval.json, o/success.png") and "2 rollout GIFs in o/videos/" in line
    assert "success or failure" in line
