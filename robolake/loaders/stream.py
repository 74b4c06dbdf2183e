"""`stream()`: one call from a notebook to PackedBatches of one epoch, whatever the source.

It opens the source with `open_batches` (the one place that tells shards from a lake) and
iterates one epoch. Training jobs that resume or run several epochs keep the `BatchSource` that
`open_batches` returns instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from robolake.lake import Lake
from robolake.loaders.config import LoaderConfig
from robolake.loaders.open import Backend, open_batches
from robolake.packers.spec import PackSpec
from robolake.schemas.batch import PackedBatch

__all__ = ["stream"]


def stream(
    source: str | Lake,
    *,
    backend: Backend = "torch",
    config: LoaderConfig | None = None,
    spec: PackSpec | None = None,
    lake: Lake | str | None = None,
    epoch: int = 0,
    storage_options: dict[str, str] | None = None,
    rank: int | None = None,
    world_size: int | None = None,
) -> Iterator[PackedBatch]:
    """Iterate one epoch of PackedBatches from packed shards or straight from a lake.

    Args: as `open_batches`, plus `epoch`, the epoch whose shuffle to use.

    Raises:
        As `open_batches`.
    """
    source_ = open_batches(
        source,
        config,
        rank=rank,
        world_size=world_size,
        storage_options=storage_options,
        spec=spec,
        backend=backend,
        lake=lake,
    )
    source_.set_epoch(epoch)
    return iter(source_)
