"""Frame layouts measured against the source video, and (`--closed-loop`) what lossy storage costs a policy.

`robolake bench media` (and `robolake bench scale`, whose `media_layouts` this is) ingests each
data set once per frame layout and measures, per layout:

- `record` (the default: the source video's own packets), `access copy h264` (derived from the
  record by `lake.access`; the record stays beside it), `jpeg` (`--frames jpeg`, q80) and
  `h264` (`--frames h264`, key-referenced, the default CRF);
- `lake_bytes_over_source`: the layout's frame bytes (packets, or encoded frames; the record's
  per-packet index included) over the bytes of the source's video files. For the access copy it
  is the copy alone; `with_record_over_source` adds the record it sits beside;
- `bit_exact`, `psnr_db`, `psnr_db_min`, `max_abs_diff`: every frame of every episode read
  from the lake (`FrameReader.read_many`) against decoding the source file with PyAV from its
  start. `psnr_db` is of the mean squared error over all frames, so it is inf exactly when the
  layout is bit-exact;
- `speedup_one_per_call`, `speedup_64_per_call`: random (episode, camera, step) frames read
  from the lake one a call and 64 a call, against the same frames by mp4 seek-and-decode from
  the source (`bench._media_reads.random_frame_access`), `repeats` paired runs: median and range. The
  seek uses PyAV's default decoder settings (slice threads, what a loader gets unless it sets
  them); `speedup_one_per_call_vs_one_thread_seek` is the same reads against a seek decoding on
  one thread, as the lake's reader does;
- `pack_seconds`: `pack` of the whole lake as 64 px training renditions (one warm-up pack of the
  JPEG lake first, so the first layout measured does not pay for starting Ray's workers).

`mcap_video` (a row of its own): a camera logged as `foxglove.CompressedVideo` messages in an MCAP
file (h264, a keyframe a second, joints at 100 Hz), ingested at the joints' rate (the camera's
frames repeat on several steps) and at 10 Hz (frames between ticks kept as extra packets):
`record_over_packets` is the record's bytes (media rows, extra packets, index, extradata) over
the bytes of the packets the steps need, and `bit_exact` compares every step's frame from the
lake with PyAV decoding the same packets in order, picked by the image rule (latest at or
before the tick).

`--pack-pairs N` measures only `pack`: the record and JPEG lakes of each data set packed
alternately (record, JPEG, record, JPEG, ...; N pairs after a warm-up), so that both see the same
machine load: per layout median and range, and the record-over-JPEG ratio of each pair.

Data sets: the synthetic h264 data (LeRobot v2.1, 64 px), a synthetic AV1 LeRobot v3.0 data
set written by robolake's own writer (several episodes per file), the real GR00T data where
../shared is present, and any `--data PATH`. Sizes and exactness do not depend on the
machine; timings do (the report says which machine).

`--closed-loop` trains the demo's policy on the same sim recordings stored three ways (record,
`--frames jpeg`, `--frames h264`), same steps and seeds, and evaluates each closed loop on the
same unseen seeds: per-task success with Wilson intervals (`bench._closed_loop`).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from robolake.bench._common import machine, print_table, ratio_summary, write_json
from robolake.bench._media_reads import random_frame_access, shared_data

__all__ = [
    "LAYOUTS",
    "dataset_layouts",
    "default_data_sets",
    "main",
    "media_layouts",
    "mcap_video",
    "pack_pair_rows",
    "pack_pairs",
    "source_frames",
]

LAYOUTS = ("record", "access copy h264", "jpeg", "h264")
RENDITION_SIZE = 64  # pack_seconds: shards of 64 x 64 training renditions
_INGESTED = {"record": "record", "jpeg": "jpeg", "h264": "h264"}  # layout -> IngestConfig.video_frames


def source_frames(src: str) -> Iterator[tuple[tuple[str, int, str], list[np.ndarray]]]:
    """((source root, episode index, camera), frames) of every episode's span, decoded by PyAV
    from the start of its file (what decoding the source gives), one episode at a time."""
    import av

    from robolake.lake import discover_readers

    readers: list[Any] = list(discover_readers(src).readers)  # video readers: .cameras, .fps
    for reader in readers:
        for ref in reader.discover():
            for cam in reader.cameras:
                path = os.path.join(reader.root, ref.get(f"video:{cam}"))
                lo, hi, half = ref.get(f"from:{cam}"), ref.get(f"to:{cam}"), 0.5 / float(reader.fps)
                with av.open(path) as c:
                    s = c.streams.video[0]
                    base = s.time_base
                    frames = [
                        f.to_ndarray(format="rgb24")
                        for f in c.decode(s)
                        if f.pts is not None
                        and base is not None
                        and (lo is None or f.pts * base >= lo - half)
                        and (hi is None or f.pts * base < hi - half)
                    ]
                yield (reader.root, ref.episode_index, cam), frames


def _video_bytes(src: str) -> int:
    from robolake.lake import discover_readers

    readers: list[Any] = list(discover_readers(src).readers)
    paths = {
        os.path.join(r.root, ref.get(f"video:{cam}")) for r in readers for ref in r.discover() for cam in r.cameras
    }
    return sum(os.path.getsize(p) for p in paths)


def _column_bytes(ds: Any, column: str = "data") -> int:
    return sum(len(b) for batch in ds.to_batches(columns=[column]) for b in batch.column(column).to_pylist())


def _record_bytes(lake: Any) -> int:
    """The record's frame bytes: packets plus what decoding them needs (index, extradata, lead-in packets)."""
    from robolake.lake import StreamIndex

    index = (
        sum(StreamIndex.from_row(r).index_bytes for r in lake.dataset("streams").to_table().to_pylist())
        if lake.count("streams")
        else 0
    )
    return _column_bytes(lake.dataset("media")) + index


def _reads(src: str, lake: Any, reads: int, repeats: int) -> dict[str, Any]:

    runs = [random_frame_access(src, lake, reads, seed=rep) for rep in range(repeats)]  # lake and mp4 paired per run
    return {
        "speedup_one_per_call": ratio_summary([r["speedup_one_per_call"] for r in runs]),
        "speedup_64_per_call": ratio_summary([r["speedup"] for r in runs]),
        "speedup_one_per_call_vs_one_thread_seek": ratio_summary(
            [r["speedup_one_per_call_vs_one_thread_seek"] for r in runs]
        ),
        "lake_one_per_call_frames_per_s": float(np.median([r["lake_one_per_call_per_s"] for r in runs])),
        "lake_64_per_call_frames_per_s": float(np.median([r["lake_per_s"] for r in runs])),
        "mp4_seek_frames_per_s": float(np.median([r["source_per_s"] for r in runs])),
    }


def _pack_seconds(lake: Any, out: str, image_size: int) -> float:
    from robolake.packers import PackSpec, TokenLengthConfig, pack

    spec = PackSpec(
        max_tokens=2048, horizon=16, tokens=TokenLengthConfig(tokens_per_view=64, state_tokens=0), image_size=image_size
    )
    t0 = time.perf_counter()
    pack(lake, spec, out, overwrite=True)
    seconds = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    return seconds


def pack_pairs(src: str, work: str, *, pairs: int, image_size: int) -> dict[str, Any]:
    """`pack` of the record and JPEG lakes of `src`, alternately, `pairs` times (after a warm-up)."""
    from robolake.lake import IngestConfig, Lake, ingest

    lakes = {}
    for layout in ("record", "jpeg"):
        uri = os.path.join(work, f"lake-{layout}")
        ingest(src, uri, IngestConfig(video_frames=_INGESTED[layout]))
        lakes[layout] = Lake.open(uri)
    _pack_seconds(lakes["jpeg"], os.path.join(work, "warm-up"), image_size)  # Ray workers up before anything is timed
    seconds: dict[str, list[float]] = {"record": [], "jpeg": []}
    for _ in range(pairs):
        for layout, lake in lakes.items():
            seconds[layout].append(_pack_seconds(lake, os.path.join(work, f"pack-{layout}"), image_size))
    out: dict[str, Any] = {
        f"{layout}_pack_seconds": {"median": float(np.median(v)), "min": min(v), "max": max(v), "runs": v}
        for layout, v in seconds.items()
    }
    out["record_over_jpeg"] = ratio_summary([r / j for r, j in zip(seconds["record"], seconds["jpeg"], strict=True)])
    return out


def _exactness(src: str, lakes: dict[str, tuple[Any, bool]]) -> dict[str, dict[str, Any]]:
    """Every frame of each lake against the source decode, one source episode decoded once for all."""
    acc = {name: {"sq": 0.0, "n": 0, "worst": float("inf"), "max_abs": 0} for name in lakes}
    readers = {name: (lake.frames(), exact) for name, (lake, exact) in lakes.items()}
    by_source = {
        name: {
            (e["source_uri"], e["source_episode_index"]): e["episode_id"]
            for e in lake.episodes(columns=["episode_id", "source_uri", "source_episode_index"]).to_pylist()
        }
        for name, (lake, _) in lakes.items()
    }
    for (root, index, cam), want in source_frames(src):
        for name, (reader, exact) in readers.items():
            eid = by_source[name].get((root, index))
            if eid is None:
                raise RuntimeError(f"lake {name}: source episode {index} of {root} was not ingested")
            got = reader.read_many([(eid, cam, t) for t in range(len(want))], exact=exact)
            a = acc[name]
            for g, w in zip(got, want, strict=True):
                d = g.astype(np.int16) - w
                mse = float(np.mean(d.astype(np.float64) ** 2))
                a["sq"] += mse
                a["n"] += 1
                a["max_abs"] = max(a["max_abs"], int(np.abs(d).max()))
                a["worst"] = min(a["worst"], _psnr(mse))
    return {
        name: {
            "bit_exact": a["max_abs"] == 0,
            "psnr_db": _psnr(a["sq"] / max(a["n"], 1)),
            "psnr_db_min": a["worst"],
            "max_abs_diff": a["max_abs"],
            "frames_compared": a["n"],
        }
        for name, a in acc.items()
    }


def _psnr(mse: float) -> float:
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def dataset_layouts(src: str, work: str, *, reads: int, repeats: int, image_size: int) -> dict[str, dict[str, Any]]:
    """Layout -> measurements on one data set (see the module docstring)."""
    from robolake.lake import IngestConfig, Lake, build_access_copy, ingest

    source_bytes = _video_bytes(src)
    lakes: dict[str, Any] = {}
    out: dict[str, dict[str, Any]] = {}
    for layout, frames in _INGESTED.items():
        uri = os.path.join(work, f"lake-{layout}")
        t0 = time.perf_counter()
        ingest(src, uri, IngestConfig(video_frames=frames))
        lakes[layout] = lake = Lake.open(uri)
        media = lake.dataset("media")
        frame_bytes = _record_bytes(lake)
        out[layout] = {
            "ingest_seconds": time.perf_counter() - t0,
            "frames": int(media.count_rows()),
            "encodings": sorted(set(media.to_table(columns=["encoding"])["encoding"].to_pylist())),
            "lake_bytes": frame_bytes,
            "source_video_bytes": source_bytes,
            "lake_bytes_over_source": frame_bytes / source_bytes,
        }
    _pack_seconds(lakes["jpeg"], os.path.join(work, "warm-up"), image_size)  # Ray workers up before anything is timed
    for layout in _INGESTED:  # the record read and packed before it has an access copy
        out[layout].update(_reads(src, lakes[layout], reads, repeats))
        out[layout]["pack_seconds"] = _pack_seconds(lakes[layout], os.path.join(work, f"pack-{layout}"), image_size)
    t0 = time.perf_counter()
    report = build_access_copy(lakes["record"])
    with_copy = lakes["record"].refresh()
    copy_bytes = _column_bytes(with_copy.dataset("access")) if with_copy.count("access") else 0
    out["access copy h264"] = {
        "build_seconds": time.perf_counter() - t0,
        "frames": report.frames,
        "encodings": ["h264;gop=16 (derived)"] if report.frames else [],
        "lake_bytes": copy_bytes,
        "source_video_bytes": source_bytes,
        "lake_bytes_over_source": copy_bytes / source_bytes,
        "with_record_over_source": (copy_bytes + out["record"]["lake_bytes"]) / source_bytes,
    }
    if report.frames:
        out["access copy h264"].update(_reads(src, with_copy, reads, repeats))
        out["access copy h264"]["pack_seconds"] = _pack_seconds(
            with_copy, os.path.join(work, "pack-access"), image_size
        )
    compared = {"record": (with_copy, True), "jpeg": (lakes["jpeg"], False), "h264": (lakes["h264"], False)}
    if report.frames:
        compared["access copy h264"] = (with_copy, False)
    for layout, fidelity in _exactness(src, compared).items():
        out[layout].update(fidelity)
    return {k: out[k] for k in LAYOUTS if k in out}


def default_data_sets(work: str, quick: bool) -> dict[str, str]:
    """name -> source: the synthetic h264 and AV1 data (written here) and the real GR00T data if present."""
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    syn = os.path.join(work, "synthetic-h264")
    generate_synthetic(syn, SyntheticConfig(seed=0, episodes_per_embodiment=2 if quick else 6))
    av1 = os.path.join(work, "synthetic-av1-v3")
    generate_synthetic(
        av1,
        SyntheticConfig(
            seed=1,
            embodiments=("single_arm_7dof",),
            episodes_per_embodiment=4 if quick else 12,
            image_size=128 if quick else 256,
            codec="av1",
            version="v3.0",
            episodes_per_file=4,
        ),
    )
    out = {"synthetic h264 (v2.1, 64 px)": syn, f"synthetic AV1 (v3.0, {128 if quick else 256} px)": av1}
    real = shared_data()
    if real is not None:
        out["real GR00T (h264, 256 px)"] = real
    return out


def media_layouts(work: str, *, quick: bool, data: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """layout -> data set -> measurements, over `default_data_sets` and `data` (name -> source)."""
    from robolake.ray_tasks import ensure_ray

    ensure_ray(num_cpus=2)
    sets = {**default_data_sets(work, quick), **(data or {})}
    per_set = {}
    for i, (name, src) in enumerate(sets.items()):
        per_set[name] = dataset_layouts(
            src, os.path.join(work, f"set-{i}"), reads=100 if quick else 1000, repeats=3, image_size=RENDITION_SIZE
        )
    return {layout: {name: m[layout] for name, m in per_set.items() if layout in m} for layout in LAYOUTS}


def mcap_video(work: str, *, quick: bool) -> dict[str, dict[str, Any]]:
    """CompressedVideo-in-MCAP: record bytes over the packets' bytes, and bit-exactness (module docstring)."""
    import json
    from pathlib import Path

    from robolake.lake import IngestConfig, Lake, ingest, mapping_from_dict
    from robolake.testing.ros import T0_NS, Layout, write_mcap_json
    from robolake.testing.video import decode_packets, video_topic

    seconds = 4.0 if quick else 20.0
    entries, packets = video_topic(seconds, 30.0, size=(96, 128), gop=30)
    cam_t = np.asarray([t for t, _ in entries])
    src = os.path.join(work, "mcap-video", "src")
    os.makedirs(src, exist_ok=True)
    write_mcap_json(
        Path(src) / "rig.mcap",
        Layout(seconds=seconds, camera="none", extra={"/camera/video": ("video", entries)}),
    )
    reference = decode_packets(packets)
    out: dict[str, dict[str, Any]] = {}
    for name, fps in (("ticks at the joints' 100 Hz", None), ("ticks at 10 Hz", 10.0)):
        spec: dict[str, Any] = {
            "state": ["/joint_states"],
            "action": ["/arm/joint_command"],
            "cameras": {"wrist": "/camera/video"},
        }
        if fps:
            spec["fps"] = fps
        lake_dir = os.path.join(work, "mcap-video", f"lake-{fps or 'joints'}")
        ingest(src, lake_dir, IngestConfig(mapping=mapping_from_dict(spec)))
        lake = Lake.open(lake_dir)
        (ep,) = lake.episodes().to_pylist()
        eid, n = ep["episode_id"], int(ep["num_steps"])
        stream = lake.frames().stream(eid, "wrist")
        if stream is None:
            raise RuntimeError(f"{lake_dir}: the CompressedVideo camera was not kept as a recorded video")
        ts = lake.to_arrow("steps", where=f"episode_id = '{eid}'").sort_by("step_index")["timestamp"].to_numpy()
        ticks = ts + (json.loads(ep["metadata"])["t0_ns"] - T0_NS) / 1e9
        want = np.maximum(np.searchsorted(cam_t, ticks + 1e-9, side="right") - 1, 0)
        frames = lake.frames().read_many([(eid, "wrist", s) for s in range(n)], exact=True)
        exact = all(np.array_equal(f, reference[int(w)]) for f, w in zip(frames, want, strict=True))
        needed = sum(len(p) for p in packets[: int(want.max()) + 1])  # from the first keyframe to the last shown
        out[name] = {
            "steps": n,
            "packets": int((~stream.repeats).sum()),
            "repeat_entries": int(stream.repeats.sum()),
            "extra_packets": len(stream.extra),
            "record_over_packets": _record_bytes(lake) / needed,
            "bit_exact": bool(exact),
        }
    return out


def mcap_video_rows(m: dict[str, dict[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (
            f"CompressedVideo in MCAP | {name}",
            f"{r['record_over_packets']:.3f}x packets | {'exact' if r['bit_exact'] else 'NOT exact'} | "
            f"{r['steps']} steps, {r['packets']} packets, {r['repeat_entries']} repeats, {r['extra_packets']} extras",
        )
        for name, r in m.items()
    ]


def table_rows(layouts: dict[str, dict[str, Any]]) -> list[tuple[str, Any]]:
    """Printable rows: one per (data set, layout)."""
    rows: list[tuple[str, Any]] = []
    for layout, sets in layouts.items():
        for name, m in sets.items():
            exact = (
                "exact"
                if m.get("bit_exact")
                else f"{m.get('psnr_db', float('nan')):.1f} dB (min {m.get('psnr_db_min', float('nan')):.1f})"
            )
            one, many = m.get("speedup_one_per_call"), m.get("speedup_64_per_call")
            lean = m.get("speedup_one_per_call_vs_one_thread_seek")
            reads = (
                (
                    f"1/call {one['median']:.2f}x ({one['min']:.2f}-{one['max']:.2f}), "
                    f"64/call {many['median']:.2f}x ({many['min']:.2f}-{many['max']:.2f})"
                    + (f", 1/call vs 1-thread seek {lean['median']:.2f}x" if lean else "")
                )
                if one and many
                else "n/a"
            )
            pack = f"{m['pack_seconds']:.1f}" if "pack_seconds" in m else "n/a"
            rows.append(
                (
                    f"{name} | {layout}",
                    f"{m['lake_bytes_over_source']:.3f}x source | {exact} | reads vs mp4 seek {reads} | pack {pack} s",
                )
            )
    return rows


def pack_pair_rows(packs: dict[str, dict[str, Any]]) -> list[tuple[str, Any]]:
    """Printable rows of `--pack-pairs`: one per data set."""
    rows: list[tuple[str, Any]] = []
    for name, m in packs.items():
        rec, jpg, ratio = m["record_pack_seconds"], m["jpeg_pack_seconds"], m["record_over_jpeg"]
        rows.append(
            (
                name,
                f"record {rec['median']:.2f} s ({rec['min']:.2f}-{rec['max']:.2f}) | jpeg {jpg['median']:.2f} s "
                f"({jpg['min']:.2f}-{jpg['max']:.2f}) | record/jpeg {ratio['median']:.2f}x "
                f"({ratio['min']:.2f}-{ratio['max']:.2f})",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smaller data, fewer reads (a few minutes); with --closed-loop, "
        "fewer demonstrations, steps and trials (under ten minutes)",
    )
    p.add_argument(
        "--data", action="append", default=[], metavar="PATH", help="another source data set to measure (repeatable)"
    )
    p.add_argument(
        "--closed-loop",
        action="store_true",
        help="train on record / JPEG q80 / h264 lakes of the same sim "
        "recordings and compare closed-loop success per task",
    )
    p.add_argument(
        "--steps", type=int, default=None, help="--closed-loop: optimizer steps per arm (default 3000, 40 quick)"
    )
    p.add_argument(
        "--demos-per-task", type=int, default=None, help="--closed-loop: demonstrations per task (default 24, 3 quick)"
    )
    p.add_argument(
        "--eval-episodes", type=int, default=None, help="--closed-loop: episodes per task per arm (default 10, 2 quick)"
    )
    p.add_argument(
        "--pack-pairs",
        type=int,
        default=None,
        metavar="N",
        help="measure only pack: record and JPEG lakes packed alternately, N pairs per data set",
    )
    p.add_argument("--work", default=None, help="scratch directory (default: a new temporary one)")
    args = p.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="robolake-bench-media-")
    if args.closed_loop:
        from robolake.bench._closed_loop import closed_loop_rows, run_closed_loop

        res: dict[str, Any] = {
            "machine": machine(),
            "quick": args.quick,
            "closed_loop": run_closed_loop(
                os.path.join(work, "closed-loop"),
                quick=args.quick,
                steps=args.steps,
                demos_per_task=args.demos_per_task,
                eval_episodes=args.eval_episodes,
            ),
        }
        print_table("robolake bench media --closed-loop", closed_loop_rows(res["closed_loop"]))
        write_json(args.json, res)
        return 0
    for path in args.data:
        if not os.path.isdir(path):
            p.error(f"--data {path}: no such directory")
    data = {f"--data {os.path.basename(os.path.normpath(d))}": os.path.abspath(d) for d in args.data}
    if args.pack_pairs is not None:
        if args.pack_pairs < 1:
            p.error(f"--pack-pairs {args.pack_pairs}: give at least 1")
        from robolake.ray_tasks import ensure_ray

        ensure_ray(num_cpus=2)
        sets = {**default_data_sets(work, args.quick), **data}
        packs = {
            name: pack_pairs(src, os.path.join(work, f"pairs-{i}"), pairs=args.pack_pairs, image_size=RENDITION_SIZE)
            for i, (name, src) in enumerate(sets.items())
        }
        write_json(args.json, {"machine": machine(), "quick": args.quick, "pack_pairs": packs})
        print_table("robolake bench media --pack-pairs: pack seconds, median (range)", pack_pair_rows(packs))
        return 0
    random.seed(0)
    layouts = media_layouts(work, quick=args.quick, data=data)
    video = mcap_video(work, quick=args.quick)
    write_json(args.json, {"machine": machine(), "quick": args.quick, "media_layouts": layouts, "mcap_video": video})
    print_table(
        "robolake bench media: layout | x source | exact or PSNR | random reads | pack",
        table_rows(layouts) + mcap_video_rows(video),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
