"""`robolake train` under torchrun (2 gloo ranks on CPU): every rank reads its own share.

The real CLI runs under `torch.distributed.run`; `--record-samples` writes what each rank trained
on, and the test checks from those files that the ranks' samples are disjoint, cover the epoch,
and that both ranks take the same number of steps. Before the fix the loader was built before the
process group started and every rank read the whole epoch.

The shards run is then resumed mid-epoch: the checkpoint keeps every rank's loader state, each
rank continues where the run stood, and one process instead of two continues it too (the states
merged: `test_elastic_torchrun.py` checks resizes in depth).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from robolake.loaders import LakeStream, LoaderConfig, PackedLoader, merge_states
from robolake.packers import PackSpec, TokenLengthConfig
from robolake.training import ModelConfig, latest_checkpoint
from robolake.training.checkpoint import read_checkpoint

REPO = str(Path(__file__).resolve().parents[2])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _train(out: Path, *source: str, steps: int, nproc: int = 2) -> subprocess.CompletedProcess:
    launch = (
        ["-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", str(_free_port())]
        if nproc > 1
        else []
    )
    cmd = [
        sys.executable,
        *launch,
        "-m",
        "robolake.cli",
        "train",
        *source,
        "--out",
        str(out),
        "--steps",
        str(steps),
        "--workers",
        "0",
        "--device",
        "cpu",
        "--record-samples",
        "--no-progress",
        "--max-tokens",
        "1024",
    ]
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _torchrun_train(out: Path, *source: str, steps: int) -> list[list[dict]]:
    res = _train(out, *source, steps=steps)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return [[json.loads(x) for x in (out / "samples" / f"rank{r}.jsonl").read_text().splitlines()] for r in range(2)]


def _check(records: list[list[dict]], epoch_keys: set[tuple[str, int]], steps: int) -> None:
    assert [len(r) for r in records] == [steps, steps], "both ranks take the same number of steps"
    assert [[x["step"] for x in r] for r in records] == [list(range(1, steps + 1))] * 2
    first = [[(k[0], k[1]) for x in r if x["epoch"] == 0 for k in x["keys"]] for r in records]
    assert len([x for x in records[0] if x["epoch"] == 0]) == len([x for x in records[1] if x["epoch"] == 0])
    assert not set(first[0]) & set(first[1]), "ranks must never share a sample"
    assert len(first[0]) + len(first[1]) == len(epoch_keys), "each sample once per epoch"
    assert set(first[0]) | set(first[1]) == epoch_keys, "the ranks together cover the epoch"
    assert any(x["epoch"] == 1 for x in records[0]), "the run went on into the next epoch"


def test_torchrun_on_packed_shards_reads_disjoint_data(packed_data, tmp_path):
    shards = str(packed_data.packed)
    per_rank = PackedLoader(shards, LoaderConfig(num_workers=0), rank=0, world_size=2).num_batches
    keys = {
        k
        for b in PackedLoader(shards, LoaderConfig(num_workers=0, image_size=8), rank=0, world_size=1)
        for k in b.sample_keys
    }
    assert len(keys) == packed_data.num_samples
    records = _torchrun_train(tmp_path / "run", "--shards", shards, steps=per_rank + 1)
    _check(records, keys, per_rank + 1)

    # The checkpoint at the end holds both ranks' loader states, keyed by rank.
    ckpt = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert ckpt is not None
    saved = read_checkpoint(ckpt).meta["loaders"]  # JSON beside the safetensors weights
    assert sorted(saved) == ["0", "1"] and [saved[r]["rank"] for r in ("0", "1")] == [0, 1]
    # Resumed mid-epoch 1 on two ranks, each continues with its own next batches of that epoch.
    assert per_rank > 2, "the resume must stop mid-epoch"
    resumed = _torchrun_train(tmp_path / "run", "--shards", shards, steps=per_rank + 2)
    for rank, lines in enumerate(resumed):
        assert [x["step"] for x in lines] == list(range(1, per_rank + 3))
        loader = PackedLoader(shards, LoaderConfig(num_workers=0, image_size=8), rank=rank, world_size=2)
        loader.set_epoch(1)
        expected = [[list(k) for k in b.sample_keys] for b, _ in zip(loader, range(2), strict=False)]
        assert [(x["epoch"], x["keys"]) for x in lines[-2:]] == [(1, k) for k in expected]
    # One process continues the two ranks' mid-epoch states (merged): the next stretch of epoch 1.
    merged = merge_states(read_checkpoint(latest_checkpoint(tmp_path / "run" / "checkpoints")).meta["loaders"])
    alone = PackedLoader(shards, LoaderConfig(num_workers=0, image_size=8))
    alone.load_state_dict(merged)
    single = _train(tmp_path / "run", "--shards", shards, steps=per_rank + 3, nproc=1)
    assert single.returncode == 0, single.stderr[-2000:]
    assert "saved by 2 ranks and this run has 1" in single.stderr
    last = json.loads((tmp_path / "run" / "samples" / "rank0.jsonl").read_text().splitlines()[-1])
    assert (last["epoch"], last["keys"]) == (1, [list(k) for k in next(iter(alone)).sample_keys])


def test_torchrun_on_a_lake_reads_disjoint_data(packed_data, tmp_path):
    base = ModelConfig.preset("tiny")
    spec = PackSpec(  # what train_on builds for --lake --max-tokens 1024
        max_tokens=1024,
        algorithm="window",
        horizon=base.action_horizon,
        tokens=TokenLengthConfig(tokens_per_view=base.tokens_per_view, state_tokens=0),
        seed=0,
    )
    lake = str(packed_data.lake)
    per_rank = LakeStream(lake, spec, LoaderConfig(image_size=8), rank=0, world_size=2).num_batches
    whole = LakeStream(lake, spec, LoaderConfig(image_size=8), rank=0, world_size=1)
    keys = set(whole.index.keys(np.arange(whole.num_samples)))
    records = _torchrun_train(tmp_path / "run", "--lake", lake, steps=per_rank + 1)
    _check(records, keys, per_rank + 1)
