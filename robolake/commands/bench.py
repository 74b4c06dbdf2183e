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
    s = sub.add_parser("bench", help="run a benchmark, print a table and write JSON")
    s.add_argument("which", help="the benchmark (a module of robolake.bench: ingest, pack, load, train, e2e, ...)")
    s.add_argument("--json", required=True, help="write the results here")
    s.add_argument("--quick", action="store_true", help="a smaller run (minutes, not tens of minutes)")
    s.epilog = "Other options (e.g. --data PATH) are passed to the benchmark; `robolake bench NAME --json X --help` lists them."
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    import importlib

    from robolake.bench import available

    if args.which not in available():
        print(f"robolake bench: unknown benchmark {args.which!r}; choose one of {', '.join(available())}", file=sys.stderr)
        return 2
    quiet_ray()
    module = importlib.import_module(f"robolake.bench.{args.which}")
    argv = ["--json", args.json] + (["--quick"] if args.quick else []) + list(args.extra)
    rc = module.main(argv)
    return int(rc or 0)
