"""Checkpoints that resume a run exactly, and hold nothing but tensors and JSON.

A resumed run matches an uninterrupted one only if everything that decides the next step is
restored: weights, optimizer moments, the schedule's position, every random number generator
(torch CPU and CUDA, numpy, Python, and the trainer's own noise generator), the step counter, and
the position in the data stream. The data position comes from the batch source's `state_dict()`
(every `BatchSource` has one), and every rank has its own: a checkpoint keeps all of them, keyed
by rank (rank 0 gathers them before it writes), and on resume each rank loads the one it saved.
For a plain iterable, or a checkpoint without loader states, the trainer replays the stream up to
the saved step instead.

A run may resume on another world size, and with other DataLoader workers, at any step: robolake's
sources place an epoch by its position in one canonical order that does not depend on the world
(`loaders/order.py`), so on resume the saved states of all ranks are merged into one
(`loaders.merge_states`, which refuses states that disagree on the epoch or position) and every
rank of the new run, whatever their number, continues from it with the rest of the epoch exactly
once. States of another batch source (a user's own `BatchSource`) are handed over as saved: rank r
gets the state rank r saved (rank 0's where the checkpoint has no rank r), and the source decides.

**What is on disk.** A checkpoint is a directory `step_{step:08d}/`:

- `model.safetensors`: the model's weights; `optimizer.safetensors`: the optimizer's state
  tensors (AdamW's moments and step counts), keyed `state.{param}.{name}`;
- `checkpoint.json`: everything else, as plain JSON: the step, the optimizer's parameter groups,
  the scheduler's state, the RNG states (byte states base64-encoded), every rank's loader state,
  `extra` (model config, policy card) and `lineage` (the lake, version and tag, the pack
  manifest's hash and spec, each rank's sample ledger).

Checkpoints are handed around (a colleague's run to evaluate, a run directory to fine-tune), so
loading one must never run code: safetensors holds only tensors, JSON only data, and nothing is
unpickled. The file names inside a checkpoint are fixed here, never read from it, and a file
that is a symlink is refused, so a checkpoint cannot make a reader open files outside it.
Checkpoints of older robolake versions are pickles (`step_N.pt`): they are loaded only with
`torch.load(weights_only=True)` (PyTorch's restricted unpickler, which builds tensors and plain
containers and refuses everything else), and where that refuses them the error says how to
convert them once: `robolake convert-checkpoint RUN --trust`, which unpickles them only because
the user said they trust their author.

**Atomic writes.** A checkpoint is written into a hidden temporary directory beside its final
name, every file fsync'ed, `checkpoint.json` last, and then renamed into place in one step, so a
run killed mid-save leaves the previous checkpoints intact and no half-written one that
`latest_checkpoint` could pick. Re-saving a step that exists moves the old directory aside first
and removes it only after the new one is in place (a save killed in between is put back by the
next one).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import pickle
import random
import re
import shutil
import uuid
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch
from torch import nn

from robolake.storage import DocumentError, ensure_within, parse_json

__all__ = [
    "CheckpointMeta",
    "Checkpoint",
    "CheckpointState",
    "LegacyCheckpointError",
    "checkpoint_step",
    "convert_legacy_checkpoint",
    "latest_checkpoint",
    "legacy_checkpoints",
    "load_checkpoint",
    "read_checkpoint",
    "resolve_checkpoint",
    "sample_ledger",
    "save_checkpoint",
    "write_checkpoint",
]

FORMAT = "robolake-checkpoint"
FORMAT_VERSION = 1
META_NAME = "checkpoint.json"
TENSOR_GROUPS = ("model", "optimizer")  # `{group}.safetensors`; names fixed here, never read from a file
MAX_META_BYTES = 256 * 2**20  # a checkpoint.json bigger than this is not one robolake wrote

_DIR_NAME = re.compile(r"^step_(\d+)$")
_LEGACY_NAME = re.compile(r"^step_(\d+)\.pt$")
_OPT_KEY = re.compile(r"^(state|group)\.(\d+)\.(.+)$")


class LegacyCheckpointError(ValueError):
    """A pickled checkpoint of an older robolake that the restricted unpickler refuses; convert it
    with `robolake convert-checkpoint RUN --trust` (callers branch on it to say so)."""


# --- reading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint as read from disk: its JSON now, its tensors when asked for.

    Attributes:
        path: The checkpoint directory (or the legacy `.pt` file it was read from).
        step: Optimizer steps completed when it was saved.
        meta: The parsed `checkpoint.json` (plain JSON data).
    """

    path: Path
    step: int
    meta: dict[str, Any]
    _tensors: dict[str, dict[str, torch.Tensor]] | None = field(default=None, repr=False, compare=False)

    @property
    def extra(self) -> dict[str, Any]:
        """Free-form JSON saved with it (the model config and policy card of `robolake train`)."""
        return dict(self.meta.get("extra") or {})

    @property
    def lineage(self) -> dict[str, Any] | None:
        """What the run trained on (lake, version, tag, pack manifest hash and spec, sample
        ledgers), or None for a checkpoint written before robolake recorded it."""
        lineage = self.meta.get("lineage")
        return dict(lineage) if isinstance(lineage, dict) else None

    @property
    def loader_states(self) -> dict[int, Any] | None:
        loaders = self.meta.get("loaders")
        return None if loaders is None else {int(r): s for r, s in loaders.items()}

    def tensors(self, group: str) -> dict[str, torch.Tensor]:
        """The tensors of `group` ("model" or "optimizer"), on the CPU ({} if it has none).

        Raises:
            ValueError: the file is not a safetensors file, or is a symlink.
        """
        if group not in TENSOR_GROUPS:
            raise KeyError(f"unknown tensor group {group!r}; a checkpoint has {TENSOR_GROUPS}")
        if self._tensors is not None:
            return dict(self._tensors.get(group, {}))
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = self.path / f"{group}.safetensors"
        if not path.exists() and not path.is_symlink():
            return {}
        _refuse_symlink(path)
        try:
            return load_file(str(path), device="cpu")
        except (SafetensorError, OSError, ValueError) as e:
            raise ValueError(
                f"checkpoint {self.path}: {path.name} is not a readable safetensors file ({e}); "
                "the checkpoint is damaged: use an earlier one"
            ) from e

    def model_state(self) -> dict[str, torch.Tensor]:
        """The model's `state_dict`, ready for `load_state_dict`."""
        return self.tensors("model")

    def optimizer_state(self) -> dict[str, Any] | None:
        """The optimizer's `state_dict` rebuilt from its tensors and JSON, or None if not saved."""
        saved = self.meta.get("optimizer")
        if saved is None:
            return None
        state: dict[int, dict[str, Any]] = {}
        groups = [dict(g) for g in saved["param_groups"]]
        for key, value in self.tensors("optimizer").items():
            m = _OPT_KEY.match(key)
            if m is None:
                raise ValueError(f"checkpoint {self.path}: optimizer tensor {key!r} is not one robolake writes")
            kind, index, name = m.group(1), int(m.group(2)), m.group(3)
            if kind == "state":
                state.setdefault(index, {})[name] = value
            else:
                groups[index][name] = value
        for pid, values in (saved.get("scalars") or {}).items():
            state.setdefault(int(pid), {}).update(values)
        for g in groups:  # JSON has no tuples; AdamW's betas were one
            if isinstance(g.get("betas"), list):
                g["betas"] = tuple(g["betas"])
        return {"state": state, "param_groups": groups}


def read_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Read the checkpoint at `path`: a checkpoint directory, a checkpoints directory or a run
    directory (the newest checkpoint there), or a legacy `step_N.pt` file.

    Nothing is unpickled: a checkpoint directory holds JSON and safetensors, and a legacy file
    is read with `torch.load(weights_only=True)` only.

    Raises:
        FileNotFoundError: no checkpoint at `path`.
        LegacyCheckpointError: a legacy pickle the restricted unpickler refuses (the message names
            the `robolake convert-checkpoint` command that converts it).
        ValueError: the checkpoint is damaged or not robolake's.
    """
    p = resolve_checkpoint(path)
    if p.is_file():
        return _read_legacy(p)
    meta_path = p / META_NAME
    _refuse_symlink(meta_path)
    if meta_path.stat().st_size > MAX_META_BYTES:
        raise ValueError(
            f"checkpoint {p}: {META_NAME} is larger than {MAX_META_BYTES >> 20} MiB; it is not one robolake wrote"
        )
    try:
        meta = parse_json(meta_path.read_bytes(), f"checkpoint {p}: {META_NAME}", max_bytes=MAX_META_BYTES)
    except DocumentError as e:
        raise ValueError(f"{e}; the checkpoint is damaged: use an earlier one") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f'checkpoint {p}: {META_NAME} is not a robolake checkpoint (no "format": "{FORMAT}")')
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"checkpoint {p} has format version {meta.get('format_version')!r}; this robolake reads "
            f"{FORMAT_VERSION}: upgrade robolake (pip install -U robolake)"
        )
    step = meta.get("step")
    if not isinstance(step, int) or step < 0:
        raise ValueError(f'checkpoint {p}: {META_NAME} field "step" is {step!r}, not a step count')
    return Checkpoint(path=p, step=step, meta=meta)


def resolve_checkpoint(path: str | os.PathLike[str]) -> Path:
    """The checkpoint `path` names: a checkpoint directory or legacy `.pt` file as it is, else the
    newest checkpoint in `path` or in `path/checkpoints`.

    Raises:
        FileNotFoundError: no checkpoint there.
    """
    p = Path(path)
    if p.is_file() or (p / META_NAME).is_file():
        return p
    for d in (p, p / "checkpoints"):
        ensure_within(p, d)  # a run's checkpoints/ linked elsewhere is refused, not followed
        ckpt = latest_checkpoint(d)
        if ckpt is not None:
            return ckpt
    raise FileNotFoundError(
        f"no checkpoint at {p} (looked for step_*/ in it and in {p / 'checkpoints'}); train one with `robolake train`"
    )


def latest_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The checkpoint with the highest step in `directory` (a `step_N/` directory, or a legacy
    `step_N.pt` file where no directory of that step exists), or None."""
    d = Path(directory)
    if not d.is_dir():
        return None
    ensure_within(d.parent, d)
    found: list[tuple[int, int, Path]] = []
    for f in d.iterdir():
        if _DIR_NAME.match(f.name) or _LEGACY_NAME.match(f.name):
            ensure_within(d, f)  # a step_N linked out of the folder would load (or resume) someone else's files
        if (m := _DIR_NAME.match(f.name)) and (f / META_NAME).is_file():
            found.append((int(m.group(1)), 1, f))  # a converted directory wins over its .pt
        elif (m := _LEGACY_NAME.match(f.name)) and f.is_file():
            found.append((int(m.group(1)), 0, f))
    return max(found)[2] if found else None


def checkpoint_step(path: str | os.PathLike[str]) -> int:
    """The step a checkpoint path's name says (`step_00000012` or `step_00000012.pt` -> 12)."""
    name = Path(path).name
    m = _DIR_NAME.match(name) or _LEGACY_NAME.match(name)
    if m is None:
        raise ValueError(f"{path} is not named like a checkpoint (step_NNNNNNNN)")
    return int(m.group(1))


def _refuse_symlink(path: Path) -> None:
    if path.is_symlink():
        raise ValueError(
            f"checkpoint file {path} is a symlink; a checkpoint holds its own files: copy the real file there"
        )


# --- legacy pickles -------------------------------------------------------------------------------


def legacy_checkpoints(path: str | os.PathLike[str]) -> list[Path]:
    """The legacy `step_N.pt` files `path` names: the file itself, or those in `path` and in
    `path/checkpoints`, oldest step first."""
    p = Path(path)
    if p.is_file():
        return [p]
    out: list[tuple[int, Path]] = []
    for d in (p, p / "checkpoints"):
        if d.is_dir():
            out += [(int(m.group(1)), f) for f in d.iterdir() if (m := _LEGACY_NAME.match(f.name)) and f.is_file()]
    return [f for _, f in sorted(out)]


def _convert_hint(path: Path) -> str:
    run = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    return f"`robolake convert-checkpoint {run} --trust`"


def _read_legacy(path: Path) -> Checkpoint:
    if tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2]) < (2, 6):
        # torch.load(weights_only=True) could still run code before 2.6 (CVE-2025-32434).
        raise LegacyCheckpointError(
            f"{path} is a pickled checkpoint of an older robolake and this torch ({torch.__version__}) cannot load "
            f"pickles safely; upgrade torch to >= 2.6, or convert it with {_convert_hint(path)} if you trust its author"
        )
    try:
        with warnings.catch_warnings():  # the restricted unpickler's note on a pickle protocol it was not written with
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError, TypeError, ValueError, EOFError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise LegacyCheckpointError(
            f"{path} is a pickled checkpoint of an older robolake that holds more than tensors; robolake loads "
            f"checkpoints without unpickling code ({first[:160]}). If you trust whoever made it, convert it once "
            f"with {_convert_hint(path)} (it writes step_N/ with safetensors weights and JSON beside it)"
        ) from None
    return _from_payload(path, payload)


def _from_payload(path: Path, payload: Any) -> Checkpoint:
    """A legacy `{"step", "model", "optimizer"?, "scheduler"?, "rng"?, "loaders"?, "extra"?}`
    payload as a Checkpoint (tensors in memory, the rest made JSON)."""
    if not isinstance(payload, dict) or "model" not in payload or "step" not in payload:
        raise ValueError(f'{path} is not a robolake checkpoint (a dict with "step" and "model")')
    tensors: dict[str, dict[str, torch.Tensor]] = {"model": _tensor_dict(payload["model"], f"{path} model")}
    typed = _meta(
        step=int(payload["step"]),
        optimizer=None,
        scheduler=payload.get("scheduler"),
        rng=_rng_json(payload["rng"]) if payload.get("rng") is not None else None,
        loader_states=payload.get("loaders"),
        extra=payload.get("extra") or {},
        lineage=None,
    )
    meta: dict[str, Any] = dict(typed)  # plus what a conversion adds: "converted_from"
    if payload.get("optimizer") is not None:
        tensors["optimizer"], meta["optimizer"] = _split_optimizer(payload["optimizer"])
    meta["converted_from"] = path.name
    _check_json(meta, path)
    return Checkpoint(path=path, step=int(payload["step"]), meta=meta, _tensors=tensors)


def convert_legacy_checkpoint(path: str | os.PathLike[str], *, trust: bool = False) -> Path:
    """Write legacy pickle `path` (`step_N.pt`) as the checkpoint directory `step_N/` beside it.

    Args:
        trust: Unpickle it fully (`weights_only=False`), which runs whatever code the file holds:
            only for files from someone you trust. Without it, only files the restricted
            unpickler accepts are converted.

    Returns:
        The new checkpoint directory (the `.pt` file is left as it was).

    Raises:
        LegacyCheckpointError: `trust` is False and the file needs the full unpickler.
        ValueError: it is not a robolake checkpoint, or holds values JSON cannot hold.
    """
    p = Path(path)
    if trust:
        payload = torch.load(p, map_location="cpu", weights_only=False)  # the user vouched for this file
        ckpt = _from_payload(p, payload)
    else:
        ckpt = _read_legacy(p)
    return write_checkpoint(
        p.parent,
        step=ckpt.step,
        tensors={g: ckpt.tensors(g) for g in TENSOR_GROUPS},
        meta={k: v for k, v in ckpt.meta.items() if k not in ("format", "format_version", "step")},
    )


# --- writing ----------------------------------------------------------------------------------------


def write_checkpoint(
    directory: str | os.PathLike[str],
    *,
    step: int,
    tensors: Mapping[str, Mapping[str, torch.Tensor]],
    meta: Mapping[str, Any],
) -> Path:
    """Write `step_{step:08d}/` into `directory` atomically: `tensors[group]` as `{group}.safetensors`,
    `meta` (plain JSON) with the format and step as `checkpoint.json`. Returns its path.

    The one writer of checkpoints (the trainer's `save_checkpoint`, RL's policy checkpoint and the
    legacy converter all come here).

    Raises:
        ValueError: `step` is negative, a group is unknown, or `meta` holds what JSON cannot.
    """
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an int >= 0, got {step!r}")
    unknown = set(tensors) - set(TENSOR_GROUPS)
    if unknown:
        raise ValueError(f"unknown tensor groups {sorted(unknown)}; a checkpoint holds {TENSOR_GROUPS}")
    from safetensors.torch import save_file

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ensure_within(out.parent, out)  # checkpoints/ linked elsewhere: never write (or recover) through it
    _recover(out)
    name = f"step_{step:08d}"
    final = Path(ensure_within(out, out / name))  # replacing a step_N linked elsewhere would act on what it points at
    payload = {"format": FORMAT, "format_version": FORMAT_VERSION, "step": step, **dict(meta)}
    text = json.dumps(payload, indent=1, sort_keys=True, allow_nan=True)  # raises on a non-JSON value
    tmp = out / f".{name}.tmp-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        for group, values in tensors.items():
            if values:
                target = tmp / f"{group}.safetensors"
                save_file(_storable(values, f"{group} tensors"), str(target))
                _fsync(target)
        (tmp / META_NAME).write_text(text)
        _fsync(tmp / META_NAME)
        _fsync(tmp)
        old = None
        if final.exists():
            old = out / f".{name}.old-{uuid.uuid4().hex[:12]}"
            os.replace(final, old)
        os.replace(tmp, final)
        _fsync(out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _recover(out: Path) -> None:
    """Clear what a save killed mid-way left: a temporary directory is dropped, a checkpoint
    moved aside whose replacement never landed is put back."""
    for f in out.iterdir():
        m = re.match(r"^\.(step_\d+)\.(tmp|old)-[0-9a-f]+$", f.name)
        if m is None or not f.is_dir():
            continue
        final = out / m.group(1)
        if m.group(2) == "old" and not final.exists():
            os.replace(f, final)
        else:
            shutil.rmtree(f, ignore_errors=True)


def _fsync(path: Path) -> None:
    with contextlib.suppress(OSError):  # a filesystem without fsync on directories
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _storable(values: Mapping[str, torch.Tensor], what: str) -> dict[str, torch.Tensor]:
    """CPU, contiguous tensors with no two sharing memory (safetensors refuses shared storage)."""
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for key, t in values.items():
        if not torch.is_tensor(t):
            raise ValueError(f"{what}: {key!r} is a {type(t).__name__}, not a tensor")
        t = t.detach().cpu().contiguous()
        storage = t.untyped_storage().data_ptr()
        if t.numel() and storage in seen:  # tied weights, views of one buffer: each gets its own copy
            t = t.clone()
            storage = t.untyped_storage().data_ptr()
        seen.add(storage)
        out[key] = t
    return out


def _tensor_dict(values: Any, what: str) -> dict[str, torch.Tensor]:
    if not isinstance(values, Mapping) or not all(torch.is_tensor(v) for v in values.values()):
        raise ValueError(f"{what} is not a mapping of names to tensors")
    return {str(k): v for k, v in values.items()}


def _split_optimizer(state_dict: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """An optimizer `state_dict` as (tensors, JSON): state tensors keyed `state.{param}.{name}`,
    tensor-valued group settings `group.{i}.{name}`, plain values in the JSON."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for pid, values in state_dict["state"].items():
        for name, v in values.items():
            if torch.is_tensor(v):
                tensors[f"state.{int(pid)}.{name}"] = v
            else:
                scalars.setdefault(str(int(pid)), {})[name] = v
    groups = []
    for i, g in enumerate(state_dict["param_groups"]):
        plain = {}
        for name, v in g.items():
            if torch.is_tensor(v):
                tensors[f"group.{i}.{name}"] = v
            else:
                plain[name] = v
        groups.append(plain)
    return tensors, {"param_groups": groups, "scalars": scalars}


class CheckpointMeta(TypedDict):
    """checkpoint.json as its producers write it (`write_checkpoint` adds "format", "format_version").

    The values are plain JSON: optimizer and scheduler state without tensors, the RNG states, each
    rank's loader state, the run's extras (the policy card) and lineage.
    """

    step: int
    optimizer: dict[str, Any] | None
    scheduler: Any
    rng: dict[str, Any] | None
    loaders: dict[str, Any] | None
    extra: dict[str, Any]
    lineage: dict[str, Any] | None


def _meta(
    *,
    step: int,
    optimizer: dict[str, Any] | None,
    scheduler: Any,
    rng: dict[str, Any] | None,
    loader_states: Mapping[Any, Any] | None,
    extra: Mapping[str, Any],
    lineage: Mapping[str, Any] | None,
) -> CheckpointMeta:
    return {
        "step": step,
        "optimizer": optimizer,
        "scheduler": scheduler,
        "rng": rng,
        "loaders": None if loader_states is None else {str(r): s for r, s in loader_states.items()},
        "extra": dict(extra),
        "lineage": None if lineage is None else dict(lineage),
    }


def _check_json(meta: Mapping[str, Any], where: Any) -> None:
    try:
        json.dumps(meta, allow_nan=True)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"{where}: a checkpoint's metadata must be plain JSON (numbers, strings, lists, dicts): {e}"
        ) from e


# --- RNG states as JSON --------------------------------------------------------------------------------


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.detach().cpu().to(torch.uint8).numpy().tobytes()).decode("ascii")


def _unb64(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8).clone()


def _rng_state(generator: torch.Generator | None) -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "generator": generator.get_state() if generator is not None else None,
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return _rng_json(state)


def _rng_json(state: Mapping[str, Any]) -> dict[str, Any]:
    """RNG states (torch byte tensors, numpy's tuple, Python's tuple) as JSON values."""
    kind, keys, pos, has_gauss, cached = state["numpy"]
    version, internal, gauss_next = state["python"]
    out: dict[str, Any] = {
        "torch": _b64(state["torch"]),
        "numpy": {
            "kind": str(kind),
            "keys": np.asarray(keys).tolist(),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "python": {"version": int(version), "state": list(internal), "gauss_next": gauss_next},
        "generator": None if state.get("generator") is None else _b64(state["generator"]),
    }
    if state.get("cuda") is not None:
        out["cuda"] = [_b64(t) for t in state["cuda"]]
    return out


def _set_rng_state(state: Mapping[str, Any], generator: torch.Generator | None) -> None:
    torch.set_rng_state(_unb64(state["torch"]))
    n = state["numpy"]
    np.random.set_state(
        (n["kind"], np.asarray(n["keys"], dtype=np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"]), py["gauss_next"]))
    if generator is not None and state.get("generator") is not None:
        generator.set_state(_unb64(state["generator"]))
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_unb64(s) for s in state["cuda"]])


# --- the trainer's checkpoints ------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointState:
    """What a loaded checkpoint hands back besides the restored objects.

    Attributes:
        step: Optimizer steps completed when it was saved.
        loader_states: Every rank's loader `state_dict()` at that step, keyed by rank (all ranks
            of the run that saved it), or None.
        extra: Free-form metadata saved with it.
        lineage: What the run trained on, or None (written before lineage was recorded).
    """

    step: int
    loader_states: dict[int, Any] | None
    extra: dict[str, Any]
    lineage: dict[str, Any] | None = None

    @property
    def world_size(self) -> int | None:
        """Ranks of the run that saved the loader states (None without them)."""
        return None if self.loader_states is None else len(self.loader_states)

    def loader_source_rank(self, rank: int) -> int:
        """The rank whose saved loader state rank `rank` resumes from: its own, or 0 where the
        saving run had no rank `rank` (fewer ranks)."""
        return rank if self.loader_states is not None and rank in self.loader_states else 0

    def loader_state(self, rank: int) -> Any:
        """The loader state rank `rank` resumes from, or None: robolake's states of every rank
        merged into one (`loaders.merge_states`: any world size continues from it); another
        source's, the state rank `rank` saved (see `loader_source_rank`).

        Raises:
            ValueError: robolake's states that disagree (on the epoch, the position, the data).
        """
        if self.loader_states is None:
            return None
        from robolake.loaders.state import is_loader_state, merge_states

        if all(is_loader_state(s) for s in self.loader_states.values()):
            return merge_states(self.loader_states)
        return self.loader_states[self.loader_source_rank(rank)]


def save_checkpoint(
    directory: str | os.PathLike[str],
    *,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    generator: torch.Generator | None = None,
    loader_states: Mapping[int, Any] | None = None,
    extra: dict[str, Any] | None = None,
    lineage: Mapping[str, Any] | None = None,
) -> Path:
    """Write checkpoint `step_{step:08d}/` into `directory` atomically and return its path.

    Args:
        loader_states: Every rank's loader `state_dict()` keyed by rank (0 .. world_size-1), or None.
        extra: JSON-able metadata (the model config, the policy card).
        lineage: JSON-able record of the data the run trained on (`robolake lineage` reads it).

    Raises:
        ValueError: `loader_states` is not keyed by the ranks 0 .. n-1, or something to be saved
            as JSON is not plain JSON.
    """
    if loader_states is not None and sorted(loader_states) != list(range(len(loader_states))):
        raise ValueError(f"loader_states must be keyed by every rank 0..n-1, got ranks {sorted(loader_states)}")
    opt_tensors, opt_json = _split_optimizer(optimizer.state_dict())
    meta = _meta(
        step=step,
        optimizer=opt_json,
        scheduler=scheduler.state_dict(),
        rng=_rng_state(generator),
        loader_states=loader_states,
        extra=dict(extra or {}),
        lineage=lineage,
    )
    _check_json(meta, f"checkpoint step {step}")
    return write_checkpoint(
        directory, step=step, tensors={"model": model.state_dict(), "optimizer": opt_tensors}, meta=meta
    )


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    generator: torch.Generator | None = None,
    restore_rng: bool = True,
) -> CheckpointState:
    """Restore a `save_checkpoint` checkpoint into the given objects (nothing is unpickled).

    Raises:
        FileNotFoundError: `path` does not exist.
        LegacyCheckpointError: a legacy pickle that must be converted first (the message says how).
        ValueError: the checkpoint is damaged, or lacks what is asked of it.
        RuntimeError: the model's parameters do not match the checkpoint (wrong preset?).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no checkpoint at {p}")
    ckpt = read_checkpoint(p)
    model.load_state_dict(ckpt.model_state())
    if optimizer is not None:
        opt = ckpt.optimizer_state()
        if opt is None:
            raise ValueError(
                f"checkpoint {ckpt.path} holds no optimizer state (a policy checkpoint?); it cannot resume training"
            )
        optimizer.load_state_dict(opt)
    if scheduler is not None and ckpt.meta.get("scheduler") is not None:
        scheduler.load_state_dict(ckpt.meta["scheduler"])
    if restore_rng and ckpt.meta.get("rng") is not None:
        _set_rng_state(ckpt.meta["rng"], generator)
    return CheckpointState(step=ckpt.step, loader_states=ckpt.loader_states, extra=ckpt.extra, lineage=ckpt.lineage)


def sample_ledger(directory: str | os.PathLike[str] | None, rank: int) -> dict[str, Any] | None:
    """What rank `rank`'s sample record (`directory/rank{rank}.jsonl`) holds so far: its name,
    lines, bytes and SHA-256, so a checkpoint pins exactly the samples it was trained on. None
    without a directory or file."""
    if directory is None:
        return None
    path = Path(directory) / f"rank{int(rank)}.jsonl"
    if not path.is_file():
        return None
    digest, lines, size = hashlib.sha256(), 0, 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            lines += chunk.count(b"\n")
            size += len(chunk)
    return {"file": path.name, "lines": lines, "bytes": size, "sha256": digest.hexdigest()}
