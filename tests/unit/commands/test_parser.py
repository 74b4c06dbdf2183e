"""The `robolake` parser: which commands it has, in which order, and what each one accepts."""

from __future__ import annotations

import argparse
import importlib
import pkgutil

import pytest

import robolake.commands
from robolake.cli import build_parser, main
from robolake.commands import COMMANDS, module_name

# Every command's positional arguments and long options, as `robolake CMD --help` lists them.
EXPECTED = {
    "ingest": (
        ["src", "lake"],
        [
            "--format",
            "--map",
            "--state-only",
            "--frames",
            "--crf",
            "--access-copy",
            "--resample",
            "--session",
            "--streams",
            "--max-read-gb",
            "--embodiment",
            "--ray-address",
            "--no-progress",
        ],
    ),
    "info": (["lake"], ["--version", "--tag", "--split", "--json", "--episodes"]),
    "pack": (
        ["lake", "out"],
        [
            "--max-tokens",
            "--algorithm",
            "--window",
            "--horizon",
            "--tokens-per-view",
            "--max-text-tokens",
            "--step-stride",
            "--seed",
            "--lake-version",
            "--tag",
            "--split",
            "--reject-oversize",
            "--mix",
            "--mix-share",
            "--image-size",
            "--history",
            "--overwrite",
            "--webdataset",
            "--no-progress",
        ],
    ),
    "train": (
        [],
        [
            "--shards",
            "--lake",
            "--out",
            "--tag",
            "--split",
            "--allow-stale",
            "--preset",
            "--family",
            "--steps",
            "--layout",
            "--lr",
            "--sequences-per-batch",
            "--max-tokens",
            "--fp8",
            "--workers",
            "--torch-threads",
            "--seed",
            "--checkpoint-every",
            "--device",
            "--fresh",
            "--record-samples",
            "--no-progress",
        ],
    ),
    "demo": ([], ["--out", "--quick", "--family"]),
    "bench": (["which"], ["--json", "--quick"]),
    "check": (["lake"], ["--version", "--quick"]),
    "convert-checkpoint": (["run"], ["--trust"]),
    "eval": (
        [],
        [
            "--sim",
            "--tasks",
            "--checkpoint",
            "--episodes",
            "--replan",
            "--noise-scale",
            "--workers",
            "--envs-per-worker",
            "--seed",
            "--videos",
            "--no-baselines",
            "--json",
            "--out",
            "--device",
            "--record-to",
            "--torch-threads",
        ],
    ),
    "export": (
        ["lake", "out"],
        [
            "--format",
            "--embodiment",
            "--task",
            "--task-contains",
            "--success",
            "--version",
            "--tag",
            "--split",
            "--crf",
            "--copy-video",
            "--fps",
            "--no-progress",
        ],
    ),
    "lineage": (["run"], ["--storage-option", "--json"]),
    "gc": (["lake"], ["--older-than", "--dry-run"]),
    "inspect": (["src"], ["--format", "--map", "--state-only", "--session", "--suggest-map", "--json"]),
    "restore": (["lake", "version"], ["--episodes", "--reason"]),
    "rl": (
        [],
        [
            "--sim",
            "--tasks",
            "--init",
            "--mode",
            "--steps",
            "--out",
            "--workers",
            "--envs-per-worker",
            "--execute-steps",
            "--sigma",
            "--start-noise",
            "--lr",
            "--micro-batch",
            "--max-staleness",
            "--staleness-mode",
            "--max-batch",
            "--deadline-ms",
            "--round-deadline-ms",
            "--latency",
            "--latency-scale-ms",
            "--latency-shape",
            "--image-size",
            "--worker-cpus",
            "--generation-cpus",
            "--generation-gpus",
            "--learner-cpus",
            "--learner-gpus",
            "--address",
            "--seed",
            "--log-every",
            "--no-learn",
            "--record-to",
        ],
    ),
    "select": (["lake"], ["--where", "--into", "--tag", "--replace", "--reason", "--json"]),
    "delete": (["lake"], ["--episodes", "--where", "--reason", "--json"]),
    "split": (["lake"], ["--val", "--test", "--by", "--stratify", "--seed", "--version", "--replace"]),
    "merge": (["lakes"], ["--into", "--reason", "--json"]),
    "tag": (["lake", "name"], ["--version", "--reason", "--replace", "--delete", "--list"]),
    "diff": (["lake", "a", "b"], ["--json"]),
    "optimize": (["lake"], ["--upgrade", "--access-copy"]),
    "align": (["lake"], ["--fps", "--rule", "--where", "--json"]),
    "resample": (["lake"], ["--fps", "--rule", "--where", "--json"]),
    "doctor": (["lake"], ["--version", "--tag", "--json", "--fail-on", "--update", "--html"]),
    "dedup": (["lake"], ["--reason", "--dry-run", "--json"]),
    "trim": (
        ["lake"],
        ["--idle", "--where-steps", "--head", "--tail", "--where", "--min-steps", "--reason", "--dry-run", "--json"],
    ),
    "view": (
        ["lake"],
        ["--version", "--tag", "--split", "--host", "--port", "--storage-option", "--rerun", "--episodes"],
    ),
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_commands_and_their_order():
    # the flow first, then the tools (the order `robolake --help` has always listed), then curation
    assert COMMANDS == (
        "ingest",
        "info",
        "pack",
        "train",
        "demo",
        "bench",
        "check",
        "convert-checkpoint",
        "eval",
        "export",
        "gc",
        "inspect",
        "lineage",
        "restore",
        "rl",
        "select",
        "delete",
        "split",
        "merge",
        "tag",
        "diff",
        "optimize",
        "align",
        "resample",
        "doctor",
        "dedup",
        "trim",
        "view",
    )
    assert list(_subparsers()) == list(COMMANDS)


def test_every_module_of_the_package_is_a_listed_command():
    modules = {m.name for m in pkgutil.iter_modules(robolake.commands.__path__)}
    assert modules - {"common"} == {module_name(c) for c in COMMANDS}
    for name in COMMANDS:
        module = importlib.import_module(f"robolake.commands.{module_name(name)}")
        assert {"register", "run"} <= set(module.__all__), name
        assert _subparsers()[name].get_default("fn") is module.run, name


def test_top_level_help_lists_the_commands_in_order(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert "{" + ",".join(COMMANDS) + "}" in out
    # a command's own line is indented by 4; wrapped help text continues further in
    lines = [
        line.split()[0]
        for line in out.splitlines()
        if line.startswith("    ") and not line.startswith("     ") and line.split()[0] in COMMANDS
    ]
    assert lines == list(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_lists_its_arguments(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert out.startswith(f"usage: robolake {command} ")
    positionals, options = EXPECTED[command]
    parser = _subparsers()[command]
    assert [a.dest for a in parser._actions if not a.option_strings] == positionals
    assert [a.option_strings[-1] for a in parser._actions if a.option_strings and a.dest != "help"] == options
    missing = [name for name in positionals + options if name not in out]
    assert not missing, f"robolake {command} --help does not mention {missing}"


def test_ingest_help_lists_the_source_formats(capsys):
    from robolake.lake.sources import formats

    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    out = capsys.readouterr().out
    assert all(f"  {f.name:<10} {f.description}" in out for f in formats())
