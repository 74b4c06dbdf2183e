"""torch's thread counts: chosen from the cores left after the loader's workers, set and reported
by the trainer (no timing here: what is asserted is which counts were chosen, set and reported)."""

from __future__ import annotations

import json
import os

import pytest
import torch

from robolake.training import TrainConfig, train
from robolake.training.threads import (
    ENV_VAR,
    ThreadChoice,
    available_cores,
    choose_threads,
    set_torch_threads,
)


def test_the_cores_left_after_the_workers():
    c = choose_threads(reserved=2, environ={}, cores=8)
    assert (c.intra_op, c.inter_op, c.source, c.cores, c.reserved) == (6, 1, "cores", 8, 2)
    assert choose_threads(reserved=2, environ={}, cores=2).intra_op == 1  # never 0: the 2-core laptop with 2 workers
    assert choose_threads(reserved=5, environ={}, cores=2).intra_op == 1
    assert choose_threads(environ={}, cores=16).inter_op == 4


def test_what_the_user_set_wins_in_order():
    env = {ENV_VAR: "3", "OMP_NUM_THREADS": "5"}
    assert choose_threads(explicit=2, environ=env, cores=8).intra_op == 2
    assert choose_threads(explicit=2, environ=env, cores=8).source == "explicit"
    assert (choose_threads(environ=env, cores=8).intra_op, choose_threads(environ=env, cores=8).source) == (3, ENV_VAR)
    omp = choose_threads(reserved=2, environ={"OMP_NUM_THREADS": "5,2"}, cores=8)
    assert (omp.intra_op, omp.source) == (5, "OMP_NUM_THREADS")  # an explicit OMP_NUM_THREADS is kept, not fought
    assert choose_threads(environ={"OMP_NUM_THREADS": ""}, cores=4).source == "cores"


@pytest.mark.parametrize("value", ["0", "many", "-1"])
def test_a_bad_environment_value_says_what_to_do(value):
    with pytest.raises(ValueError, match=f"{ENV_VAR} must be a whole number >= 1.*unset it"):
        choose_threads(environ={ENV_VAR: value}, cores=4)


def test_available_cores_is_this_process_affinity():
    assert available_cores() == len(os.sched_getaffinity(0)) >= 1


def test_set_torch_threads_applies_and_reports_what_is_in_effect():
    previous = torch.get_num_threads()
    try:
        c = set_torch_threads(explicit=1)
        assert torch.get_num_threads() == 1 == c.intra_op
        assert c.inter_op == torch.get_num_interop_threads()  # set once per process: reported as it is
    finally:
        torch.set_num_threads(previous)


def _train(tmp_path, batch_factory, tiny_config, **fields):
    during: list[int] = []
    config = TrainConfig(
        model=tiny_config,
        total_steps=2,
        warmup_steps=1,
        device="cpu",
        bf16=False,
        log_every=1,
        log_path=str(tmp_path / "m.jsonl"),
        **fields,
    )
    result = train(
        config,
        [batch_factory(seed=0), batch_factory(seed=1)],
        progress=lambda p: during.append((torch.get_num_threads(), p.torch_threads)),
    )
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    return result, during, rows


def test_the_trainer_sets_and_reports_its_thread_count(tmp_path, batch_factory, tiny_config, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = available_cores()
    torch.set_num_threads(cores + 3)  # what the caller had: the trainer replaces it while it runs
    result, during, rows = _train(tmp_path, batch_factory, tiny_config, reserved_cores=cores)
    assert isinstance(result.threads, ThreadChoice)
    assert (result.threads.intra_op, result.threads.source, result.threads.reserved) == (1, "cores", cores)
    assert during == [(1, 1), (1, 1)]  # set while training, and in the progress callback
    assert [(r["torch_threads"], r["interop_threads"]) for r in rows] == [(1, result.threads.inter_op)] * 2
    assert torch.get_num_threads() == cores + 3  # restored afterwards


def test_an_explicit_count_and_the_environment_reach_the_trainer(tmp_path, batch_factory, tiny_config, monkeypatch):
    monkeypatch.setenv(ENV_VAR, "2")
    result, during, _ = _train(tmp_path, batch_factory, tiny_config)
    assert (result.threads.intra_op, result.threads.source) == (2, ENV_VAR) and during[0] == (2, 2)
    result, during, _ = _train(tmp_path, batch_factory, tiny_config, torch_threads=1)
    assert (result.threads.intra_op, result.threads.source) == (1, "explicit") and during[0] == (1, 1)


def test_train_on_reserves_the_loader_workers(packed_data, tmp_path, monkeypatch):
    from robolake.training.run import RunConfig, train_on

    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    result = train_on(
        str(packed_data.packed), RunConfig(out=str(tmp_path / "run"), steps=1, num_workers=0, device="cpu")
    )
    assert result.threads is not None and (result.threads.reserved, result.threads.source) == (0, "cores")
    assert result.threads.intra_op == available_cores()
    with pytest.raises(ValueError, match="torch_threads must be >= 1"):
        RunConfig(out=str(tmp_path / "x"), torch_threads=0)
