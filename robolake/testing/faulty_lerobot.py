"""LeRobot datasets with faults planted on purpose, each recorded in a manifest: a doctor's answer key.

A data lead trusts a quality check when it finds what is known to be there and nothing else. This
module writes LeRobot v2.1 or v3.0 datasets (through robolake's one LeRobot writer,
`write_lerobot_dataset`) in which every episode but the clean ones carries exactly one fault, and
returns where each fault is (`PlantedFault`: which episode, which fault, which stream or camera,
which steps). `robolake bench doctor` runs robolake's doctor and the peer `lerobot-doctor` on these
datasets and scores both against the manifest.

Clean episodes are smooth, noisy joint trajectories (no two consecutive rows equal, no dimension
constant, no jump beyond the noise) with a textured, moving camera image, so that nothing in them
should be flagged. The faults (`FAULTS`), named by the check that should find each:

- `frozen_state`: every dimension of observation.state holds one value for the whole episode (a
  sensor that was not being read);
- `frozen_action`: the action never changes over the whole episode;
- `zero_rows`: one action row, mid-episode, is all zeros (a replay buffer's uninitialised row);
- `near_duplicate`: the episode is an exact copy of an earlier clean one (`of_episode`);
- `black_camera`: a run of camera frames is all black;
- `frozen_camera`: a run of camera frames repeats one frame;
- `timestamp_gap`: the timestamps jump by `GAP_S` seconds after one step (dropped frames);
- `identical_dims`: every action column equals the first at every step;
- `idle_head` / `idle_tail`: state and action hold still over the first / last `IDLE_FRACTION`
  of the episode (the operator had not started / had stopped);
- `action_jump`: one action row is displaced by `JUMP_SIGMAS` times the episode's step scale.

`EXTRA_FAULTS` are the checks only robolake has, planted on request (`FaultySpec(faults=...)`;
the peer comparison plants `FAULTS`):

- `length_outlier`: the episode runs `LENGTH_FACTOR` times as long as the others of its task;
- `out_of_range`: one state dimension is recorded in degrees where the others are radians
  (multiplied by 180/pi): a unit error;
- `overexposed_camera`: a run of camera frames is all white;
- `frame_duplicate`: the camera frames of clean episode 0, with this episode's own state and
  actions (a take whose actions were re-labelled: only the frames give it away);
- `action_duplicate`: the actions of clean episode 0 (within a 1e-4 offset), with this episode's
  own state and frames (the same commands recorded with another camera).

Everything is seeded: the same arguments write the same bytes of parquet and the same frames.
`FaultySpec` is tiny by default (4 clean episodes of 48 steps, 32x32 frames) for tests; the
benchmark raises `clean` and `length`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from robolake.writers.lerobot import EpisodeArrays, write_lerobot_dataset

__all__ = [
    "ALL_FAULTS",
    "CAMERA",
    "EXTRA_FAULTS",
    "FAULTS",
    "FaultyDataset",
    "FaultySpec",
    "PlantedFault",
    "write_faulty_lerobot",
]

CAMERA = "observation.images.front"
FAULTS = (
    "frozen_state",
    "frozen_action",
    "zero_rows",
    "near_duplicate",
    "black_camera",
    "frozen_camera",
    "timestamp_gap",
    "identical_dims",
    "idle_head",
    "idle_tail",
    "action_jump",
)
EXTRA_FAULTS = ("length_outlier", "out_of_range", "overexposed_camera", "frame_duplicate", "action_duplicate")
ALL_FAULTS = FAULTS + EXTRA_FAULTS
LENGTH_FACTOR = 3
GAP_S = 0.5  # seconds missing after the gap step: 5 frames at 10 fps
IDLE_FRACTION = 0.3
JUMP_SIGMAS = 40.0
_TASK = "pick the cube and place it in the bin"


@dataclass(frozen=True, kw_only=True)
class FaultySpec:
    """What to write.

    Attributes:
        version: LeRobot layout, "v2.1" or "v3.0".
        clean: Clean episodes (at least 1: the near-duplicate copies the first), written first.
        length: Steps per episode (at least 20, so every fault has room).
        dims: State and action width.
        fps: Recording rate.
        image: Camera frame side in pixels (even).
        faults: The faults to plant (`FAULTS` and `EXTRA_FAULTS`), one episode each, in this order
            after the clean episodes.
        seed: Seed of every random draw.
    """

    version: Literal["v2.1", "v3.0"] = "v3.0"
    clean: int = 4
    length: int = 48
    dims: int = 6
    fps: int = 10
    image: int = 32
    faults: tuple[str, ...] = FAULTS
    seed: int = 0

    def __post_init__(self) -> None:
        if self.version not in ("v2.1", "v3.0"):
            raise ValueError(f"version must be 'v2.1' or 'v3.0', got {self.version!r}")
        if self.clean < 1:
            raise ValueError(f"clean must be >= 1 (the near-duplicate copies a clean episode), got {self.clean}")
        if self.length < 20:
            raise ValueError(f"length must be >= 20 steps so every fault has room, got {self.length}")
        if self.dims < 2:
            raise ValueError(f"dims must be >= 2 (identical_dims needs two columns), got {self.dims}")
        if self.image < 8 or self.image % 2:
            raise ValueError(f"image must be an even side >= 8, got {self.image}")
        unknown = sorted(set(self.faults) - set(ALL_FAULTS))
        if unknown:
            raise ValueError(f"unknown faults {unknown}; choose from {', '.join(ALL_FAULTS)}")


@dataclass(frozen=True, kw_only=True)
class PlantedFault:
    """One fault, where it was planted.

    Attributes:
        fault: One of `ALL_FAULTS`.
        episode_index: The LeRobot episode_index that carries it.
        stream: "observation.state", "action", "timestamp", or a camera's video key.
        start: First step affected.
        stop: One past the last step affected.
        of_episode: For `near_duplicate`, `frame_duplicate` and `action_duplicate`: the episode it
            copies; else None.
        detail: What was done, in words.
    """

    fault: str
    episode_index: int
    stream: str
    start: int
    stop: int
    of_episode: int | None = None
    detail: str = ""

    def episodes(self) -> tuple[int, ...]:
        """The episodes a finding of this fault may name (both of a duplicated pair)."""
        return (self.episode_index,) if self.of_episode is None else (self.of_episode, self.episode_index)


@dataclass(frozen=True)
class FaultyDataset:
    """A written dataset and its answer key.

    Attributes:
        root: The LeRobot dataset directory.
        spec: What was asked for.
        planted: One entry per fault, in episode order.
        clean: The clean episodes' indices.
        episodes: The episodes as written (for tests that check the data holds each fault).
    """

    root: Path
    spec: FaultySpec
    planted: tuple[PlantedFault, ...]
    clean: tuple[int, ...]
    episodes: tuple[EpisodeArrays, ...]

    def manifest(self) -> dict[str, Any]:
        """The answer key as JSON-ready data (also written beside the dataset as `faults.json`)."""
        return {
            "root": str(self.root),
            "spec": {**asdict(self.spec), "faults": list(self.spec.faults)},
            "clean": list(self.clean),
            "planted": [asdict(p) for p in self.planted],
        }


def write_faulty_lerobot(root: str | Path, spec: FaultySpec | None = None) -> FaultyDataset:
    """Write a LeRobot dataset with `spec.faults` planted (one episode each) after `spec.clean` clean ones.

    The manifest is also written to `<root>.faults.json` (beside the dataset, so that the dataset
    directory holds only what LeRobot writes).

    Args:
        root: Dataset directory; must not exist or be empty.
        spec: What to write (default `FaultySpec()`: tiny v3.0).

    Returns:
        The dataset root, its manifest and the episodes as written.
    """
    spec = spec or FaultySpec()
    rng = np.random.default_rng(spec.seed)
    episodes = [_clean_episode(rng, spec, i) for i in range(spec.clean)]
    planted: list[PlantedFault] = []
    for fault in spec.faults:
        index = len(episodes)
        base = _clean_episode(rng, spec, index)
        episode, where = _plant(fault, base, episodes[0], spec, index, rng)
        episodes.append(episode)
        planted.append(where)
    out = write_lerobot_dataset(
        root, episodes=episodes, fps=spec.fps, robot_type="faulty_arm", version=spec.version, episodes_per_file=50
    )
    data = FaultyDataset(
        root=Path(out), spec=spec, planted=tuple(planted), clean=tuple(range(spec.clean)), episodes=tuple(episodes)
    )
    Path(str(out) + ".faults.json").write_text(json.dumps(data.manifest(), indent=2))
    return data


def _clean_episode(rng: np.random.Generator, spec: FaultySpec, index: int) -> EpisodeArrays:
    """A smooth reach with sensor noise, and a textured camera view that moves every step."""
    t = np.arange(spec.length, dtype=np.float64) / spec.fps
    phase = rng.uniform(0, 2 * np.pi, spec.dims)
    freq = rng.uniform(0.2, 0.6, spec.dims)
    amp = rng.uniform(0.3, 1.0, spec.dims)
    state = amp * np.sin(2 * np.pi * freq * t[:, None] + phase) + rng.normal(0, 0.01, (spec.length, spec.dims))
    lead = np.vstack([state[1:], state[-1:] + (state[-1:] - state[-2:-1])])  # the next state: the command
    action = lead + rng.normal(0, 0.01, (spec.length, spec.dims))
    s = spec.image
    yy, xx = np.mgrid[0:s, 0:s]
    base = rng.integers(0, 256, (s, s, 3), dtype=np.uint8)
    frames = np.empty((spec.length, s, s, 3), np.uint8)
    for k in range(spec.length):
        wave = (127 + 100 * np.sin((xx + 2 * k) / 4.0) * np.cos((yy - k) / 5.0)).astype(np.int16)
        frames[k] = ((base.astype(np.int16) // 4 + wave[..., None]) % 256).astype(np.uint8)
    return EpisodeArrays(state=state, action=action, task=_TASK, frames={CAMERA: frames})


def _plant(
    fault: str, ep: EpisodeArrays, first: EpisodeArrays, spec: FaultySpec, index: int, rng: np.random.Generator
) -> tuple[EpisodeArrays, PlantedFault]:
    """`ep` with `fault` planted, and where it is."""
    n = spec.length
    state, action = ep.state.copy(), ep.action.copy()
    frames = ep.frames[CAMERA].copy()
    timestamps: np.ndarray | None = None
    mid = n // 2
    run = (n // 3, n // 3 + max(5, n // 4))
    of: int | None = None
    if fault == "frozen_state":
        state[:] = state[0]
        stream, span, detail = "observation.state", (0, n), "every state dimension holds its first value"
    elif fault == "frozen_action":
        action[:] = action[0]
        stream, span, detail = "action", (0, n), "the action holds its first value"
    elif fault == "zero_rows":
        action[mid] = 0.0
        stream, span, detail = "action", (mid, mid + 1), f"action row {mid} is all zeros"
    elif fault == "near_duplicate":
        state, action, frames = first.state.copy(), first.action.copy(), first.frames[CAMERA].copy()
        of = 0
        stream, span, detail = "action", (0, n), "an exact copy of episode 0"
    elif fault == "black_camera":
        frames[run[0] : run[1]] = 0
        stream, span, detail = CAMERA, run, f"frames {run[0]}..{run[1] - 1} are black"
    elif fault == "frozen_camera":
        frames[run[0] : run[1]] = frames[run[0]]
        stream, span, detail = CAMERA, run, f"frames {run[0]}..{run[1] - 1} repeat frame {run[0]}"
    elif fault == "timestamp_gap":
        timestamps = np.arange(n, dtype=np.float64) / spec.fps
        timestamps[mid:] += GAP_S
        stream, span, detail = "timestamp", (mid, mid + 1), f"{GAP_S} s missing before step {mid}"
    elif fault == "identical_dims":
        action[:] = action[:, :1]
        stream, span, detail = "action", (0, n), "every action column equals column 0"
    elif fault in ("idle_head", "idle_tail"):
        k = int(round(IDLE_FRACTION * n))
        if fault == "idle_head":
            state[:k], action[:k] = state[k], action[k]
            span = (0, k)
        else:
            state[n - k :], action[n - k :] = state[n - k - 1], action[n - k - 1]
            span = (n - k, n)
        stream, detail = "action", f"state and action hold still over steps {span[0]}..{span[1] - 1}"
    elif fault == "action_jump":
        scale = float(np.median(np.abs(np.diff(action, axis=0)))) or 0.01
        action[mid] += JUMP_SIGMAS * scale * np.sign(rng.standard_normal(spec.dims))
        stream, span, detail = "action", (mid, mid + 1), f"action row {mid} jumps {JUMP_SIGMAS:g}x the step scale"
    elif fault == "length_outlier":
        longer = _clean_episode(rng, dataclasses.replace(spec, length=LENGTH_FACTOR * n), index)
        state, action, frames = longer.state, longer.action, longer.frames[CAMERA]
        stream, span, detail = "action", (0, LENGTH_FACTOR * n), f"{LENGTH_FACTOR * n} steps where the others have {n}"
    elif fault == "out_of_range":
        state[:, 0] *= 180.0 / np.pi
        stream, span, detail = "observation.state", (0, n), "state dim 0 in degrees, the others in radians"
    elif fault == "overexposed_camera":
        frames[run[0] : run[1]] = 255
        stream, span, detail = CAMERA, run, f"frames {run[0]}..{run[1] - 1} are white"
    elif fault == "frame_duplicate":
        frames = first.frames[CAMERA].copy()
        of = 0
        stream, span, detail = CAMERA, (0, n), "the camera frames of episode 0, with its own state and actions"
    elif fault == "action_duplicate":
        action = first.action.copy() + 1e-4
        of = 0
        stream, span, detail = "action", (0, n), "the actions of episode 0 (+1e-4), with its own state and frames"
    else:  # FaultySpec validated the names
        raise ValueError(f"unknown fault {fault!r}")
    planted = PlantedFault(
        fault=fault, episode_index=index, stream=stream, start=span[0], stop=span[1], of_episode=of, detail=detail
    )
    episode = EpisodeArrays(state=state, action=action, task=ep.task, frames={CAMERA: frames}, timestamps=timestamps)
    return episode, planted
