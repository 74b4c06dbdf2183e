"""Where robolake's files live: URIs, fsspec filesystems, atomic small writes, roots, bounded documents.

A lake URI is a local path or an object-store URI (`s3://bucket/prefix`, `gs://...`). Lance
datasets are opened by URI with `storage_options`; robolake's own small JSON files (the format
marker and the version manifests) go through fsspec with the same options, so one set of
credentials serves both.

Two rules hold for every file robolake reads or writes, and live here once so that every reader
and writer applies them the same way:

- **Roots.** Every file belongs to a root (a lake, a run folder, a shards directory, an export).
  A name that comes from data (a table name in a manifest, a tag, a checkpoint folder) is checked
  as a name (`check_name`: no separator, no `..`), never joined as a path, and a local path is
  resolved, symlinks followed, and must stay inside its resolved root (`under_root`,
  `ensure_within`). A run folder or lake handed over by someone else cannot make robolake read
  or write outside it.
- **Bounded documents.** Every JSON or YAML document robolake reads (manifests, tags, mixtures,
  mappings, checkpoints, pack manifests) is size-capped before it is read (`MAX_DOCUMENT_BYTES`;
  on object stores one ranged GET of at most the cap plus a byte) and parsed by one function
  (`parse_json`, `parse_yaml`) whose only errors are `DocumentError`, one line naming the file:
  invalid text, nesting past the parser's depth, duplicate YAML keys.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    "DocumentError",
    "MAX_DOCUMENT_BYTES",
    "OutsideRootError",
    "check_name",
    "ensure_within",
    "parse_json",
    "parse_yaml",
    "read_document",
    "under_root",
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
    import fsspec  # here, not at import: the model's checkpoints use this module's roots without fsspec

    protocol = uri.split("://", 1)[0] if "://" in uri else "file"
    try:
        return fsspec.filesystem(protocol, **fsspec_options(protocol, storage_options))
    except ImportError as e:
        raise ImportError(f"{uri}: {e}. Install the object-store extra: pip install 'robolake[cloud]'") from e


def exists(uri: str, storage_options: dict[str, str] | None = None) -> bool:
    return bool(filesystem(uri, storage_options).exists(uri))


_READ_TRIES = 5


def read_bytes(uri: str, storage_options: dict[str, str] | None = None, *, max_bytes: int | None = None) -> bytes:
    """A small file's bytes in one plain GET, retrying transient store errors.

    Not `fs.open()`: s3fs pins the object's ETag when it opens, so a writer replacing the file
    between that and the read (a lease renewal, a new manifest) fails the read with a precondition
    error instead of returning either version.

    With `max_bytes`, at most that many bytes are read (locally the size is looked up first; on
    object stores one ranged GET of `max_bytes + 1`), and a longer file is refused.

    Raises:
        FileNotFoundError: there is no such file.
        DocumentError: the file is longer than `max_bytes`.
        OSError: the store kept failing.
    """
    fs = filesystem(uri, storage_options)
    kw: dict[str, Any] = {}
    if max_bytes is not None and "://" not in uri:
        if os.path.getsize(uri) > max_bytes:
            raise _too_large(uri, max_bytes)
    elif max_bytes is not None:  # a ranged GET: never more than the cap (a local read(n) would allocate n)
        kw = {"start": 0, "end": max_bytes + 1}
    for attempt in range(1, _READ_TRIES + 1):
        try:
            data = bytes(fs.cat_file(uri, **kw))
            break
        except FileNotFoundError:
            raise
        except OSError:
            if attempt == _READ_TRIES:
                raise  # what the store says, after the last try
            time.sleep(0.05 * attempt)
    if max_bytes is not None and len(data) > max_bytes:
        raise _too_large(uri, max_bytes)
    return data


def read_json(uri: str, storage_options: dict[str, str] | None = None, *, what: str = "robolake file") -> Any:
    """A JSON document robolake wrote (a manifest, a tag, a marker), bounded and parsed by `parse_json`.

    Raises:
        FileNotFoundError: there is no such file.
        DocumentError: it is too large or not valid JSON (the message names the file).
    """
    return parse_json(read_bytes(uri, storage_options, max_bytes=MAX_DOCUMENT_BYTES), f"{what} {uri}")


def read_document(path: str | os.PathLike[str], what: str, *, max_bytes: int | None = None) -> str:
    """The text of a local document a user hands robolake (a mixture, a mapping), size-capped.

    Raises:
        FileNotFoundError: there is no such file.
        DocumentError: it is too large or not UTF-8.
    """
    data = read_bytes(normalize_uri(path), max_bytes=max_bytes or MAX_DOCUMENT_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocumentError(f"{what} {os.fspath(path)} is not UTF-8 text ({e})") from None


# --- bounded documents ----------------------------------------------------------------------------

# Far above any document robolake writes (a manifest naming DROID's 92k episodes is ~6 MB) and far
# below what takes a machine down (json.loads holds about eight times a document's size).
MAX_DOCUMENT_BYTES = 64 * 2**20


class DocumentError(ValueError):
    """A JSON or YAML document that is too large, not valid, or ambiguous (one line, naming the file)."""


def _too_large(name: str, max_bytes: int) -> DocumentError:
    return DocumentError(
        f"{name} is larger than {max_bytes >> 20} MiB, more than any document robolake writes or reads; "
        "it is damaged or not what it claims to be: restore it from a copy, or remove it"
    )


def parse_json(data: bytes | str, name: str, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """`data` parsed as JSON; every failure is a DocumentError naming `name`.

    Raises:
        DocumentError: too large, not UTF-8, not valid JSON, or nested past the parser's depth.
    """
    if len(data) > max_bytes:
        raise _too_large(name, max_bytes)
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DocumentError(f"{name} is not valid JSON ({e}); restore it from a copy or rewrite it") from None
    except RecursionError:
        raise DocumentError(f"{name} nests deeper than robolake reads; it is not a document robolake wrote") from None


def parse_yaml(text: str, name: str, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """`text` parsed as YAML (safe loader: plain data only), refusing duplicate keys.

    A YAML mapping that names a key twice keeps the last silently in PyYAML; in a mixture or a
    mapping that is a weight or a topic the user did not mean, so it is refused here.

    Raises:
        DocumentError: too large, not valid YAML, a duplicate key, or nested past the parser's depth.
    """
    import yaml

    if len(text) > max_bytes:
        raise _too_large(name, max_bytes)

    class _Loader(yaml.SafeLoader):
        pass

    def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                duplicate = key in out
            except TypeError:  # an unhashable key: the constructor below names it
                duplicate = False
            if duplicate:
                raise DocumentError(
                    f"{name} line {key_node.start_mark.line + 1}: key {key!r} appears twice; keep one (YAML would "
                    "silently keep the last)"
                )
            out[key] = loader.construct_object(value_node, deep=True)
        return out

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        raise DocumentError(f"{name} is not valid YAML ({' '.join(str(e).split())})") from None
    except (RecursionError, TypeError) as e:
        raise DocumentError(f"{name} is not a YAML document robolake reads ({type(e).__name__})") from None


# --- roots ----------------------------------------------------------------------------------------


class OutsideRootError(ValueError):
    """A name from data, or a link, that would take a read or write outside the root it belongs to."""


_NOT_IN_NAME = re.compile(r"[/\\\x00]")


def check_name(name: object, what: str) -> str:
    """`name` if it is one plain path component (what a table, tag or checkpoint folder is called).

    Names from data are looked up, never joined: `../../etc/passwd`, `a/b`, `..`, an empty or
    non-string name is refused.

    Raises:
        OutsideRootError: it is not a plain name.
    """
    if not isinstance(name, str) or name in ("", ".", "..") or len(name) > 255 or _NOT_IN_NAME.search(name) is not None:
        raise OutsideRootError(
            f"{what} {name!r} is not a plain name (no '/', '\\', '..' or NUL); the file that names it is "
            "damaged or not robolake's"
        )
    return name


def ensure_within(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> str:
    """`path` if, resolved with every symlink followed, it stays inside `root` (itself resolved).

    Object-store URIs have no links: they are checked by name only (`under_root`).

    Raises:
        OutsideRootError: a symlink (or a `..`) takes `path` outside `root`.
    """
    text = os.fspath(path)
    if "://" in text and not text.startswith("file://"):
        return text
    real_root = os.path.realpath(normalize_uri(root))
    real = os.path.realpath(normalize_uri(text))
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise OutsideRootError(
            f"{text} leads outside {normalize_uri(root)} (it resolves to {real}): robolake reads and writes only "
            "inside the folder it was given; replace the symlink with a real folder or file"
        )
    return text


def under_root(root: str | os.PathLike[str], *names: str, what: str = "name") -> str:
    """`root/names...`, each name checked by `check_name` and the result by `ensure_within`.

    Raises:
        OutsideRootError: a name is not plain, or the path resolves outside `root`.
    """
    base = normalize_uri(root)
    path = join_uri(base, *(check_name(n, what) for n in names))
    return ensure_within(base, path)


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
