"""The `robolake` command: builds the parser from the modules in `robolake/commands/` (in the order
of `robolake.commands.COMMANDS`), quiets the libraries' logs, and runs the chosen command.

Errors reach a CLI user as one line naming what went wrong and what to do; `--debug` shows the
traceback instead. Ctrl-C and SIGTERM print one line whenever they come (SIGTERM exits 143),
also while the command's imports (Lance, Ray, torch: seconds) are still loading. A reader that
stops early (`robolake info --json | head`) ends the command quietly, as it ends `cat`. A
misspelt command gets the names it is closest to.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import signal
import sys
import threading

from robolake.commands import COMMANDS, module_name
from robolake.commands.common import (
    checkpoint_state,
    describe_error,
    help_formatter,
    lake_state,
    quiet_logging,
    quiet_ray,
)

__all__ = ["build_parser", "main"]

_NO_RAY_COMMANDS = {
    "info",
    "check",
    "gc",
    "restore",
    "inspect",
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
    "view",
}
_GLOBAL_FLAGS = ("--debug", "--verbose")
_EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
_EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports `cat` stopped by `head`
_EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports `kill`, `timeout` or a scheduler's cancel


class _Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the command unwinds as from Ctrl-C (writers abandon their leases and files) and
    prints one line, not a traceback or Ray's crash dump."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


def _catch_sigterm() -> object:
    """Route SIGTERM to `_Terminated` while the command runs; returns the handler to put back."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def build_parser() -> argparse.ArgumentParser:
    from robolake import __version__

    p = argparse.ArgumentParser(
        prog="robolake",
        description="Robot episodes -> Lance lake -> packed batches -> trainer.",
        formatter_class=help_formatter(),
    )
    p.add_argument("--version", action="version", version=f"robolake {__version__}")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    p.add_argument("--verbose", action="store_true", help="show the log lines of Lance, Ray and robolake")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"robolake.commands.{module_name(name)}").register(sub)
    for command in sub.choices.values():  # every option's help ends with its default
        base = command.formatter_class
        if isinstance(base, type) and issubclass(base, argparse.HelpFormatter):
            command.formatter_class = help_formatter(base)
    return p


def _check_command(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """A command name that is not one: say which ones it is closest to (argparse lists all 21)."""
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is None or word in COMMANDS:
        return
    close = difflib.get_close_matches(word, COMMANDS, n=3, cutoff=0.5)
    if close:
        parser.error(
            f"unknown command {word!r}; did you mean {' or '.join(close)}? (robolake --help lists every command)"
        )
    parser.error(f"unknown command {word!r}; choose one of {', '.join(COMMANDS)}")


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail on the closed pipe too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no file descriptor (a notebook, a test's capture)
        pass


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug / --verbose are accepted anywhere on the line, not only before the subcommand.
    flags = [a for a in argv if a in _GLOBAL_FLAGS]
    argv = [a for a in argv if a not in _GLOBAL_FLAGS]
    try:
        quiet_logging("--verbose" in flags)  # before any command module imports lance or ray
        parser = build_parser()
        _check_command(parser, argv)
        args, extra = parser.parse_known_args(flags + argv)
    except KeyboardInterrupt:  # while the parser's imports load: nothing has started yet
        print("robolake: interrupted", file=sys.stderr)
        return _EXIT_INTERRUPTED
    if extra and args.command != "bench":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra  # a benchmark's own options
    previous_sigterm = _catch_sigterm()
    try:
        if args.command not in _NO_RAY_COMMANDS:
            if not args.debug:  # Ray's C++ handler answers SIGTERM with a stack dump and an abort; ours says one line
                os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
            quiet_ray()  # imports Ray (seconds): inside the handler, so Ctrl-C here is one line too
        rc = int(args.fn(args))
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return rc
    except BrokenPipeError:  # the reader stopped (`| head`): what it wanted was written
        _quiet_stdout()
        return _EXIT_BROKEN_PIPE
    except KeyboardInterrupt as e:
        if args.debug:
            raise
        what, code = (
            ("terminated", _EXIT_TERMINATED) if isinstance(e, _Terminated) else ("interrupted", _EXIT_INTERRUPTED)
        )
        print(f"robolake {args.command}: {what}{lake_state(args)}{checkpoint_state(args)}", file=sys.stderr)
        return code
    except SystemExit as e:  # ray.init installs its own SIGTERM handler: sys.exit(SIGTERM)
        if args.debug or e.code != signal.SIGTERM:
            raise
        print(f"robolake {args.command}: terminated{lake_state(args)}{checkpoint_state(args)}", file=sys.stderr)
        return _EXIT_TERMINATED
    except Exception as e:  # one line for a CLI user; --debug shows the traceback
        if args.debug:
            raise
        print(f"robolake {args.command}: {describe_error(e)}", file=sys.stderr)
        return 2
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
