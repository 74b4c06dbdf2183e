"""Loader states that resume on any world size: one rank's `ElasticState`, `merge_states`, state files.

A robolake source's position in an epoch is world-size free: `position`, the sequences of the
epoch's canonical order that all ranks together have consumed (`loaders/order.py`). Every rank of
a step-synchronous (DDP) run holds the same position, so any one rank's state says where the whole
run is; `merge_states` checks that the states of all ranks agree on it (one epoch, one position,
one plan) and hands back the one state a run of any size loads. A checkpoint keeps every rank's
state and merges them on resume (`training/checkpoint.py`).

`ElasticState` is the `schemas.batch.LoaderState` record plus `position`, `anchor` (where the
saving world's plan of the epoch began: a resume on the same world and batch size keeps it, so it
splits the rest exactly as the uninterrupted run would) and `sequences` (the epoch's sequence
count, a check that the data is the same). It resumes (`resume_from`) when the
source, version, spec digest, seed, shuffle and drop_last match; the world size, the rank, the
DataLoader workers and the sequences per batch may all change. A state from before positions
were recorded resumes only at an epoch boundary, as it did when it was written.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from robolake.schemas.batch import LoaderState
from robolake.storage import DocumentError, parse_json, read_bytes, write_json_atomic

__all__ = ["ElasticState", "is_elastic_state", "merge_states", "read_state", "write_state"]

IDENTITY = ("loader", "source", "version", "spec", "seed", "shuffle", "drop_last")
MAX_STATE_BYTES = 1 << 20


@dataclass(frozen=True, kw_only=True)
class ElasticState(LoaderState):
    """One rank's position (what robolake's `state_dict()` returns, as JSON).

    Attributes (besides `LoaderState`'s):
        position: Sequences of `epoch`'s canonical order consumed by all ranks together after
            this rank's `batches_done` batches (the next step reads from here).
        anchor: Position at which this world's plan of `epoch` began (`batches_done` counts from
            it): 0, or where the run resumed on another world size or batch size.
        sequences: Packed sequences in `epoch`.
    """

    position: int
    anchor: int
    sequences: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.anchor <= self.position <= self.sequences:
            raise ValueError(
                f"loader state has anchor={self.anchor}, position={self.position} outside the epoch's "
                f"{self.sequences} sequences; pass a state from state_dict()"
            )

    @property
    def finished(self) -> bool:
        """The epoch was read to the end (the next batch is the next epoch's first)."""
        return self.num_batches > 0 and self.batches_done == self.num_batches

    def resume_from(self, saved: Mapping[str, Any]) -> tuple[int, int, int | None]:  # type: ignore[override]
        """(epoch, position, anchor) a source in state `self` continues from to pick up `saved`.

        `self` is the loading source's own state; `saved` may come from any rank of any world
        size, or from `merge_states`. A finished epoch continues at the next one's start. The
        anchor is the saved plan's where the world size and batch size are the same (the rest
        of the epoch is split as the uninterrupted run would have), else None (plan from the
        position).

        Raises:
            ValueError: `saved` is malformed, comes from another loader, data, spec or seed, or
                (written before positions were recorded) another world size mid-epoch.
        """
        if isinstance(saved, Mapping) and not {"position", "sequences"} & set(saved):
            return self._resume_legacy(saved)
        old = ElasticState.from_json(saved)
        for key in IDENTITY:
            theirs, mine = getattr(old, key), getattr(self, key)
            if theirs != mine:
                raise ValueError(
                    f"loader state has {key}={theirs!r} but this loader has {mine!r}: it comes from another "
                    f"dataset, pack spec or loader config, and resuming would repeat or skip samples; open the "
                    f"{old.loader} source on the same data ({old.source} version {old.version}), spec and seed, or "
                    "start over without the loader state (set_epoch())"
                )
        if old.finished:
            return old.epoch + 1, 0, 0
        same_world = (old.world_size, old.sequences_per_batch) == (self.world_size, self.sequences_per_batch)
        return old.epoch, old.position, old.anchor if same_world else None

    def _resume_legacy(self, saved: Mapping[str, Any]) -> tuple[int, int, int | None]:
        """A state written before positions were recorded: its epoch split is not this one, so
        it resumes at an epoch boundary only."""
        legacy = dataclasses.fields(LoaderState)
        mine = {f.name: getattr(self, f.name) for f in legacy}
        epoch, done = LoaderState(**mine).resume_from({**saved, "world_size": self.world_size, "rank": self.rank})
        if done:
            raise ValueError(
                f"loader state (epoch {epoch}, batch {done}) was written by an older robolake that did not record the "
                "epoch position, and its split of the epoch is not this one's: resume from a checkpoint taken at an "
                f"epoch boundary, or restart the epoch with set_epoch({epoch})"
            )
        return epoch, 0, 0

    @classmethod
    def from_json(cls, state: Mapping[str, Any]) -> ElasticState:
        if not isinstance(state, Mapping):
            raise ValueError(
                f"a loader state is a JSON object from state_dict(), got {type(state).__name__}; pass the dict itself"
            )
        return super().from_json(state)  # type: ignore[return-value]


def is_elastic_state(state: Any) -> bool:
    """Whether `state` has the keys of an `ElasticState` (a robolake source's `state_dict()`)."""
    return isinstance(state, Mapping) and set(state) == {f.name for f in dataclasses.fields(ElasticState)}


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
    parsed = sorted((ElasticState.from_json(s) for s in given), key=lambda s: s.rank)
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
    ElasticState.from_json(state)
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
    ElasticState.from_json(doc)
    return doc
