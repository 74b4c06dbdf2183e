"""`lerobot_adapter.items_equal`: the LeRobot adapter's items against `LeRobotDataset`'s, item by item.

Both edges of every episode and random frames, with state, action and image windows (so the
`*_is_pad` masks and the clamping at episode edges are compared too). Frames read from the
record (`exact_frames=True`) must be bit-exact, since both sides decode the same h264 packets;
the access copy's largest pixel distance from them is reported beside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robolake.bench.peers.process import Peer

__all__ = ["adapter_items_equal"]

# export-only columns LeRobot's items carry that the adapter does not serve (not features a policy reads)
EXPORT_ONLY = ("next.done", "next.success", "annotation.human.action.task_description")


def adapter_items_equal(lake: str, v3: Path, lerobot: Peer, work: Path) -> dict[str, Any]:
    """Compare the adapter on `lake` with LeRobot (torchcodec, in `lerobot`) on its v3.0 export `v3`."""
    import numpy as np

    from robolake.bench.load import HORIZON
    from robolake.integrations.lerobot import LakeLeRobotDataset
    from robolake.integrations.lerobot.compare import compare_items, saved_items

    probe = LakeLeRobotDataset(lake)
    fps, cams = probe.fps, probe.meta.camera_keys
    delta = {"action": [i / fps for i in range(HORIZON)], "observation.state": [-1 / fps, 0.0]}
    delta.update({c: [-1 / fps, 0.0] for c in cams})
    ds = LakeLeRobotDataset(lake, delta_timestamps=delta, exact_frames=True)
    starts = ds.table.starts
    idx = sorted(
        {int(x) for a, b in zip(starts[:-1], starts[1:], strict=True) for x in (a, a + 1, b - 2, b - 1)}
        | set(np.random.default_rng(0).integers(0, len(ds), 24).tolist())
    )
    out = work / "lerobot-items.npz"
    answer = lerobot.request(
        "items",
        root=str(v3),
        repo_id="local/real",
        delta_timestamps=delta,
        indices=idx,
        out=str(out),
        backend="torchcodec",
    )
    theirs = saved_items(str(out), answer["meta"], idx)
    report = compare_items(ds.items(idx), theirs, cams, ignore=EXPORT_ONLY)
    copy = LakeLeRobotDataset(lake, delta_timestamps=delta)  # the access copy, as the timed adapter reads
    via_copy = compare_items(copy.items(idx), theirs, cams, max_abs_pixel=1.0, ignore=EXPORT_ONLY)
    return report.as_dict() | {
        "indices": len(idx),
        "delta_timestamps": delta,
        "backend": "torchcodec",
        "frames_from": "the record (exact_frames=True)",
        "access_copy_max_abs_pixel": via_copy.max_abs_pixel,
        "access_copy_other_keys_equal": via_copy.equal,
    }
