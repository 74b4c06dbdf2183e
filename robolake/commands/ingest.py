"""`robolake ingest SRC LAKE`: read a dataset, a recording or a folder of them into a lake version."""

from __future__ import annotations

import argparse
import os
import sys

from robolake.commands.common import quiet_ray, tqdm_progress

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
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
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake.ingest import IngestConfig, ingest

    quiet_ray()
    if args.format == "synthetic" and not os.path.isdir(args.src):
        from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

        print(f"generating synthetic dataset at {args.src}")
        generate_synthetic(args.src, SyntheticConfig())
    from robolake.lake.sources.mapping import load_mapping

    mapping = load_mapping(args.map) if args.map else None
    config = IngestConfig(format=args.format, embodiment=args.embodiment, ray_address=args.ray_address,
                          mapping=mapping, state_only=args.state_only, video_frames=args.video_frames)
    result = ingest(args.src, args.lake, config, progress=None if args.no_progress else tqdm_progress())
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
