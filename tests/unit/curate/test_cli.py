"""The curation commands as a user runs them: one line each, errors as one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from robolake.cli import main
from robolake.lake import Lake


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_curation_session_on_the_command_line(lake_dir: Path, tmp_path: Path, capsys):
    lake = str(lake_dir)
    v = Lake.open(lake).version
    code, out, err = _run(capsys, "delete", lake, "--episodes", "nope", "--reason", "x")
    assert code == 2 and err.count("\n") == 1 and "has no episode 'nope'" in err and "Traceback" not in err
    assert Lake.open(lake).version == v
    code, out, _ = _run(capsys, "select", lake, "--where", "embodiment = 'humanoid_44dof'", "--tag", "humanoids")
    assert code == 0 and "tag 'humanoids' names 2 episodes" in out
    code, out, _ = _run(
        capsys, "delete", lake, "--where", "embodiment = 'humanoid_44dof'", "--reason", "bad rig", "--json"
    )
    assert code == 0 and json.loads(out)["episodes"] == 2 and json.loads(out)["version"] == v + 1
    code, out, _ = _run(capsys, "diff", lake, str(v), str(v + 1))
    assert code == 0 and "2 removed" in out and "delete" in out and "bad rig" in out
    code, out, _ = _run(capsys, "diff", lake, "humanoids", str(v + 1))  # a tag resolves where a version does
    assert code == 0
    code, out, _ = _run(capsys, "split", lake, "--val", "0.5", "--stratify", "embodiment", "--seed", "1")
    assert code == 0 and "split into train 2, val 2" in out
    code, out, _ = _run(capsys, "info", lake, "--split", "val", "--json")
    assert code == 0
    code, out, _ = _run(capsys, "tag", lake)
    assert code == 0 and "split:val" in out and "humanoids" in out
    code, out, err = _run(capsys, "tag", lake, "humanoids")
    assert code == 2 and "already names" in err
    gone = sorted(e for e in Lake.open(lake, version=v).episode_ids() if e.startswith("humanoid"))
    code, out, _ = _run(capsys, "restore", lake, "--episodes", *gone)
    assert code == 0 and "2 episodes restored" in out
    code, out, _ = _run(capsys, "optimize", lake)
    assert code == 0 and "fragments" in out
    code, out, err = _run(capsys, "merge", lake, "--into", str(tmp_path / "m"))
    assert code == 2 and "at least two lakes" in err
    code, out, err = _run(capsys, "select", lake, "--where", "__import__('os')")
    assert code == 2 and "unknown function" in err and err.count("\n") == 1


def test_pack_reads_a_split(lake_dir: Path, tmp_path: Path, capsys):
    from robolake.curate import SplitConfig, split
    from robolake.packers import read_manifest

    parts = split(str(lake_dir), SplitConfig(val=0.5, stratify=("embodiment",), seed=2)).parts
    code, out, err = _run(
        capsys,
        "pack",
        str(lake_dir),
        str(tmp_path / "p"),
        "--split",
        "val",
        "--tokens-per-view",
        "16",
        "--max-tokens",
        "1024",
        "--no-progress",
    )
    assert code == 0, err
    m = read_manifest(str(tmp_path / "p"))
    assert m.lake_tag == "split:val"
    steps = sum(
        r["num_steps"] for r in Lake.open(str(lake_dir)).episodes().to_pylist() if r["episode_id"] in set(parts["val"])
    )
    assert m.num_samples == steps
