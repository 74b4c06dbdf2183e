"""Synthetic teleoperation data: real LeRobot datasets for three made-up robots.

Tests, notebooks and the demo need robot data with the shape of the real thing: several
embodiments with different state widths and camera counts, episodes of different lengths,
instructions of different lengths, smooth trajectories a policy can learn, and camera frames
that change with the robot's pose. `generate_synthetic` writes one LeRobot dataset per
embodiment (any version the writer knows, h264 or AV1 video, a GR00T `meta/modality.json`), so
everything downstream exercises the same reader code path as a downloaded dataset.

The robots:

- `single_arm_7dof`: 6-joint arm + gripper (7 dims), one camera `front`.
- `bimanual_14dof`: two 6-joint arms + grippers (14 dims, ALOHA order), three cameras
  `cam_high`, `cam_left_wrist`, `cam_right_wrist`.
- `humanoid_44dof`: the GR1 44-dim layout of the real GR00T PickNPlace data (left_arm 0:7,
  left_hand 7:13, left_leg 13:19, neck 19:22, right_arm 22:29, right_hand 29:35, right_leg 35:41,
  waist 41:44), one camera `ego_view`.

Joints follow a sum of three low-frequency sinusoids around a random posture, grippers and
hands close and reopen along smooth sigmoids, and `action[t] = state[t+1] + a fixed small
offset`, so an action chunk is a deterministic function of the recent states. Frames are
cheap numpy drawings: a per-camera gradient background, colored discs whose positions are fixed
random projections of the joint vector and whose size follows the gripper, and a bar showing
the gripper opening. Everything is drawn from `numpy.random.default_rng([seed, robot, episode])`,
so the same seed gives identical parquet contents and identical decoded frames.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robolake.schemas.embodiment import EmbodimentSpec, SliceSpec
from robolake.writers.lerobot import VERSIONS, EpisodeArrays, LeRobotVersion, write_lerobot_dataset
from robolake.writers.video import PIX_FMT, EncodedSegment, Mp4Writer, VideoCodec, VideoOptions

__all__ = [
    "EMBODIMENT_NAMES",
    "SyntheticConfig",
    "generate_synthetic",
    "synthetic_episodes",
    "synthetic_spec",
    "make_instruction",
]


@dataclass(frozen=True, kw_only=True)
class _Robot:
    name: str
    parts: tuple[tuple[str, int], ...]
    grippers: tuple[str, ...]
    cameras: tuple[str, ...]


_ROBOTS = {
    r.name: r
    for r in (
        _Robot(name="single_arm_7dof", parts=(("arm", 6), ("gripper", 1)), grippers=("gripper",), cameras=("front",)),
        _Robot(
            name="bimanual_14dof",
            parts=(("left_arm", 6), ("left_gripper", 1), ("right_arm", 6), ("right_gripper", 1)),
            grippers=("left_gripper", "right_gripper"),
            cameras=("cam_high", "cam_left_wrist", "cam_right_wrist"),
        ),
        _Robot(
            name="humanoid_44dof",
            parts=(
                ("left_arm", 7),
                ("left_hand", 6),
                ("left_leg", 6),
                ("neck", 3),
                ("right_arm", 7),
                ("right_hand", 6),
                ("right_leg", 6),
                ("waist", 3),
            ),
            grippers=("left_hand", "right_hand"),
            cameras=("ego_view",),
        ),
    )
}
EMBODIMENT_NAMES: tuple[str, ...] = tuple(_ROBOTS)


@dataclass(frozen=True, kw_only=True)
class SyntheticConfig:
    """What `generate_synthetic` writes.

    Attributes:
        seed: Seed of every random choice; same seed, same datasets.
        episodes_per_embodiment: Episodes in each embodiment's dataset.
        min_length: Shortest episode, in steps (inclusive).
        max_length: Longest episode, in steps (inclusive).
        image_size: Camera frames are image_size x image_size RGB (even, >= 16).
        fps: Recording rate.
        codec: Video codec, "h264" or "av1".
        version: LeRobot layout, "v2.0", "v2.1" or "v3.0".
        embodiments: Which robots to write (names from EMBODIMENT_NAMES).
        episodes_per_file: v3.0 only: episodes per data/video file.
        video_pool: 0 (the default): each episode's frames are drawn from its state and encoded.
            K > 0: each episode's video is a copy of one of K clips per episode length, encoded
            once (`EncodedSegment`), so its frames do not follow its state; for benchmarks at a
            scale where encoding would be most of the cost (a frame takes ~0.15 ms to encode even
            at 16x16). The parquet rows are the same either way.
    """

    seed: int = 0
    episodes_per_embodiment: int = 8
    min_length: int = 40
    max_length: int = 160
    image_size: int = 64
    fps: int = 20
    codec: VideoCodec = "h264"
    version: LeRobotVersion = "v2.1"
    embodiments: tuple[str, ...] = EMBODIMENT_NAMES
    episodes_per_file: int = 4
    video_pool: int = 0

    def __post_init__(self) -> None:
        if self.episodes_per_embodiment < 1:
            raise ValueError(f"episodes_per_embodiment must be >= 1, got {self.episodes_per_embodiment}")
        if not 2 <= self.min_length <= self.max_length:
            raise ValueError(f"need 2 <= min_length <= max_length, got {self.min_length}, {self.max_length}")
        if self.image_size < 16 or self.image_size % 2:
            raise ValueError(f"image_size must be even and >= 16 (yuv420p), got {self.image_size}")
        if self.fps <= 0:
            raise ValueError(f"fps must be > 0, got {self.fps}")
        if self.codec not in ("h264", "av1"):
            raise ValueError(f"codec must be 'h264' or 'av1', got {self.codec!r}")
        if self.version not in VERSIONS:
            raise ValueError(f"version must be one of {VERSIONS}, got {self.version!r}")
        unknown = [e for e in self.embodiments if e not in _ROBOTS]
        if not self.embodiments or unknown or len(set(self.embodiments)) != len(self.embodiments):
            raise ValueError(f"embodiments must be distinct names from {EMBODIMENT_NAMES}, got {self.embodiments}")
        if self.episodes_per_file < 1:
            raise ValueError(f"episodes_per_file must be >= 1, got {self.episodes_per_file}")
        if self.video_pool < 0:
            raise ValueError(f"video_pool must be >= 0, got {self.video_pool}")

    @classmethod
    def tiny(cls, **overrides: object) -> SyntheticConfig:
        """A config for tests: 2 episodes per robot, 20-40 steps, 32x32 frames."""
        base: dict[str, object] = {
            "episodes_per_embodiment": 2,
            "min_length": 20,
            "max_length": 40,
            "image_size": 32,
        }
        return cls(**{**base, **overrides})  # type: ignore[arg-type]


def synthetic_spec(name: str, *, fps: float = 20.0) -> EmbodimentSpec:
    """The EmbodimentSpec (and so the modality.json) of synthetic robot `name`."""
    robot = _robot(name)
    slices, start = [], 0
    for part, width in robot.parts:
        slices.append(SliceSpec(name=part, start=start, end=start + width))
        start += width
    return EmbodimentSpec(
        tag=robot.name,
        state_dim=start,
        action_dim=start,
        state=tuple(slices),
        action=tuple(slices),
        cameras=robot.cameras,
        video_keys=tuple((c, f"observation.images.{c}") for c in robot.cameras),
        annotations=(("human.task_description", "task_index"),),
        fps=float(fps),
        robot_type=robot.name,
    )


def generate_synthetic(
    root: str | Path,
    config: SyntheticConfig | None = None,
    *,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[Path]:
    """Write one LeRobot dataset per embodiment under `root` (`root/<embodiment>`).

    Args:
        root: Parent directory; `root/<embodiment>` must not already hold a dataset.
        config: What to write (default `SyntheticConfig()`).
        progress: Called as progress(embodiment, done, total) after each dataset.

    Returns:
        The dataset roots, in `config.embodiments` order.

    Raises:
        FileExistsError: a dataset directory already holds a dataset.
    """
    config = config or SyntheticConfig()
    out = []
    for done, name in enumerate(config.embodiments, start=1):
        spec = synthetic_spec(name, fps=config.fps)
        names = [f"{s.name}_{i}" for s in spec.state for i in range(s.end - s.start)]
        if config.video_pool:
            out.append(_write_pooled(Path(root) / name, config, name, spec, names))
            if progress is not None:
                progress(name, done, len(config.embodiments))
            continue
        out.append(
            write_lerobot_dataset(
                Path(root) / name,
                episodes=_Episodes(config, name),  # drawn as the writer asks: one episode in memory at a time
                fps=config.fps,
                robot_type=name,
                version=config.version,
                video=config.codec,
                modality=spec.to_modality_json(),
                state_names=names,
                action_names=names,
                episodes_per_file=config.episodes_per_file,
            )
        )
        if progress is not None:
            progress(name, done, len(config.embodiments))
    return out


def synthetic_episodes(config: SyntheticConfig, name: str) -> list[EpisodeArrays]:
    """The episodes of robot `name` under `config`, in memory (what generate_synthetic writes)."""
    return list(_Episodes(config, name))


class _Episodes(Sequence[EpisodeArrays]):
    """The episodes of robot `name`, each drawn when asked for (from its own seed, so any order
    gives the same episode): 100,000 episodes are written without holding their frames at once."""

    def __init__(self, config: SyntheticConfig, name: str) -> None:
        self.config = config
        robot = _robot(name)
        self.rid = EMBODIMENT_NAMES.index(name)
        self.dim = sum(w for _, w in robot.parts)
        self.grip = _gripper_dims(robot)
        self.offset = np.float32(0.01) * np.cos(np.arange(self.dim, dtype=np.float32))  # fixed calibration offset
        self.cams = {c: _Camera(robot, c, self.dim, config.image_size) for c in robot.cameras}

    def __len__(self) -> int:
        return self.config.episodes_per_embodiment

    def __getitem__(self, ep: int) -> EpisodeArrays:  # type: ignore[override]
        arrays = self.arrays(ep)
        frames = {f"observation.images.{c}": cam.render(arrays.state) for c, cam in self.cams.items()}
        return dataclasses.replace(arrays, frames=frames)

    def arrays(self, ep: int) -> EpisodeArrays:
        """Episode `ep` without its frames (they are drawn from its state)."""
        if not isinstance(ep, int) or not 0 <= ep < len(self):
            raise IndexError(ep)
        config = self.config
        rng = np.random.default_rng([config.seed, self.rid, ep])
        length = int(rng.integers(config.min_length, config.max_length + 1))
        traj = _trajectory(rng, length + 1, self.dim, self.grip, config.fps)
        state, action = traj[:-1], traj[1:] + self.offset
        return EpisodeArrays(state=state, action=action, task=make_instruction(rng))

    def clip(
        self, length: int, variant: int, options: VideoOptions
    ) -> tuple[dict[str, np.ndarray], dict[str, EncodedSegment]]:
        """Frames of `length` steps per camera (drawn from a trajectory of their own) and the same
        frames encoded as a segment (`video_pool`)."""
        import tempfile

        import av

        rng = np.random.default_rng([self.config.seed, self.rid, 1 << 40, length, variant])
        state = _trajectory(rng, length, self.dim, self.grip, self.config.fps)
        frames = {f"observation.images.{c}": cam.render(state) for c, cam in self.cams.items()}
        segments = {}
        with tempfile.TemporaryDirectory() as tmp:
            for key, clip in frames.items():
                path = os.path.join(tmp, "clip.mp4")
                mp4 = Mp4Writer(path, width=clip.shape[2], height=clip.shape[1], fps=self.config.fps, options=options)
                for i, frame in enumerate(clip):
                    mp4.write(frame, keyframe=i == 0)
                mp4.close()
                with av.open(path) as container:
                    stream = container.streams.video[0]
                    packets = [p for p in container.demux(stream) if p.size]
                    pts = np.asarray([p.pts for p in packets])
                    segments[key] = EncodedSegment(
                        codec=options.codec,
                        extradata=bytes(stream.codec_context.extradata or b""),
                        width=clip.shape[2],
                        height=clip.shape[1],
                        pix_fmt=PIX_FMT,
                        packets=tuple(bytes(p) for p in packets),
                        frame_index=tuple(int(i) for i in np.argsort(np.argsort(pts, kind="stable"))),
                        keyframes=tuple(bool(p.is_keyframe) for p in packets),
                    )
        return frames, segments


def _write_pooled(root: Path, config: SyntheticConfig, name: str, spec: EmbodimentSpec, names: list[str]) -> Path:
    """`write_lerobot_dataset` of the episodes of `name`, each camera's video copied from a clip
    of the episode's length (`config.video_pool` clips per length, encoded once)."""
    from robolake.writers._lerobot_layout import LeRobotFeatures, LeRobotFiles
    from robolake.writers.lerobot import LeRobotWriter

    episodes = _Episodes(config, name)
    first = episodes[0]
    features = LeRobotFeatures(
        fps=config.fps,
        robot_type=name,
        video_keys=tuple(first.frames),
        state_names=tuple(names),
        action_names=tuple(names),
    )
    options = VideoOptions(codec=config.codec)
    files = LeRobotFiles(version=config.version, video=options, episodes_per_file=config.episodes_per_file)
    clips: dict[tuple[int, int], tuple[dict[str, np.ndarray], dict[str, EncodedSegment]]] = {}
    with LeRobotWriter(root, features, files) as writer:
        for ep in range(len(episodes)):
            arrays = episodes.arrays(ep)  # state, action and task only: no frames drawn
            key = (len(arrays.state), ep % config.video_pool)
            if key not in clips:
                clips[key] = episodes.clip(*key, options)
            frames, segments = clips[key]
            writer.add_episode(
                state=arrays.state, action=arrays.action, tasks=[arrays.task], frames=frames, segments=segments
            )
        return writer.finish(meta={"modality.json": dict(spec.to_modality_json())})


def _robot(name: str) -> _Robot:
    if name not in _ROBOTS:
        raise ValueError(f"unknown synthetic embodiment {name!r}; choose from {EMBODIMENT_NAMES}")
    return _ROBOTS[name]


def _gripper_dims(robot: _Robot) -> np.ndarray:
    dims: list[int] = []
    start = 0
    for part, width in robot.parts:
        if part in robot.grippers:
            dims.extend(range(start, start + width))
        start += width
    return np.array(dims, dtype=np.int64)


def _trajectory(rng: np.random.Generator, n: int, dim: int, grip: np.ndarray, fps: float) -> np.ndarray:
    """[n, dim] float32: sinusoid sums for joints, close-then-open sigmoids for grippers in [0, 1]."""
    t = np.arange(n, dtype=np.float64)[:, None] / fps
    center = rng.uniform(-1.0, 1.0, dim)
    freq = rng.uniform(0.05, 0.4, (3, dim))
    amp = rng.uniform(0.05, 0.4, (3, dim)) / np.arange(1, 4)[:, None]
    phase = rng.uniform(0, 2 * np.pi, (3, dim))
    q = center + (amp[None] * np.sin(2 * np.pi * freq[None] * t[:, None] + phase[None])).sum(axis=1)
    duration = n / fps
    t_close = rng.uniform(0.2, 0.45) * duration
    t_open = rng.uniform(0.6, 0.85) * duration
    sharp = rng.uniform(3.0, 6.0)
    g = 1.0 / (1 + np.exp(-sharp * (t[:, 0] - t_close))) - 1.0 / (1 + np.exp(-sharp * (t[:, 0] - t_open)))
    q[:, grip] = 0.05 + 0.9 * (1.0 - g)[:, None] * rng.uniform(0.8, 1.0, len(grip))
    return q.astype(np.float32)


class _Camera:
    """Draws frames of one camera: gradient background, joint-driven discs, a gripper bar."""

    _BLOBS = 4

    def __init__(self, robot: _Robot, camera: str, dim: int, size: int) -> None:
        rng = np.random.default_rng([EMBODIMENT_NAMES.index(robot.name), sum(map(ord, camera))])
        self.size = size
        self.proj = rng.normal(0.0, 1.0 / np.sqrt(dim), (self._BLOBS, 2, dim)).astype(np.float32)
        self.colors = rng.integers(60, 256, (self._BLOBS, 3)).astype(np.uint8)
        lin = np.linspace(0.0, 1.0, size, dtype=np.float32)
        base = rng.integers(0, 90, 3)
        tint = rng.integers(20, 80, 3)
        bg = base + tint * (lin[:, None, None] * 0.7 + lin[None, :, None] * 0.3)
        self.background = np.clip(bg, 0, 255).astype(np.uint8)
        self.grip = _gripper_dims(robot)
        self.yy, self.xx = np.mgrid[0:size, 0:size].astype(np.float32)

    def render(self, state: np.ndarray) -> np.ndarray:
        n, s = len(state), self.size
        frames = np.broadcast_to(self.background, (n, s, s, 3)).copy()
        centers = 0.5 + 0.38 * np.tanh(np.einsum("kcd,td->tkc", self.proj, state))  # [n, K, 2] in (0, 1)
        opening = state[:, self.grip].mean(axis=1) if len(self.grip) else np.full(n, 0.5, np.float32)
        radius = s * (0.07 + 0.06 * opening)
        for k in range(self._BLOBS):
            cx = centers[:, k, 0, None, None] * (s - 1)
            cy = centers[:, k, 1, None, None] * (s - 1)
            mask = (self.xx - cx) ** 2 + (self.yy - cy) ** 2 <= (radius[:, None, None] * (1 + 0.3 * k)) ** 2
            frames[mask] = self.colors[k]
        bar = np.clip((opening * s).astype(np.int64), 1, s)
        frames[:, -3:, :, :][self.xx[-3:][None] < bar[:, None, None]] = 255
        return frames


_VERBS = (
    "pick up",
    "move",
    "push",
    "place",
    "put",
    "slide",
    "lift",
    "grab",
    "rotate",
    "drop",
    "hand over",
    "carefully stack",
)
_OBJECTS = (
    "cup",
    "red block",
    "banana",
    "sponge",
    "ketchup bottle",
    "small screwdriver",
    "blue bowl",
    "towel",
    "apple",
    "marker",
    "green cube",
    "plastic spoon",
)
_PLACES = (
    "plate",
    "top drawer",
    "left bin",
    "tray",
    "shelf",
    "cardboard box",
    "sink",
    "counter",
    "wicker basket",
    "cutting board",
)
_PREPS = ("into", "onto", "next to", "behind", "in front of", "to the left of", "to the right of")
_QUALIFIERS = (
    "slowly",
    "carefully",
    "without touching the other objects",
    "using the left hand",
    "and return to the home pose",
    "while keeping it upright",
    "as fast as you can",
)


def make_instruction(rng: np.random.Generator) -> str:
    """One instruction from a small grammar: 5 to 120 bytes, short ones and long ones."""

    def pick(options: tuple[str, ...]) -> str:
        return options[int(rng.integers(len(options)))]

    def clause(qualified: bool) -> str:
        text = f"{pick(_VERBS)} the {pick(_OBJECTS)} {pick(_PREPS)} the {pick(_PLACES)}"
        return f"{text} {pick(_QUALIFIERS)}" if qualified else text

    form = rng.random()
    if form < 0.2:
        text = f"{pick(_VERBS).split()[-1]} {pick(_OBJECTS).split()[-1]}"
    elif form < 0.6:
        text = clause(rng.random() < 0.5)
    else:
        text = f"{clause(rng.random() < 0.7)}, then {clause(rng.random() < 0.5)}"
        if len(text.encode()) > 120:
            text = f"{clause(False)}, then {clause(False)}"
        if len(text.encode()) > 120:
            text = clause(True)
    return text
