"""`robolake export LAKE OUT`: write a lake version as LeRobot v3.0 datasets (+ GR00T modality.json), as
parquet and mp4 files or, with `--format lerobot-lance`, in LeRobot's Lance layout."""

from __future__ import annotations

import argparse

from robolake.commands.common import add_tag_arguments, open_lake_at, tqdm_progress

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "export",
        help="write lake episodes as a LeRobot v3.0 dataset (one per embodiment) with GR00T's modality.json",
        description=(
            "Write the lake's episodes (all, or those a filter selects, at any lake version) as a LeRobot "
            "v3.0 dataset: multi-episode parquet and h264 mp4 files, meta/info.json, meta/episodes/, "
            "meta/tasks.parquet, meta/stats.json and meta/modality.json. With one embodiment selected OUT "
            "is the dataset; with several, each is written to OUT/<embodiment>. `robolake ingest OUT` reads "
            "it back (same state, action, timestamps and tasks; frames within video codec tolerance)."
        ),
    )
    s.add_argument("lake", help="the lake to read (a path or object-store URI)")
    s.add_argument("out", help="a new or empty local directory for the dataset(s)")
    s.add_argument(
        "--format",
        default="lerobot-v3",
        choices=["lerobot-v3", "lerobot-lance"],
        help=(
            "output format: lerobot-v3 (parquet + mp4 files) or lerobot-lance (LeRobot's Lance layout of "
            "lerobot-lancedb: meta/ + frames.lance, videos.lance, meta.lance; default: lerobot-v3)"
        ),
    )
    s.add_argument(
        "--embodiment",
        action="append",
        default=None,
        metavar="TAG",
        help="export only this embodiment (repeat for several; default: every embodiment)",
    )
    s.add_argument(
        "--task",
        action="append",
        default=None,
        metavar="TEXT",
        help="only episodes with this exact task (repeat for several; default: any task)",
    )
    s.add_argument(
        "--task-contains",
        default=None,
        metavar="TEXT",
        help="only episodes whose task contains TEXT (default: any task)",
    )
    s.add_argument(
        "--success",
        choices=["true", "false"],
        default=None,
        help="only successful (true) or unsuccessful (false) episodes (default: both)",
    )
    s.add_argument("--version", type=int, default=None, help="lake version to export (default: the newest)")
    add_tag_arguments(s)
    s.add_argument(
        "--crf", type=int, default=None, help="h264 constant rate factor (default 23; lower is better quality)"
    )
    s.add_argument(
        "--copy-video",
        action="store_true",
        help="copy recorded video packets into the mp4s without re-encoding where the codec fits (bit-exact)",
    )
    s.add_argument(
        "--fps",
        type=float,
        default=None,
        metavar="F",
        help=(
            "render each episode from its record at F Hz (as `robolake align --fps F` would, without writing "
            "the lake) and export that; episodes that cannot be rendered at F are left out and named "
            "(default: the lake's steps at their own rate)"
        ),
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bars")
    s.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import EpisodeFilter, ExportConfig, export_lerobot
    from robolake.writers.lerobot import VideoOptions

    where = EpisodeFilter(
        embodiment=args.embodiment,
        task=args.task,
        task_contains=args.task_contains,
        success=None if args.success is None else args.success == "true",
    )
    progress = None if args.no_progress else tqdm_progress()
    config = ExportConfig(
        video=VideoOptions(codec="h264", crf=args.crf),
        copy_video=args.copy_video,
        fps=args.fps,
        format=args.format,
    )
    results = export_lerobot(
        open_lake_at(args.lake, args, args.version),
        args.out,
        filter=None if where.is_empty else where,
        config=config,
        progress=progress,
    )
    for r in results:
        rate = f" rendered at {args.fps:g} Hz" if args.fps is not None else ""
        print(
            f"exported {r.episodes} episodes ({r.frames} frames, {r.tasks} tasks, {r.videos} mp4 files) of "
            f"{r.embodiment}{rate} from lake version {r.lake_version} to {r.path} in {r.seconds:.1f}s"
        )
        for eid, why in sorted(r.refused.items())[:20]:
            print(f"  refused {eid}: {why}")
        if len(r.refused) > 20:
            print(f"  ... and {len(r.refused) - 20} more episodes refused (meta/robolake_export.json lists them)")
    return 0
