"""What `bench peers` prints and draws: the table of its figures, and the training runs' loss curves."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robolake.bench._common import print_table
from robolake.bench.peers.figures import TARGETS

__all__ = ["plot_training", "print_result"]


def print_result(res: dict[str, Any]) -> None:
    rows: list[tuple[Any, ...]] = []
    for name, d in res.get("datasets", {}).items():
        rows.append((f"{name}: robolake samples/s", d["robolake"]["samples_per_s"]))
        for b, s in d["lerobot"].items():
            rows.append((f"{name}: lerobot {b} samples/s", s["samples_per_s"]))
        rows.append((f"{name}: speedup vs lerobot {d['best_backend']}", d["speedup"], TARGETS["speedup"]))
    if "bfd_speedup_spread" in res:
        rows.append(("trl pack_dataset samples/s", res["trl"]["samples_per_s"]))
        rows.append(
            ("bfd_speedup (trl pack_dataset / robolake plan)", res["bfd_speedup_spread"], TARGETS["bfd_speedup"])
        )
        rows.append(("bfd_speedup with the Arrow take", res["bfd_speedup_with_take"]))
        rows.append(("bfd_speedup vs trl _pack_bfd on one table", res["bfd_speedup_vs_pack_bfd_table"]))
    if "lerobot_adapter" in res:
        for name, d in res["adapter_loaders"].items():
            mb = round(d["peak_rss_bytes"] / 2**20)
            rows.append((f"real 256px: {name} samples/s (peak RSS {mb} MB)", d["samples_per_s"]))
        lancedb = res["lancedb"]
        rows.append(("lancedb.speedup_local (robolake loader / LanceDBDataset)", lancedb["speedup_local_spread"], 2.0))
        if lancedb.get("speedup_s3_spread"):
            rows.append(("lancedb.speedup_s3 (the same, from S3)", lancedb["speedup_s3_spread"], 2.0))
        else:
            rows.append(("lancedb.speedup_s3", f"null: {lancedb.get('speedup_s3_reason')}"))
        rows.append(
            ("lerobot_adapter.speedup (adapter / LeRobotDataset)", res["lerobot_adapter"]["speedup_spread"], 10.0)
        )
        if res["lerobot_adapter"].get("vs_lancedb_s3"):
            rows.append(("adapter / LanceDBDataset, from S3", res["lerobot_adapter"]["vs_lancedb_s3"]))
        rows.append(("lerobot_adapter.items_equal", res["lerobot_adapter"]["items_equal"]))
        for kind, t in res["lerobot_training"].items():
            rows.append((f"ACT from {kind}: data-wait fraction", round(t["data_wait_fraction"], 4)))
    lr, trl = res.get("lerobot", {}).get("version"), res.get("trl", {}).get("version")
    print_table(f"peers measured as themselves (lerobot {lr}, trl {trl}; {res['machine']['cpus']} CPUs)", rows)


def plot_training(training: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    """Both runs' loss curves, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = {"adapter": "robolake LeRobot adapter", "lerobot": "LeRobotDataset (torchcodec)"}
    for kind, run in training.items():
        ax.plot(
            range(1, len(run["losses"]) + 1),
            run["losses"],
            label=f"{names.get(kind, kind)}: data wait {run['data_wait_fraction']:.1%}",
            linestyle="-" if kind == "adapter" else "--",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("ACT training loss")
    ax.set_title("LeRobot ACT, same seed, from each dataset (GR00T PickNPlace)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
