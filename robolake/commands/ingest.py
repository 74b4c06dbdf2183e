"""`robolake ingest SRC LAKE`: read a dataset, a recording or a folder of them into a lake version."""

from __future__ import annotations

import argparse
import os
import sys

from robolake.commands.common import quiet_ray, tqdm_progress

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    from robolake.lake import format_choices, formats

    s = sub.add_parser(
        "ingest",
        help="ingest a dataset, a recording, or a directory of them into a lake",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="formats (detected per file or directory with --format auto):\n"
        + "\n".join(f"  {f.name:<10} {f.description}" for f in formats()),
    )
    s.add_argument("src", help="a dataset directory, a recording file, or a folder of them (searched at any depth)")
    s.add_argument("lake", help="the lake URI (created if missing)")
    s.add_argument("--format", default="auto", choices=format_choices(), help="source format (default: detect)")
    s.add_argument(
        "--map",
        default=None,
        metavar="FILE",
        help="YAML/JSON mapping: which topics/keys become state, action, cameras, task "
        "(see `robolake inspect`; default: the format's own)",
    )
    s.add_argument(
        "--state-only",
        action="store_true",
        help="ingest without cameras: accept episodes without frames instead of quarantining them, and leave "
        "out the default cameras of bags and MCAP files",
    )
    s.add_argument(
        "--frames",
        default="record",
        choices=["record", "jpeg", "h264"],
        help="how camera frames are stored: record (default: a source video's own packets, bit-exact and no bigger "
        "than the source; images as recorded; raw pixels lossless), or the lossy jpeg (JPEG q80 a frame) or "
        "h264 (key-referenced; see --crf), recorded per row and in `robolake info`",
    )
    s.add_argument(
        "--crf",
        type=int,
        default=None,
        metavar="N",
        help="with --frames h264: its constant rate factor (default 22; lower is better quality)",
    )
    s.add_argument(
        "--access-copy",
        default=None,
        choices=["h264"],
        help="also write a key-referenced h264 access copy of recorded videos, for fast random reads "
        "(derived from the record; `robolake optimize --access-copy none` drops it; default: none)",
    )
    s.add_argument(
        "--resample",
        default=None,
        choices=["ticks", "none"],
        help="topic logs and stamped HDF5: ticks (fixed-rate ticks) or none (a step per message of the first "
        "state stream; default: the mapping's `resample:`, else ticks)",
    )
    s.add_argument(
        "--session",
        default=None,
        choices=["folder", "overlap", "split"],
        help="read several topic-log files of one folder as one recording (one episode): overlap (time spans "
        "overlap: bags recorded side by side, a topic per file), split (numbered parts name_0.bag, name_1.bag, ... "
        "in index order), folder (every file of a format in the folder); default: the mapping's `session:`, else "
        "one episode per file (`robolake inspect SRC --session MODE` shows the sessions)",
    )
    s.add_argument(
        "--streams",
        nargs="+",
        default=None,
        metavar="PATTERN",
        help="glob patterns of the topic / key names to keep in the record, e.g. '/joint*' '/gripper/*' "
        "(default: every numeric stream)",
    )
    s.add_argument(
        "--max-read-gb",
        type=float,
        default=None,
        metavar="GB",
        help="the read budget: a source declaring more for one read (a dataset, a frame, a chunk) is "
        "quarantined before it is read (default: 2)",
    )
    s.add_argument(
        "--embodiment", default=None, help="force this embodiment tag (default: the one the source names or implies)"
    )
    s.add_argument("--ray-address", default=None, help="Ray cluster address (default: local Ray)")
    s.add_argument("--no-progress", action="store_true", help="no progress bars")
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import IngestConfig, ingest

    quiet_ray()
    if args.format == "synthetic" and not os.path.isdir(args.src):
        from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

        print(f"generating synthetic dataset at {args.src}")
        generate_synthetic(args.src, SyntheticConfig())
    from robolake.lake import load_mapping

    mapping = load_mapping(args.map) if args.map else None
    from robolake.lake import DEFAULT_MAX_READ_BYTES

    budget = DEFAULT_MAX_READ_BYTES if args.max_read_gb is None else max(1, int(args.max_read_gb * 1e9))
    config = IngestConfig(
        format=args.format,
        embodiment=args.embodiment,
        ray_address=args.ray_address,
        mapping=mapping,
        state_only=args.state_only,
        video_frames=args.frames,
        video_crf=args.crf,
        access_copy=args.access_copy,
        resample=args.resample,
        max_read_bytes=budget,
        session=args.session,
        streams=tuple(args.streams) if args.streams else None,
    )
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
