"""Stream PackedBatches straight from a lake, packing on the fly (no materialised shards).

For notebooks and quick experiments, when writing shards first is not worth it. The stream runs
the same steps as `robolake pack`, lazily:

    sample index (metadata only) -> seeded shuffle (seed, epoch) -> WindowPacker (bounded window)
    -> SequenceMaterializer.rows (Lance take of frames, states, actions) -> collate_rows

The sample index and the packing plan are cheap (lengths only); materialising a batch (random
reads plus JPEG decodes) is the expensive part, so it runs in a small thread pool, a few batches
ahead, in order. Lance takes and PIL decodes release the GIL, which is what makes threads pay
off here; for full-speed training, pack once and use `PackedLoader` or `RayPackedStream`.

The stream is single-process: it does not split work across ranks or workers, and its batches
differ from those of packed shards of the same lake (a window packer, reshuffled per epoch,
instead of the pack run's global plan).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from robolake.lake.lake import Lake
from robolake.loaders.batch import PackedBatch
from robolake.loaders.collate import CollateConfig, collate_rows
from robolake.loaders.shards import LoaderConfig
from robolake.packers.materialize import SequenceMaterializer
from robolake.packers.pipeline import materializer_for
from robolake.packers.samples import SampleIndex, build_sample_index
from robolake.packers.spec import PackSpec
from robolake.packers.window import WindowPacker

__all__ = ["LakeStream"]


class LakeStream:
    """PackedBatches packed on the fly from a lake; iterate once per epoch.

    Example:
        >>> stream = LakeStream(Lake.open("lake/"), PackSpec(max_tokens=2048))  # doctest: +SKIP
        >>> batch = next(iter(stream))                                          # doctest: +SKIP
    """

    def __init__(
        self,
        lake: Lake | str,
        spec: PackSpec | None = None,
        config: LoaderConfig | None = None,
        *,
        num_threads: int | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        """Index the lake's samples (metadata only).

        Args:
            lake: A Lake (read at its version) or its URI (newest version).
            spec: Token model, max_tokens, horizon, normalisation, window and which episodes
                (`spec.where`); its algorithm is ignored (always the window packer).
            config: Batch size, image size, seed and shuffle; padded widths default to the widest
                embodiment of the lake's selected episodes.
            num_threads: Batches materialised in parallel (default: `config.num_workers`, at least 1).
            storage_options: Object-store options, when `lake` is a URI.

        Raises:
            ValueError: no episodes to stream (see `build_sample_index`).
        """
        self.lake = lake if isinstance(lake, Lake) else Lake.open(lake, storage_options=storage_options)
        self.spec = spec or PackSpec()
        self.config = config or LoaderConfig()
        self.num_threads = max(1, num_threads if num_threads is not None else self.config.num_workers)
        self.index: SampleIndex = build_sample_index(self.lake, self.spec)
        self.materializer: SequenceMaterializer = materializer_for(self.lake, self.index, self.spec)
        specs = self.lake.embodiments()
        tags = [t for t in self.index.embodiments if t in specs]
        self.collate = CollateConfig(
            tokens_per_view=self.spec.tokens.tokens_per_view,
            image_size=self.config.image_size,
            max_state_dim=self.config.max_state_dim or max((specs[t].state_dim for t in tags), default=1),
            max_action_dim=self.config.max_action_dim or max((specs[t].action_dim for t in tags), default=1),
        )
        self.epoch = 0
        self.rejected: list[int] = []

    @property
    def num_samples(self) -> int:
        return self.index.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use `epoch`'s shuffle at the next iteration."""
        self.epoch = int(epoch)

    def bins(self, epoch: int | None = None) -> Iterator[list[int]]:
        """Sample ids of each packed sequence of `epoch`, lazily (the packing plan)."""
        epoch = self.epoch if epoch is None else epoch
        n = self.index.num_samples
        order = np.random.default_rng([self.config.seed, epoch]).permutation(n) if self.config.shuffle else np.arange(n)
        packer = WindowPacker(
            max_tokens=self.spec.max_tokens, window=self.spec.window, seed=self.config.seed + epoch, on_oversize=self.spec.on_oversize
        )
        self.rejected = []
        lengths = self.index.length
        return packer.pack(((int(i), int(lengths[i])) for i in order), rejected=self.rejected)

    def _batch(self, group: list[list[int]], first_seq: int) -> PackedBatch:
        table = self.materializer.rows([np.asarray(b, dtype=np.int64) for b in group], range(first_seq, first_seq + len(group)))
        return collate_rows(table, self.collate)

    def __iter__(self) -> Iterator[PackedBatch]:
        per_batch = self.config.sequences_per_batch
        ahead = 2 * self.num_threads
        with ThreadPoolExecutor(self.num_threads, thread_name_prefix="robolake-lake-stream") as pool:
            pending: deque[Future[PackedBatch]] = deque()
            group: list[list[int]] = []
            seq = 0
            for b in self.bins():
                group.append(b)
                if len(group) == per_batch:
                    pending.append(pool.submit(self._batch, group, seq))
                    seq += len(group)
                    group = []
                    if len(pending) >= ahead:
                        yield pending.popleft().result()
            if group:
                pending.append(pool.submit(self._batch, group, seq))
            while pending:
                yield pending.popleft().result()
