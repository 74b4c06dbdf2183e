"""Elastic resume under torchrun (gloo on CPU): 4 ranks stop mid-epoch, 2 (or 3) ranks finish it.

`robolake train --record-samples` writes what every rank trained on; the union of those ledgers
over the old and the new run must be the epoch, each sample exactly once, and each step of the
resumed run must read the next stretch of the epoch's one canonical order (what an in-process
loader of the new world size reads from the checkpoint's merged state). A resume on the same world
size trains exactly as the uninterrupted run: the same losses from the checkpoint on.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from robolake.loaders import LoaderConfig, PackedLoader, merge_states
from robolake.training import ModelConfig
from robolake.training.checkpoint import read_checkpoint

REPO = str(Path(__file__).resolve().parents[2])
pytestmark = pytest.mark.slow  # several torchrun launches of up to 4 ranks: minutes on 2 cores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _train(out: Path, shards: str, *, steps: int, nproc: int, workers: int = 0, every: int = 0) -> None:
    launch = ["-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", str(_free_port())]
    cmd = [sys.executable, *launch, "-m", "robolake.cli", "train", "--shards", shards, "--out", str(out)]
    cmd += ["--steps", str(steps), "--workers", str(workers), "--device", "cpu", "--record-samples", "--no-progress"]
    cmd += ["--checkpoint-every", str(every)]
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def _ledger(out: Path) -> list[dict]:
    """Every line of every rank's sample record, with its rank."""
    lines = []
    for path in sorted((out / "samples").glob("rank*.jsonl")):
        rank = int(path.stem[4:])
        lines += [{**json.loads(x), "rank": rank} for x in path.read_text().splitlines()]
    return lines


def _loader_config() -> LoaderConfig:
    """What `robolake train` opens the shards with (the preset's image size, seed 0, one sequence)."""
    return LoaderConfig(image_size=ModelConfig.preset("tiny").image_size, num_workers=0)


@pytest.mark.parametrize("resume_on,workers", [(2, 1), (3, 0)])
def test_four_ranks_stopped_mid_epoch_resume_on_fewer_with_every_sample_once(packed_data, tmp_path, resume_on, workers):
    shards = str(packed_data.packed)
    epoch = {k for b in PackedLoader(shards, _loader_config()) for k in b.sample_keys}
    assert len(epoch) == packed_data.num_samples
    four = PackedLoader(shards, _loader_config(), rank=0, world_size=4).num_batches
    stop = four // 2
    assert 0 < stop < four, "the run must stop mid-epoch"
    run = tmp_path / "run"
    _train(run, shards, steps=stop, nproc=4)
    saved = read_checkpoint(run / "checkpoints").meta["loaders"]
    assert sorted(saved) == ["0", "1", "2", "3"] and {s["position"] for s in saved.values()} == {4 * stop}

    # The new world reads, step by step, what a loader of that size reads from the merged state.
    merged = merge_states(read_checkpoint(run / "checkpoints").meta["loaders"])
    expected = []
    for rank in range(resume_on):
        loader = PackedLoader(shards, _loader_config(), rank=rank, world_size=resume_on)
        loader.load_state_dict(merged)
        expected.append([[list(k) for k in b.sample_keys] for b in loader])
    rest = len(expected[0])
    _train(run, shards, steps=stop + rest, nproc=resume_on, workers=workers)

    ledger = _ledger(run)
    first = Counter(tuple(k) for x in ledger if x["epoch"] == 0 for k in x["keys"])
    assert set(first) == epoch and max(first.values()) == 1, "the epoch, every sample exactly once"
    old = [x for x in ledger if x["step"] <= stop]
    assert sorted({x["rank"] for x in old}) == [0, 1, 2, 3] and len(old) == 4 * stop
    new = [x for x in ledger if x["step"] > stop]
    assert sorted({x["rank"] for x in new}) == list(range(resume_on)) and len(new) == resume_on * rest
    for x in new:
        assert x["keys"] == expected[x["rank"]][x["step"] - stop - 1], "the rest of the canonical order, unchanged"


def test_a_same_size_resume_trains_as_the_uninterrupted_run(packed_data, tmp_path):
    shards = str(packed_data.packed)
    steps = PackedLoader(shards, _loader_config(), rank=0, world_size=2).num_batches
    stop = steps // 2
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    _train(whole, shards, steps=steps, nproc=2, every=stop)
    # The run as it stood at step `stop` (same schedule: --steps is the whole run's), resumed to the end.
    shutil.copytree(whole, cut)
    for ckpt in (cut / "checkpoints").iterdir():
        if ckpt.name != f"step_{stop:08d}":
            shutil.rmtree(ckpt)
    shutil.rmtree(cut / "samples")  # the resumed run's ledger alone, below
    (cut / "metrics.jsonl").unlink()
    _train(cut, shards, steps=steps, nproc=2)

    def rows(out: Path) -> dict[int, float]:
        return {r["step"]: r["loss"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())}

    a, b = rows(whole), rows(cut)
    assert sorted(b) == list(range(stop + 1, steps + 1))
    assert [b[s] for s in sorted(b)] == [a[s] for s in sorted(b)], "the same losses from the checkpoint on"
    resumed = _ledger(cut)
    reference = {(x["rank"], x["step"]): x["keys"] for x in _ledger(whole)}
    assert resumed and all(x["keys"] == reference[(x["rank"], x["step"])] for x in resumed)
