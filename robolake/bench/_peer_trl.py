"""TRL's side of `robolake bench peers`, run by the TRL environment's own Python.

Not imported by robolake (it needs `trl` and `datasets`, which live only in the peer environment
that `robolake.bench.peers` builds): `robolake.bench.peers` starts it as `PYTHON _peer_trl.py` and
sends one JSON request per line on stdin; answers come back one per line on stdout (`_peer_serve.py`).

Requests (`op`):

- `load`: read the sample lengths (`.npy`) robolake's packer is timed on and build a
  `datasets.Dataset` with one `input_ids` row of that many tokens per sample (built once, not
  timed: a tokenised dataset is what `pack_dataset` is handed).
- `pack`: `trl.data_utils.pack_dataset(dataset, seq_length, strategy="bfd")` as SFTTrainer calls
  it (through `Dataset.map`, batched, TRL's and datasets' defaults), timed here. Returns the
  packed rows and their fill (real tokens over rows x seq_length).
- `pack_table`: TRL's BFD function itself (`_pack_bfd`) on ONE Arrow table of all the lengths,
  without `Dataset.map`'s batches of 1,000: the algorithm on the whole set, as robolake's packer
  sees it.
- `quit`.
"""

from __future__ import annotations

import time
from typing import Any

import _peer_serve  # first: the answers keep stdout to themselves (this directory is on the path)

STATE: dict[str, Any] = {}


PACKAGES = ("trl", "datasets", "pyarrow", "transformers", "torch")


def versions() -> dict[str, str]:
    return _peer_serve.versions(PACKAGES)


def load(req: dict[str, Any]) -> dict[str, Any]:
    import datasets
    import numpy as np
    import pyarrow as pa

    lengths = np.load(req["lengths"]).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = pa.array(np.arange(offsets[-1], dtype=np.int64) % 50_000)  # any ids: BFD reads only lengths
    input_ids = (
        pa.LargeListArray.from_arrays(pa.array(offsets), tokens)
        if offsets[-1] >= 2**31
        else pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), tokens)
    )
    table = pa.table({"input_ids": input_ids})
    STATE.update(table=table, dataset=datasets.Dataset(table), samples=len(lengths), tokens=int(offsets[-1]))
    datasets.disable_progress_bars()
    return {"samples": len(lengths), "tokens": int(offsets[-1]), "versions": versions()}


def _fill(seq_lengths_rows: Any, rows: int, seq_length: int) -> float:
    import pyarrow.compute as pc

    return float(pc.sum(pc.list_flatten(seq_lengths_rows)).as_py()) / (rows * seq_length)


def pack(req: dict[str, Any]) -> dict[str, Any]:
    from trl.data_utils import pack_dataset

    seq_length = int(req["seq_length"])
    t0 = time.perf_counter()
    packed = pack_dataset(STATE["dataset"], seq_length, strategy="bfd")
    wall = time.perf_counter() - t0
    rows = len(packed)
    table = packed.with_format("arrow")[:]
    return {
        "wall_s": wall,
        "samples": STATE["samples"],
        "rows": rows,
        "fill": _fill(table["seq_lengths"], rows, seq_length),
    }


def pack_table(req: dict[str, Any]) -> dict[str, Any]:
    from trl.data_utils import _pack_bfd

    seq_length = int(req["seq_length"])
    t0 = time.perf_counter()
    packed = _pack_bfd(STATE["table"], seq_length=seq_length, on_seq_length_overflow="truncate")
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "samples": STATE["samples"],
        "rows": packed.num_rows,
        "fill": _fill(packed["seq_lengths"], packed.num_rows, seq_length),
    }


OPS = {"load": load, "pack": pack, "pack_table": pack_table}


def main() -> None:
    _peer_serve.serve(OPS, PACKAGES)


if __name__ == "__main__":
    main()
