"""The arrays of one `.npz` / `.npy` episode, read without ever unpickling, and its JSON sidecar.

Simulation codebases save an episode as one `.npz` file (`np.savez(path, obs_qpos=..., actions=...)`)
or as a folder of `.npy` files, one per array. Both are NumPy's own format: a short header (dtype,
shape, order) then the raw bytes. The header is read first, here, so an array's size is checked
against the read budget (`limits`) before a byte of it is allocated, and `robolake inspect` can
list every array without loading any. An array of Python objects is the one thing NumPy cannot
store without pickle: it is refused by name (`np.load(..., allow_pickle=False)`; its header says
so already), never unpickled.

The sidecar (`<stem>.json` beside a `.npz`; `meta.json`, `episode.json` or the one `.json` of a
folder episode) holds what arrays do not: the instruction (`task` or `instruction`, also
`language_instruction`), `success`, and optionally `fps`. It is read through robolake's bounded
document reader (`storage.read_document`, `parse_json`): a sidecar that is not JSON is that
episode's `bad_metadata` quarantine row.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.limits import ReadLimits
from robolake.storage import DocumentError, parse_json, read_document

__all__ = ["ArrayHeader", "EpisodeFiles", "Sidecar", "episode_files", "read_headers", "load_array", "read_sidecar"]

_SIDECARS = ("meta.json", "episode.json", "info.json", "metadata.json")
_TASK_KEYS = ("task", "instruction", "language_instruction")


@dataclass(frozen=True, kw_only=True)
class ArrayHeader:
    """What a `.npy` header declares about one array.

    Attributes:
        name: Array name (the `.npz` member or `.npy` file, without the suffix).
        dtype: Its dtype string (`float32`, `uint8`, `<U12`, `object`).
        shape: Its shape.
        nbytes: Bytes it takes in memory.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def rows(self) -> int:
        return int(self.shape[0]) if self.shape else 1

    @property
    def is_object(self) -> bool:
        return self.dtype in ("object", "O") or self.dtype.startswith("|O")

    @property
    def kind(self) -> str:
        return "O" if self.is_object else np.dtype(self.dtype).kind

    def is_image(self) -> bool:
        """uint8 frames: [T, H, W, 3|4|1]."""
        return self.dtype == "uint8" and len(self.shape) == 4 and self.shape[3] in (1, 3, 4)


@dataclass(frozen=True, kw_only=True)
class EpisodeFiles:
    """Where one episode lives: a `.npz` file or a folder of `.npy` files, and its sidecar."""

    path: str
    sidecar: str | None

    @property
    def is_npz(self) -> bool:
        return self.path.endswith(".npz")


@dataclass(frozen=True, kw_only=True)
class Sidecar:
    """The episode facts a sidecar JSON holds (None: not said)."""

    task: str | None = None
    success: bool | None = None
    fps: float | None = None
    extra: tuple[tuple[str, Any], ...] = ()


def _npy_names(folder: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if n.endswith(".npy") and not n.startswith("."))
    except OSError:
        return []


def is_npy_folder(path: str) -> bool:
    return os.path.isdir(path) and bool(_npy_names(path))


def episode_files(root: str) -> list[EpisodeFiles]:
    """The episodes of a unit: the file itself, the folder itself (of `.npy`), or its `.npz` files and
    `.npy` sub-folders, in name order."""
    if os.path.isfile(root):
        return [EpisodeFiles(path=root, sidecar=_npz_sidecar(root))]
    if is_npy_folder(root) and not any(n.endswith(".npz") for n in os.listdir(root)):
        return [EpisodeFiles(path=root, sidecar=_folder_sidecar(root))]
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name.startswith("."):
            continue
        if name.endswith(".npz") and os.path.isfile(path):
            out.append(EpisodeFiles(path=path, sidecar=_npz_sidecar(path)))
        elif is_npy_folder(path):
            out.append(EpisodeFiles(path=path, sidecar=_folder_sidecar(path)))
    return out


def _npz_sidecar(path: str) -> str | None:
    side = path[: -len(".npz")] + ".json"
    return side if os.path.isfile(side) else None


def _folder_sidecar(folder: str) -> str | None:
    for name in _SIDECARS:
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    found = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    return os.path.join(folder, found[0]) if len(found) == 1 else None


def _header(fp: IO[bytes], name: str, where: str) -> ArrayHeader:
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fp)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(fp)
    except (ValueError, OSError, EOFError) as e:
        raise SourceError("corrupt_file", where, f"array {name!r} has no readable .npy header ({e})") from e
    dtype = np.dtype(dtype)
    text = "object" if dtype.hasobject else str(dtype)
    n = int(np.prod(shape)) if shape else 1
    return ArrayHeader(name=name, dtype=text, shape=tuple(int(x) for x in shape), nbytes=n * dtype.itemsize)


def read_headers(ep: EpisodeFiles) -> dict[str, ArrayHeader]:
    """Every array of the episode, by name, from its headers alone (nothing is loaded).

    Raises:
        SourceError: `corrupt_file`: a `.npz` that is not a whole zip file (truncated), or a header
            that does not parse.
    """
    out: dict[str, ArrayHeader] = {}
    if ep.is_npz:
        try:
            with zipfile.ZipFile(ep.path) as z:
                for member in z.namelist():
                    if not member.endswith(".npy"):
                        continue
                    with z.open(member) as fp:
                        name = member[: -len(".npy")]
                        out[name] = _header(fp, name, ep.path)
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise SourceError(
                "corrupt_file", ep.path, f"not a readable .npz file ({e}); it is truncated or not written by np.savez"
            ) from e
        return out
    for name in _npy_names(ep.path):
        path = os.path.join(ep.path, name)
        with open(path, "rb") as fp:
            out[name[: -len(".npy")]] = _header(fp, name[: -len(".npy")], path)
    return out


def load_array(ep: EpisodeFiles, header: ArrayHeader, limits: ReadLimits) -> np.ndarray:
    """One array in its own dtype: budget-checked from its header, loaded with `allow_pickle=False`.

    Raises:
        SourceError: `pickled` for an object array (refused, never unpickled); `too_large` past the
            read budget; `corrupt_file` when its bytes are short.
    """
    where = ep.path if ep.is_npz else os.path.join(ep.path, header.name + ".npy")
    if header.is_object:
        raise SourceError(
            "pickled",
            where,
            f"array {header.name!r} is an object array, which NumPy stores with pickle; robolake never unpickles "
            "data: save it as numbers or strings (np.asarray(x, dtype=float / str))",
        )
    limits.check_bytes(header.nbytes, where, header.name, f"declares shape {header.shape} =")
    try:
        if ep.is_npz:
            with np.load(ep.path, allow_pickle=False) as z:
                return np.asarray(z[header.name])
        return np.asarray(np.load(where, allow_pickle=False))
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise SourceError("corrupt_file", where, f"array {header.name!r} cannot be read ({e}); it is truncated") from e


def read_sidecar(ep: EpisodeFiles) -> Sidecar:
    """The sidecar's task, success and fps (an empty `Sidecar` when there is none).

    Raises:
        SourceError: `bad_metadata`: it is not JSON, not an object, or a key has the wrong type.
    """
    if ep.sidecar is None:
        return Sidecar()
    try:
        d = parse_json(read_document(ep.sidecar, "episode sidecar"), f"episode sidecar {ep.sidecar}")
    except (DocumentError, OSError) as e:
        raise SourceError("bad_metadata", ep.sidecar, f"{e}; fix or remove the sidecar") from e
    if not isinstance(d, dict):
        raise SourceError("bad_metadata", ep.sidecar, f"a sidecar is a JSON object, got {type(d).__name__}")
    task = next((d[k] for k in _TASK_KEYS if k in d), None)
    if task is not None and not isinstance(task, str):
        raise SourceError("bad_metadata", ep.sidecar, f"the instruction must be a string, got {task!r}")
    success = d.get("success")
    if success is not None and not isinstance(success, bool):
        raise SourceError("bad_metadata", ep.sidecar, f"'success' must be true or false, got {success!r}")
    fps = d.get("fps")
    if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0):
        raise SourceError("bad_metadata", ep.sidecar, f"'fps' must be a positive number, got {fps!r}")
    extra = tuple((str(k), v) for k, v in d.items() if k not in (*_TASK_KEYS, "success", "fps") and _jsonable_scalar(v))
    return Sidecar(task=task, success=success, fps=float(fps) if fps is not None else None, extra=extra)


def _jsonable_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))
