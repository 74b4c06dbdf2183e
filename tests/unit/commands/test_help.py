"""Every option of every command says what it does and what it defaults to (`robolake CMD --help`)."""

from __future__ import annotations

import argparse
import re

import pytest

from robolake.cli import build_parser, main
from robolake.commands import COMMANDS
from robolake.commands.common import DefaultsHelpFormatter, help_formatter


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"robolake": parser, **dict(sub.choices)}


def _help_lines(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(argument, its help as --help prints it) for every argument but -h/--version/the subcommands."""
    formatter = parser._get_formatter()
    out = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        name = a.option_strings[-1] if a.option_strings else a.dest
        out.append((name, formatter._expand_help(a) if a.help else ""))
    return out


def test_every_option_has_help_and_shows_its_default():
    undocumented, no_default = [], []
    for command, parser in _parsers().items():
        for a, (name, text) in zip(
            [
                a
                for a in parser._actions
                if not isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction))
            ],
            _help_lines(parser),
            strict=True,
        ):
            if not text.strip():
                undocumented.append(f"{command} {name}")
            elif (a.option_strings or a.nargs in ("?", "*")) and not re.search(r"\bdefault\b|\brequired\b", text):
                no_default.append(f"{command} {name}: {text!r}")
    assert not undocumented, f"options without help: {undocumented}"
    assert not no_default, "options whose help does not show the default:\n" + "\n".join(no_default)


def test_no_literal_percent_escapes_in_any_help(capsys):
    for command in ("--help", *[f"{c} --help" for c in COMMANDS]):
        with pytest.raises(SystemExit):
            main(command.split())
        out = capsys.readouterr().out
        assert "%%" not in out and "%(" not in out, command


def test_the_formatter_appends_defaults_and_keeps_written_ones():
    p = argparse.ArgumentParser(formatter_class=DefaultsHelpFormatter)
    p.add_argument("--steps", type=int, default=100, help="optimizer steps")
    p.add_argument("--fresh", action="store_true", help="start over")
    p.add_argument("--out", required=True, help="where to write")
    p.add_argument("--older-than", default="7d", help="retention (default 7d)")
    text = p.format_help()
    assert "optimizer steps (default: 100)" in text
    assert "start over (default: off)" in text
    assert "where to write (required)" in text
    assert "retention (default 7d)" in text and "(default: 7d)" not in text


def test_a_raw_description_keeps_its_layout():
    fmt = help_formatter(argparse.RawDescriptionHelpFormatter)
    assert issubclass(fmt, DefaultsHelpFormatter) and issubclass(fmt, argparse.RawDescriptionHelpFormatter)
    assert help_formatter(fmt) is fmt and help_formatter() is DefaultsHelpFormatter


def test_demo_help_says_what_it_runs(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    assert "synthetic data in a local lake" not in out
    assert "Meta-World" in out and "sim" in out


def test_eval_description_prints_one_percent_sign(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Wilson 95% interval" in out


def test_bench_name_help_is_the_benchmarks_own(capsys):
    # before: `robolake bench media --help` printed bench's own three options, as if NAME were ignored
    with pytest.raises(SystemExit) as e:
        main(["bench", "media", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--closed-loop" in out and "--demos-per-task" in out
    assert main(["bench", "media"]) == 2
    assert "--json PATH is required" in capsys.readouterr().err
