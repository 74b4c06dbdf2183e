"""Which recorded frames a trimmed episode's steps show.

`robolake trim` drops steps without touching a byte of media: the episode's `steps` rows are
written again, kept ones only and renumbered 0..k-1 (they are a few floats a step, and every
reader of state and action then works unchanged), while its `media`, `streams` and `access` rows
stay as ingest wrote them, one per original step. The episode's metadata says which original
steps remain (`trim`: the frame rows per camera and the kept half-open ranges of original step
indices, in order); `KeptSteps.frame_steps` turns that into the original step (the media row) of
each kept step. Every frame reader maps through it: `FrameReader`, the packer's sample index,
export. Recorded videos keep decoding from their own packets, dropped ones included, so no
keyframe is ever lost.

An episode without `trim` shows frame t at step t. Trimming a trimmed episode composes the
maps (`KeptSteps.then`), so there is one map per episode, always against the rows ingest wrote.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TRIM_KEY", "KeptSteps", "kept_of"]

TRIM_KEY = "trim"


@dataclass(frozen=True)
class KeptSteps:
    """The original steps a trimmed episode keeps.

    Attributes:
        frames: Media rows per camera: the steps ingest wrote.
        ranges: Half-open [start, stop) ranges of original step indices kept, ascending and disjoint.
    """

    frames: int
    ranges: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        last = 0
        for a, b in self.ranges:
            if not (last <= a < b <= self.frames):
                raise ValueError(
                    f"kept step ranges {list(self.ranges)} do not lie ascending within the episode's {self.frames} "
                    "frames; its metadata `trim` is damaged: `robolake restore` the version before the trim"
                )
            last = b

    @property
    def num_steps(self) -> int:
        return sum(b - a for a, b in self.ranges)

    @property
    def frame_steps(self) -> np.ndarray:
        """int64 [num_steps]: the original step (media row) each kept step shows."""
        if not self.ranges:
            return np.zeros(0, np.int64)
        return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in self.ranges])

    @classmethod
    def of(cls, frames: int, frame_steps: np.ndarray) -> KeptSteps:
        """The ranges of an ascending array of original steps."""
        s = np.asarray(frame_steps, dtype=np.int64)
        if not len(s):
            return cls(frames, ())
        breaks = np.flatnonzero(np.diff(s) != 1) + 1
        starts = np.concatenate([[0], breaks])
        stops = np.concatenate([breaks, [len(s)]])
        return cls(frames, tuple((int(s[a]), int(s[b - 1]) + 1) for a, b in zip(starts, stops, strict=True)))

    def then(self, keep: np.ndarray) -> KeptSteps:
        """This map after keeping the steps `keep` (indices into the current steps, ascending)."""
        return KeptSteps.of(self.frames, self.frame_steps[np.asarray(keep, dtype=np.int64)])

    def to_json(self) -> dict[str, Any]:
        return {"frames": self.frames, "kept": [list(r) for r in self.ranges]}

    @classmethod
    def untrimmed(cls, num_steps: int) -> KeptSteps:
        return cls(num_steps, ((0, num_steps),) if num_steps else ())


def kept_of(metadata: str | Mapping[str, Any] | None) -> KeptSteps | None:
    """The kept steps an episode's metadata records; None when it was never trimmed."""
    meta = json.loads(metadata or "{}") if isinstance(metadata, str) or metadata is None else metadata
    trim = meta.get(TRIM_KEY)
    if not trim:
        return None
    return KeptSteps(int(trim["frames"]), tuple((int(a), int(b)) for a, b in trim["kept"]))
