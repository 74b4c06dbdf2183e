"""The S3 arm of the LeRobot-interface comparison: each loader's own files in a bucket of a local S3
server, read through its object-store path.

What goes into the bucket, byte for byte from the local run's files: robolake's pack output
(its shards hold the frames at the size handed out, so its loader reads them without the lake),
the lake the LeRobot adapter reads (with its h264 access copy), and lerobot-lancedb's converted
dataset (its frames, videos and meta tables; `LanceDBDataset(root="s3://...",
storage_options=...)` connects to it with `lancedb.connect` and caches `meta/` under
`HF_LEROBOT_HOME`). The server is moto, started as `bench scale`'s S3 section starts it
(`robolake.bench._s3_loader`): one Python process on the same cores as the loaders, so every
rate here is a lower bound on what a real S3 endpoint (served elsewhere, in parallel) gives, for
each loader alike. Its CPU seconds during each arm's epoch are reported beside it, never charged
to a loader.

`LeRobotDataset` reads a local directory or the Hugging Face hub, not an object-store URI: it
has no S3 arm.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LEROBOT_S3", "S3Copies", "open_s3_loader", "s3_copies", "s3_unavailable"]

LEROBOT_S3 = "LeRobotDataset reads a local directory or the Hugging Face hub, not an S3 URI: timed from local disk only"


@dataclass(frozen=True)
class S3Copies:
    """The uploaded copies: each one's URI, the options that reach the server, its pid, bytes copied,
    and the count of requests it has answered so far."""

    uris: dict[str, str]
    storage_options: dict[str, str]
    server_pid: int
    bytes_copied: dict[str, int]
    requests: Callable[[], int]


def s3_unavailable() -> str | None:
    """Why the S3 arm cannot run here (moto or boto3 missing), else None."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError as e:
        return f"not measured: the local S3 server (moto) is not importable ({e}); install moto[server] and boto3"
    return None


@contextlib.contextmanager
def s3_copies(dirs: Mapping[str, Path]) -> Iterator[S3Copies]:
    """A local S3 server holding a copy of each directory in `dirs` (name -> local directory),
    under a prefix of the same name; stopped on exit."""
    from robolake.bench._s3_loader import BUCKET, _moto_server, _upload

    with _moto_server() as (client, opts, server):
        copied = {name: _upload(client, str(d), name) for name, d in dirs.items()}
        yield S3Copies(
            uris={name: f"s3://{BUCKET}/{name}" for name in dirs},
            storage_options=dict(opts),
            server_pid=server.pid,
            bytes_copied=copied,
            requests=server.requests,
        )


def open_s3_loader(uri: str, storage_options: Mapping[str, str], config: Any) -> Any:
    """robolake's loader over packed shards in the bucket (no lake: the shards hold the frames)."""
    from robolake.loaders import PackedLoader, open_shards

    return PackedLoader(open_shards(uri, storage_options=dict(storage_options)), config)
