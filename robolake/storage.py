"""Where lake files live: URI joining, fsspec filesystems and atomic small-file writes.

A lake URI is a local path or an object-store URI (`s3://bucket/prefix`, `gs://...`). Lance
datasets are opened by URI with `storage_options`; robolake's own small JSON files (the format
marker and the version manifests) go through fsspec with the same options, so one set of
credentials serves both.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import Any

import fsspec

log = logging.getLogger(__name__)

__all__ = [
    "join_uri",
    "normalize_uri",
    "filesystem",
    "fsspec_options",
    "read_bytes",
    "read_json",
    "list_names",
    "put_if_absent",
    "write_bytes_atomic",
    "write_json_atomic",
    "exists",
]


def normalize_uri(uri: str | os.PathLike[str]) -> str:
    """An absolute local path, or the object-store URI unchanged (without a trailing slash)."""
    text = os.fspath(uri)
    if "://" in text and not text.startswith("file://"):
        return text.rstrip("/")
    if text.startswith("file://"):
        text = text[len("file://") :]
    return os.path.abspath(os.path.expanduser(text))


def join_uri(base: str, *parts: str) -> str:
    if "://" in base:
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])
    return os.path.join(base, *parts)


# Lance's object-store option names -> s3fs keyword arguments, so one dict serves both.
_S3_KEYS = {
    "aws_access_key_id": ("key",),
    "access_key_id": ("key",),
    "aws_secret_access_key": ("secret",),
    "secret_access_key": ("secret",),
    "aws_session_token": ("token",),
    "session_token": ("token",),
    "aws_endpoint": ("client_kwargs", "endpoint_url"),
    "aws_endpoint_url": ("client_kwargs", "endpoint_url"),
    "endpoint": ("client_kwargs", "endpoint_url"),
    "aws_region": ("client_kwargs", "region_name"),
    "region": ("client_kwargs", "region_name"),
}
_LANCE_ONLY = {"allow_http", "aws_virtual_hosted_style_request", "virtual_hosted_style_request", "timeout"}


def fsspec_options(protocol: str, storage_options: dict[str, str] | None) -> dict[str, object]:
    """fsspec keyword arguments for `protocol` from Lance-style `storage_options`.

    Lance (object_store) and s3fs name the same settings differently; robolake takes Lance's
    names everywhere and translates them here. Unknown keys pass through unchanged.
    """
    opts = dict(storage_options or {})
    if protocol not in ("s3", "s3a"):
        return dict(opts)
    out: dict[str, object] = {}
    client: dict[str, object] = {}
    for key, value in opts.items():
        target = _S3_KEYS.get(key.lower())
        if target is None:
            if key.lower() not in _LANCE_ONLY:
                out[key] = value
        elif target[0] == "client_kwargs":
            client[target[1]] = value
        else:
            out[target[0]] = value
    if client:
        out["client_kwargs"] = client
    return out


def filesystem(uri: str, storage_options: dict[str, str] | None = None) -> fsspec.AbstractFileSystem:
    """The fsspec filesystem serving `uri` (object stores need their fsspec package: `robolake[cloud]`).

    Raises:
        ImportError: the filesystem package for the URI's scheme is not installed.
    """
    protocol = uri.split("://", 1)[0] if "://" in uri else "file"
    try:
        return fsspec.filesystem(protocol, **fsspec_options(protocol, storage_options))
    except ImportError as e:
        raise ImportError(f"{uri}: {e}. Install the object-store extra: pip install 'robolake[cloud]'") from e


def exists(uri: str, storage_options: dict[str, str] | None = None) -> bool:
    return bool(filesystem(uri, storage_options).exists(uri))


_READ_TRIES = 5


def read_bytes(uri: str, storage_options: dict[str, str] | None = None) -> bytes:
    """A small file's bytes in one plain GET, retrying transient store errors.

    Not `fs.open()`: s3fs pins the object's ETag when it opens, so a writer replacing the file
    between that and the read (a lease renewal, a new manifest) fails the read with a precondition
    error instead of returning either version.

    Raises:
        FileNotFoundError: there is no such file.
        OSError: the store kept failing.
    """
    fs = filesystem(uri, storage_options)
    for attempt in range(1, _READ_TRIES):
        try:
            return bytes(fs.cat_file(uri))
        except FileNotFoundError:
            raise
        except OSError:
            time.sleep(0.05 * attempt)
    return bytes(fs.cat_file(uri))  # the last try raises what the store says


def read_json(uri: str, storage_options: dict[str, str] | None = None) -> Any:
    return json.loads(read_bytes(uri, storage_options))


def list_names(uri: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """The names (not paths) of the entries in directory `uri`, sorted; [] if it is absent.

    Listed fresh every time: fsspec caches listings per filesystem instance, forever by default,
    so a long-lived reader would never see another process's new version or lease epoch.
    """
    fs = filesystem(uri, storage_options)
    fs.invalidate_cache(uri)
    try:
        paths = fs.ls(uri, detail=False)
    except FileNotFoundError:
        return []
    return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in paths)


def put_if_absent(uri: str, data: bytes, storage_options: dict[str, str] | None = None) -> None:
    """Create `uri` holding `data` unless it exists, atomically.

    Locally a finished temporary file is hard-linked into place (`os.link` fails when the name
    exists, so the whole file appears at once or nothing does); on S3-compatible stores it is a
    conditional PUT (`If-None-Match: *`), the primitive Lance's own commits rely on.

    Raises:
        FileExistsError: `uri` already exists (another writer created it first).
    """
    if "://" not in uri:
        tmp = _durable_temp(uri, data)
        try:
            os.link(tmp, uri)
        finally:
            os.unlink(tmp)
        return
    fs = filesystem(uri, storage_options)
    try:
        fs.pipe_file(uri, data, mode="create")
    except TypeError:  # a filesystem without conditional writes: best effort, with a warning
        log.warning("%s: this object store offers no conditional PUT; concurrent writers are not fenced", uri)
        if fs.exists(uri):
            raise FileExistsError(uri) from None
        fs.pipe_file(uri, data)


def write_bytes_atomic(uri: str, data: bytes, storage_options: dict[str, str] | None = None) -> None:
    """Replace `uri` with `data` so that a reader sees the old file or the whole new one, never half.

    Locally the bytes go to a temporary file that is then renamed (atomic on POSIX). Object
    stores make a single PUT visible atomically, so there the file is written directly.
    """
    if "://" not in uri:
        os.replace(_durable_temp(uri, data), uri)
        return
    filesystem(uri, storage_options).pipe_file(uri, data)


def write_json_atomic(uri: str, payload: Any, storage_options: dict[str, str] | None = None) -> None:
    """`write_bytes_atomic` of `payload` as indented, key-sorted JSON."""
    write_bytes_atomic(uri, json.dumps(payload, indent=2, sort_keys=True).encode(), storage_options)


def _durable_temp(uri: str, data: bytes) -> str:
    """A fsync'ed temporary file beside local path `uri` holding `data`; returns its path."""
    os.makedirs(os.path.dirname(uri), exist_ok=True)
    tmp = f"{uri}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp
