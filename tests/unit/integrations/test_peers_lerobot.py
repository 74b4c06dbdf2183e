"""`robolake bench peers`: one line saying what to install when FFmpeg's libraries are missing,
before it builds the LeRobot environment (minutes, gigabytes); the adapter section's JSON keys and plot."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from robolake.bench import peers
from robolake.bench.peers import env, measure, process

REPO = Path(__file__).resolve().parents[3]


def test_missing_ffmpeg_stops_before_the_env_build(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(env, "FFMPEG_SONAMES", ("libavutil-robolake-test-absent.so.99",))
    monkeypatch.setattr(env.sys, "platform", "linux")

    def no_build(*a, **k):
        raise AssertionError("the environment build started before the FFmpeg check")

    for module in (env, process, peers):  # wherever a build could start from
        monkeypatch.setattr(module, "ensure_env", no_build)
    monkeypatch.setattr(measure, "measure_adapter", no_build)
    rc = peers.main(["--json", str(tmp_path / "out.json"), "--only", "loader", "--cache", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1
    assert "scripts/install_ffmpeg.sh" in err[0] and "apt-get install ffmpeg" in err[0] and "libavutil" in err[0]
    assert not (tmp_path / "out.json").exists()


def test_ffmpeg_found_when_a_library_loads(monkeypatch):
    monkeypatch.setattr(env.sys, "platform", "linux")
    monkeypatch.setattr(env, "FFMPEG_SONAMES", ("libc.so.6",))  # any loadable soname stands in
    assert peers.ffmpeg_missing() is None


def test_help_names_the_install_script(capsys):
    with pytest.raises(SystemExit):
        peers.main(["--help"])
    assert "scripts/install_ffmpeg.sh" in capsys.readouterr().out


def test_install_script_is_valid_bash():
    script = REPO / "scripts" / "install_ffmpeg.sh"
    assert script.stat().st_mode & 0o100, "scripts/install_ffmpeg.sh must be executable"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def _ratio(median: float) -> dict:
    one = {"median": median, "min": median * 0.9, "max": median * 1.1, "repeats": 3, "stable": True}
    return {"wall": one, "cpu": one, "target_applies_to": "wall", "median": median}


def test_adapter_keys_are_the_issues_json_keys(tmp_path):
    figures = {
        "lancedb_speedup_local": _ratio(2.5),
        "adapter_speedup": _ratio(12.0),
        "adapter_vs_lancedb": _ratio(1.5),
        "versions": {"lerobot-lancedb": "0.3.1"},
        "items": {"equal": True, "items": 30, "mismatches": []},
        "training": {
            "adapter": {"losses": [3.0, 2.0, 1.5], "data_wait_fraction": 0.02, "versions": {}},
            "lerobot": {"losses": [3.0, 2.1, 1.4], "data_wait_fraction": 0.4, "versions": {}},
        },
        "loaders": {},
    }
    keys = peers.adapter_keys(figures)
    assert keys["lancedb"]["speedup_local"] == 2.5 and keys["lancedb"]["speedup_s3"] is None
    assert keys["lancedb"]["speedup_s3_reason"]
    assert keys["lerobot_adapter"]["speedup"] == 12.0 and keys["lerobot_adapter"]["items_equal"] is True
    assert "versions" not in keys["lerobot_training"]["adapter"]
    figures["items"]["equal"] = False
    assert peers.adapter_keys(figures)["lerobot_adapter"]["items_equal"] is False
    png = tmp_path / "curves.png"
    peers.plot_training(figures["training"], png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_s3_arm_fills_lancedb_speedup_s3(capsys):
    figures = {
        "lancedb_speedup_local": _ratio(2.5),
        "adapter_speedup": _ratio(12.0),
        "adapter_vs_lancedb": _ratio(1.5),
        "versions": {"lerobot-lancedb": "0.3.1"},
        "items": {"equal": True},
        "training": {},
        "loaders": {"robolake_s3": {"samples_per_s": 90.0, "peak_rss_bytes": 2**30}},
        "s3": {"lancedb_speedup": _ratio(4.0), "adapter_vs_lancedb": _ratio(3.0), "server_cpu_s": {}},
    }
    keys = peers.adapter_keys(figures)
    assert keys["lancedb"]["speedup_s3"] == 4.0 and "speedup_s3_reason" not in keys["lancedb"]
    assert keys["lancedb"]["speedup_s3_spread"]["wall"]["min"] == pytest.approx(3.6)
    assert keys["lerobot_adapter"]["vs_lancedb_s3"]["median"] == 3.0
    assert "lancedb_speedup" not in keys["adapter_s3"] and "server_cpu_s" in keys["adapter_s3"]
    peers.print_result({"machine": {"cpus": 2}, **keys})
    out = capsys.readouterr().out
    assert "lancedb.speedup_s3 (the same, from S3)" in out and "robolake_s3 samples/s" in out

    figures["s3"] = {"skipped": "not measured: the local S3 server (moto) is not importable (x)"}
    keys = peers.adapter_keys(figures)
    assert keys["lancedb"]["speedup_s3"] is None and "moto" in keys["lancedb"]["speedup_s3_reason"]
