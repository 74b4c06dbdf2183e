"""What the `robolake` subcommands share: quiet logs, progress bars, the lake summary, error
lines, and the help formatter that shows every option's default.

`quiet_logging` runs once at start-up (from `robolake.cli.main`), before any command imports
Lance or Ray; `quiet_ray` runs again after Ray is imported, because `import ray` installs its own
INFO handler. Both read one verbosity switch, so they live together here.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from typing import Any

from robolake.errors import one_line

__all__ = [
    "DefaultsHelpFormatter",
    "add_tag_arguments",
    "checkpoint_state",
    "help_formatter",
    "open_lake_at",
    "tag_of",
    "describe_error",
    "print_curation",
    "lake_state",
    "print_summary",
    "quiet_logging",
    "quiet_ray",
    "tqdm_progress",
    "train_progress_bar",
]

_RAY_LOGGERS = ("ray", "ray.data", "ray.train", "ray.tune")
_verbose = False


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record arrives (tests and notebooks swap it)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def quiet_logging(verbose: bool) -> None:
    """A CLI user sees robolake's own lines and progress bars, not the libraries' (unless --verbose).

    Lance's Rust log level is read from LANCE_LOG when lance loads, so this runs before any
    command imports it; Ray's notices (token authentication, disabled progress bars) are Python
    log records of the `ray` logger; "lance is not fork-safe" is a Python warning.
    """
    import warnings

    global _verbose
    _verbose = verbose
    root = logging.getLogger("robolake")
    handler = next((h for h in root.handlers if isinstance(h, _StderrHandler)), None)
    if handler is None:  # once per process: main() may run many times in one interpreter
        handler = _StderrHandler()
        root.addHandler(handler)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s" if verbose else "%(message)s"))
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    root.propagate = False
    if verbose:
        os.environ.setdefault("LANCE_LOG", "info")
        return
    os.environ.setdefault("LANCE_LOG", "error")
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    for name in _RAY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="lance is not fork-safe")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def quiet_ray() -> None:
    """Ray Data's own progress bars and start-up notices stay off: robolake prints its own."""
    try:
        from ray.data import DataContext

        ctx = DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
    except Exception:  # older Ray without these knobs: its own bars are fine
        pass
    if not _verbose:
        # `import ray` installs its own INFO handler on the "ray" logger: lower it afterwards.
        for name in _RAY_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)


def tqdm_progress() -> Any:
    """A progress(stage, done, total) callback (ingest, pack, export) drawing one tqdm bar per stage."""
    from tqdm import tqdm

    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            unit = "sequences" if stage == "pack" else "episodes"
            bar = bars[stage] = tqdm(total=total, desc=f"{stage:>6}", unit=f" {unit}", leave=True)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return progress


def train_progress_bar(total: int, desc: str = "train") -> Any:
    """A tqdm bar fed by the trainer's progress callback: step, loss, samples/s (total over total), ETA.

    The bar is drawn at the first step, not when it is made: a run that fails while it checks its
    inputs or opens its data prints its one error line and no empty bar above it.
    """
    from tqdm import tqdm

    bars: list[Any] = []

    def progress(p: Any) -> None:
        if not bars:
            bars.append(tqdm(total=total, desc=desc, unit="step", leave=True))
        bar = bars[0]
        if bar.total != p.total_steps:
            bar.total = p.total_steps
        bar.n = p.step
        threads = p.torch_threads
        bar.set_postfix_str(
            f"loss {p.loss:.4f}, {p.samples_per_s:,.1f} samples/s, data wait {p.data_wait_fraction:.1%}"
            + (f", {threads} thread{'s' if threads != 1 else ''}" if threads else ""),
            refresh=False,
        )
        bar.refresh()
        if p.step >= p.total_steps:
            bar.close()

    return progress


def print_summary(summary: dict[str, Any]) -> None:
    """Print `Lake.summary()` as the `robolake info` table."""
    print(f"lake {summary['uri']}  version {summary['version']} ({summary['num_versions']} versions)")
    print(f"  {'table':<12} {'rows':>10} {'lance version':>14}")
    for name, t in summary["tables"].items():
        print(f"  {name:<12} {t['rows']:>10} {t['lance_version']:>14}")
    if summary["embodiments"]:
        print(f"  {'embodiment':<24} {'episodes':>9} {'steps':>9}  cameras")
        for name, e in summary["embodiments"].items():
            print(f"  {name:<24} {e['episodes']:>9} {e['steps']:>9}  {', '.join(e['cameras'])}")
        for name, e in summary["embodiments"].items():
            for r in e.get("steps_rendition", []):
                rules = ", ".join(f"{k}={v}" for k, v in sorted(r["rules"].items())) or "defaults"
                print(f"  {name}: steps at {r['fps']:g} Hz ({rules}) in {r['episodes']} episodes")
            if e.get("streams"):
                print(f"    {'stream':<36} {'kind':<8} {'messages':>10} {'rate Hz':>9}  gaps")
                for st in e["streams"]:
                    gaps = f"{st['gaps']} (longest {st['longest_gap_s']:.3f} s)" if st.get("gaps") else "-"
                    print(f"    {st['name']:<36} {st['kind']:<8} {st['count']:>10} {st['rate_hz']:>9g}  {gaps}")
        quality = {name: e["quality"] for name, e in summary["embodiments"].items() if "quality" in e}
        if quality:  # episodes each quality check flags, per embodiment (robolake.lake.doctor's rules)
            print("  quality (episodes flagged per check):")
            for name, counts in quality.items():
                flagged = ", ".join(f"{k}={v}" for k, v in counts.items()) or "none"
                print(f"    {name:<24} {flagged}")
            print(f"    details: robolake doctor {summary['uri']}")
    media = summary.get("media")
    if media and media["encodings"]:  # what the frames are, and whether any are lossy (lake.media)
        print(
            "  frames: "
            + ", ".join(f"{k}={v}" for k, v in media["fidelity"].items())
            + " ("
            + ", ".join(f"{k}: {v}" for k, v in media["encodings"].items())
            + ")"
            + (f"; access copy: {media['access_copy_rows']} frames" if media["access_copy_rows"] else "")
        )
        if media.get("note"):
            print(f"  note: {media['note']}")
    if summary["quarantine"]:
        print("  quarantine: " + ", ".join(f"{k}={v}" for k, v in sorted(summary["quarantine"].items())))
    else:
        print("  quarantine: empty")


def lake_state(args: argparse.Namespace) -> str:
    """'; the lake is still at version N; re-run to resume' for a command that writes a lake."""
    uri = getattr(args, "lake", None)
    if not isinstance(uri, str) or args.command not in ("ingest", "restore", "gc"):
        return ""
    try:
        from robolake.lake import list_versions
        from robolake.storage import normalize_uri

        known = list_versions(normalize_uri(uri))
    except Exception:  # the lake is unreadable: the interruption is all there is to say
        return ""
    if not known:
        return "; no lake version was published; re-run to resume"
    return f"; the lake is still at version {known[-1]}; re-run to resume"


def checkpoint_state(args: argparse.Namespace) -> str:
    """'; the newest checkpoint is X (re-run to resume from it)' for an interrupted train or demo."""
    from pathlib import Path

    out = getattr(args, "out", None)
    if not isinstance(out, str) or args.command not in ("train", "demo"):
        return ""
    run_dir = Path(out) / "train_packed" if args.command == "demo" else Path(out)
    found = sorted((run_dir / "checkpoints").glob("step_*")) if (run_dir / "checkpoints").is_dir() else []
    if not found:
        return "; no checkpoint was written yet"
    again = "re-run without --fresh" if getattr(args, "fresh", False) else "re-run"
    return f"; the newest checkpoint is {found[-1]} ({again} to resume from it)"


def describe_error(e: BaseException) -> str:
    """The one line a CLI user sees for an error (`errors.one_line`) and how to see more."""
    return f"{one_line(e)} (run with --debug for a traceback)"


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Ends every option's help with its default: "(default: X)", "(default: off)" for a flag, or
    "(required)"; help that already names its default (or means one with None) is left as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.help == argparse.SUPPRESS or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            return action.help
        if re.search(r"\bdefault\b", text) or isinstance(action, argparse._SubParsersAction):
            return text
        if action.required and action.option_strings:
            return f"{text} (required)"
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text  # a required positional has no default
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (default: off)"
        if isinstance(action, argparse._StoreFalseAction):
            return f"{text} (default: on)"
        if action.default is None or action.default == argparse.SUPPRESS:
            return text  # what None means belongs in the text itself (tests/unit/commands/test_help.py checks it)
        if action.default == []:
            return f"{text} (default: none)"
        return f"{text} (default: %(default)s)"


def help_formatter(base: type[argparse.HelpFormatter] = argparse.HelpFormatter) -> type[argparse.HelpFormatter]:
    """`DefaultsHelpFormatter` over `base` (a command may keep a raw description or epilog)."""
    if issubclass(base, DefaultsHelpFormatter):
        return base
    if base is argparse.HelpFormatter:
        return DefaultsHelpFormatter
    return type(f"Defaults{base.__name__}", (DefaultsHelpFormatter, base), {})


def print_curation(result: Any, text: str, *, as_json: bool) -> None:
    """A curation verb's outcome: one sentence, or (`--json`) one JSON line."""
    if as_json:
        from robolake.curate.edit import summary_json

        print(summary_json(result))
    else:
        print(text)


def add_tag_arguments(p: argparse.ArgumentParser) -> None:
    """`--tag NAME` and `--split PART`: read a tagged version (or a split part) of the lake."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--tag", default=None, metavar="NAME", help="read the version (and episodes) this tag names (default: none)"
    )
    g.add_argument(
        "--split",
        default=None,
        choices=["train", "val", "test"],
        help="read this part of `robolake split` (the tag split:PART; default: the whole lake)",
    )


def tag_of(args: argparse.Namespace) -> str | None:
    """The tag `--tag` / `--split` name, or None."""
    if getattr(args, "split", None):
        return f"split:{args.split}"
    return getattr(args, "tag", None)


def open_lake_at(uri: str, args: argparse.Namespace, version: int | None = None) -> Any:
    """`Lake.open` at `version` or at the tag `--tag`/`--split` names (not both)."""
    from robolake.lake import Lake

    return Lake.open(uri, version=version, tag=tag_of(args))


def add_storage_option_argument(p: argparse.ArgumentParser) -> None:
    """`--storage-option KEY=VALUE` (repeatable): Lance/fsspec options for an object-store URI."""
    p.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Lance/fsspec option for an object-store lake, e.g. aws_endpoint=http://127.0.0.1:9000 "
        "(repeatable; values are never printed)",
    )


def storage_options_of(args: argparse.Namespace) -> dict[str, str] | None:
    """The `--storage-option` pairs as a dict (None when none); a malformed pair is named by its key only,
    since its value may be a credential."""
    out = {}
    for pair in args.storage_option:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(
                "--storage-option must be KEY=VALUE, e.g. aws_region=us-east-1 (got one without '=' or key)"
            )
        out[key] = value
    return out or None
