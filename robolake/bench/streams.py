"""`robolake bench streams`: what keeping every stream as recorded costs, and what it buys.

One ROS 2 recording of a rig with multi-rate sensors (the RealSense T265 case of the issue, plus
a force-torque sensor): joint states at 100 Hz, commands at 50 Hz, odometry and a gyro at 200 Hz,
an accelerometer at 62.5 Hz, a force-torque stream at 1 kHz, a 30 fps camera, fault flags and
button triggers; 20 s (6 s with `--quick`). Figures, each measured in this run on this recording:

- `bytes`: per numeric stream, the record's bytes (the stored values, both clocks' stamps) over
  the source's serialized message bytes (goal <= 1.1x), and the signals table on disk over all
  numeric message bytes.
- `ingest`: an ingest keeping every stream over one keeping only the mapped streams (what the
  steps need; before the record, ingest read only those), paired runs A B A B, CPU seconds.
- `align`: `robolake align --fps 30` on the lake over an ingest of the source at 30 Hz (the
  only way to change the rate before the record), paired, CPU seconds.
- `window`: reading 1 s of the 1 kHz stream from the lake over reading it from the source bag,
  paired, CPU seconds (both decode to arrays of the values).

- `history`: a lake of the T265 rig and a contact rig (its force-torque sensor publishes only in
  contact, a third of the time) streamed with `pack --history /ft=0.05 --history /gyro=0.1`
  (every message of the 1 kHz and 200 Hz streams in a window before each sample, as tokens) into
  batches of the tiny model, then training steps packed against the same batches padded
  (`bench train`'s protocol: steps interleaved, tokens over CPU seconds), with the padding fraction.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from robolake.bench._common import Stopwatch, interleave, machine, print_table, spread, two_clock_ratios, write_json

__all__ = ["run", "main"]

_FT = "/ft"


def _extras(seconds: float) -> dict[str, Any]:
    def at(hz: float) -> np.ndarray:
        return np.arange(int(seconds * hz)) / hz

    return {
        "/odom": ("odometry", [(t, np.arange(13) * 0.01 + t) for t in at(200)]),
        "/gyro": ("imu", [(t, np.arange(10) * 0.1 + t) for t in at(200)]),
        "/accel": ("imu", [(t, np.arange(10) * 0.2 - t) for t in at(62.5)]),
        _FT: ("multiarray", [(t, np.sin(np.arange(6) + t)) for t in at(1000)]),
        "/fault": ("bool", [(t, bool(i % 2)) for i, t in enumerate(at(0.5))]),
        "/button": ("empty", [(t, None) for t in at(0.25)]),
    }


def _contact(seconds: float) -> dict[str, Any]:
    """A rig whose force-torque sensor publishes only in contact (a third of the time, in bursts)."""
    t = np.arange(int(seconds * 1000)) / 1000.0
    touching = (np.floor(t / 0.4) % 3) == 1
    return {
        _FT: ("multiarray", [(x, np.cos(np.arange(6) + x)) for x in t[touching]]),
        "/gyro": ("imu", [(x, np.arange(10) * 0.1 - x) for x in np.arange(int(seconds * 200)) / 200.0]),
    }


def _write(root: Path, seconds: float) -> Path:
    """The T265 rig's recording (the figures below are of it) and, beside it, a contact rig's."""
    from robolake.testing.ros import Layout, write_ros2

    bag = root / "src" / "t265_rig"
    write_ros2(bag, Layout(seconds=seconds, joint_hz=100, cmd_hz=50, cam_hz=30, extra=_extras(seconds)))
    write_ros2(root / "contact" / "contact_rig", Layout(seconds=seconds, seed=5, cam_hz=30, extra=_contact(seconds)))
    return bag


def _ingest(src: Path, dest: Path, *, keep: bool = False, **config: Any) -> Any:
    from robolake.lake import IngestConfig, ingest

    if not keep:
        shutil.rmtree(dest, ignore_errors=True)
    return ingest(str(src), str(dest), IngestConfig(execution="local", **config))


def _bytes(lake_dir: Path) -> dict[str, Any]:
    from robolake.lake import Lake

    lake = Lake.open(str(lake_dir))
    sig = lake.to_arrow("signals")
    ep = json.loads(lake.episodes(columns=["metadata"])["metadata"][0].as_py())
    source = ep["record"]["source_bytes"]
    stored: dict[str, int] = {}
    for row in sig.to_pylist():
        if row["kind"] != "numeric":
            continue
        n = 8 * (len(row["t_ns"]) + len(row["log_ns"])) + sum(len(d) for d in row["data"])
        stored[row["stream"]] = stored.get(row["stream"], 0) + n
    per = {
        s: {"record_bytes": stored[s], "source_bytes": int(source[s]), "ratio": stored[s] / source[s]}
        for s in sorted(stored)
        if source.get(s)
    }
    on_disk = sum(f.stat().st_size for f in (lake_dir / "signals.lance").rglob("*") if f.is_file())
    total_src = sum(v["source_bytes"] for v in per.values())
    return {
        "streams": per,
        "record_over_source": sum(v["record_bytes"] for v in per.values()) / total_src,
        "signals_on_disk_over_source": on_disk / total_src,
        "source_numeric_bytes": total_src,
        "worst_stream": max(per, key=lambda s: per[s]["ratio"]),
    }


def _window_from_lake(lake_dir: Path, start_s: float) -> np.ndarray:
    from robolake.lake import Lake, read_record, sql_quote

    lake = Lake.open(str(lake_dir))
    eid = lake.episode_ids()[0]
    sig = lake.to_arrow("signals", where=f"episode_id = {sql_quote(eid)} AND stream = {sql_quote(_FT)}")
    (part,) = read_record(sig, lake.to_arrow("events", where="episode_id = ''")).signals
    t = part.t_ns
    lo = t[0] + int(start_s * 1e9)
    keep = (t >= lo) & (t < lo + 1_000_000_000)
    return part.values[part.fields.index("data")][keep]


def _window_from_source(bag: Path, start_s: float) -> np.ndarray:
    from rosbags.highlevel import AnyReader

    rows = []
    with AnyReader([bag]) as r:
        conns = [c for c in r.connections if c.topic == _FT]
        first = None
        for conn, t, raw in r.messages(connections=conns):
            first = t if first is None else first
            if t < first + int(start_s * 1e9):
                continue
            if t >= first + int((start_s + 1) * 1e9):
                break
            msg: Any = r.deserialize(raw, conn.msgtype)
            rows.append(np.asarray(msg.data, np.float64))
    return np.stack(rows)


def run(quick: bool) -> dict[str, Any]:
    from robolake.lake import AlignSpec, align_lake, mapping_from_dict

    seconds = 6.0 if quick else 20.0
    repeats = 2 if quick else 3
    with tempfile.TemporaryDirectory(prefix="robolake-bench-streams-") as tmp:
        root = Path(tmp)
        bag = _write(root, seconds)
        lake_dir = root / "lake"
        _ingest(bag, lake_dir)
        out: dict[str, Any] = {"machine": machine(), "recording_seconds": seconds, "repeats": repeats}
        out["bytes"] = _bytes(lake_dir)

        def timed(fn: Any) -> Any:
            def go() -> Any:
                with Stopwatch() as sw:
                    fn()
                return sw.timing

            return go

        arms = interleave(
            {
                "all": timed(lambda: _ingest(bag, root / "all")),
                "mapped": timed(lambda: _ingest(bag, root / "mapped", streams=("__only_mapped__",))),
            },
            repeats=repeats,
            warmup=1,
        )
        out["ingest"] = {
            **two_clock_ratios(arms["mapped"], arms["all"], target_applies_to="cpu"),
            "note": "the ratio is mapped-only seconds over every-stream seconds: below 1 means keeping "
            "every stream costs 1/ratio times the work",
            "all_cpu_s": [t.cpu_s for t in arms["all"]],
            "mapped_cpu_s": [t.cpu_s for t in arms["mapped"]],
        }

        fps30 = mapping_from_dict({"state": ["/joint_states"], "action": ["/arm/joint_command"], "fps": 30})

        def align_once() -> None:
            work = root / "align"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(lake_dir, work)
            align_lake(str(work), AlignSpec(fps=30.0))

        def copy_only() -> None:
            work = root / "align"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(lake_dir, work)

        arms = interleave(
            {
                "reingest": timed(lambda: _ingest(bag, root / "re30", mapping=fps30)),
                "align": timed(align_once),
                "copy": timed(copy_only),
            },
            repeats=repeats,
            warmup=1,
        )
        net = [
            type(a)(wall_s=a.wall_s - c.wall_s, cpu_s=max(a.cpu_s - c.cpu_s, 1e-6))
            for a, c in zip(arms["align"], arms["copy"], strict=True)
        ]
        out["align"] = {
            **two_clock_ratios(arms["reingest"], net, target_applies_to="cpu"),
            "note": "re-ingest at 30 Hz seconds over align --fps 30 seconds (the lake copy each align runs on is "
            "measured separately and subtracted)",
        }

        got_lake = _window_from_lake(lake_dir, 1.0)
        got_src = _window_from_source(bag, 1.0)
        arms = interleave(
            {
                "source": timed(lambda: _window_from_source(bag, 1.0)),
                "lake": timed(lambda: _window_from_lake(lake_dir, 1.0)),
            },
            repeats=repeats * 2,
            warmup=1,
        )
        out["window"] = {
            **two_clock_ratios(arms["source"], arms["lake"], target_applies_to="cpu"),
            "messages": int(len(got_lake)),
            "same_values": bool(len(got_lake) == len(got_src) and np.array_equal(got_lake, got_src)),
            "note": "1 s of the 1 kHz stream: source-bag seconds over lake seconds",
        }
        _ingest(root / "contact", root / "both")
        _ingest(bag, root / "both", keep=True)
        out["history"] = _history_training(root / "both", quick)
        return out


def _history_training(lake_dir: Path, quick: bool) -> dict[str, Any]:
    """Packed vs padded training steps on the lake's samples with native-rate stream history."""
    import statistics

    import torch

    from robolake.bench.train import measure, two_clocks
    from robolake.lake import Lake
    from robolake.loaders import LoaderConfig, open_batches
    from robolake.packers import HistorySpec, PackSpec, TokenLengthConfig
    from robolake.training import ModelConfig
    from robolake.training.sizing import size_model_config

    spec = PackSpec(
        algorithm="window",
        window=64,  # a small window mixes lengths in a sequence as a padded loader's random batches do
        max_tokens=1024,
        tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0),
        history=(HistorySpec(stream=_FT, seconds=0.05, field="data"), HistorySpec(stream="/gyro", seconds=0.1)),
    )
    base = ModelConfig.preset("tiny")
    config = LoaderConfig(
        image_size=base.image_size,
        num_workers=0,
        shuffle=True,
        max_state_dim=32,
        max_action_dim=32,
        sequences_per_batch=4,
    )
    src = open_batches(Lake.open(str(lake_dir)), config, spec=spec)
    model_config = size_model_config(base, src.layout)
    every = list(src)  # one epoch (a few hundred sequences); the steps run on batches spread over it
    want = 3 if quick else 6
    batches = [every[i] for i in np.linspace(0, len(every) - 1, want).round().astype(int).tolist()]
    padded = [b.to_padded() for b in batches]
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        timing = measure(model_config, {"packed": batches, "padded": padded}, warmup=1, repeats=3 if quick else 5)
    finally:
        torch.set_num_threads(previous)
    pad = statistics.mean(p.padding_fraction for p in padded)
    speed = two_clocks(timing, "packed", "padded")
    return {
        "streams": [h.to_json() for h in spec.history],
        "batches": len(batches),
        "history_tokens_per_sample": statistics.mean(float(b.history_lengths.float().mean()) for b in batches),
        "history_tokens_range": [
            int(min(int(b.history_lengths.min()) for b in batches)),
            int(max(int(b.history_lengths.max()) for b in batches)),
        ],
        "padding_fraction": pad,
        "packed_tokens_per_cpu_s": timing["packed"]["effective_tokens_per_cpu_s"],
        "padded_tokens_per_cpu_s": timing["padded"]["effective_tokens_per_cpu_s"],
        "speedup_packed_vs_padded": speed,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="robolake bench streams", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--quick", action="store_true", help="a 6 s recording, 2 pairs")
    args = p.parse_args(argv)
    res = run(args.quick)
    b = res["bytes"]
    print_table(
        f"record bytes over source message bytes ({res['recording_seconds']:g} s recording)",
        [
            *(
                (s, f"{v['ratio']:.3f} ({v['record_bytes']:,} / {v['source_bytes']:,} B)")
                for s, v in b["streams"].items()
            ),
            ("all numeric streams", f"{b['record_over_source']:.3f}"),
            ("signals table on disk / source", f"{b['signals_on_disk_over_source']:.3f}"),
        ],
    )
    print_table(
        "paired ratios (CPU seconds; median and range)",
        [
            ("ingest: mapped-only / every stream", spread(res["ingest"]["cpu"])),
            ("align --fps 30 vs re-ingest (re-ingest / align)", spread(res["align"]["cpu"])),
            ("1 s window of 1 kHz: source / lake", spread(res["window"]["cpu"])),
            ("window values equal the source's", res["window"]["same_values"]),
        ],
    )
    h = res["history"]
    print_table(
        "training with native-rate stream history (lake streamed with --history; tiny model, CPU)",
        [
            (
                "history tokens per sample (min-max)",
                f"{h['history_tokens_per_sample']:.1f} {h['history_tokens_range']}",
            ),
            ("padding fraction of the padded batches", f"{h['padding_fraction']:.3f}"),
            ("packed tokens / CPU s", f"{h['packed_tokens_per_cpu_s']:.0f}"),
            ("padded tokens / CPU s", f"{h['padded_tokens_per_cpu_s']:.0f}"),
            ("packed / padded (CPU)", spread(h["speedup_packed_vs_padded"]["cpu"])),
        ],
    )
    write_json(args.json, res)


if __name__ == "__main__":
    main()
