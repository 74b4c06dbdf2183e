"""The figures `bench peers` reports, from timed runs: pure functions, no peer needed.

Every comparison divides two arms' rates within each interleaved round (`two_clock_ratios`),
on the wall clock and on CPU time, and reports the median with its range; `target_applies_to`
names the clock a goal is judged on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from robolake.bench._common import Timing, two_clock_ratios

__all__ = ["TARGETS", "Arm", "adapter_keys", "assemble", "bfd_figures", "loader_figures"]

TARGETS = {"speedup": 20.0, "bfd_speedup": 300.0}


@dataclass(frozen=True)
class Arm:
    """One side's timed runs (same rounds as the other arms) and the work each did."""

    timings: list[Timing]
    work: list[float]
    info: dict[str, Any] = field(default_factory=dict)

    def rates(self, clock: str = "wall") -> list[float]:
        return [w / getattr(t, f"{clock}_s") for t, w in zip(self.timings, self.work, strict=True)]

    def summary(self, unit: str) -> dict[str, Any]:
        wall, cpu = self.rates("wall"), self.rates("cpu")
        return {
            f"{unit}_per_s": sorted(wall)[len(wall) // 2],
            f"{unit}_per_s_runs": wall,
            f"{unit}_per_cpu_s": sorted(cpu)[len(cpu) // 2],
            "runs": [t.as_dict() for t in self.timings],
            **self.info,
        }


def loader_figures(robolake: Arm, lerobot: Mapping[str, Arm]) -> dict[str, Any]:
    """One dataset's loader figures: robolake's rate, each backend's, and the speedups.

    `speedup` is against the backend with the higher median rate (LeRobot at its best).
    """
    by_backend = {
        b: two_clock_ratios(
            arm.timings, robolake.timings, target_applies_to="wall", slow_work=arm.work, fast_work=robolake.work
        )
        for b, arm in lerobot.items()
    }
    summaries = {b: arm.summary("samples") for b, arm in lerobot.items()}
    best = max(summaries, key=lambda b: summaries[b]["samples_per_s"])
    return {
        "robolake": robolake.summary("samples"),
        "lerobot": summaries,
        "best_backend": best,
        "speedup": by_backend[best],
        "speedup_by_backend": by_backend,
    }


def bfd_figures(arms: Mapping[str, Arm]) -> dict[str, Any]:
    """robolake's plan (and plan + take) against TRL's `pack_dataset` and `_pack_bfd`."""
    plan, take, trl, table = (
        arms[k] for k in ("robolake_plan", "robolake_plan_take", "trl_pack_dataset", "trl_pack_bfd_table")
    )

    def ratio(slow: Arm, fast: Arm) -> dict[str, Any]:
        return two_clock_ratios(
            slow.timings, fast.timings, target_applies_to="cpu", slow_work=slow.work, fast_work=fast.work
        )

    return {
        "robolake": {"plan": plan.summary("samples"), "plan_and_take": take.summary("samples")},
        "trl": {"pack_dataset": trl.summary("samples"), "pack_bfd_table": table.summary("samples")},
        "bfd_speedup": ratio(trl, plan),
        "bfd_speedup_with_take": ratio(trl, take),
        "bfd_speedup_vs_pack_bfd_table": ratio(table, plan),
    }


def assemble(
    loaders: Mapping[str, dict[str, Any]] | None,
    bfd: dict[str, Any] | None,
    *,
    versions: Mapping[str, Mapping[str, str]],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON: {"lerobot", "robolake", "speedup": {"real", "av1"}, "trl", "bfd_speedup", ...}.

    Args:
        loaders: `loader_figures` per dataset ("real", "av1"), or None when not run.
        bfd: `bfd_figures`, or None when not run.
        versions: Each peer environment's package versions.
        extra: More top-level keys (machine, quick, conversion, ...).
    """
    out: dict[str, Any] = dict(extra or {})
    out["targets"] = TARGETS
    out["target_applies_to"] = {"speedup": "wall", "bfd_speedup": "cpu"}
    if loaders:
        head = loaders.get("real") or next(iter(loaders.values()))
        best = head["best_backend"]
        out["lerobot"] = {
            "version": versions.get("lerobot", {}).get("lerobot"),
            "samples_per_s": head["lerobot"][best]["samples_per_s"],
            "backend": best,
            "versions": dict(versions.get("lerobot", {})),
        }
        out["robolake"] = {
            "samples_per_s": head["robolake"]["samples_per_s"],
            "image_size": head["robolake"].get("image_size"),
        }
        out["speedup"] = {name: d["speedup"]["median"] for name, d in loaders.items()}
        out["speedup_spread"] = {name: d["speedup"] for name, d in loaders.items()}
        out["datasets"] = dict(loaders)
    if bfd:
        out["trl"] = {
            "version": versions.get("trl", {}).get("trl"),
            "samples_per_s": bfd["trl"]["pack_dataset"]["samples_per_s"],
            "fill": bfd["trl"]["pack_dataset"].get("fill"),
            "versions": dict(versions.get("trl", {})),
            **bfd["trl"],
        }
        out.setdefault("robolake", {})["bfd"] = bfd["robolake"]
        out["bfd_speedup"] = bfd["bfd_speedup"]["median"]
        out["bfd_speedup_spread"] = bfd["bfd_speedup"]
        out["bfd_speedup_with_take"] = bfd["bfd_speedup_with_take"]
        out["bfd_speedup_vs_pack_bfd_table"] = bfd["bfd_speedup_vs_pack_bfd_table"]
    return out


def adapter_keys(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON keys the issue names, from `measure_adapter`'s figures.

    `lancedb.speedup_s3` is the S3 arm's median (robolake's loader over `LanceDBDataset`, both
    reading the local S3 server), or None with `speedup_s3_reason` when that arm did not run.
    """
    s3 = figures.get("s3") or {}
    s3_ratio = s3.get("lancedb_speedup")
    lancedb: dict[str, Any] = {
        "speedup_local": figures["lancedb_speedup_local"]["median"],
        "speedup_local_spread": figures["lancedb_speedup_local"],
        "speedup_s3": s3_ratio["median"] if s3_ratio else None,
        "speedup_s3_spread": s3_ratio,
        "version": figures["versions"].get("lerobot-lancedb"),
    }
    if not s3_ratio:
        lancedb["speedup_s3_reason"] = s3.get("skipped") or "not measured: the S3 arm did not run"
    adapter: dict[str, Any] = {
        "speedup": figures["adapter_speedup"]["median"],
        "speedup_spread": figures["adapter_speedup"],
        "vs_lancedb": figures["adapter_vs_lancedb"],
        "items_equal": bool(figures["items"]["equal"]),
        "items": figures["items"],
    }
    if s3.get("adapter_vs_lancedb"):
        adapter["vs_lancedb_s3"] = s3["adapter_vs_lancedb"]
    return {
        "lancedb": lancedb,
        "lerobot_adapter": adapter,
        "lerobot_training": {
            k: {kk: v for kk, v in run.items() if kk != "versions"} for k, run in figures["training"].items()
        },
        "adapter_loaders": figures["loaders"],
        "adapter_s3": {k: v for k, v in s3.items() if k not in ("lancedb_speedup", "adapter_vs_lancedb")},
        "adapter_setup": {
            k: figures[k] for k in ("batch_size", "num_workers", "horizon", "lancedb_convert_s") if k in figures
        },
    }
