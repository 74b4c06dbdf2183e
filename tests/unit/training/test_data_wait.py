"""The trainer reports how much of each step it spent waiting for the next batch.

No timing threshold: the same batches come from a source that sleeps before each one and from a
list already in memory, and the sleeping source must show the larger wait, in every place the
wait is reported (TrainResult, the progress callback, metrics.jsonl rows).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from robolake.schemas.batch import PackedBatch
from robolake.training import TrainConfig, train
from robolake.training.trainer import TrainProgress


class SlowSource:
    """Yields `batches` once each, sleeping before every one (a starved data path)."""

    def __init__(self, batches: list[PackedBatch], sleep_s: float) -> None:
        self.batches, self.sleep_s = batches, sleep_s

    def __iter__(self) -> Iterator[PackedBatch]:
        for b in self.batches:
            time.sleep(self.sleep_s)
            yield b


def _run(tmp_path, name, source, steps, tiny_config):
    seen: list[TrainProgress] = []
    config = TrainConfig(
        model=tiny_config,
        total_steps=steps,
        warmup_steps=1,
        device="cpu",
        bf16=False,
        log_every=1,
        log_path=str(tmp_path / f"{name}.jsonl"),
        torch_threads=1,
    )
    result = train(config, source, progress=seen.append)
    rows = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
    return result, seen, rows


def test_a_slow_source_raises_the_reported_data_wait(tmp_path, batch_factory, tiny_config):
    batches = [batch_factory(n=2, seed=i) for i in range(3)]
    fast, fast_progress, fast_rows = _run(tmp_path, "fast", list(batches), len(batches), tiny_config)
    slow, slow_progress, slow_rows = _run(tmp_path, "slow", SlowSource(batches, 0.2), len(batches), tiny_config)

    for result, progress, rows in ((fast, fast_progress, fast_rows), (slow, slow_progress, slow_rows)):
        assert 0.0 <= result.data_wait_fraction <= 1.0
        assert 0.0 <= result.data_wait_s <= result.seconds
        assert all(0.0 <= p.data_wait_fraction <= 1.0 for p in progress)
        assert len(rows) == len(batches)
        assert all(0.0 <= r["data_wait_fraction"] <= 1.0 and r["data_wait_s"] <= r["step_time_s"] for r in rows)
    # the sleeps are in the wait, not in the compute: every slow step waited longer than any fast one
    assert slow.data_wait_s > fast.data_wait_s
    assert slow.data_wait_fraction > fast.data_wait_fraction
    assert slow_progress[-1].data_wait_fraction > fast_progress[-1].data_wait_fraction
    assert min(r["data_wait_s"] for r in slow_rows) > max(r["data_wait_s"] for r in fast_rows)
