"""The `robolake` command: ingest, info, pack, train, demo, bench, and the commands in
`robolake/commands/` (each module there has `register(subparsers)`; they are found at start-up,
so a new command is one new module and no edit here).

Errors reach a CLI user as one line naming what went wrong and what to do; `--debug` shows the
traceback instead.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

__all__ = ["main"]

def _tqdm_progress() -> Any:
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


def _quiet_ray() -> None:
    """Ray Data's own progress bars and start-up notices stay off: robolake prints its own."""
    try:
        from ray.data import DataContext

        ctx = DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
    except Exception:  # older Ray without these knobs: its own bars are fine
        pass
    if not _VERBOSE:
        # `import ray` installs its own INFO handler on the "ray" logger: lower it afterwards.
        for name in ("ray", "ray.data", "ray.train", "ray.tune"):
            logging.getLogger(name).setLevel(logging.ERROR)


_VERBOSE = False


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record arrives (tests and notebooks swap it)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass
_NO_RAY_COMMANDS = {"info", "check", "gc", "restore", "inspect"}


def _quiet(verbose: bool) -> None:
    """A CLI user sees robolake's own lines and progress bars, not the libraries' (unless --verbose).

    Lance's Rust log level is read from LANCE_LOG when lance loads, so this runs before any
    command imports it; Ray's notices (token authentication, disabled progress bars) are Python
    log records of the `ray` logger; "lance is not fork-safe" is a Python warning.
    """
    import warnings

    global _VERBOSE
    _VERBOSE = verbose
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
    for name in ("ray", "ray.data", "ray.train", "ray.tune"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="lance is not fork-safe")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def _print_summary(summary: dict[str, Any]) -> None:
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


def cmd_ingest(args: argparse.Namespace) -> int:
    from robolake.lake.ingest import IngestConfig, ingest

    _quiet_ray()
    if args.format == "synthetic" and not os.path.isdir(args.src):
        from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

        print(f"generating synthetic dataset at {args.src}")
        generate_synthetic(args.src, SyntheticConfig())
    from robolake.lake.sources.mapping import load_mapping

    mapping = load_mapping(args.map) if args.map else None
    config = IngestConfig(format=args.format, embodiment=args.embodiment, ray_address=args.ray_address,
                          mapping=mapping, state_only=args.state_only, video_frames=args.video_frames)
    result = ingest(args.src, args.lake, config, progress=None if args.no_progress else _tqdm_progress())
    print(
        f"ingested {result.ingested} episodes ({result.steps} steps, {result.frames} frames) in "
        f"{result.seconds:.1f}s; skipped {result.skipped} already in the lake; "
        f"quarantined {result.quarantined}"
        + (f" (of them {result.duplicates} duplicates of other episodes)" if result.duplicates else "")
        + f"; lake version {result.lake_version}"
    )
    # One line per problem: a dataset-level problem quarantines each of its episodes with one reason.
    problems: dict[tuple[str, str], int] = {}
    for path, reason in result.quarantine:
        problems[(path, reason)] = problems.get((path, reason), 0) + 1
    for (path, reason), n in problems.items():
        print(f"  quarantined {path}{f' ({n} episodes)' if n > 1 else ''}: {reason}")
    for what in result.unrecognised:
        print(f"  not read: {what}")
    for note in result.notes:
        print(f"  note: {note}")
    if result.ingested == 0 and result.skipped == 0:
        print("nothing could be ingested", file=sys.stderr)
        return 1
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from robolake.lake import Lake
    from robolake.lake.check import missing_files

    lake = Lake.open(args.lake, version=args.version)
    missing = missing_files(lake.uri, lake.version_info, lake.storage_options)
    if missing:  # a cheap listing: counts from the manifests would look normal without it
        print(
            f"robolake info: lake {lake.uri} version {lake.version} references {len(missing)} data file(s) that do "
            f"not exist (first: {missing[0]}); run `robolake check {lake.uri}` for what to do",
            file=sys.stderr,
        )
        return 1
    summary = lake.summary()
    if args.json:
        summary["versions"] = [v.to_json() for v in lake.versions()]
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from robolake.lake import Lake
    from robolake.packers import PackSpec, TokenLengthConfig, export_webdataset, pack

    _quiet_ray()
    spec = PackSpec(
        max_tokens=args.max_tokens,
        algorithm=args.algorithm,
        window=args.window,
        horizon=args.horizon,
        step_stride=args.step_stride,
        tokens=TokenLengthConfig(tokens_per_view=args.tokens_per_view, max_text_tokens=args.max_text_tokens, state_tokens=0),
        seed=args.seed,
        on_oversize="reject" if args.reject_oversize else "error",
        image_size=args.image_size,
    )
    lake = Lake.open(args.lake, version=args.lake_version)
    m = pack(lake, spec, args.out, overwrite=args.overwrite, progress=None if args.no_progress else _tqdm_progress())
    print(
        f"packed {m.num_samples} samples from lake version {m.lake_version} into {m.num_sequences} sequences "
        f"of <= {spec.max_tokens} tokens ({args.algorithm}) in {m.seconds:.1f}s"
    )
    print(
        f"  fill {m.fill:.4f}: padding in packed sequences {1 - m.fill:.1%}; padded batches of the same samples "
        f"would spend {1 - m.padded_fill:.1%} of their tokens on padding (fill {m.padded_fill:.4f})"
    )
    if m.rejected:
        print(f"  rejected {len(m.rejected)} samples longer than max_tokens (listed in {args.out}/manifest.json)")
    if m.num_samples == 0:
        print(
            f"robolake pack: nothing was packed: all {len(m.rejected)} samples are longer than --max-tokens "
            f"{spec.max_tokens}; raise --max-tokens (longest sample: {max((r[2] for r in m.rejected), default=0)} "
            "tokens) or cap the instruction with --max-text-tokens",
            file=sys.stderr,
        )
        return 1
    _advise_capacity(lake, spec, m)
    if args.webdataset:
        tars = export_webdataset(args.out, args.webdataset)
        print(f"  exported {len(tars)} WebDataset tars to {args.webdataset}")
    return 0


def _advise_capacity(lake: Any, spec: Any, m: Any) -> None:
    """Say when packing cannot beat padding, and which --max-tokens would pack these lengths best."""
    from robolake.packers import build_sample_index
    from robolake.packers.suggest import suggest_max_tokens

    lengths = build_sample_index(lake, spec).length
    lengths = lengths[lengths <= spec.max_tokens]
    if lengths.size == 0:
        return
    s = suggest_max_tokens(lengths, spec.max_tokens, seed=spec.seed)
    if s.uniform:
        print(
            f"  every sample has the same length ({int(lengths[0])} tokens): padded batches waste nothing here, so "
            "packing cannot beat them; it only loses the tail of each sequence"
        )
    elif m.fill <= m.padded_fill + 0.005:
        print("  packing gains nothing over padding on these lengths (they barely differ)")
    if s.max_tokens != spec.max_tokens and s.fill > s.current_fill + 0.005:
        print(f"  suggestion: --max-tokens {s.max_tokens} packs these lengths to fill {s.fill:.3f} (vs {s.current_fill:.3f})")


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


def cmd_train(args: argparse.Namespace) -> int:
    import json as _json
    import statistics

    from robolake.training.run import RunConfig, train_on

    _quiet_ray()
    source = args.shards or args.lake
    run = RunConfig(
        out=args.out, preset=args.preset, steps=args.steps, layout=args.layout, lr=args.lr,
        sequences_per_batch=args.sequences_per_batch, max_tokens=args.max_tokens, fp8=args.fp8,
        num_workers=args.workers, seed=args.seed, checkpoint_every=args.checkpoint_every, device=args.device,
        resume=not args.fresh, record_samples=args.record_samples,
    )
    is_main = int(os.environ.get("RANK", "0")) == 0
    progress = train_progress_bar(args.steps) if is_main and not args.no_progress else None
    result = train_on(source, run, progress=progress)
    if not is_main:
        return 0
    records = []
    if result.metrics_path and result.metrics_path.exists():
        records = [_json.loads(line) for line in result.metrics_path.read_text().splitlines() if line.strip()]
    first, last = (result.losses[0], result.losses[-1]) if result.losses else (float("nan"), float("nan"))
    print(
        f"trained steps {result.first_step + 1}..{result.step} ({args.layout}, preset {args.preset}, "
        f"fp8 {result.fp8_backend}); loss {first:.4f} -> {last:.4f}"
    )
    print(f"  samples/s   {result.samples_per_s:,.2f} (all samples of this run over its wall time)")
    mine = records[-len(result.losses):] if result.losses else []
    if mine:
        step_rates = [r["samples_per_s"] for r in mine if "samples_per_s" in r]
        waits = sum(r.get("data_wait_s", 0.0) for r in mine)
        steps_s = sum(r.get("step_time_s", 0.0) for r in mine)
        print(f"  per step    median {statistics.median(step_rates):,.2f} samples/s; "
              f"waiting for data {waits / max(steps_s, 1e-9):.1%} of step time")
        pads = [r.get("padding_fraction", 0.0) for r in mine]
        if any(pads):
            print(f"  padding     {statistics.median(pads):.1%} of the computed token grid (median)")
    print(f"  metrics: {result.metrics_path}  checkpoint: {result.checkpoint}")
    if args.record_samples:
        print(f"  samples: {os.path.join(args.out, 'samples')}/rank*.jsonl")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from robolake.demo import DemoConfig, run_demo

    _quiet_ray()
    run_demo(DemoConfig(out=args.out, quick=args.quick), progress=_tqdm_progress(), train_progress=train_progress_bar)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import importlib

    from robolake.bench import available

    if args.which not in available():
        print(f"robolake bench: unknown benchmark {args.which!r}; choose one of {', '.join(available())}", file=sys.stderr)
        return 2
    _quiet_ray()
    module = importlib.import_module(f"robolake.bench.{args.which}")
    argv = ["--json", args.json] + (["--quick"] if args.quick else []) + list(args.extra)
    rc = module.main(argv)
    return int(rc or 0)


def _register_command_modules(sub: Any) -> None:
    import importlib
    import pkgutil

    import robolake.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"robolake.commands.{info.name}").register(sub)


def build_parser() -> argparse.ArgumentParser:
    from robolake import __version__

    p = argparse.ArgumentParser(prog="robolake", description="Robot episodes -> Lance lake -> packed batches -> trainer.")
    p.add_argument("--version", action="version", version=f"robolake {__version__}")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    p.add_argument("--verbose", action="store_true", help="show the log lines of Lance, Ray and robolake")
    sub = p.add_subparsers(dest="command", required=True)

    from robolake.lake.sources import format_choices, formats

    s = sub.add_parser(
        "ingest", help="ingest a dataset, a recording, or a directory of them into a lake",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="formats (detected per file or directory with --format auto):\n"
        + "\n".join(f"  {f.name:<10} {f.description}" for f in formats()),
    )
    s.add_argument("src", help="a dataset directory, a recording file, or a folder of them (searched at any depth)")
    s.add_argument("lake", help="the lake URI (created if missing)")
    s.add_argument("--format", default="auto", choices=format_choices(), help="source format (default: detect)")
    s.add_argument("--map", default=None, metavar="FILE",
                   help="YAML/JSON mapping: which topics/keys become state, action, cameras, task (see `robolake inspect`)")
    s.add_argument("--state-only", action="store_true", help="accept episodes without camera frames instead of quarantining them")
    s.add_argument("--video-frames", default="jpeg", choices=["jpeg", "h264"],
                   help="how frames decoded from source videos are stored: jpeg (one image a frame; default) or h264 "
                        "(key-referenced: a lake no bigger than the source, ~3x slower random reads and ingest)")
    s.add_argument("--embodiment", default=None, help="force this embodiment tag")
    s.add_argument("--ray-address", default=None, help="Ray cluster address (default: local Ray)")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=cmd_ingest)

    s = sub.add_parser("info", help="tables, row counts, versions, embodiments, quarantine")
    s.add_argument("lake", help="the lake directory or object-store URI")
    s.add_argument("--version", type=int, default=None, help="show this lake version (default: the newest)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_info)

    s = sub.add_parser("pack", help="pack a lake into cu_seqlens shards (Ray Data) with lineage")
    s.add_argument("lake", help="the lake to pack (directory or object-store URI)")
    s.add_argument("out", help="where shards.lance and manifest.json are written")
    s.add_argument("--max-tokens", type=int, default=4096)
    s.add_argument("--algorithm", default="bfd", choices=["bfd", "ffd", "window"])
    s.add_argument("--window", type=int, default=8192, help="samples held by the window packer")
    s.add_argument("--horizon", type=int, default=16, help="action chunk length H")
    s.add_argument("--tokens-per-view", type=int, default=64)
    s.add_argument("--max-text-tokens", type=int, default=None)
    s.add_argument("--step-stride", type=int, default=1, help="every k-th step starts a sample")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--lake-version", type=int, default=None, help="pack an older lake version")
    s.add_argument("--reject-oversize", action="store_true", help="record and skip samples over max-tokens")
    s.add_argument("--image-size", type=int, default=None, help="write frames at the model's input size N x N (training rendition; the loader then never resizes)")
    s.add_argument("--overwrite", action="store_true")
    s.add_argument("--webdataset", default=None, metavar="DIR", help="also export WebDataset tars here")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=cmd_pack)

    s = sub.add_parser("train", help="train the thin GR00T-style model on shards or a lake")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--shards", help="a `robolake pack` output")
    src.add_argument("--lake", help="a lake (packed on the fly)")
    s.add_argument("--out", required=True, help="metrics.jsonl and checkpoints go here")
    s.add_argument("--preset", default="tiny", choices=["tiny", "small", "n15"])
    s.add_argument("--steps", type=int, default=100)
    s.add_argument("--layout", default="packed", choices=["packed", "padded"])
    s.add_argument("--lr", type=float, default=3e-4)
    s.add_argument("--sequences-per-batch", type=int, default=1)
    s.add_argument("--max-tokens", type=int, default=2048, help="packed sequence capacity with --lake")
    s.add_argument("--fp8", default="none", choices=["none", "auto", "te", "torchao"])
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--checkpoint-every", type=int, default=0)
    s.add_argument("--device", default="auto")
    s.add_argument("--fresh", action="store_true", help="start over instead of resuming from --out/checkpoints")
    s.add_argument("--record-samples", action="store_true",
                   help="write OUT/samples/rank{R}.jsonl: the (episode, step) keys of every batch each rank trained on")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(fn=cmd_train)

    s = sub.add_parser("demo", help="the whole flow on synthetic data in a local lake with a local Ray")
    s.add_argument("--out", default="demo_out")
    s.add_argument("--quick", action="store_true")
    s.set_defaults(fn=cmd_demo)

    s = sub.add_parser("bench", help="run a benchmark, print a table and write JSON")
    s.add_argument("which", help="the benchmark (a module of robolake.bench: ingest, pack, load, train, e2e, ...)")
    s.add_argument("--json", required=True, help="write the results here")
    s.add_argument("--quick", action="store_true", help="a smaller run (minutes, not tens of minutes)")
    s.epilog = "Other options (e.g. --data PATH) are passed to the benchmark; `robolake bench NAME --json X --help` lists them."
    s.set_defaults(fn=cmd_bench)
    _register_command_modules(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug / --verbose are accepted anywhere on the line, not only before the subcommand.
    flags = [a for a in argv if a in ("--debug", "--verbose")]
    argv = [a for a in argv if a not in ("--debug", "--verbose")]
    _quiet("--verbose" in flags)  # before any command module imports lance or ray
    parser = build_parser()
    args, extra = parser.parse_known_args(flags + argv)
    if extra and args.command != "bench":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra  # a benchmark's own options
    if args.command not in _NO_RAY_COMMANDS:
        _quiet_ray()
    if args.debug:
        return int(args.fn(args))
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        print(f"robolake {args.command}: interrupted{_lake_state(args)}", file=sys.stderr)
        return 130
    except Exception as e:  # one line for a CLI user; --debug shows the traceback
        print(f"robolake {args.command}: {_describe(e)}", file=sys.stderr)
        return 2


def _lake_state(args: argparse.Namespace) -> str:
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


def _describe(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    if isinstance(e, KeyError):
        text = f"missing key {text}"
    if not isinstance(e, (FileNotFoundError, FileExistsError, ValueError, KeyError, RuntimeError, OSError)):
        text = f"{type(e).__name__}: {text}"
    return f"{text} (run with --debug for a traceback)"


if __name__ == "__main__":
    sys.exit(main())
