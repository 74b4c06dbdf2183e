"""`robolake view LAKE [--version N|--tag T] [--port P] [--host H]`: a local web viewer of a lake;
`--rerun OUT.rrd [--episodes ID ...]` writes a Rerun recording instead."""

from __future__ import annotations

import argparse
import sys

from robolake.commands.common import add_storage_option_argument, storage_options_of, tag_of

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="browse a lake in a local web app (read-only), or export episodes to Rerun")
    p.add_argument("lake", help="the lake directory or object-store URI")
    at = p.add_mutually_exclusive_group()
    at.add_argument("--version", type=int, default=None, help="show this lake version (default: the newest)")
    at.add_argument("--tag", default=None, help="show the version (and episodes) this tag names (default: none)")
    at.add_argument(
        "--split",
        default=None,
        choices=["train", "val", "test"],
        help="show this part of `robolake split` (default: all)",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="interface to serve on (default 127.0.0.1; anything else exposes the lake)"
    )
    p.add_argument("--port", type=int, default=8765, help="port to serve on (default 8765; 0 picks a free one)")
    add_storage_option_argument(p)
    p.add_argument(
        "--rerun",
        default=None,
        metavar="OUT.rrd",
        help="write a Rerun recording of episodes to OUT.rrd and exit (default: serve the web viewer)",
    )
    p.add_argument(
        "--episodes", nargs="+", default=None, metavar="ID", help="with --rerun: these episodes (default: all)"
    )
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.lake import Lake

    if args.episodes is not None and args.rerun is None:
        raise ValueError("--episodes chooses what --rerun OUT.rrd exports; the web viewer shows every episode")
    lake = Lake.open(args.lake, version=args.version, tag=tag_of(args), storage_options=storage_options_of(args))
    if args.rerun is not None:
        from robolake.commands.common import tqdm_progress
        from robolake.view.rerun_export import export_rerun

        r = export_rerun(lake, args.rerun, args.episodes, progress=tqdm_progress())
        print(
            f"wrote {r.path}: {len(r.episodes)} episodes, {r.frames} frames, {r.scalars} scalar values "
            f"(open it with `rerun {r.path}`)"
        )
        return 0
    from robolake.view.app import LOOPBACK_HOSTS, create_app
    from robolake.view.server import ViewServer, is_loopback, warn_if_exposed

    warning = warn_if_exposed(args.host)
    if warning:
        print(f"robolake view: warning: {warning}", file=sys.stderr)
    app = create_app(lake, allowed_hosts=LOOPBACK_HOSTS if is_loopback(args.host) else None)
    server = ViewServer(app, host=args.host, port=args.port)
    print(f"robolake view: {lake!r} at {server.url}  (read-only; Ctrl-C stops it)", flush=True)
    server.serve_forever()
    return 0
