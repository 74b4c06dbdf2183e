"""`robolake view`: the command module (parser, serving, the Rerun export) and the package data it needs."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from robolake.commands import view as view_command
from robolake.lake import Lake
from robolake.view.catalog import joint_names
from robolake.view.server import warn_if_exposed

REPO = Path(__file__).resolve().parents[3]
_MAIN = (
    "import argparse, sys; from robolake.commands import view; p = argparse.ArgumentParser(); "
    "view.register(p.add_subparsers(dest='command')); a = p.parse_args(sys.argv[1:]); sys.exit(a.fn(a))"
)


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="robolake")
    view_command.register(p.add_subparsers(dest="command", required=True))
    return p.parse_args(["view", *argv])


def test_parser_defaults_to_loopback_and_keeps_version_and_tag_apart(view_lakes) -> None:
    a = _parse(str(view_lakes.jpeg))
    assert (a.host, a.port, a.version, a.tag, a.rerun, a.fn) == ("127.0.0.1", 8765, None, None, None, view_command.run)
    with pytest.raises(SystemExit):
        _parse(str(view_lakes.jpeg), "--version", "2", "--tag", "picked")
    with pytest.raises(ValueError, match="--episodes chooses what --rerun"):
        view_command.run(_parse(str(view_lakes.jpeg), "--episodes", "x"))
    with pytest.raises(ValueError, match="KEY=VALUE"):
        view_command.run(_parse(str(view_lakes.jpeg), "--storage-option", "novalue"))
    assert warn_if_exposed("127.0.0.1") is None and warn_if_exposed("localhost") is None
    assert "no authentication" in (warn_if_exposed("0.0.0.0") or "")


def test_rerun_export_holds_frames_and_joint_scalars_on_the_episode_timeline(view_lakes, tmp_path) -> None:
    chunk = pytest.importorskip("rerun.chunk")
    lake = Lake.open(str(view_lakes.jpeg), version=2)
    eid = next(e for e in sorted(lake.episode_ids()) if e.startswith("bimanual"))
    out = tmp_path / "out" / "episode.rrd"
    assert view_command.run(_parse(str(view_lakes.jpeg), "--version", "2", "--rerun", str(out), "--episodes", eid)) == 0
    assert out.stat().st_size > 0

    row = lake.episodes(where=f"episode_id = '{eid}'").to_pylist()[0]
    spec = lake.embodiments()[row["embodiment"]]
    base = "/episodes/" + eid.replace("/", "\\/")
    expected = {f"{base}/task"} | {f"{base}/camera/{c}" for c in row["cameras"]}
    for kind in ("state", "action"):
        expected |= {f"{base}/{kind}/{n.replace('[', '/').rstrip(']')}" for n in joint_names(spec, kind)}
    by_path: dict[str, list] = {}
    for c in chunk.RrdReader(str(out)).stream():
        by_path.setdefault(c.entity_path, []).append(c.to_record_batch())
    assert set(by_path) - {"/__properties"} == expected

    steps = lake.to_arrow("steps", where=f"episode_id = '{eid}'").sort_by("step_index")
    state = np.array(steps["state"].to_pylist(), dtype=np.float32)
    first = joint_names(spec, "state")[0].replace("[", "/").rstrip("]")
    batches = by_path[f"{base}/state/{first}"]
    values = [v[0] for b in batches for v in b.column("Scalars:scalars").to_pylist()]
    assert [s for b in batches for s in b.column("step").to_pylist()] == list(range(row["num_steps"]))
    np.testing.assert_array_equal(np.array(values, dtype=np.float32), state[:, 0])

    cam = row["cameras"][0]
    frames = sorted(
        (s, bytes(blob[0]), mime[0])
        for b in by_path[f"{base}/camera/{cam}"]
        for s, blob, mime in zip(
            b.column("step").to_pylist(),
            b.column("EncodedImage:blob").to_pylist(),
            b.column("EncodedImage:media_type").to_pylist(),
            strict=True,
        )
    )
    assert [s for s, _, _ in frames] == list(range(row["num_steps"]))
    stored = lake.frames().read_encoded([(eid, cam, s) for s in range(row["num_steps"])])
    assert [f for _, f, _ in frames] == stored and {m for _, _, m in frames} == {"image/jpeg"}


def test_rerun_export_refuses_an_unknown_episode_by_name(view_lakes, tmp_path) -> None:
    from robolake.view.rerun_export import export_rerun

    with pytest.raises(KeyError, match="no episode '../etc'"):
        export_rerun(Lake.open(str(view_lakes.jpeg)), tmp_path / "x.rrd", ["../etc"])
    assert not (tmp_path / "x.rrd").exists()


def test_the_command_serves_until_stopped_and_warns_off_loopback(view_lakes) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _MAIN,
            "view",
            str(view_lakes.jpeg),
            "--tag",
            "picked",
            "--port",
            "0",
            "--host",
            "0.0.0.0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert " at http://0.0.0.0:" in line, (
            line,
            proc.stderr.read() if proc.poll() is not None and proc.stderr else "",
        )
        port = int(line.split("http://0.0.0.0:")[1].split()[0])
        deadline = time.monotonic() + 60
        while True:
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/api/lake", headers={"Host": "lab-box:1234"})
                with urllib.request.urlopen(req, timeout=10) as r:
                    body = json.loads(r.read())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert body["tag"]["name"] == "picked" and body["counts"]["episodes"] == 1
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "warning: serving on 0.0.0.0" in err and "no authentication" in err


def test_the_wheel_ships_the_pages_and_the_vendored_plot_library() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["robolake.view"]
    root = REPO / "robolake" / "view"
    files = [
        p.relative_to(root).as_posix() for d in ("static", "templates") for p in (root / d).rglob("*") if p.is_file()
    ]
    assert {"static/uPlot.iife.min.js", "static/uPlot.LICENSE", "templates/episode.html"} <= set(files)
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert not unshipped, f"pyproject.toml package-data misses {unshipped}"
    extras = config["project"]["optional-dependencies"]
    assert {"starlette", "uvicorn", "rerun-sdk"} <= {d.split(">")[0].split("[")[0] for d in extras["view"]}
    dev = {d.split(">")[0].split("[")[0] for d in extras["dev"]}
    assert {"selenium", "starlette", "uvicorn", "rerun-sdk"} <= dev
