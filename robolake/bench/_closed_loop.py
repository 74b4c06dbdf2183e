"""What lossy frame storage costs a policy: the demo's policy trained on one set of sim recordings
stored three ways, and each evaluated closed loop on the same unseen seeds.

The recordings are the demo's noisy-expert Meta-World demonstrations (`sim.recorder`), recorded
once, written as a LeRobot v2.1 dataset (an h264 mp4 per camera, as a rig would write it): the
camera's recording is then a video, which is what the three layouts store differently. Each arm
ingests it with one frame layout: `record` (the default: the mp4's own packets, bit-exact),
`jpeg` (`--frames jpeg`, q80) and `h264` (`--frames h264`, key-referenced, the default CRF).
(The demo's default HDF5 logs hold raw renders, which the lossy layouts both store as JPEG, so
they cannot tell JPEG from h264 apart.) Everything else is the same in every arm: the pack spec
and seed (the same samples in the same order), the model preset, the optimizer steps, the
training seed, and the evaluation (the demo's `eval_config`: episodes per task, seeds,
replanning), without the expert and floor baselines, which do not depend on the arm. Per task:
success rate and its Wilson 95% interval (`sim.evaluate.summarize`); per arm also the lake's
frame bytes and the PSNR of its frames against the record's.

Small differences between arms are noise at these episode counts; the Wilson intervals say how
much. `quick` (3 demonstrations a task, 40 steps, 2 episodes a task) checks the flow end to end
in minutes; it trains too little for the comparison to mean anything. The default (24
demonstrations a task, 3,000 steps, 10 episodes a task) is the demo's full run, three times.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import numpy as np

__all__ = ["ARMS", "closed_loop_rows", "run_closed_loop"]

ARMS = ("record", "jpeg", "h264")  # IngestConfig.video_frames of each arm


def _frame_fidelity(lake: Any, reference: Any, limit: int = 400) -> dict[str, Any]:
    """Frame bytes of `lake`, and PSNR of up to `limit` of its frames against the same frames of `reference`."""
    media = lake.dataset("media")
    frame_bytes = sum(len(b) for batch in media.to_batches(columns=["data"]) for b in batch.column("data").to_pylist())
    keys = lake.to_arrow("media", columns=["episode_id", "camera", "step_index"]).to_pylist()[:limit]
    by_src = {(e["source_uri"], e["source_episode_index"]): e["episode_id"] for e in reference.episodes().to_pylist()}
    ids = {e["episode_id"]: by_src[(e["source_uri"], e["source_episode_index"])] for e in lake.episodes().to_pylist()}
    got = lake.frames().read_many([(k["episode_id"], k["camera"], k["step_index"]) for k in keys])
    want = reference.frames().read_many(
        [(ids[k["episode_id"]], k["camera"], k["step_index"]) for k in keys], exact=True
    )
    mse = (
        float(np.mean([np.mean((g.astype(np.float64) - w) ** 2) for g, w in zip(got, want, strict=True)]))
        if keys
        else 0.0
    )
    return {
        "frame_bytes": frame_bytes,
        "psnr_db_vs_record": float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse)),
        "frames_compared": len(keys),
    }


def run_closed_loop(
    work: str,
    *,
    quick: bool,
    seed: int = 0,
    steps: int | None = None,
    demos_per_task: int | None = None,
    eval_episodes: int | None = None,
) -> dict[str, Any]:
    """Record once, then per arm: ingest, pack, train, evaluate (see the module docstring)."""
    import torch

    from robolake.demo import DemoConfig, eval_config, sim_available
    from robolake.lake import IngestConfig, Lake, ingest
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.sim.evaluate import evaluate_checkpoint
    from robolake.sim.recorder import RecordConfig, record_demos
    from robolake.training.config import ModelConfig
    from robolake.training.run import RunConfig, train_on
    from robolake.training.threads import set_torch_threads

    if not sim_available():
        raise ImportError("bench media --closed-loop needs the sim extra: pip install 'robolake[sim]'")
    demo = DemoConfig(out=work, quick=quick, seed=seed, sim="on", eval_episodes=eval_episodes)
    steps = steps or (40 if quick else 3000)  # the demo's packed-run steps
    src = os.path.join(work, "sim_demos")
    t0 = time.perf_counter()
    if not (os.path.isdir(src) and os.listdir(src)):
        record_demos(
            src,
            RecordConfig(
                episodes_per_task=demos_per_task or (3 if quick else 24), seed=seed, num_workers=2, format="lerobot"
            ),
        )
    out: dict[str, Any] = {"steps": steps, "seed": seed, "record_seconds": time.perf_counter() - t0, "arms": {}}
    model = ModelConfig.preset("tiny")
    spec = PackSpec(
        max_tokens=512,
        horizon=model.action_horizon,
        seed=seed,
        image_size=model.image_size,
        tokens=TokenLengthConfig(tokens_per_view=model.tokens_per_view, state_tokens=0),
    )  # the demo's sim spec
    ec = dataclasses.replace(eval_config(demo), baselines=False, videos=0)
    lakes: dict[str, Any] = {}
    for arm in ARMS:
        t_arm = time.perf_counter()
        uri = os.path.join(work, f"lake-{arm}")
        ingest(src, uri, IngestConfig(video_frames=arm))
        lakes[arm] = lake = Lake.open(uri)
        packed = os.path.join(work, f"packed-{arm}")
        pack(lake, spec, packed, overwrite=True)
        run = RunConfig(
            out=os.path.join(work, f"train-{arm}"),
            steps=steps,
            lr=1e-3,
            sequences_per_batch=1,
            seed=seed,
            warmup_steps=min(50, steps // 10 + 1),
            checkpoint_every=0,
            resume=False,
        )  # the demo's run
        trained = train_on(packed, run)
        previous = torch.get_num_threads()
        set_torch_threads(reserved=ec.rollout.num_workers)  # the environment actors keep their cores busy
        try:
            result = evaluate_checkpoint(run.out, ec)
        finally:
            torch.set_num_threads(previous)
        out["arms"][arm] = {
            "encodings": sorted(set(lake.to_arrow("media", columns=["encoding"])["encoding"].to_pylist())),
            **_frame_fidelity(lake, lakes["record"]),
            "loss_last_mean10": float(np.mean(trained.losses[-10:])) if trained.losses else None,
            "tasks": result["tasks"],
            "mean_success": result["mean_success"],
            "episodes_per_task": ec.episodes,
            "seconds": time.perf_counter() - t_arm,
        }
    out["total_seconds"] = time.perf_counter() - t0
    return out


def closed_loop_rows(res: dict[str, Any]) -> list[tuple[str, Any]]:
    """Printable rows: per arm its frame bytes and fidelity, then per task success [Wilson 95%]."""
    rows: list[tuple[str, Any]] = [("optimizer steps / seed", f"{res['steps']} / {res['seed']}")]
    record_bytes = res["arms"]["record"]["frame_bytes"]
    for arm, a in res["arms"].items():
        rows.append(
            (
                f"{arm}: frame bytes x record, PSNR vs record",
                f"{a['frame_bytes'] / record_bytes:.2f}x, {a['psnr_db_vs_record']:.1f} dB "
                f"({', '.join(a['encodings'])})",
            )
        )
    tasks = list(next(iter(res["arms"].values()))["tasks"])
    for task in tasks:
        cells = []
        for arm, a in res["arms"].items():
            t = a["tasks"][task]
            cells.append(f"{arm} {t['successes']}/{t['episodes']} [{t['ci95'][0]:.2f}, {t['ci95'][1]:.2f}]")
        rows.append((f"success {task}", "; ".join(cells)))
    rows.append(("mean success", "; ".join(f"{arm} {a['mean_success']:.2f}" for arm, a in res["arms"].items())))
    return rows
