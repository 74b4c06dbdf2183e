"""Subcommands of `robolake`, one module each, found by `robolake.cli` at start-up.

A module here defines `register(subparsers)`, which adds its parser and sets `fn` to a function
taking the parsed arguments and returning the exit code. Keep imports at module level light
(argparse, stdlib): heavy imports go inside the command function, so `robolake --help` is fast.
"""
