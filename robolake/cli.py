"""The `robolake` command: builds the parser from the modules in `robolake/commands/` (in the order
of `robolake.commands.COMMANDS`), quiets the libraries' logs, and runs the chosen command.

Errors reach a CLI user as one line naming what went wrong and what to do; `--debug` shows the
traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from robolake.commands import COMMANDS
from robolake.commands.common import describe_error, lake_state, quiet_logging, quiet_ray

__all__ = ["build_parser", "main"]

_NO_RAY_COMMANDS = {"info", "check", "gc", "restore", "inspect", "select", "delete", "split", "merge", "tag", "diff", "optimize", "view"}


def build_parser() -> argparse.ArgumentParser:
    from robolake import __version__

    p = argparse.ArgumentParser(prog="robolake", description="Robot episodes -> Lance lake -> packed batches -> trainer.")
    p.add_argument("--version", action="version", version=f"robolake {__version__}")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    p.add_argument("--verbose", action="store_true", help="show the log lines of Lance, Ray and robolake")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"robolake.commands.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug / --verbose are accepted anywhere on the line, not only before the subcommand.
    flags = [a for a in argv if a in ("--debug", "--verbose")]
    argv = [a for a in argv if a not in ("--debug", "--verbose")]
    quiet_logging("--verbose" in flags)  # before any command module imports lance or ray
    parser = build_parser()
    args, extra = parser.parse_known_args(flags + argv)
    if extra and args.command != "bench":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra  # a benchmark's own options
    if args.command not in _NO_RAY_COMMANDS:
        quiet_ray()
    if args.debug:
        return int(args.fn(args))
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        print(f"robolake {args.command}: interrupted{lake_state(args)}", file=sys.stderr)
        return 130
    except Exception as e:  # one line for a CLI user; --debug shows the traceback
        print(f"robolake {args.command}: {describe_error(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
