"""Isaac-GR00T's data interface over a lake: what a GR00T training script changes to read robolake.

    from robolake.integrations.gr00t import LakeGr00tDataset
    from robolake.integrations.lerobot import LakeSource

    dataset = LakeGr00tDataset(LakeSource(uri="lake/", split="train"), data_config.modality_config())

Samples equal `LeRobotSingleDataset.get_step_data`'s for the same data (see `dataset.py`).
Isaac-GR00T itself is never imported.
"""

from robolake.integrations.gr00t.dataset import LakeGr00tDataset, ModalityConfig, lake_modality_json

__all__ = ["LakeGr00tDataset", "ModalityConfig", "lake_modality_json"]
