"""`state_dict` / `load_state_dict` for every batch source, written once.

Each source says what it reads (`_identity`: which loader, the source URI, its version, the
digest of its packing spec) and keeps `config`, `rank`, `world_size`, `epoch`, `batches_done`
and `num_batches`; this base turns them into the one `LoaderState` shape and checks a state
strictly on load (`LoaderState.resume_from`: every key, the source and plan, and another world
size only at an epoch boundary).
"""

from __future__ import annotations

from typing import Any

from robolake.loaders.config import LoaderConfig
from robolake.schemas.batch import BatchSource, LoaderState

__all__ = ["ResumableSource"]


class ResumableSource(BatchSource):
    """A `BatchSource` whose position is a `LoaderState` (and whose epoch length is known)."""

    config: LoaderConfig
    rank: int
    world_size: int
    epoch: int
    batches_done: int

    def _identity(self) -> tuple[str, str, int, str]:
        """(loader name, source URI, source version, spec digest) of what this source reads."""
        raise NotImplementedError

    @property
    def num_batches(self) -> int:
        raise NotImplementedError

    def _state(self) -> LoaderState:
        loader, source, version, spec = self._identity()
        cfg = self.config
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
            batches_done=min(self.batches_done, self.num_batches),
            num_batches=self.num_batches,
        )

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is (`LoaderState.to_json()`): load it into a new source to continue with the next batch."""
        return self._state().to_json()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state` (from `state_dict()` of a source over the same data and plan).

        Raises:
            ValueError: the state is malformed or comes from other data or another plan, or from
                another world size mid-epoch (see `LoaderState.resume_from`).
        """
        self.epoch, self.batches_done = self._state().resume_from(state)
