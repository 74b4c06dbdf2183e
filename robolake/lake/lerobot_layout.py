"""How a lake's episodes read as a LeRobot dataset: task numbering, camera keys, timestamps.

`robolake export` writes LeRobot datasets and `robolake.integrations.lerobot` serves LeRobot's
items straight from a lake; a policy trained on one and evaluated on the other must see the
same task indices, feature keys and timestamps, so both take them from here.
"""

from __future__ import annotations

import graphlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robolake.lake.media.kept import KeptSteps
from robolake.schemas.embodiment import EmbodimentSpec

__all__ = ["episode_tasks", "lerobot_cameras", "lerobot_timestamps", "task_order", "video_key"]

log = logging.getLogger(__name__)


def episode_tasks(episode: Mapping[str, Any]) -> list[str]:
    """The episode's task list (metadata `tasks`, else its task), which its steps' task_index points into."""
    try:
        tasks = json.loads(episode["metadata"] or "{}").get("tasks")
    except (json.JSONDecodeError, AttributeError):
        tasks = None
    return [str(t) for t in tasks] if tasks else [str(episode["task"])]


def task_order(per_episode: Sequence[Sequence[str]]) -> list[str]:
    """All tasks in an order that keeps each episode's own order (first appearance otherwise).

    A re-ingest numbers an episode's tasks by their global index, so keeping each episode's
    relative order reproduces its per-step task indices exactly.
    """
    first = list(dict.fromkeys(t for tasks in per_episode for t in tasks))
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for t in first:
        sorter.add(t)
    for tasks in per_episode:
        for a, b in zip(tasks, tasks[1:], strict=False):
            sorter.add(b, a)
    try:
        return list(sorter.static_order())
    except graphlib.CycleError:
        log.info("episodes list their tasks in contradicting orders; numbering tasks by first appearance")
        return first


def video_key(spec: EmbodimentSpec, camera: str) -> str:
    """LeRobot's feature key of a camera (`observation.images.<camera>` unless the spec maps it)."""
    key = spec.video_key(camera)
    return key if key.startswith("observation.images.") else f"observation.images.{camera}"


def lerobot_cameras(spec: EmbodimentSpec, episodes: Sequence[Mapping[str, Any]], narrow: str) -> list[str]:
    """Cameras every episode has, in spec order.

    Raises:
        ValueError: an episode lacks a camera others have (a LeRobot dataset needs every camera in
            every episode); `narrow` says how to select fewer episodes.
    """
    seen: list[str] = []
    for e in episodes:
        seen += [c for c in e["cameras"] if c not in seen]
    ordered = [c for c in spec.cameras if c in seen] + [c for c in seen if c not in spec.cameras]
    for e in episodes:
        missing = [c for c in ordered if c not in e["cameras"]]
        if missing:
            raise ValueError(
                f"episode {e['episode_id']} has no frames of camera(s) {missing} that other episodes of "
                f"{spec.tag!r} have; a LeRobot dataset needs every camera in every episode: {narrow}"
            )
    return ordered


def lerobot_timestamps(timestamps: np.ndarray, kept: KeptSteps | None, fps: float) -> np.ndarray:
    """The episode's timestamps as LeRobot reads them: from 0, at the frames the video holds.

    A trimmed episode keeps its recorded times in the lake; as LeRobot data it starts at 0, and
    where steps were dropped from the middle (the video holds its frames back to back) it is i / fps.
    """
    ts = np.asarray(timestamps, dtype=np.float64)
    if kept is None or not len(ts):
        return ts
    if len(kept.ranges) == 1:
        return ts - ts[0]
    return np.arange(len(ts), dtype=np.float64) / fps
