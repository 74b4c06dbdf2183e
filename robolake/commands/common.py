"""What the `robolake` subcommands share: quiet logs, progress bars, the lake summary, error lines.

`quiet_logging` runs once at start-up (from `robolake.cli.main`), before any command imports
Lance or Ray; `quiet_ray` runs again after Ray is imported, because `import ray` installs its own
INFO handler. Both read one verbosity switch, so they live together here.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

__all__ = [
    "add_tag_arguments",
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
    """A tqdm bar fed by the trainer's progress callback: step, loss, samples/s (total over total), ETA."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="step", leave=True)

    def progress(p: Any) -> None:
        if bar.total != p.total_steps:
            bar.total = p.total_steps
        bar.n = p.step
        bar.set_postfix_str(f"loss {p.loss:.4f}, {p.samples_per_s:,.1f} samples/s", refresh=False)
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
        from robolake.lake.storage import normalize_uri
        from robolake.lake.versions import list_versions

        known = list_versions(normalize_uri(uri))
    except Exception:  # the lake is unreadable: the interruption is all there is to say
        return ""
    if not known:
        return "; no lake version was published; re-run to resume"
    return f"; the lake is still at version {known[-1]}; re-run to resume"


def describe_error(e: BaseException) -> str:
    """The one line a CLI user sees for an error: its message (typed where the type says more)."""
    text = str(e) or type(e).__name__
    if isinstance(e, KeyError):
        text = f"missing key {text}"
    if not isinstance(e, (FileNotFoundError, FileExistsError, ValueError, KeyError, RuntimeError, OSError)):
        text = f"{type(e).__name__}: {text}"
    return f"{text} (run with --debug for a traceback)"


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
    g.add_argument("--tag", default=None, metavar="NAME", help="read the version (and episodes) this tag names (default: none)")
    g.add_argument("--split", default=None, choices=["train", "val", "test"],
                   help="read this part of `robolake split` (the tag split:PART; default: the whole lake)")  # fmt: skip


def tag_of(args: argparse.Namespace) -> str | None:
    """The tag `--tag` / `--split` name, or None."""
    if getattr(args, "split", None):
        return f"split:{args.split}"
    return getattr(args, "tag", None)


def open_lake_at(uri: str, args: argparse.Namespace, version: int | None = None) -> Any:
    """`Lake.open` at `version` or at the tag `--tag`/`--split` names (not both)."""
    from robolake.lake import Lake

    return Lake.open(uri, version=version, tag=tag_of(args))
