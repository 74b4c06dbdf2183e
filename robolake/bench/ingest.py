"""Ingest throughput against its practical limit, and random frame access: lake vs source mp4.

- `frames_per_s`: `robolake.lake.intake.ingest` of the synthetic dataset (validation, hashing,
  quarantine checks, frame encode, fragment writes, one commit).
- `limit_frames_per_s`: the same episodes only read, decoded, JPEG-encoded and written to Lance by
  the same Ray Data parallelism, with no validation: what ingest could reach at best.
- `random_frame_access`: 1,000 random (episode, step, camera) frames decoded to RGB, from the
  lake (one Lance take + JPEG decode) and from the source files (mp4 seek + decode), same run.
  Measured on the synthetic data and, when ../shared is present, on the real GR00T dataset.
- `--data PATH`: measure ingest on PATH (any dataset a registered reader reads) instead of the
  synthetic data; `data` in the JSON and the first table row say which data was used.
- `formats`: one row per registered source format and encoding (lerobot, hdf5 ALOHA and indexed
  `states_{i}` families, rlds, ros2 in both storages, ros2-file, ros1, mcap in JSON, ROS 1,
  protobuf and mixed encodings): a small fixture written with the format's own writer (the
  writers of `robolake.testing`), ingested on Ray, against the *reader limit* of the same data:
  the format's reader alone (`read_tabular` + `read_frames`) and a Lance write of its steps and
  frames, with the same Ray Data parallelism and none of ingest's hashing against the lake,
  quarantine, statistics, index or commit. Paired runs (limit, ingest, limit, ingest, ...);
  throughput is total over total; the ratio is the median of the pairs with its min/max.
  Beside it, the *fixed cost of a one-file ingest*: wall seconds to ingest one unit of the
  format into a fresh lake, in this process (`execution="auto"`, what a small source gets) and
  on the already-running Ray (`execution="ray"`), median of the repeats.
- `one_bag_cold_s`: what a user waits for `ingest one.bag lake` in a fresh interpreter (imports,
  discovery, the stages, the commit), in process and with a local Ray started for it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import lance
import pyarrow as pa
import pyarrow.parquet as pq

from robolake.bench._common import machine, print_table, ratio_summary, write_json
from robolake.bench._media_reads import SHARED, random_frame_access
from robolake.lake import (
    IngestConfig,
    Lake,
    LeRobotReader,
    SourceReader,
    discover_readers,
    format_names,
    ingest,
    iter_video_frames,
)
from robolake.ray_tasks import ensure_ray
from robolake.testing import hdf5 as hdf5_fixture
from robolake.testing import mcap as mcap_fixture
from robolake.testing import rlds as rlds_fixture
from robolake.testing import ros as ros_fixture
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


def _limit_ingest(src: str, out: str) -> int:
    """Read, decode, encode, write to Lance on Ray Data, no validation; returns frames written."""
    import ray.data

    jobs = []
    for reader in cast(list[LeRobotReader], discover_readers(src)):  # this limit reads LeRobot layouts
        for ref in reader.discover():
            jobs.append(
                (
                    reader.root,
                    ref.get("data_path"),
                    [(c, ref.get(f"video:{c}"), ref.get(f"from:{c}"), ref.get(f"to:{c}")) for c in reader.cameras],
                    reader.fps,
                )
            )

    # The same chunking as ingest: about two tasks per CPU.
    per_task = max(1, -(-len(jobs) // 4))
    chunks = [jobs[i : i + per_task] for i in range(0, len(jobs), per_task)]

    def load(row: dict[str, Any]) -> dict[str, Any]:
        frames = []
        rows = 0
        for root, data_path, videos, fps in chunks[int(row["i"])]:
            rows += pq.read_table(os.path.join(root, data_path)).num_rows
            for cam, rel, lo, hi in videos:
                for j, (t, img, _h, _w) in enumerate(
                    iter_video_frames(os.path.join(root, rel), start_s=lo, end_s=hi, fps=fps)
                ):
                    frames.append({"episode": data_path, "camera": cam, "step": j, "t": t, "data": img})
        table = pa.Table.from_pylist(frames, schema=schema)
        frags = lance.fragment.write_fragments(table, out, schema=schema) if frames else []
        return {"n": len(frames), "rows": rows, "frags": [f.to_json() for f in frags]}

    import json as _json

    schema = pa.schema(
        [
            ("episode", pa.string()),
            ("camera", pa.string()),
            ("step", pa.int64()),
            ("t", pa.float64()),
            ("data", pa.binary()),
        ]
    )
    lance.write_dataset(pa.Table.from_pylist([], schema=schema), out, schema=schema, mode="overwrite")
    base = lance.dataset(out).version
    ds = ray.data.from_items([{"i": i} for i in range(len(chunks))], override_num_blocks=len(chunks))
    results = list(ds.map(lambda r: {"r": _json.dumps(load(r))}).iter_rows())
    parsed = [_json.loads(r["r"]) for r in results]
    frags = [lance.FragmentMetadata.from_json(_json.dumps(f)) for p in parsed for f in p["frags"]]
    lance.LanceDataset.commit(out, lance.LanceOperation.Append(frags), read_version=base)
    return sum(p["n"] for p in parsed)


def _reader_limit(src: str, out: str, fmt: str = "auto") -> tuple[int, int]:
    """The readers alone plus a Lance write, on Ray Data; returns (steps, frames) written."""
    from robolake.ray_tasks import chunk, fan_out

    readers = {r.root: r for r in discover_readers(src, format=fmt)}
    refs = [ref for r in readers.values() for ref in r.discover()]
    chunks = chunk(refs, 8)
    schema = pa.schema([("episode", pa.string()), ("camera", pa.string()), ("step", pa.int64()), ("data", pa.binary())])
    step_schema = pa.schema(
        [
            ("episode", pa.string()),
            ("step", pa.int64()),
            ("t", pa.float64()),
            ("state", pa.list_(pa.float32())),
            ("action", pa.list_(pa.float32())),
        ]
    )
    for path, sch in ((out + ".media", schema), (out + ".steps", step_schema)):
        lance.write_dataset(pa.Table.from_pylist([], schema=sch), path, schema=sch, mode="overwrite")
    task = _ReaderLimitTask(readers, chunks, out, schema, step_schema)
    results = [res for _, res in fan_out(task, len(chunks))]
    for suffix in (".media", ".steps"):
        frags = [lance.FragmentMetadata.from_json(json.dumps(f)) for r in results for f in r[suffix]]
        base = lance.dataset(out + suffix).version
        lance.LanceDataset.commit(out + suffix, lance.LanceOperation.Append(frags), read_version=base)
    return sum(r["steps"] for r in results), sum(r["frames"] for r in results)


class _ReaderLimitTask:
    def __init__(
        self,
        readers: dict[str, SourceReader],
        chunks: list[list[Any]],
        out: str,
        schema: pa.Schema,
        step_schema: pa.Schema,
    ):
        self.readers, self.chunks, self.out, self.schema, self.step_schema = readers, chunks, out, schema, step_schema

    def __call__(self, index: int) -> dict[str, Any]:
        media: list[dict[str, Any]] = []
        steps: list[dict[str, Any]] = []
        for ref in self.chunks[index]:
            reader = self.readers[ref.source_uri]
            ep = reader.read_tabular(ref)
            name = f"{ref.source_uri}#{ref.episode_index}"
            steps += [
                {
                    "episode": name,
                    "step": i,
                    "t": float(ep.timestamps[i]),
                    "state": ep.state[i].tolist(),
                    "action": ep.action[i].tolist(),
                }
                for i in range(ep.num_steps)
            ]
            for f in reader.read_frames(ep):
                media += [
                    {"episode": name, "camera": f.camera, "step": i, "data": img} for i, img in enumerate(f.images)
                ]
        out: dict[str, Any] = {"steps": len(steps), "frames": len(media)}
        for suffix, rows, sch in ((".media", media, self.schema), (".steps", steps, self.step_schema)):
            frags = (
                lance.fragment.write_fragments(pa.Table.from_pylist(rows, schema=sch), self.out + suffix, schema=sch)
                if rows
                else []
            )
            out[suffix] = [f.to_json() for f in frags]
        return out


# --- fixtures of every format, written with each format's own writer ---------------------------


def _fixtures(quick: bool) -> dict[str, tuple[str, str, Callable[[Path], None]]]:
    """Row name -> (registry format, what the fixture holds, builder(dir))."""
    k = 3 if quick else 6  # recordings per format
    secs = 2.0 if quick else 4.0
    steps = 40 if quick else 120

    def lerobot(d: Path) -> None:
        generate_synthetic(
            d, SyntheticConfig(seed=1, episodes_per_embodiment=k, embodiments=("single_arm_7dof",), version="v3.0")
        )

    def hdf5(d: Path) -> None:
        for i in range(k):
            hdf5_fixture.write_aloha(d / f"episode_{i}.hdf5", steps=steps, compress=True, seed=i)

    def rlds(d: Path) -> None:
        rlds_fixture.write_tfds(
            d / "oxe_bench", splits={"train": [[rlds_fixture.episode_example(steps, i) for i in range(k)]]}
        )

    def ros(storage: str) -> Callable[[Path], None]:
        def build(d: Path) -> None:
            for i in range(k):
                ros_fixture.write_ros2(d / f"rec_{i}", ros_fixture.Layout(seconds=secs, seed=i), storage=storage)

        return build

    def ros2_file(d: Path) -> None:
        for i in range(k):
            bag = d / f"tmp_{i}"
            ros_fixture.write_ros2(bag, ros_fixture.Layout(seconds=secs, seed=i), storage="sqlite3")
            (db,) = bag.glob("*.db3")
            db.rename(d / f"rec_{i}.db3")
            shutil.rmtree(bag)

    def ros1(d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        for i in range(k):
            ros_fixture.write_ros1(d / f"rec_{i}.bag", ros_fixture.Layout(seconds=secs, seed=i))

    def mcap(writer: Callable[..., Any]) -> Callable[[Path], None]:
        def build(d: Path) -> None:
            d.mkdir(parents=True, exist_ok=True)
            for i in range(k):
                writer(d / f"rec_{i}.mcap", ros_fixture.Layout(seconds=secs, seed=i))

        return build

    def hdf5_indexed(d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        hdf5_fixture.write_indexed(d / "flat.h5", episodes=k, steps=steps, images=True, fps=20.0)

    def video_mcap(d: Path) -> None:
        from robolake.testing.video import video_topic

        d.mkdir(parents=True, exist_ok=True)
        for i in range(k):
            entries, _ = video_topic(secs, 15.0)
            layout = ros_fixture.Layout(
                seconds=secs, seed=i, camera="none", extra={"/camera/video": ("video", entries)}
            )
            ros_fixture.write_mcap_json(d / f"rec_{i}.mcap", layout)

    def lerobot_lance(d: Path) -> None:
        from robolake.writers.lerobot_lance import write_lerobot_lance

        (v3,) = generate_synthetic(
            d.parent / f"{d.name}_v3",
            SyntheticConfig(seed=1, episodes_per_embodiment=k, embodiments=("single_arm_7dof",), version="v3.0"),
        )
        write_lerobot_lance(v3, d / "arm_lance")

    def own(module: str) -> Callable[[Path], None]:  # a reader's own bench fixture (robolake.testing.<module>)
        def build(d: Path) -> None:
            import importlib

            importlib.import_module(f"robolake.testing.{module}").bench_fixture(d, k, steps)

        return build

    rec = f"{k} recordings x {secs:g} s: joints 100 Hz, commands 50 Hz, 24x32 JPEG camera 15 fps"
    return {
        "lerobot": ("lerobot", f"{k} episodes, v3.0, 64x64 h264, 1 camera", lerobot),
        "hdf5": ("hdf5", f"{k} ALOHA files x {steps} steps, 2 JPEG-compressed 48x64 cameras", hdf5),
        "hdf5 (indexed)": (
            "hdf5",
            f"1 file of {k} states_{{i}}/actions_{{i}}/images_{{i}} x {steps} steps, raw 16x16",
            hdf5_indexed,
        ),
        "rlds": ("rlds", f"{k} episodes x {steps} steps, JPEG 32x40 + PNG 16x16", rlds),
        "ros2 (sqlite3)": ("ros2", rec, ros("sqlite3")),
        "ros2 (mcap)": ("ros2", rec, ros("mcap")),
        "ros2-file": ("ros2-file", rec + ", lone .db3 files", ros2_file),
        "ros1": ("ros1", rec, ros1),
        "mcap": ("mcap", rec + ", JSON messages", mcap(ros_fixture.write_mcap_json)),
        "mcap (ros1)": ("mcap", rec + ", ROS 1 messages (mcap-ros1-support)", mcap(mcap_fixture.write_mcap_ros1)),
        "mcap (protobuf)": (
            "mcap",
            rec + ", protobuf messages (mcap-protobuf-support)",
            mcap(mcap_fixture.write_mcap_protobuf),
        ),
        "mcap (mixed)": (
            "mcap",
            rec + ", JSON + ROS 1 + protobuf channels in one file",
            mcap(mcap_fixture.write_mcap_mixed),
        ),
        "mcap (CompressedVideo)": (
            "mcap",
            f"{k} recordings x {secs:g} s: joints 100 Hz, commands 50 Hz, h264 48x64 foxglove.CompressedVideo 15 fps",
            video_mcap,
        ),
        "zarr": (
            "zarr",
            f"{k} episodes x {steps} steps, UMI-style replay buffer, 96x96 JPEG-XL camera",
            own("zarr_buffers"),
        ),
        "rerun": ("rerun", f"{k} takes x {steps} steps, Rerun .rrd: scalars, JPEG camera", own("rerun_recordings")),
        "npz": ("npz", f"{k} .npz episodes x {steps} steps with JSON sidecars, a uint8 camera", own("npz_episodes")),
        "lerobot-lance": ("lerobot-lance", f"{k} episodes, LeRobot's Lance layout, 64x64 h264", lerobot_lance),
    }


def _paired(src: str, work: str, fmt: str, reps: int, limit: Callable[[str, str], tuple[int, int]]) -> dict[str, Any]:
    """(limit, ingest) pairs on `src`: throughputs total over total, median ratio with spread."""
    limit(src, os.path.join(work, "warm.lance"))  # first Ray Data job of a shape pays for workers
    ratios, steps, frames = [], 0, 0
    lim_s = ing_s = 0.0
    lim_steps = lim_frames = 0
    result = None
    for rep in range(reps):
        t0 = time.perf_counter()
        ls, lf = limit(src, os.path.join(work, f"limit{rep}.lance"))
        dl = time.perf_counter() - t0
        t0 = time.perf_counter()
        # on Ray, as the limit runs: the ratio compares the same parallelism
        result = ingest(src, os.path.join(work, f"lake{rep}"), IngestConfig(format=fmt, execution="ray"))
        di = time.perf_counter() - t0
        lim_s, ing_s, lim_steps, lim_frames = lim_s + dl, ing_s + di, lim_steps + ls, lim_frames + lf
        steps, frames = steps + result.steps, frames + result.frames
        unit = (result.frames, lf) if lf else (result.steps, ls)
        ratios.append((unit[0] / di) / (unit[1] / dl))
    assert result is not None
    return {
        "episodes": result.ingested,
        "quarantined": result.quarantined,
        "steps": result.steps,
        "frames": result.frames,
        "frames_per_s": frames / ing_s,
        "steps_per_s": steps / ing_s,
        "limit_frames_per_s": lim_frames / lim_s,
        "limit_steps_per_s": lim_steps / lim_s,
        "ratio_to_limit": ratio_summary(ratios),
    }


def one_file_cost(src: str, work: str, fmt: str, reps: int) -> dict[str, Any]:
    """Wall seconds of ingesting one unit of `src` into a fresh lake: in process and on the running Ray."""
    from robolake.lake import find_units

    unit = find_units(src, format=fmt).units[0][0]
    out: dict[str, Any] = {"unit": os.path.basename(unit)}
    for mode in ("auto", "ray"):
        times, ran = [], ""
        for rep in range(reps):
            t0 = time.perf_counter()
            res = ingest(unit, os.path.join(work, f"one-{mode}-{rep}"), IngestConfig(format=fmt, execution=mode))
            times.append(time.perf_counter() - t0)
            ran = res.execution
        out[f"{mode}_s"] = float(sorted(times)[len(times) // 2])
        out[f"{mode}_ran"] = ran
    return out


ONE_BAG = """
import sys, time
t0 = time.perf_counter()
from robolake.lake.intake.ingest import IngestConfig, ingest
res = ingest(sys.argv[1], sys.argv[2], IngestConfig(execution=sys.argv[3]))
print(time.perf_counter() - t0, res.execution, res.ingested)
"""


def one_bag_cold(work: str) -> dict[str, Any]:
    """`ingest one.bag lake` in a fresh interpreter, in process and with a local Ray of its own."""
    import subprocess
    import sys

    bag = Path(work) / "cold" / "one.bag"
    bag.parent.mkdir(parents=True, exist_ok=True)
    ros_fixture.write_ros1(bag, ros_fixture.Layout(seconds=1.0))
    out: dict[str, Any] = {"data": "one ROS 1 bag, 1 s: joints 100 Hz, commands 50 Hz, JPEG camera 15 fps"}
    for mode in ("auto", "ray"):
        t0 = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", ONE_BAG, str(bag), str(bag.parent / f"lake-{mode}"), mode],
            capture_output=True,
            text=True,
            timeout=600,
        )
        wall = time.perf_counter() - t0
        if run.returncode != 0:
            out[mode] = {"error": run.stderr[-500:]}
            continue
        inside, ran, n = run.stdout.split()[-3:]
        out[mode] = {"wall_s": wall, "in_script_s": float(inside), "ran": ran, "ingested": int(n)}
    return out


def run_formats(work: str, quick: bool) -> dict[str, Any]:
    """One paired measurement per registered format; formats without a fixture are reported."""
    out: dict[str, Any] = {}
    fixtures = _fixtures(quick)
    for name in format_names():
        if not any(f == name for f, _, _ in fixtures.values()):
            out[name] = {"skipped": "no fixture builder for this format in robolake.bench.ingest"}
    for row, (fmt, what, build) in fixtures.items():
        if fmt not in format_names():
            continue
        d = Path(work) / "formats" / row.replace(" ", "_").replace("(", "").replace(")", "")
        d.mkdir(parents=True, exist_ok=True)
        try:
            build(d)
        except ImportError as e:  # the format's own writer (rosbags, mcap, h5py) is not installed
            out[row] = {"format": fmt, "skipped": f"cannot build the fixture ({type(e).__name__}: {e})"}
            continue

        def limit(s: str, o: str, f: str = fmt) -> tuple[int, int]:
            return _reader_limit(s, o, f)

        res = _paired(str(d), str(d) + "_work", fmt, 2 if quick else 3, limit)
        out[row] = {
            "format": fmt,
            "data": what,
            **res,
            "one_file": one_file_cost(str(d), str(d) + "_one", fmt, 3 if quick else 5),
        }
    return out


def run(quick: bool, data: str | None = None, formats: bool = True) -> dict[str, Any]:
    ensure_ray(num_cpus=2)
    work = tempfile.mkdtemp(prefix="robolake-bench-ingest-")
    if data is None:
        cfg = SyntheticConfig(seed=0, episodes_per_embodiment=4 if quick else 12)
        src = os.path.join(work, "synthetic")
        generate_synthetic(src, cfg)
        what = (
            f"synthetic: 3 embodiments x {cfg.episodes_per_embodiment} episodes, "
            f"{cfg.image_size}px, {cfg.version} {cfg.codec}"
        )
    else:
        src = os.path.abspath(data)
        what = src
    readers = list(discover_readers(src))
    kinds = sorted({r.format_name for r in readers})
    lerobot = all(isinstance(r, LeRobotReader) for r in readers)

    # The LeRobot limit decodes the mp4s itself; other formats are held to their readers' limit.
    def limit(s: str, o: str) -> tuple[int, int]:
        return (0, _limit_ingest(s, o)) if lerobot else _reader_limit(s, o)

    paired = _paired(src, os.path.join(work, "main"), "auto", 2, limit)
    lake = Lake.open(os.path.join(work, "main", "lake0"))

    out: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "data": {"path": src, "what": what, "formats": kinds, "limit": "lerobot mp4 decode" if lerobot else "reader"},
        "episodes": paired["episodes"],
        "frames": paired["frames"],
        "steps": paired["steps"],
        "frames_per_s": paired["frames_per_s"],
        "steps_per_s": paired["steps_per_s"],
        "limit_frames_per_s": paired["limit_frames_per_s"],
        "ratio_to_limit": paired["ratio_to_limit"]["median"],
        "ratio_to_limit_spread": paired["ratio_to_limit"],
    }
    if lerobot:
        out["random_frame_access"] = random_frame_access(src, lake, 1000)
    shared = os.path.abspath(SHARED)  # the checkout's ../shared
    if os.path.isdir(shared) and data is None:
        real_lake = os.path.join(work, "real_lake")
        ingest(shared, real_lake, IngestConfig())
        out["random_frame_access_real"] = random_frame_access(shared, Lake.open(real_lake), 300 if quick else 1000)
    if formats:
        out["formats"] = run_formats(work, quick)
    out["one_bag_cold_s"] = one_bag_cold(work)
    shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument(
        "--data", default=None, metavar="PATH", help="measure ingest on this dataset instead of synthetic data"
    )
    p.add_argument("--no-formats", action="store_true", help="skip the one-row-per-format measurements")
    args = p.parse_args(argv)
    res = run(args.quick, args.data, formats=not args.no_formats)
    rows: list[tuple[Any, ...]] = [
        ("data", res["data"]["what"]),
        ("episodes", res["episodes"]),
        ("frames", res["frames"]),
        ("ingest frames/s", res["frames_per_s"]),
        ("ingest steps/s", res["steps_per_s"]),
        (f"limit frames/s ({res['data']['limit']} + write only)", res["limit_frames_per_s"]),
        ("ratio_to_limit", res["ratio_to_limit_spread"]),
    ]
    if "random_frame_access" in res:
        r = res["random_frame_access"]
        rows += [
            (
                "random frames/s, lake (64 a call / 1 a call)",
                f"{r['lake_per_s']:,.0f} / {r['lake_one_per_call_per_s']:,.0f}",
            ),
            ("random frames/s, source mp4", r["source_per_s"]),
            ("random access speedup (64 a call / 1 a call)", f"{r['speedup']:.1f} / {r['speedup_one_per_call']:.1f}"),
        ]
    if "random_frame_access_real" in res:
        r = res["random_frame_access_real"]
        rows += [
            (
                "real data: lake frames/s (64 a call / 1 a call)",
                f"{r['lake_per_s']:,.0f} / {r['lake_one_per_call_per_s']:,.0f}",
            ),
            ("real data: mp4 frames/s", r["source_per_s"]),
            ("real data: speedup (64 a call / 1 a call)", f"{r['speedup']:.1f} / {r['speedup_one_per_call']:.1f}"),
        ]
    print_table("robolake bench ingest", rows)
    if "formats" in res:
        frows: list[tuple[Any, ...]] = []
        for name, r in res["formats"].items():
            if "skipped" in r:
                frows.append((f"{name}", f"skipped: {r['skipped']}"))
                continue
            one = r["one_file"]
            frows += [
                (f"{name}: data", r["data"]),
                (f"{name}: ingest frames/s | steps/s", f"{r['frames_per_s']:,.0f} | {r['steps_per_s']:,.0f}"),
                (
                    f"{name}: limit frames/s | steps/s",
                    f"{r['limit_frames_per_s']:,.0f} | {r['limit_steps_per_s']:,.0f}",
                ),
                (f"{name}: ratio_to_limit", r["ratio_to_limit"]),
                (
                    f"{name}: one-file ingest s, in process | on Ray ({one['unit']})",
                    f"{one['auto_s']:.2f} | {one['ray_s']:.2f}",
                ),
            ]
        print_table("ingest per source format (same data: ingest vs reader + write; fixed cost of one file)", frows)
    cold = res["one_bag_cold_s"]
    crows: list[tuple[Any, ...]] = [("data", cold["data"])]
    for mode, label in (("auto", "in process"), ("ray", "local Ray started for it")):
        c = cold[mode]
        crows.append(
            (
                f"one-bag ingest, fresh interpreter, {label}: wall s (imports + ingest s)",
                f"{c['wall_s']:.2f} ({c['in_script_s']:.2f})" if "wall_s" in c else c.get("error", "?"),
            )
        )
    print_table("fixed cost of `ingest one.bag lake`", crows)
    write_json(args.json, res)


if __name__ == "__main__":
    main()
