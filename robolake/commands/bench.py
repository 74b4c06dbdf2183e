"""`robolake bench NAME --json PATH [--quick] [options]`: run `robolake.bench.NAME.main`.

Options this parser does not know (e.g. `--data PATH`) are the benchmark's own: `robolake.cli`
collects them into `args.extra` and they are passed on after `--json` and `--quick`.
"""

from __future__ import annotations

import argparse
import sys

from robolake.commands.common import quiet_ray

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    # Its own -h: `robolake bench NAME --help` is the benchmark's help, not this parser's.
    s = sub.add_parser("bench", help="run a benchmark, print a table and write JSON", add_help=False)
    s.add_argument(
        "-h",
        "--help",
        action="store_true",
        help="show this help; with NAME, the benchmark's own options (default: off)",
    )
    s.add_argument(
        "which",
        nargs="?",
        help="the benchmark (a module of robolake.bench: ingest, pack, load, train, e2e, ...; required)",
    )
    s.add_argument("--json", default=None, help="write the results here (required)")
    s.add_argument("--quick", action="store_true", help="a smaller run (minutes, not tens of minutes)")
    s.epilog = "Other options (e.g. --data PATH) are passed to the benchmark; `robolake bench NAME --help` lists them."
    s.set_defaults(fn=run, bench_parser=s)


def run(args: argparse.Namespace) -> int:
    import importlib

    from robolake.bench import available

    if args.which is None:  # as argparse's own --help: print, exit 0 (a missing NAME is a usage error)
        if args.help:
            args.bench_parser.print_help()
            args.bench_parser.exit(0)
        args.bench_parser.error("the benchmark NAME is required")
    if args.which not in available():
        print(
            f"robolake bench: unknown benchmark {args.which!r}; choose one of {', '.join(available())}", file=sys.stderr
        )
        return 2
    module = importlib.import_module(f"robolake.bench.{args.which}")
    if args.help:
        return int(module.main(["--help"]) or 0)  # the benchmark's argparse prints and exits 0
    if args.json is None:
        print(f"robolake bench {args.which}: --json PATH is required (where the results are written)", file=sys.stderr)
        return 2
    quiet_ray()
    argv = ["--json", args.json] + (["--quick"] if args.quick else []) + list(args.extra)
    rc = module.main(argv)
    return int(rc or 0)
