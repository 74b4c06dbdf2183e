"""The `elastic` measure of `robolake bench scale`: resume on another world size, exactly once.

For each (N, M) case, N shard loaders (one per rank, in this process) read half of an epoch of a
mixed pack; their states are merged (`merge_states`) as a checkpoint merges them; M loaders load
the merged state and read the rest. What every loader yielded is the ledger: `exactly_once` is
True only if the ledgers of all cases were checked and each holds every sample of the epoch
exactly once (as often as the mixture draws it: an upsampled group's samples are drawn more than
once per epoch), and `order_unchanged` only if every step of the resumed world read the next
stretch of the epoch's canonical order. The cost of a resize is the time to first batch of a
loader resumed at M ranks over one resumed at N (the same state, the same data), measured in
interleaved pairs; the mixture's realised share of every rank on both sides of the resize is
compared with the epoch's.

The scale benchmark (`bench/scale.py`) calls `elastic_section` for `--sections elastic`.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from robolake.bench._common import paired
from robolake.loaders import LoaderConfig, PackedLoader, merge_states, open_shards
from robolake.loaders.shards import PackedShards

__all__ = ["CASES", "elastic_section"]

CASES: tuple[tuple[int, int], ...] = ((4, 2), (4, 3), (2, 4), (3, 5))
MIX = "embodiment=gr1:0.5,so101:0.3,*:0.2"


def _build(work: str, samples: int) -> PackedShards:
    """A mixed lake of about `samples` steps, packed with a mixture (tiny frames: the measure is the loader's)."""
    from robolake.bench.mix import build_mixed_lake
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.packers.mix import MixSpec

    lake = build_mixed_lake(os.path.join(work, "lake"), samples, mean_steps=30)
    spec = PackSpec(
        max_tokens=512, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0), mix=MixSpec.parse(MIX)
    )
    pack(lake, spec, os.path.join(work, "packed"))
    return open_shards(os.path.join(work, "packed"))


def _first_batch(shards: PackedShards, config: LoaderConfig, state: dict[str, Any], world: int) -> float:
    """Seconds from opening rank 0 of `world` ranks on a saved state to holding its first batch."""
    t0 = time.perf_counter()
    loader = PackedLoader(shards.root, config, rank=0, world_size=world)
    loader.load_state_dict(state)
    next(iter(loader))
    return time.perf_counter() - t0


def _case(shards: PackedShards, config: LoaderConfig, old: int, new: int, repeats: int) -> dict[str, Any]:
    loaders = [PackedLoader(shards, config, rank=r, world_size=old) for r in range(old)]
    stop = len(loaders[0]) // 2
    ledger: list[tuple[str, int]] = []
    per_rank: list[list[tuple[str, int]]] = []
    for loader in loaders:
        keys = [k for _, b in zip(range(stop), loader, strict=False) for k in b.sample_keys]
        ledger += keys
        per_rank.append(keys)
    state = merge_states([loader.state_dict() for loader in loaders])
    resumed = [PackedLoader(shards, config, rank=r, world_size=new) for r in range(new)]
    for loader in resumed:
        loader.load_state_dict(state)
    order_ok = _walks_the_order(shards, config, [loader.plan for loader in resumed], state)
    for loader in resumed:
        keys = [k for b in loader for k in b.sample_keys]
        ledger += keys
        per_rank.append(keys)
    same, resized = [], []
    for _ in range(repeats):  # interleaved: the machine's drift hits both arms alike
        same.append(_first_batch(shards, config, state, old))
        resized.append(_first_batch(shards, config, state, new))
    return {
        "ledger": ledger,
        "per_rank": per_rank,
        "position": int(state["position"]),
        "order_ok": bool(order_ok),
        "same_s": same,
        "resized_s": resized,
    }


def _walks_the_order(shards: PackedShards, config: LoaderConfig, plans: list[Any], state: dict[str, Any]) -> bool:
    """Whether every step of the resumed plans reads the next stretch of the epoch's canonical order."""
    from robolake.loaders.order import canonical_order
    from robolake.packers.mix import row_strata

    strata = row_strata(shards.manifest.mixture)
    order = canonical_order(shards.num_rows, seed=[config.seed, int(state["epoch"])], strata=strata)
    lo = int(state["position"])
    for step, hi in enumerate(plans[0].ends):
        rows = np.concatenate([p.batches[step] for p in plans])
        if any(p.ends != plans[0].ends for p in plans) or sorted(rows.tolist()) != sorted(order[lo:hi].tolist()):
            return False
        lo = hi
    return lo == shards.num_rows


def _share(keys: Sequence[tuple[str, int]], tag: str) -> float:
    return sum(1 for e, _ in keys if e.split("/")[0] == tag) / max(1, len(keys))


def elastic_section(
    work: str, *, quick: bool = True, cases: Sequence[tuple[int, int]] = CASES, repeats: int = 3
) -> dict[str, Any]:
    """Resume mid-epoch on another world size: exactly-once ledgers and the time-to-first-batch cost.

    Args:
        work: A scratch directory (the lake and the pack are written under it).
        quick: A 2,000-sample lake (about a minute on 2 cores) instead of 8,000.
        cases: (N, M) world sizes: N ranks read half the epoch, M ranks resume and read the rest.
        repeats: Interleaved first-batch pairs per case.

    Returns:
        {"exactly_once": bool, "order_unchanged": bool, "cases": [[N, M], ...],
        "resize_first_batch_over_same_size": ratio summary (median, min, max, values),
        "first_batch_s": {"same_size": [...], "resized": [...]}, "mixture_rank_error": float,
        "sequences": int, "samples": int, "per_case": [...]}.
    """
    shards = _build(work, 2000 if quick else 8000)
    config = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0, seed=0)
    epoch = Counter(k for b in PackedLoader(shards, config) for k in b.sample_keys)
    target = _share(list(epoch.elements()), "gr1")  # a mixture repeats samples: the epoch is a multiset
    exactly_once, order_ok, same, resized, worst = True, True, [], [], 0.0
    per_case = []
    for old, new in cases:
        got = _case(shards, config, old, new, repeats)
        once = Counter(got["ledger"]) == epoch  # every drawn sample as often as the epoch draws it
        exactly_once &= once
        order_ok &= got["order_ok"]
        same += got["same_s"]
        resized += got["resized_s"]
        error = max(abs(_share(keys, "gr1") - target) for keys in got["per_rank"])
        worst = max(worst, error)
        per_case.append(
            {
                "old": old,
                "new": new,
                "position": got["position"],
                "exactly_once": once,
                "mixture_rank_error": error,
                "first_batch_ratio": paired(got["resized_s"], got["same_s"])["median"],
            }
        )
    return {
        "exactly_once": bool(exactly_once and per_case),
        "order_unchanged": bool(order_ok),
        "cases": [[old, new] for old, new in cases],
        "resize_first_batch_over_same_size": paired(resized, same),
        "first_batch_s": {"same_size": same, "resized": resized},
        "mixture_rank_error": float(worst),
        "sequences": int(shards.num_rows),
        "samples": int(sum(epoch.values())),
        "per_case": per_case,
    }


if __name__ == "__main__":  # pragma: no cover - a quick look: python -m robolake.bench._elastic DIR
    import json
    import sys

    out = elastic_section(sys.argv[1] if len(sys.argv) > 1 else "/tmp/robolake-elastic", repeats=3)
    print(json.dumps({k: v for k, v in out.items() if k != "first_batch_s"}, indent=2, default=str))
