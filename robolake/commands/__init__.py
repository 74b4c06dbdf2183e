"""Subcommands of `robolake`, one module each; `COMMANDS` lists them in the order `robolake --help` shows.

A module here defines `register(subparsers)`, which adds its parser and sets `fn` to its `run`
function: it takes the parsed arguments and returns the exit code. What several commands share
(progress bars, quiet logs, the lake summary, error lines) is in `robolake.commands.common`. Keep
imports at module level light (argparse, stdlib, `common`): heavy imports go inside `run`, so
`robolake --help` is fast. A new command is a new module and one more name in `COMMANDS` (a
command of two words is spelt with a hyphen, its module with an underscore: `module_name`).
"""

__all__ = ["COMMANDS", "module_name"]

# The flow first (ingest -> info -> pack -> train, the demo of all of it, benchmarks), then the tools,
# then the curation verbs.
COMMANDS: tuple[str, ...] = (
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


def module_name(command: str) -> str:
    """The module of `robolake COMMAND` in this package (`convert-checkpoint` -> `convert_checkpoint`)."""
    return command.replace("-", "_")
