"""Rollouts as episodes: what a policy did in closed loop, written into a lake like any recording.

A rollout is only worth something to the next training run if it comes back as data. Every
episode that `robolake eval --record-to LAKE` or `robolake rl --record-to LAKE` runs becomes an
episode of the lake with exactly the rows a recorded demonstration has: one steps row per action
(the state the policy saw, the action the environment executed, the time), one media row per
camera and step (the frame the policy saw, kept as ingest keeps raw pixels: losslessly in the
record, `lake.codecs.encode_raw`, so the lake gives back exactly the rendered pixels), so a
rollout lake packs and trains like any other. What only a rollout has
goes in the episode's `metadata`, which `--where` reads:

- `source: "rollout"` (recordings have none: `where` reads them as 'recorded'), so
  `robolake select LAKE --where "success and source='rollout'"` keeps the successes;
- `producer` (eval, rl), `run`, `seed` (with the task it fixes the initial scene), `success`,
  `reward` and per-step `rewards`;
- `checkpoint`, `checkpoint_sha256` (of the weights) and `trained_on` (the lake URI, version and
  tag the policy was trained on), the way back from the rollout to its policy's data;
- `policy`: how it acted (replanning horizon, noise scale, ...), and `policy_chunks`: every action
  chunk the policy returned, all H actions of it, with the step it was asked at, float32 as
  base64 (`decode_chunks`), so the chunk behind any executed action can be read back.

The write goes through the lake's one write protocol, as ingest's does: a `LakeTransaction`
under the write lease, media, steps and episodes appended, the embodiment's statistics merged
as ingest merges them (`lake.stats.embodiments`), the episode_id indexes and compaction
as ingest keeps them, and one lake version published. The content hash covers the rows, the
frames, the seed and the weights, so writing the same rollouts twice lands them once (a second
`eval --record-to` of a deterministic policy adds nothing). A lost race re-reads the lake and
retries on top of it, through the same `commit_with_retries` as ingest.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.lake.lake import Lake
from robolake.lake.media.frames import encode_raw
from robolake.lake.protocol.retry import commit_with_retries
from robolake.lake.sources.base import content_hash
from robolake.lake.stats.embodiments import merge_embodiment_stats, partial_stats
from robolake.schemas.embodiment import EmbodimentSpec
from robolake.schemas.tables import schema_for_table

__all__ = [
    "RolloutEpisode",
    "RolloutOrigin",
    "RolloutTarget",
    "RolloutWriteResult",
    "decode_chunks",
    "write_rollouts",
    "ROLLOUT_FORMAT",
]

log = logging.getLogger(__name__)

ROLLOUT_FORMAT = "rollout"  # the episodes' `source_format`


@dataclass(frozen=True, kw_only=True, eq=False)
class RolloutEpisode:
    """One episode a policy ran.

    Attributes:
        embodiment: Embodiment tag (the lake's spec of it must match the widths).
        task: The language instruction the policy was given.
        seed: The environment seed (with the task it fixes the initial scene).
        states: float32 [T, state_dim] the state before each action.
        actions: float32 [T, action_dim] the actions the environment executed.
        frames: (camera, uint8 [T, H, W, 3]) the frames before each action, per camera.
        rewards: float32 [T] the reward of each action.
        success: The environment's success flag was set.
        chunks: float32 [C, H, action_dim] every chunk the policy returned.
        chunk_steps: int [C] the step each chunk was asked for at (non-decreasing, < T).
        fps: Control rate (timestamps are step / fps).
        info: More JSON-able metadata (the sim task name, weight versions, ...).
    """

    embodiment: str
    task: str
    seed: int
    states: np.ndarray
    actions: np.ndarray
    frames: tuple[tuple[str, np.ndarray], ...]
    rewards: np.ndarray
    success: bool
    chunks: np.ndarray
    chunk_steps: np.ndarray
    fps: float
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        t = len(self.actions)
        if t < 1:
            raise ValueError("a rollout episode needs at least one executed action")
        if self.states.ndim != 2 or self.actions.ndim != 2 or len(self.states) != t or len(self.rewards) != t:
            raise ValueError(
                f"rollout of {self.task!r} seed {self.seed}: states {self.states.shape}, actions "
                f"{self.actions.shape} and rewards {self.rewards.shape} must be [T, state_dim], [T, action_dim] "
                "and [T]"
            )
        for cam, f in self.frames:
            if f.dtype != np.uint8 or f.ndim != 4 or len(f) != t or f.shape[-1] != 3:
                raise ValueError(
                    f"rollout camera {cam!r}: frames must be uint8 [T={t}, H, W, 3], got {f.dtype} {f.shape}"
                )
        steps = np.asarray(self.chunk_steps)
        if len(self.chunks) != len(steps) or (
            steps.size and (np.any(np.diff(steps) < 0) or steps[0] != 0 or steps[-1] >= t)
        ):
            raise ValueError(
                f"rollout chunk_steps {steps.tolist()[:8]}... must start at 0, not decrease and stay below {t}"
            )
        if self.fps <= 0:
            raise ValueError(f"rollout fps must be > 0, got {self.fps}")


@dataclass(frozen=True, kw_only=True)
class RolloutOrigin:
    """Where a batch of rollouts came from (the same for all of them).

    Attributes:
        producer: What ran them: "eval" or "rl".
        run: An id of the run (the eval's or RL run's output directory, or a name).
        checkpoint: The policy's checkpoint path.
        checkpoint_sha256: SHA-256 of its weights.
        trained_on: The lake the policy was trained on: {"lake_uri", "lake_version", "lake_tag"}.
        policy: How the policy acted (replanning horizon, noise scale, ...).
    """

    producer: str
    run: str
    checkpoint: str
    checkpoint_sha256: str
    trained_on: Mapping[str, Any] = field(default_factory=dict)
    policy: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.producer or not self.checkpoint_sha256:
            raise ValueError("a rollout origin needs its producer and the checkpoint's sha256")


@dataclass(frozen=True, kw_only=True)
class RolloutTarget:
    """Where a run's rollouts go and what they are (what `robolake rl --record-to` hands its workers).

    Attributes:
        lake: The lake URI (created if missing).
        spec: The embodiment: its tag, one camera name per view of the observations, the
            control rate; used when the lake does not have the embodiment yet.
        origin: The checkpoint and run the rollouts come from.
        storage_options: Object-store options of the lake.
    """

    lake: str
    spec: EmbodimentSpec
    origin: RolloutOrigin
    storage_options: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if not self.spec.cameras:
            raise ValueError(
                f"a rollout target needs the camera name of every view; embodiment {self.spec.tag!r} names none"
            )
        if self.spec.fps <= 0:
            raise ValueError(f"a rollout target needs the control rate (spec fps > 0), got {self.spec.fps}")

    def write(self, episodes: Sequence[RolloutEpisode]) -> RolloutWriteResult:
        """`write_rollouts` of `episodes` into this target."""
        return write_rollouts(self.lake, episodes, self.origin, spec=self.spec, storage_options=self.storage_options)


@dataclass(frozen=True, kw_only=True)
class RolloutWriteResult:
    """What `write_rollouts` did.

    Attributes:
        lake_uri: The lake written.
        lake_version: The version it published (the old one when nothing was new).
        written: Episodes written.
        skipped: Episodes the lake already held (same content, seed and weights).
        successes: Successful episodes among those written.
        steps: Steps written.
        episode_ids: Ids of the episodes written.
    """

    lake_uri: str
    lake_version: int
    written: int
    skipped: int
    successes: int
    steps: int
    episode_ids: tuple[str, ...] = ()


def _encode_chunks(chunks: np.ndarray, steps: np.ndarray) -> dict[str, Any]:
    c = np.ascontiguousarray(chunks, dtype="<f4")
    return {
        "steps": [int(s) for s in steps],
        "shape": list(c.shape),
        "dtype": "float32",
        "data": base64.b64encode(c.tobytes()).decode("ascii"),
    }


def decode_chunks(metadata: Mapping[str, Any] | str) -> tuple[np.ndarray, np.ndarray]:
    """(chunks float32 [C, H, action_dim], the step each was asked at) of a rollout's metadata.

    Raises:
        ValueError: the metadata is not a rollout's (no `policy_chunks`).
    """
    meta = json.loads(metadata) if isinstance(metadata, str) else metadata
    pc = meta.get("policy_chunks")
    if not isinstance(pc, Mapping):
        raise ValueError("this episode's metadata has no policy_chunks: it is not a rollout written by robolake")
    arr = np.frombuffer(base64.b64decode(pc["data"]), dtype="<f4").reshape(pc["shape"]).astype(np.float32)
    return arr, np.asarray(pc["steps"], dtype=np.int64)


@dataclass
class _Prepared:
    row: dict[str, Any]
    steps: pa.Table
    media: pa.Table
    hash: str


def _prepare(e: RolloutEpisode, origin: RolloutOrigin, index: int) -> _Prepared:
    t = len(e.actions)
    ts = np.arange(t, dtype=np.float64) / e.fps
    state = np.asarray(e.states, np.float32)
    action = np.asarray(e.actions, np.float32)
    encoded = [(cam, [encode_raw(np.ascontiguousarray(f)) for f in frames]) for cam, frames in e.frames]
    digests = tuple(f"{cam}:{hashlib.sha256(b''.join(d for d, _ in rows)).hexdigest()[:16]}" for cam, rows in encoded)
    digest = content_hash(
        state=state,
        action=action,
        timestamps=ts,
        tasks=(e.task,),
        task_index=np.zeros(t, np.int32),
        media_digests=(*digests, f"seed:{e.seed}", f"weights:{origin.checkpoint_sha256}"),
    )
    episode_id = f"rollout-{origin.checkpoint_sha256[:12]}/{int(e.seed):010d}-{digest[:12]}"
    metadata = {
        "source": "rollout",
        "producer": origin.producer,
        "run": origin.run,
        "seed": int(e.seed),
        "success": bool(e.success),
        "reward": float(np.sum(e.rewards)),
        "rewards": [float(r) for r in np.asarray(e.rewards, np.float32)],
        "checkpoint": origin.checkpoint,
        "checkpoint_sha256": origin.checkpoint_sha256,
        "trained_on": dict(origin.trained_on),
        "policy": dict(origin.policy),
        "policy_chunks": _encode_chunks(e.chunks, np.asarray(e.chunk_steps)),
        "tasks": [e.task],
        "source_time_offset_s": 0.0,
        **dict(e.info),
    }
    row = {
        "episode_id": episode_id,
        "source_uri": origin.checkpoint,
        "source_format": ROLLOUT_FORMAT,
        "source_episode_index": index,
        "embodiment": e.embodiment,
        "task": e.task,
        "num_steps": t,
        "fps": float(e.fps),
        "cameras": [cam for cam, _ in e.frames],
        "success": bool(e.success),
        "content_hash": digest,
        "ingested_at": time.time_ns(),
        "metadata": json.dumps(metadata, sort_keys=True),
    }
    steps = pa.table(
        {
            "episode_id": pa.array([episode_id] * t, pa.string()),
            "embodiment": pa.array([e.embodiment] * t, pa.string()),
            "step_index": pa.array(np.arange(t, dtype=np.int32)),
            "timestamp": pa.array(ts),
            "state": pa.ListArray.from_arrays(
                pa.array(np.arange(t + 1, dtype=np.int32) * state.shape[1]), pa.array(state.reshape(-1))
            ),
            "action": pa.ListArray.from_arrays(
                pa.array(np.arange(t + 1, dtype=np.int32) * action.shape[1]), pa.array(action.reshape(-1))
            ),
            "task_index": pa.array(np.zeros(t, np.int32)),
        },
        schema=schema_for_table("steps"),
    )
    cols: dict[str, list[Any]] = {k: [] for k in schema_for_table("media").names}
    for (cam, rows), (_, frames) in zip(encoded, e.frames, strict=True):
        cols["episode_id"] += [episode_id] * t
        cols["camera"] += [cam] * t
        cols["step_index"] += list(range(t))
        cols["timestamp"] += ts.tolist()
        cols["width"] += [int(frames.shape[2])] * t
        cols["height"] += [int(frames.shape[1])] * t
        cols["encoding"] += [enc for _, enc in rows]
        cols["data"] += [d for d, _ in rows]
    return _Prepared(row, steps, pa.Table.from_pydict(cols, schema=schema_for_table("media")), digest)


def _check_spec(
    lake: Lake, episodes: Sequence[RolloutEpisode], spec: EmbodimentSpec | None
) -> dict[str, EmbodimentSpec]:
    """The spec of every embodiment the rollouts use: the lake's (checked), else `spec`."""
    have = lake.embodiments()
    out: dict[str, EmbodimentSpec] = {}
    for e in episodes:
        if e.embodiment in out:
            continue
        s = have.get(e.embodiment) or (spec if spec is not None and spec.tag == e.embodiment else None)
        if s is None:
            raise ValueError(
                f"lake {lake.uri} has no embodiment {e.embodiment!r} and no spec of it was given; pass "
                "spec=EmbodimentSpec(...) (robolake.sim.record_to_lake.sim_embodiment_spec for the sim suite)"
            )
        cams = tuple(c for c, _ in e.frames)
        if (s.state_dim, s.action_dim) != (e.states.shape[1], e.actions.shape[1]) or (
            s.cameras and tuple(s.cameras) != cams
        ):
            raise ValueError(
                f"rollouts of embodiment {e.embodiment!r} have state/action widths "
                f"{e.states.shape[1]}/{e.actions.shape[1]} and cameras {list(cams)}, but lake {lake.uri} has "
                f"{s.state_dim}/{s.action_dim} and {list(s.cameras)}; "
                "record into another lake, or under another embodiment tag"
            )
        out[e.embodiment] = s
    return out


def write_rollouts(
    lake: Lake | str,
    episodes: Sequence[RolloutEpisode],
    origin: RolloutOrigin,
    *,
    spec: EmbodimentSpec | None = None,
    storage_options: dict[str, str] | None = None,
) -> RolloutWriteResult:
    """Write `episodes` into `lake` (created if missing) as one lake version, under the write lease.

    Args:
        lake: A Lake or a lake URI.
        episodes: The rollouts.
        origin: The checkpoint, run and training data they came from.
        spec: The embodiment's spec, for a lake that does not have the embodiment yet.
        storage_options: Object-store options, when `lake` is a URI.

    Returns:
        What was written and skipped.

    Raises:
        ValueError: the lake's spec of the embodiment has other widths or cameras, or the lake
            lacks it and `spec` is None.
        CommitConflictError: other writers kept changing the lake (re-run).
    """
    from robolake.lake.upkeep.compact import compact_in, needs_compaction

    handle = lake if isinstance(lake, Lake) else Lake.open_or_create(lake, storage_options=storage_options)
    specs = _check_spec(handle, episodes, spec)
    prepared = [_prepare(e, origin, i) for i, e in enumerate(episodes)]

    def attempt(handle: Lake, n: int) -> RolloutWriteResult:
        have = handle.content_hashes()
        todo: list[_Prepared] = []
        for p in prepared:
            if p.hash not in have:
                have.add(p.hash)
                todo.append(p)
        if not todo:
            return RolloutWriteResult(
                lake_uri=handle.uri, lake_version=handle.version, written=0, skipped=len(prepared), successes=0, steps=0
            )
        rows = [p.row for p in todo]
        steps = pa.concat_tables([p.steps for p in todo])
        stats = partial_stats(steps)
        with handle.begin() as tx:
            tx.acquire()
            tx.append_table("media", pa.concat_tables([p.media for p in todo]))
            tx.append_table("steps", steps)
            tx.append_table("episodes", pa.Table.from_pylist(rows, schema=schema_for_table("episodes")))
            merge_embodiment_stats(tx, specs, Counter(r["embodiment"] for r in rows), [stats], episodes=rows)
            tx.index_episodes(("episodes", "steps", "media"))
            summary: dict[str, Any] = {
                "source": "rollout",
                "producer": origin.producer,
                "run": origin.run,
                "checkpoint_sha256": origin.checkpoint_sha256,
                "episodes": len(rows),
                "successes": sum(bool(r["success"]) for r in rows),
                "steps": steps.num_rows,
            }
            if needs_compaction(tx):
                summary["compacted"] = compact_in(tx)
            published = tx.commit("rollouts", summary)
        return RolloutWriteResult(
            lake_uri=handle.uri,
            lake_version=published.version,
            written=len(todo),
            skipped=len(prepared) - len(todo),
            successes=sum(bool(r["success"]) for r in rows),
            steps=int(steps.num_rows),
            episode_ids=tuple(r["episode_id"] for r in rows),
        )

    return commit_with_retries(handle, attempt, what="these rollouts")
