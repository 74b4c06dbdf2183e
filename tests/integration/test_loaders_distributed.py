"""Loaders across processes: two gloo ranks x two DataLoader workers, and a resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = os.path.abspath(__file__)
REPO = str(Path(HERE).parents[2])


@pytest.fixture(scope="module")
def packed(ray_session, tmp_path_factory):
    from tests.fixtures import build_packed

    return build_packed(tmp_path_factory.mktemp("loaders_dist"))


def _run(log: Path, *args: str, check: bool = True) -> int:
    """Run this file's entry point; output goes to a file (killed runs leave no pipe to drain)."""
    env = {**os.environ, "PYTHONPATH": REPO}
    with open(log, "w") as f:
        rc = subprocess.run(
            [sys.executable, HERE, *args], env=env, stdout=f, stderr=subprocess.STDOUT, timeout=240
        ).returncode
    if check and rc != 0:
        raise AssertionError(f"{args} failed ({rc}):\n{log.read_text()[-4000:]}")
    return rc


def _config():
    from robolake.loaders import LoaderConfig

    return LoaderConfig(sequences_per_batch=2, image_size=8, num_workers=2, seed=5)


def test_two_ranks_two_workers_read_each_sample_once_per_epoch(packed, tmp_path):
    rdv = tmp_path / "rendezvous"
    env = {**os.environ, "PYTHONPATH": REPO}
    procs = [
        subprocess.Popen(
            [sys.executable, HERE, "ddp", str(packed.packed), str(rdv), str(r), str(tmp_path / f"rank{r}.json")],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-4000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for epoch in ("0", "1"):
        per_rank = [[tuple(k) for k in res[epoch]["keys"]] for res in results]
        assert results[0][epoch]["batches"] == results[1][epoch]["batches"], "ranks must take equal steps"
        union = per_rank[0] + per_rank[1]
        assert len(union) == len(set(union)) == packed.num_samples
        assert not set(per_rank[0]) & set(per_rank[1])
    assert results[0]["0"]["keys"] != results[0]["1"]["keys"], "epochs are shuffled differently"


def test_resume_after_kill_9(packed, tmp_path):
    from robolake.loaders import PackedLoader

    reference = PackedLoader(str(packed.packed), _config())
    whole = [k for b in reference for k in b.sample_keys]
    progress = tmp_path / "progress.json"
    rc = _run(tmp_path / "consume.log", "consume", str(packed.packed), str(progress), "3", check=False)
    assert rc == -signal.SIGKILL, (tmp_path / "consume.log").read_text()[-2000:]
    state = json.loads(progress.read_text())
    assert state["loader"]["batches_done"] == 3
    _run(tmp_path / "resume.log", "resume", str(packed.packed), str(progress), str(tmp_path / "rest.json"))
    rest = json.loads((tmp_path / "rest.json").read_text())
    got = [tuple(k) for k in state["keys"] + rest]
    assert got == whole
    assert len(set(got)) == packed.num_samples


# --- subprocess entry points ------------------------------------------------------------------


def _ddp(packed: str, rdv: str, rank: str, out: str) -> None:
    import torch.distributed as dist

    from robolake.loaders import open_batches

    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=int(rank), world_size=2)
    loader = open_batches(packed, _config())  # the entry point reads the rank once; loader classes never do
    assert (loader.rank, loader.world_size) == (int(rank), 2)
    res = {}
    for epoch in range(2):
        loader.set_epoch(epoch)
        keys, n = [], 0
        for batch in loader:
            keys.extend(batch.sample_keys)
            n += 1
        res[str(epoch)] = {"keys": keys, "batches": n}
    dist.barrier()
    dist.destroy_process_group()
    Path(out).write_text(json.dumps(res))


def _consume(packed: str, progress: str, kill_after: str) -> None:
    from robolake.loaders import PackedLoader

    loader = PackedLoader(packed, _config())
    keys = []
    for i, batch in enumerate(loader):
        keys.extend(batch.sample_keys)
        tmp = progress + ".tmp"
        Path(tmp).write_text(json.dumps({"keys": keys, "loader": loader.state_dict()}))
        os.replace(tmp, progress)
        if i + 1 == int(kill_after):
            os.kill(os.getpid(), signal.SIGKILL)


def _resume(packed: str, progress: str, out: str) -> None:
    from robolake.loaders import PackedLoader

    loader = PackedLoader(packed, _config())
    loader.load_state_dict(json.loads(Path(progress).read_text())["loader"])
    Path(out).write_text(json.dumps([k for b in loader for k in b.sample_keys]))


if __name__ == "__main__":
    {"ddp": _ddp, "consume": _consume, "resume": _resume}[sys.argv[1]](*sys.argv[2:])
