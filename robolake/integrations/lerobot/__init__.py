"""LeRobot's dataset interface over a lake: what a LeRobot training script changes to read robolake.

    from robolake.integrations.lerobot import LakeLeRobotDataset, LakeSource

    dataset = LakeLeRobotDataset(LakeSource(uri="lake/", split="train"), delta_timestamps=delta)
    policy = make_policy(cfg.policy, ds_meta=dataset.meta)

Items equal `LeRobotDataset.__getitem__`'s for the same data (see `dataset.py`); `dataset.meta`
answers what policies read from `LeRobotDatasetMetadata`. LeRobot itself is never imported.
"""

from robolake.integrations.lerobot.dataset import LakeLeRobotDataset, LakeLeRobotIterable, MixtureSampler
from robolake.integrations.lerobot.metadata import LakeDatasetMetadata
from robolake.integrations.lerobot.mixture import draw_epoch
from robolake.integrations.lerobot.source import FrameTable, LakeSource

__all__ = [
    "FrameTable",
    "LakeDatasetMetadata",
    "LakeLeRobotDataset",
    "LakeLeRobotIterable",
    "LakeSource",
    "MixtureSampler",
    "draw_epoch",
]
