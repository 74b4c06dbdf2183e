"""`robolake demo`: the whole flow on the embedded default (a local lake directory, a local Ray).

With the sim extra installed (`pip install 'robolake[sim]'`) the demo closes the loop:
record noisy-expert demonstrations of five Meta-World tasks on Ray actors (LeRobot files, as a
rig would write them) -> ingest (Ray Data) -> pack (Ray Data) -> stream -> train the tiny model
(packed, then a short padded baseline) -> held-out action MSE against the mean-action baseline ->
closed-loop evaluation in the simulator on unseen seeds, beside the scripted expert and a floor
-> `out/report.md` with PNG plots, one rollout GIF and `out/eval.json`.

Without the extra it runs the same stages on synthetic multi-embodiment teleoperation data and
stops at the held-out MSE. Each stage prints what it produced; on a 2-core laptop the closed-loop
demo takes about ten minutes and the synthetic one a few.

Running it again over the same `out` reuses what is there: the recordings, the lake (ingest is
idempotent), and the training run, which checkpoints every fifth of its steps and resumes from
the newest checkpoint an interrupted demo left (a finished run starts over and keeps only its
last checkpoint). The packed-vs-padded training comparison runs only where padding the
packer's batches would cost something: samples of one length (the sim's single camera and short
instructions, bucketed by the packer) pad to nothing, and a padded run would then measure the
attention kernels, not padding, so the report says that instead of a ratio. Closed-loop episodes
run to each task's own step limit, so the expert's score is the expert's, not a cut-off's.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from robolake.lake import EpisodeFilter, IngestConfig, Lake, ingest
from robolake.loaders import LoaderConfig, PackedLoader
from robolake.packers import (
    PackSpec,
    TokenLengthConfig,
    build_sample_index,
    pack,
    plan_sequences,
)
from robolake.plots import plot_fill_rates, plot_length_histograms, plot_loss, plot_throughput
from robolake.training.checkpoint import latest_checkpoint
from robolake.training.config import ModelConfig
from robolake.training.evaluate import evaluate_actions, heldout_loss
from robolake.training.families import PolicyModel
from robolake.training.run import RunConfig, train_on
from robolake.training.threads import set_torch_threads
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

__all__ = ["DemoConfig", "run_demo", "sim_available"]

log = logging.getLogger(__name__)
ProgressFn = Callable[[str, int, int], None]
# Below this share of padding in the packer's own batches a padded run has nothing to measure.
MIN_PADDING_TO_COMPARE = 0.01


def sim_available() -> bool:
    """Whether the sim extra (Meta-World) is installed."""
    return importlib.util.find_spec("metaworld") is not None


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """What the demo runs.

    Attributes:
        out: Directory for the dataset, lake, shards, checkpoints and report.
        quick: Fewer episodes and steps (for tests and a first look).
        seed: Seed of the data, the packing and the model.
        steps: Training steps of the packed run (default: sim 3000 full / 40 quick; synthetic
            300 / 40).
        sim: "auto" closes the loop in simulation when the sim extra is installed, "on" requires
            it, "off" runs the synthetic flow.
        episodes_per_task: Sim demonstrations recorded per task (default 24 full, 3 quick).
        eval_episodes: Closed-loop episodes per task for the policy, the expert and the floors
            (default 10 full, 2 quick).
        family: The model family trained and evaluated: "groot" (default) or "pi0"
            (`robolake.training.pi0`); the same shards train either.
    """

    out: str = "demo_out"
    quick: bool = False
    seed: int = 0
    steps: int | None = None
    family: Literal["groot", "pi0"] = "groot"
    sim: Literal["auto", "on", "off"] = "auto"
    episodes_per_task: int | None = None
    eval_episodes: int | None = None

    def __post_init__(self) -> None:
        if self.sim not in ("auto", "on", "off"):
            raise ValueError(f"sim must be auto, on or off, got {self.sim!r}")
        if self.family not in ("groot", "pi0"):
            raise ValueError(f"family must be groot or pi0, got {self.family!r}")

    @property
    def use_sim(self) -> bool:
        if self.sim == "on" and not sim_available():
            raise ImportError("the closed-loop demo needs the sim extra: pip install 'robolake[sim]'")
        return self.sim == "on" or (self.sim == "auto" and sim_available())


def _metrics(path: str) -> list[dict[str, Any]]:
    """metrics.jsonl rows, one per step: a resumed run logs again the steps after its checkpoint,
    and the later row of a step is the one the checkpoint continued from."""
    by_step: dict[int, dict[str, Any]] = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                by_step[int(row["step"])] = row
    return [by_step[k] for k in sorted(by_step)]


def _checkpoint_step(run_dir: str) -> int:
    ckpt = latest_checkpoint(os.path.join(run_dir, "checkpoints"))
    return int(ckpt.stem.split("_")[-1]) if ckpt is not None else 0  # step_{step:08d}


def _pack_once(lake: Lake, spec: PackSpec, path: str, progress: ProgressFn | None) -> Any:
    """Pack `lake` with `spec` into `path`, unless `path` already holds exactly that pack.

    The same lake version and spec give the same shards; packing them again would only publish a
    new shards version, which an interrupted training run's loader state (rightly) refuses.
    """
    from robolake.packers.manifest import read_manifest

    try:
        old = read_manifest(path)
    except FileNotFoundError:
        old = None
    if (
        old is not None
        and (old.lake_uri, old.lake_version) == (lake.uri, lake.version)
        and old.spec == json.loads(json.dumps(spec.to_json()))
    ):
        print(f"      ({path} already holds these shards)")
        return old
    return pack(lake, spec, path, overwrite=True, progress=progress)


def _keep_only(checkpoint: Any) -> None:
    """Remove the run's earlier checkpoints (tens of MB each): they were only there for an interruption."""
    import shutil
    from pathlib import Path

    if checkpoint is None:
        return
    keep = Path(checkpoint)
    for other in keep.parent.glob("step_*"):
        if other != keep:
            shutil.rmtree(other) if other.is_dir() else other.unlink()


def _batch_padding(index: Any, spec: PackSpec, sequences_per_batch: int) -> float:
    """Padding share of the token grid if the packer's batches were padded to their longest sample."""
    sequences, _ = plan_sequences(index, spec)
    real = grid = 0
    for i in range(0, len(sequences), sequences_per_batch):
        lengths = index.length_of(np.concatenate(sequences[i : i + sequences_per_batch]))
        real, grid = real + int(lengths.sum()), grid + int(lengths.max()) * len(lengths)
    return 1.0 - real / grid if grid else 0.0


def _steady(records: list[dict[str, Any]], key: str) -> float:
    """Median of `key` over the second half of a run (past warm-up)."""
    vals = [r[key] for r in records[len(records) // 2 :] if key in r]
    return float(np.median(vals)) if vals else float("nan")


def _record_sim(config: DemoConfig, src: str, fig: dict[str, Any]) -> None:
    from robolake.sim.recorder import RecordConfig, record_demos

    per_task = config.episodes_per_task or (3 if config.quick else 24)
    if os.path.isdir(src) and os.listdir(src):
        print("      (already recorded)")
        return
    r = record_demos(src, RecordConfig(episodes_per_task=per_task, seed=config.seed, num_workers=2))
    fig["record"] = {
        "episodes": r.episodes,
        "failed": r.failed,
        "steps": r.steps,
        "seconds": r.seconds,
        "per_task": r.per_task,
    }
    print(
        f"      {r.episodes} demonstrations ({r.failed} failed and dropped), {r.steps} steps in {r.seconds:.0f}s: "
        + ", ".join(f"{k} {v}" for k, v in r.per_task.items())
    )


def run_demo(
    config: DemoConfig,
    progress: ProgressFn | None = None,
    train_progress: Callable[[int, str], Any] | None = None,
) -> dict[str, Any]:
    """Run the demo; returns its figures (also written to out/report.json).

    Args:
        config: What to run.
        progress: Ingest/pack progress, called as progress(stage, done, total).
        train_progress: Makes a trainer progress callback for a run of N steps with a label
            (the CLI passes a progress-bar factory).
    """
    out = os.path.abspath(config.out)
    os.makedirs(out, exist_ok=True)
    use_sim = config.use_sim
    stages = 8 if use_sim else 7
    if use_sim:
        steps = config.steps or (40 if config.quick else 3000)
    else:
        steps = config.steps or (40 if config.quick else 300)
    fig: dict[str, Any] = {"sim": use_sim}
    model = ModelConfig.preset("tiny")
    tokens = TokenLengthConfig(tokens_per_view=model.tokens_per_view, state_tokens=0)

    t0 = time.perf_counter()
    if use_sim:
        src = os.path.join(out, "sim_demos")
        print(
            f"[1/{stages}] record noisy-expert demonstrations of 5 Meta-World tasks on Ray actors (HDF5 logs) -> {src}"
        )
        _record_sim(config, src, fig)
    else:
        src = os.path.join(out, "synthetic")
        print(f"[1/{stages}] synthetic teleoperation data -> {src}")
        if not os.path.isdir(src):
            generate_synthetic(
                src,
                SyntheticConfig(
                    seed=config.seed,
                    episodes_per_embodiment=4 if config.quick else 10,
                    max_length=80 if config.quick else 160,
                ),
            )
    fig["generate_s"] = time.perf_counter() - t0

    print(f"[2/{stages}] ingest into a Lance lake (Ray Data, one commit)")
    result = ingest(src, os.path.join(out, "lake"), IngestConfig(), progress=progress)
    lake = Lake.open(os.path.join(out, "lake"))
    fig["ingest"] = {
        "episodes": lake.count("episodes"),
        "steps": lake.count("steps"),
        "frames": lake.count("media"),
        "new": result.ingested,
        "seconds": result.seconds,
    }
    for name, e in lake.summary()["embodiments"].items():
        print(f"      {name:<18} {e['episodes']:>3} episodes {e['steps']:>6} steps  cameras: {', '.join(e['cameras'])}")

    # Hold out the last episode of every embodiment (synthetic) or task (sim) for the MSE check.
    key = "task" if use_sim else "embodiment"
    eps = lake.episodes(columns=["episode_id", key]).sort_by("episode_id").to_pylist()
    held_out = {e[key]: e["episode_id"] for e in eps}
    test_ids = sorted(held_out.values())
    train_ids = sorted(e["episode_id"] for e in eps if e["episode_id"] not in test_ids)

    print(f"[3/{stages}] pack training samples into cu_seqlens shards (Ray Data)")
    # Sim samples are short (one 32 px view + a short instruction, ~30 tokens): 512-token sequences
    # of ~16 samples, one per step, give many small optimizer steps, which learns a closed-loop
    # policy faster per second of CPU than fewer large batches (measured on this machine).
    max_tokens = 512 if use_sim else 1024
    spec = PackSpec(
        max_tokens=max_tokens,
        horizon=model.action_horizon,
        tokens=tokens,
        seed=config.seed,
        where=EpisodeFilter(episode_ids=train_ids),
        image_size=model.image_size,
    )
    m = _pack_once(lake, spec, os.path.join(out, "packed_train"), progress)
    _pack_once(
        lake,
        dataclasses.replace(spec, where=EpisodeFilter(episode_ids=test_ids)),
        os.path.join(out, "packed_test"),
        None,
    )
    index = build_sample_index(lake, spec)
    fills = {alg: _plan_fill(index, dataclasses.replace(spec, algorithm=alg)) for alg in ("bfd", "ffd", "window")}
    fig["pack"] = {
        "samples": m.num_samples,
        "sequences": m.num_sequences,
        "fill": fills,
        "padded_fill": m.padded_fill,
        "max_tokens": max_tokens,
    }
    print(
        f"      {m.num_samples} samples -> {m.num_sequences} sequences; "
        f"fill bfd {fills['bfd']:.3f}, ffd {fills['ffd']:.3f}, "
        f"window {fills['window']:.3f}; padded batches {m.padded_fill:.3f}"
    )
    group = "task" if use_sim else "embodiment"
    tags = np.asarray(index.episodes[group].to_pylist())[index.episode]
    lengths = {str(t): index.length[tags == t] for t in sorted(set(tags.tolist()))}

    print(f"[4/{stages}] stream PackedBatches from the shards (DataLoader, 2 workers)")
    loader = PackedLoader(
        os.path.join(out, "packed_train"), LoaderConfig(image_size=model.image_size, sequences_per_batch=2)
    )
    batch = next(iter(loader))
    print(
        f"      one batch: {batch.num_samples} samples, {batch.total_tokens} tokens, "
        f"cu_seqlens[:6]={batch.cu_seqlens[:6].tolist()}, "
        f"pixels {tuple(batch.pixels.shape)}"
    )

    label = "GR00T" if config.family == "groot" else "pi0"
    print(f"[5/{stages}] train the tiny {label}-style model, packed, {steps} steps (varlen attention)")
    t_train = time.perf_counter()
    run_dir = os.path.join(out, "train_packed")
    done = _checkpoint_step(run_dir)
    resume = 0 < done < steps  # an interrupted demo's run continues; a finished one starts over
    if resume:
        print(f"      resuming from the checkpoint at step {done} an interrupted demo left in {run_dir}")
    spb = 1 if use_sim else 2
    run = RunConfig(
        out=run_dir,
        preset=f"{config.family}:tiny",
        steps=steps,
        lr=1e-3,
        sequences_per_batch=spb,
        seed=config.seed,
        warmup_steps=min(50, steps // 10 + 1),
        checkpoint_every=max(1, steps // 5),
        resume=resume,
    )
    packed_result = train_on(
        os.path.join(out, "packed_train"),
        run,
        progress=train_progress(steps, "train packed") if train_progress else None,
    )
    fig["train_s"] = time.perf_counter() - t_train
    _keep_only(packed_result.checkpoint)
    fig["checkpoint"] = str(packed_result.checkpoint)
    print(
        f"      checkpoint {packed_result.checkpoint}"
        + (f" (robolake eval --checkpoint {run_dir} evaluates it)" if use_sim else "")
    )
    packed_m = _metrics(os.path.join(run.out, "metrics.jsonl"))
    padding = _batch_padding(build_sample_index(lake, spec), spec, spb)
    padded_m: list[dict[str, Any]] = []
    if padding >= MIN_PADDING_TO_COMPARE:
        padded_steps = max(10, min(40, steps // 5))
        print(
            f"      ... and the padded baseline on the same batches, {padded_steps} steps (each padded to its longest "
            f"sample: {padding:.0%} padding; dense attention with a mask)"
        )
        padded_run = dataclasses.replace(
            run,
            out=os.path.join(out, "train_padded"),
            layout="padded",
            steps=padded_steps,
            checkpoint_every=0,
            resume=False,
        )
        train_on(
            os.path.join(out, "packed_train"),
            padded_run,
            progress=train_progress(padded_steps, "train padded") if train_progress else None,
        )
        padded_m = _metrics(os.path.join(padded_run.out, "metrics.jsonl"))
    else:
        print(
            f"      (no padded baseline: the packer's batches hold samples of one length, so padding them costs "
            f"{padding:.1%}; `robolake bench train` compares packed and padded on mixed lengths)"
        )
    losses = [r["loss"] for r in packed_m]
    fig["train"] = {
        "steps": steps,
        "seconds": fig["train_s"],
        "resumed_from_step": done if resume else 0,
        "threads": packed_result.threads.to_json() if packed_result.threads else None,
        "loss_first": losses[0],
        "loss_last_mean10": float(np.mean(losses[-10:])),
        "packed_tokens_per_s": _steady(packed_m, "effective_tokens_per_s"),
        "batch_padding_fraction": padding,
        "data_wait_fraction": packed_result.data_wait_fraction,
    }
    line = (
        f"      loss {fig['train']['loss_first']:.3f} -> {fig['train']['loss_last_mean10']:.3f} "
        f"in {fig['train_s']:.0f}s; "
        f"effective tokens/s packed {fig['train']['packed_tokens_per_s']:,.0f}"
    )
    if padded_m:
        fig["train"]["padded_tokens_per_s"] = _steady(padded_m, "effective_tokens_per_s")
        fig["train"]["padded_padding_fraction"] = _steady(padded_m, "padding_fraction")
        fig["train"]["speedup_packed_vs_padded"] = (
            fig["train"]["packed_tokens_per_s"] / fig["train"]["padded_tokens_per_s"]
        )
        line += (
            f" vs padded {fig['train']['padded_tokens_per_s']:,.0f} ({fig['train']['speedup_packed_vs_padded']:.2f}x)"
        )
    print(line)

    print(f"[6/{stages}] evaluate on held-out episodes (action MSE vs the mean-action baseline)")
    fitted = cast(PolicyModel, packed_result.model).config
    test_loader = PackedLoader(
        os.path.join(out, "packed_test"),
        LoaderConfig(
            image_size=model.image_size,
            shuffle=False,
            num_workers=0,
            max_state_dim=fitted.max_state_dim,
            max_action_dim=fitted.max_action_dim,
        ),
    )
    fig["eval"] = evaluate_actions(packed_result.model, test_loader, seed=config.seed)
    fig["eval"]["heldout_loss"] = heldout_loss(packed_result.model, test_loader, seed=config.seed)
    train_eval_loader = PackedLoader(
        os.path.join(out, "packed_train"), dataclasses.replace(test_loader.config, shuffle=True)
    )
    fig["eval_train"] = evaluate_actions(
        packed_result.model, train_eval_loader, seed=config.seed, max_batches=len(test_loader)
    )
    print(
        f"      action MSE {fig['eval']['mse']:.4f} vs mean-action baseline {fig['eval']['baseline_mse']:.4f} "
        f"({fig['eval']['ratio_to_baseline']:.2f}x of baseline) on {int(fig['eval']['samples'])} held-out samples; "
        f"on training samples {fig['eval_train']['mse']:.4f} vs {fig['eval_train']['baseline_mse']:.4f}"
    )

    if use_sim:
        print(f"[7/{stages}] closed-loop evaluation in Meta-World on unseen seeds (Ray actors, batched policy calls)")
        fig["closed_loop"] = _closed_loop(config, out, run.out, progress)

    print(f"[{stages}/{stages}] report -> {os.path.join(out, 'report.md')}")
    pngs = {
        "lengths": plot_length_histograms(
            lengths, os.path.join(out, "lengths.png"), title=f"sample length (backbone tokens) per {group}"
        ),
        "fill": plot_fill_rates(
            fills, m.padded_fill, os.path.join(out, "fill.png"), padded_label="padded\n(random batches)"
        ),
        "loss": plot_loss(
            {"packed": losses, **({"padded": [r["loss"] for r in padded_m]} if padded_m else {})},
            os.path.join(out, "loss.png"),
            held_out={"packed": [(steps, fig["eval"]["heldout_loss"])]},
        ),
    }
    if padded_m:
        pngs["throughput"] = plot_throughput(
            {"packed": fig["train"]["packed_tokens_per_s"], "padded": fig["train"]["padded_tokens_per_s"]},
            os.path.join(out, "throughput.png"),
        )
    if use_sim and fig["closed_loop"].get("plot"):
        pngs["success"] = fig["closed_loop"]["plot"]
    fig["total_s"] = time.perf_counter() - t0
    _write_report(out, fig, pngs)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(fig, f, indent=2)
    print(
        f"      whole demo {fig['total_s']:.0f}s; report {os.path.join(out, 'report.md')}; "
        f"checkpoint {fig['checkpoint']}"
    )
    return fig


def eval_config(config: DemoConfig) -> Any:
    """The closed-loop evaluation the demo runs (an `EvalConfig`).

    Episodes run to each task's own step limit, also in --quick: a shorter cap cut the expert off
    before it finished push and drawer-open, which then scored 0.00 for a reason the report did not give.
    """
    from robolake.sim.evaluate import EvalConfig
    from robolake.sim.rollout import RolloutConfig

    return EvalConfig(
        episodes=config.eval_episodes or (2 if config.quick else 10),
        seed=config.seed,
        videos=1,
        rollout=RolloutConfig(replan=4, num_workers=2, envs_per_worker=5 if not config.quick else 2),
    )


def _closed_loop(config: DemoConfig, out: str, run_dir: str, progress: ProgressFn | None) -> dict[str, Any]:
    import torch

    from robolake.sim.evaluate import evaluate_checkpoint

    ec = eval_config(config)
    episodes = ec.episodes
    previous = torch.get_num_threads()
    set_torch_threads(reserved=ec.rollout.num_workers)  # the environment actors keep their cores busy
    try:
        result = evaluate_checkpoint(
            run_dir, ec, out_dir=out, json_path=os.path.join(out, "eval.json"), progress=progress
        )
    finally:
        torch.set_num_threads(previous)
    floor = result["floor"]
    expert = result["baselines"]["expert"]["tasks"]
    print(f"      {'task':<14} {'policy':>7} {'95% CI':>13} {'expert':>7} {'floor':>6}")
    for name, t in result["tasks"].items():
        lo, hi = t["ci95"]
        print(
            f"      {name:<14} {t['success_rate']:>7.2f} {f'[{lo:.2f}, {hi:.2f}]':>13} "
            f"{expert[name]['success_rate']:>7.2f} {floor[name]:>6.2f}"
        )
    print(
        f"      mean success {result['mean_success']:.2f} (expert {result['expert_mean_success']:.2f}, floor "
        f"{result['floor_mean_success']:.2f}) over {episodes} episodes per task; "
        f"{result['actions_per_s']:.0f} actions/s; "
        f"eval JSON {result['json']}"
    )
    if result.get("videos"):
        print(
            f"      success.png and {len(result['videos'])} rollout GIFs (videos/, each saying success or failure) "
            f"in {out}"
        )
    return result


def _plan_fill(index: Any, spec: PackSpec) -> float:
    sequences, _ = plan_sequences(index, spec)
    return float(index.length.sum() / (len(sequences) * spec.max_tokens))


def _closed_loop_lines(out: str, cl: dict[str, Any]) -> list[str]:
    from robolake.sim.tasks import resolve_tasks

    floor, expert = cl["floor"], cl["baselines"]["expert"]["tasks"]
    n = next(iter(cl["tasks"].values()))["episodes"]
    limits = ", ".join(f"{t.name} {t.max_steps}" for t in resolve_tasks(list(cl["config"]["tasks"])))
    short = [t for t, v in expert.items() if v["success_rate"] < 1.0]
    lines = [
        "## Closed loop: success in simulation",
        "",
        f"The trained policy in Meta-World on {n} unseen initial scenes per task "
        "(seeds disjoint from the demonstrations), "
        f"replanning every {cl['config']['replan']} actions of each 16-step chunk; "
        "the scripted expert (ceiling) and the "
        "better of a random and a mean-action policy (floor) on the same seeds. Intervals are Wilson 95%. "
        f"Every episode runs until success or its task's own step limit ({limits} steps), never a shorter cap"
        + (f"; the expert's failures on {', '.join(short)} happened within that limit." if short else "."),
        "",
        "| task | policy | 95% CI | expert | floor | mean length |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, t in cl["tasks"].items():
        lo, hi = t["ci95"]
        lines.append(
            f"| {name} | {t['success_rate']:.2f} | [{lo:.2f}, {hi:.2f}] | "
            f"{expert[name]['success_rate']:.2f} | {floor[name]:.2f} | {t['mean_length']:.0f} |"
        )
    lines += [
        f"| **mean** | **{cl['mean_success']:.2f}** | | "
        f"{cl['expert_mean_success']:.2f} | {cl['floor_mean_success']:.2f} | |",
        "",
        f"{cl['actions_per_s']:.0f} closed-loop actions/s ({cl['config']['num_workers']} env workers x "
        f"{cl['config']['envs_per_worker']} environments, {cl['mean_batch']:.1f} observations per policy call). "
        f"Full result: `eval.json`.",
        "",
    ]
    videos = cl.get("videos") or []
    if videos:
        lines += ["One rollout of the policy:", "", f"![rollout]({os.path.relpath(videos[0], out)})", ""]
    return lines


def _throughput_row(tr: dict[str, Any]) -> str:
    if "padded_tokens_per_s" not in tr:
        return (
            f"| effective tokens/s, higher is better | packed {tr['packed_tokens_per_s']:,.0f}; no padded baseline "
            f"(padding these batches costs {tr['batch_padding_fraction']:.1%}) |"
        )
    return (
        f"| effective tokens/s, higher is better | packed {tr['packed_tokens_per_s']:,.0f}, padded "
        f"{tr['padded_tokens_per_s']:,.0f} (packed is {tr['speedup_packed_vs_padded']:.2f}x padded; padding "
        f"{tr['padded_padding_fraction']:.1%} of the padded token grid) |"
    )


def _throughput_note(tr: dict[str, Any]) -> str:
    """What the throughput row compares, said only as far as the figures show it."""
    if "padded_tokens_per_s" not in tr:
        return (
            "The packer buckets samples by length, and here the samples of a batch have one length: padding them "
            f"to their longest would cost {tr['batch_padding_fraction']:.1%} of the token grid, so a padded run would "
            "measure the attention kernels, not padding, and the demo runs none. The fill row's padded figure is "
            "for batches drawn at random, as a loader without a packer draws them; `robolake bench train` times "
            "packed against padded on mixed lengths. Throughput is measured in this run on this machine."
        )
    return (
        "Throughputs are measured in this run on this machine. The padded baseline trains the same model on the same "
        f"batches, each padded to its longest sample ({tr['padded_padding_fraction']:.1%} of its token grid is "
        "padding), with dense attention and a key-padding mask: the difference is that padding plus the kernels' own."
    )


def _write_report(out: str, fig: dict[str, Any], pngs: dict[str, str]) -> None:
    tr, pk, ev, ing = fig["train"], fig["pack"], fig["eval"], fig["ingest"]
    if fig.get("sim"):
        intro = (
            f"Meta-World demonstrations recorded by noisy scripted experts (5 tasks, one Sawyer arm, 1 camera): "
            f"{ing['episodes']} episodes, {ing['steps']} steps, {ing['frames']} camera frames."
        )
    else:
        intro = (
            f"Synthetic multi-embodiment teleoperation data: {ing['episodes']} episodes, {ing['steps']} steps, "
            f"{ing['frames']} camera frames "
            "(7-DoF arm with 1 camera, 14-DoF bimanual rig with 3, 44-DoF humanoid with 1)."
        )
    lines = [
        "# robolake demo report",
        "",
        intro,
        "",
        "| stage | figure |",
        "| --- | --- |",
        f"| pack | {pk['samples']} samples -> {pk['sequences']} sequences of <= {pk['max_tokens']} tokens |",
        f"| fill (real tokens / tokens computed) | bfd {pk['fill']['bfd']:.3f}, ffd {pk['fill']['ffd']:.3f}, "
        f"window {pk['fill']['window']:.3f}; padded batches of randomly drawn samples {pk['padded_fill']:.3f} |",
        f"| training loss, lower is better (tiny, {tr['steps']} steps) | "
        f"{tr['loss_first']:.3f} -> {tr['loss_last_mean10']:.3f} (mean of the last 10); "
        f"held-out {ev.get('heldout_loss', float('nan')):.3f} |",
        _throughput_row(tr),
        f"| checkpoint | `{os.path.relpath(fig['checkpoint'], out)}`"
        + (f" (`robolake eval --checkpoint {os.path.join(out, 'train_packed')}`) |" if fig.get("sim") else " |"),
        f"| waiting for the next batch (packed run) | {tr.get('data_wait_fraction', 0.0):.1%} of its wall time |",
        f"| held-out action MSE, lower is better | {ev['mse']:.4f} vs mean-action baseline {ev['baseline_mse']:.4f} "
        f"(the policy's error is {ev['ratio_to_baseline']:.2f}x the baseline's; below 1 beats it) |",
        f"| training-episode action MSE | {fig['eval_train']['mse']:.4f} "
        f"vs mean-action baseline {fig['eval_train']['baseline_mse']:.4f} |",
        f"| whole demo | {fig.get('total_s', 0.0):.0f} s |",
        "",
        _throughput_note(tr),
        "MSE is in normalised action units, where the mean-action baseline predicts zeros.",
        "",
    ]
    if fig.get("closed_loop"):
        lines += _closed_loop_lines(out, fig["closed_loop"])
    titles = {
        "lengths": "Sample lengths",
        "fill": "Fill rate per packing algorithm vs padding",
        "loss": "Training loss",
        "throughput": "Packed vs padded throughput",
        "success": "Closed-loop success per task",
    }
    for key, path in pngs.items():
        lines += [f"## {titles[key]}", "", f"![{key}]({os.path.basename(path)})", ""]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines))
