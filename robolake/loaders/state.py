"""Loader states of every rank merged into one (`merge_states`), and state files.

A robolake source's position in an epoch is world-size free (`schemas.batch.LoaderState.position`:
the sequences of the epoch's canonical order, `loaders/order.py`, that all ranks together have
consumed). Every rank of a step-synchronous (DDP) run holds the same position, so any one rank's
state says where the whole run is; `merge_states` checks that the states of all ranks agree on it
(one epoch, one position, one plan) and hands back the one state a run of any size loads. A
checkpoint keeps every rank's state and merges them on resume (`training/checkpoint.py`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import Any

from robolake.schemas.batch import IDENTITY, LoaderState
from robolake.storage import DocumentError, parse_json, read_bytes, write_json_atomic

__all__ = ["is_loader_state", "merge_states", "read_state", "write_state"]

MAX_STATE_BYTES = 1 << 20


def is_loader_state(state: Any) -> bool:
    """Whether `state` has the keys of a `LoaderState` (a robolake source's `state_dict()` of this version)."""
    return isinstance(state, Mapping) and set(state) == {f.name for f in dataclasses.fields(LoaderState)}


def merge_states(states: Iterable[Mapping[str, Any]] | Mapping[Any, Mapping[str, Any]]) -> dict[str, Any]:
    """One state, from every rank's: what a run of any world size loads to continue the epoch.

    Args:
        states: Each rank's `state_dict()` (a list, or a mapping keyed by rank as a checkpoint
            holds them), all saved at one step.

    Returns:
        Rank 0's state, once every rank's is checked against it.

    Raises:
        ValueError: no states; a malformed state; states of other data, spec or seed than each
            other; not exactly one state per rank 0..world_size-1; or ranks that disagree on the
            epoch or the position (they were not saved at one step).
    """
    given = list(states.values()) if isinstance(states, Mapping) else list(states)
    if not given:
        raise ValueError("merge_states needs the state of every rank, got none")
    parsed = sorted((LoaderState.from_json(s) for s in given), key=lambda s: s.rank)
    first = parsed[0]
    for s in parsed[1:]:
        for key in (*IDENTITY, "world_size", "sequences"):
            if getattr(s, key) != getattr(first, key):
                raise ValueError(
                    f"the ranks' loader states disagree on {key} (rank {first.rank}: {getattr(first, key)!r}, rank "
                    f"{s.rank}: {getattr(s, key)!r}): they come from different runs; pass the states of one checkpoint"
                )
    ranks = [s.rank for s in parsed]
    if ranks != list(range(first.world_size)):
        missing = sorted(set(range(first.world_size)) - set(ranks))
        raise ValueError(
            f"merge_states needs one state per rank 0..{first.world_size - 1} of the run that saved them, got ranks "
            f"{ranks} (missing {missing}); pass every rank's state of one checkpoint"
        )
    for s in parsed[1:]:
        if s.epoch != first.epoch:
            raise ValueError(
                f"the ranks' loader states disagree on the epoch (rank {first.rank} is in epoch {first.epoch}, rank "
                f"{s.rank} in epoch {s.epoch}): they were not saved at one step; resume from one checkpoint's states"
            )
        if (s.position, s.anchor, s.batches_done) != (first.position, first.anchor, first.batches_done):
            raise ValueError(
                f"the ranks' loader states disagree on the position in epoch {first.epoch} (rank {first.rank}: "
                f"{first.batches_done} batches, sequence {first.position}; rank {s.rank}: {s.batches_done} batches, "
                f"sequence {s.position}): they were not saved at one step; resume from one checkpoint's states"
            )
    return first.to_json()


def write_state(path: str | os.PathLike[str], state: Mapping[str, Any]) -> None:
    """Write a loader state (or `merge_states`' result) to `path` as JSON, atomically: a reader
    sees the old file or the new one, never half.

    Raises:
        ValueError: `state` is not a loader state.
    """
    LoaderState.from_json(state)
    write_json_atomic(os.fspath(path), dict(state))


def read_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The loader state in the JSON file at `path`.

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: the file is not complete JSON (truncated mid-write), or not a loader state.
    """
    name = os.fspath(path)
    try:
        doc = parse_json(read_bytes(name, max_bytes=MAX_STATE_BYTES), f"loader state {name}", max_bytes=MAX_STATE_BYTES)
    except DocumentError as e:
        raise ValueError(
            f"{e} (a state file truncated mid-write?); use an earlier checkpoint's state, and write states with "
            "write_state, which replaces the file atomically"
        ) from None
    if not isinstance(doc, dict):
        raise ValueError(f"loader state {name} holds {type(doc).__name__}, not a JSON object: not a loader state")
    LoaderState.from_json(doc)
    return doc
