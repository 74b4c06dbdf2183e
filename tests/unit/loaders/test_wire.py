"""Batches cross from DataLoader workers as `WireBatch`: small arrays inline, big ones shared."""

from __future__ import annotations

import dataclasses

import torch

from robolake.loaders import LoaderConfig, PackedLoader
from robolake.loaders.wire import SHARED_MIN_BYTES, WireBatch, from_wire, to_wire


def _fields_equal(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor) and x.dtype == y.dtype and torch.equal(x, y), f.name
        else:
            assert x == y, f.name


def test_batches_from_workers_equal_the_batches_made_in_process(packed_data) -> None:
    cfg = dict(sequences_per_batch=2, image_size=16, seed=5)
    here = list(PackedLoader(str(packed_data.packed), LoaderConfig(**cfg, num_workers=0)))
    there = list(PackedLoader(str(packed_data.packed), LoaderConfig(**cfg, num_workers=2)))
    assert len(here) == len(there) > 1
    for a, b in zip(here, there, strict=True):
        assert type(b).__name__ == "PackedBatch"
        _fields_equal(a, b)


def test_small_arrays_travel_inline_and_big_ones_in_shared_memory(packed_data) -> None:
    batch = next(iter(PackedLoader(str(packed_data.packed), LoaderConfig(sequences_per_batch=2, image_size=16))))
    side = int((SHARED_MIN_BYTES // 3) ** 0.5) + 1
    big = dataclasses.replace(batch, pixels=torch.zeros((1, 3, side, side), dtype=torch.uint8))
    wire = to_wire(big)
    assert isinstance(wire, WireBatch)
    assert isinstance(wire.fields["pixels"], torch.Tensor)  # >= SHARED_MIN_BYTES: the shared-memory path
    small = [k for k, v in wire.fields.items() if k != "pixels" and isinstance(getattr(batch, k), torch.Tensor)]
    assert small and not any(isinstance(wire.fields[k], torch.Tensor) for k in small)
    _fields_equal(big, from_wire(wire))
    assert from_wire(batch) is batch


def test_a_loader_with_workers_starts_their_fork_server_before_the_first_batch(packed_data) -> None:
    """The server's imports (torch) run while the caller sets up: it is running once the loader
    is built, before anything is iterated (checked in a fresh process, where nothing else started it)."""
    import subprocess
    import sys

    code = (
        "from multiprocessing import forkserver\n"
        "from robolake.loaders import LoaderConfig, PackedLoader\n"
        "assert forkserver._forkserver._forkserver_pid is None\n"
        f"PackedLoader({str(packed_data.packed)!r}, LoaderConfig(image_size=8, num_workers=2))\n"
        "assert forkserver._forkserver._forkserver_pid is not None\n"
        "PackedLoader({0!r}, LoaderConfig(image_size=8, num_workers=0))\n"
    ).replace("{0!r}", repr(str(packed_data.packed)))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
