"""`robolake bench peers` says in one line what to install when FFmpeg's libraries are missing,
before it builds the LeRobot environment (minutes, gigabytes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from robolake.bench import peers

REPO = Path(__file__).resolve().parents[3]


def test_missing_ffmpeg_stops_before_the_env_build(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(peers, "FFMPEG_SONAMES", ("libavutil-robolake-test-absent.so.99",))
    monkeypatch.setattr(peers.sys, "platform", "linux")

    def no_build(*a, **k):
        raise AssertionError("the environment build started before the FFmpeg check")

    monkeypatch.setattr(peers, "ensure_env", no_build)
    rc = peers.main(["--json", str(tmp_path / "out.json"), "--only", "loader", "--cache", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1
    assert "scripts/install_ffmpeg.sh" in err[0] and "apt-get install ffmpeg" in err[0] and "libavutil" in err[0]
    assert not (tmp_path / "out.json").exists()


def test_ffmpeg_found_when_a_library_loads(monkeypatch):
    monkeypatch.setattr(peers.sys, "platform", "linux")
    monkeypatch.setattr(peers, "FFMPEG_SONAMES", ("libc.so.6",))  # any loadable soname stands in
    assert peers.ffmpeg_missing() is None


def test_help_names_the_install_script(capsys):
    with pytest.raises(SystemExit):
        peers.main(["--help"])
    assert "scripts/install_ffmpeg.sh" in capsys.readouterr().out


def test_install_script_is_valid_bash():
    script = REPO / "scripts" / "install_ffmpeg.sh"
    assert script.stat().st_mode & 0o100, "scripts/install_ffmpeg.sh must be executable"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
