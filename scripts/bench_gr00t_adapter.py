"""Time Isaac-GR00T's own `LeRobotSingleDataset` against robolake's GR00T adapter on the same samples.

    .venv/bin/python scripts/bench_gr00t_adapter.py [--samples 200] [--rounds 3] [--data DIR]

The real PickNPlace data (default ../shared/data/gr00t_pick_n_place) is ingested into a lake in a
temporary directory; GR00T reads the source files (timestamps rebased to 0, as the equality test
does) in the reference environment `scripts/build_gr00t_reference.sh` builds (decord, its default
video backend), robolake reads the lake. Both take the same shuffled step indices with
fourier_gr1_arms_only's modality config (video [0], state [0], 16 actions, task) and no
transforms. Rounds alternate GR00T, adapter per item, adapter in batches of 32 (DataLoader's
`__getitems__`), each in its own process, so every round starts cold; CPU is per-process time
(all threads), wall is elapsed. Prints each round and the medians and ranges of the ratios.
`--access-copy` adds the adapter on a copy of the lake with an h264 access copy
(`robolake optimize --access-copy h264`: short GOPs, pixels within codec tolerance).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REF = Path(os.environ.get("ROBOLAKE_GR00T_REF", Path.home() / ".cache" / "robolake" / "gr00t-ref"))
CONFIGS = {
    "video": {"delta_indices": [0], "modality_keys": ["video.ego_view"]},
    "state": {
        "delta_indices": [0],
        "modality_keys": ["state.left_arm", "state.right_arm", "state.left_hand", "state.right_hand"],
    },
    "action": {
        "delta_indices": list(range(16)),
        "modality_keys": ["action.left_arm", "action.right_arm", "action.left_hand", "action.right_hand"],
    },
    "language": {"delta_indices": [0], "modality_keys": ["annotation.human.action.task_description"]},
}


def _ours(lake: str, indices: list[int], batch: int, out: str) -> None:
    from robolake.integrations.gr00t import LakeGr00tDataset

    ds = LakeGr00tDataset(lake, CONFIGS)
    cpu, wall = time.process_time(), time.perf_counter()
    if batch == 1:
        for i in indices:
            ds[i]
    else:
        for a in range(0, len(indices), batch):
            ds.__getitems__(indices[a : a + batch])
    Path(out).write_text(json.dumps({"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="samples a round reads (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each reader, alternating (default 3)")
    parser.add_argument(
        "--data",
        default=str(ROOT.parent / "shared" / "data" / "gr00t_pick_n_place"),
        help="GR00T dataset (default ../shared/data/gr00t_pick_n_place)",
    )
    parser.add_argument(
        "--access-copy",
        action="store_true",
        help="also time the adapter on a copy of the lake with an h264 access copy (default off)",
    )
    args = parser.parse_args()
    python = (REF / "python").read_text().strip() if (REF / "python").is_file() else None
    if python is None:
        sys.exit(f"no GR00T reference environment at {REF}: build it with scripts/build_gr00t_reference.sh GR00T_SRC")
    sys.path.insert(0, str(ROOT))
    from robolake.lake import ingest
    from tests.integration.test_gr00t_adapter import _rebased_copy

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        lake = work / "lake"
        ingest(args.data, str(lake))
        rebased = _rebased_copy(Path(args.data), work / "rebased")
        from robolake.integrations.gr00t import LakeGr00tDataset

        n = len(LakeGr00tDataset(str(lake), CONFIGS))
        indices = np.random.default_rng(0).permutation(n)[: args.samples].tolist()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(REF / p) for p in ("src", "site", "stubs")))
        runs: dict[str, list[dict]] = {"gr00t": [], "adapter": [], "adapter_batched": []}
        lakes = dict.fromkeys(runs, lake)
        if args.access_copy:  # frames within codec tolerance of the record's, decoded from short GOPs
            shutil.copytree(lake, work / "lake-access")
            optimize = [str(Path(sys.executable).parent / "robolake"), "optimize", str(work / "lake-access")]
            subprocess.run([*optimize, "--access-copy", "h264"], check=True, capture_output=True)
            for name in ("adapter_access", "adapter_access_batched"):
                runs[name], lakes[name] = [], work / "lake-access"
        for r in range(args.rounds):
            for name in runs:
                out = work / f"{name}-{r}.json"
                if name == "gr00t":
                    req = work / "req.json"
                    req.write_text(
                        json.dumps(
                            {
                                "root": str(rebased),
                                "configs": CONFIGS,
                                "indices": indices,
                                "out": str(out),
                                "backend": "decord",
                                "time": True,
                            }
                        )
                    )
                    cmd = [python, str(ROOT / "scripts" / "gr00t_reference.py"), str(req)]
                    subprocess.run(cmd, env=env, check=True, capture_output=True)
                else:
                    batch = 32 if name.endswith("_batched") else 1
                    call = f"_ours({str(lakes[name])!r}, {indices!r}, {batch}, {str(out)!r})"
                    head = f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                    code = head + f"from scripts.bench_gr00t_adapter import _ours; {call}"
                    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
                runs[name].append(json.loads(out.read_text()))
                t = runs[name][-1]
                rate = args.samples / t["wall_s"]
                print(
                    f"round {r} {name:16s} cpu {t['cpu_s']:7.2f} s  wall {t['wall_s']:7.2f} s  ({rate:7.1f} samples/s)"
                )
    for name in [n for n in runs if n != "gr00t"]:
        for what in ("cpu_s", "wall_s"):
            ratios = [g[what] / a[what] for g, a in zip(runs["gr00t"], runs[name], strict=True)]
            low, high = min(ratios), max(ratios)
            print(f"GR00T / {name} {what[:-2]}: median {statistics.median(ratios):.1f}x (range {low:.1f}-{high:.1f}x)")


if __name__ == "__main__":
    main()
