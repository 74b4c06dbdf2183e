"""`state_dict` / `load_state_dict` for every batch source, written once.

Each source says what it reads (`_identity`: which loader, the source URI, its version, the
digest of its packing spec), keeps `config`, `rank`, `world_size`, `epoch`, `start` (the position
its current epoch's plan starts from) and `batches_done`, and plans an epoch with `_epoch_plan`
(`loaders/order.py`). This base turns them into the one state shape (`schemas.batch.LoaderState`: where
the epoch's canonical order stands, whoever read it) and, on load, checks the state and moves the
source to its position: `load_state_dict` takes any rank's state of any world size, or the
`merge_states` of all of them.
"""

from __future__ import annotations

from typing import Any

from robolake.loaders.config import LoaderConfig
from robolake.loaders.order import EpochPlan
from robolake.schemas.batch import BatchSource, LoaderState

__all__ = ["ResumableSource"]


class ResumableSource(BatchSource):
    """A `BatchSource` whose position is a `LoaderState` (and whose epoch plan is known)."""

    config: LoaderConfig
    rank: int
    world_size: int
    epoch: int
    start: int
    batches_done: int

    def _identity(self) -> tuple[str, str, int, str]:
        """(loader name, source URI, source version, spec digest) of what this source reads."""
        raise NotImplementedError

    def _epoch_plan(self, epoch: int, start: int) -> EpochPlan:
        """This rank's plan of `epoch` from position `start` (see `plan_epoch`).

        Raises:
            ValueError: the rest of the epoch cannot be split over this world (`plan_epoch`).
        """
        raise NotImplementedError

    def _epoch_sequences(self, epoch: int) -> int:
        """Packed sequences in `epoch`."""
        return self._epoch_plan(epoch, 0).sequences

    @property
    def plan(self) -> EpochPlan:
        """This rank's plan of the current epoch, from where it started."""
        return self._epoch_plan(self.epoch, self.start)

    @property
    def num_batches(self) -> int:
        """Batches of the current epoch's plan on this rank (the same on every rank); after a
        mid-epoch resume, the batches left when it resumed."""
        return len(self.plan)

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its first batch at the next iteration."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.epoch, self.start, self.batches_done = int(epoch), 0, 0

    def _next_epoch_if_done(self) -> None:
        """At the start of an iteration: a finished epoch moves on to the next one."""
        if self.batches_done >= self.num_batches:
            self.epoch, self.start, self.batches_done = self.epoch + 1, 0, 0

    def _state(self) -> LoaderState:
        loader, source, version, spec = self._identity()
        cfg = self.config
        plan = self.plan
        done = min(self.batches_done, len(plan))
        return LoaderState(
            loader=loader,
            source=source,
            version=version,
            spec=spec,
            seed=cfg.seed,
            shuffle=cfg.shuffle,
            drop_last=cfg.drop_last,
            sequences_per_batch=cfg.sequences_per_batch,
            rank=self.rank,
            world_size=self.world_size,
            epoch=self.epoch,
            batches_done=done,
            num_batches=len(plan),
            position=plan.position(done),
            anchor=plan.start,
            sequences=plan.sequences,
        )

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is (`LoaderState.to_json()`): a source of any world size that loads it
        (or the `merge_states` of every rank's) continues with the next step's sequences."""
        return self._state().to_json()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state`: one rank's `state_dict()` from a run of any world size and
        workers, or `merge_states` of all of them.

        Raises:
            ValueError: the state is malformed, or comes from other data, another pack spec or
                seed (see `LoaderState.resume_from`); the epoch's sequences differ; or the rest
                of the epoch has fewer sequences than this world has ranks (`plan_epoch`).
                A refused state leaves the source where it was.
        """
        epoch, position, anchor = self._state().resume_from(state)
        saved_epoch, sequences = state.get("epoch"), state.get("sequences")
        if sequences is not None and saved_epoch is not None and sequences != self._epoch_sequences(saved_epoch):
            raise ValueError(
                f"loader state has {sequences} packed sequences in epoch {saved_epoch} but this loader plans "
                f"{self._epoch_sequences(saved_epoch)}: it comes from other data or another packing; open the source "
                "the state was saved on, or start over without the loader state (set_epoch())"
            )
        if anchor is not None:  # the same world: continue the saved plan, split as the uninterrupted run
            plan = self._epoch_plan(epoch, anchor)
            done = [k for k in range(len(plan) + 1) if plan.position(k) == position]
            if done:
                self.epoch, self.start, self.batches_done = epoch, anchor, done[0]
                return
        self._epoch_plan(epoch, position)  # raises here, before anything moves, if the rest cannot be split
        self.epoch, self.start, self.batches_done = epoch, position, 0
