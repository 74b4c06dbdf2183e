"""Isaac-GR00T's data interface over a lake: `LeRobotSingleDataset`'s samples, modality-keyed.

GR00T's trainer (N1/N1.5 `gr00t.data.dataset.LeRobotSingleDataset`) reads a "GR00T LeRobot"
dataset: LeRobot v2 files plus `meta/modality.json`, which names slices of the flat state and
action vectors (`state.left_arm` = observation.state[0:7]), the cameras (`video.ego_view`) and
the language columns (`annotation.human.action.task_description`). A training config picks
keys per modality with frame offsets (`ModalityConfig(delta_indices=[-1, 0], modality_keys=[...])`)
and every sample is `get_step_data(trajectory, base_index)`: one entry per key.
`LakeGr00tDataset` hands out the same entries from a lake version, tag or split (filtered, one
embodiment), numbered as the lake's LeRobot adapter numbers them, so a GR00T config and its
transforms run unchanged. The rules it keeps (GR00T N1.5's, checked against its own code by
`tests/integration/test_gr00t_adapter.py`):

- `video.<camera>`: uint8 [T, H, W, C], each index clamped into the episode (the first or last
  frame repeats at an edge);
- `state.<slice>` / `action.<slice>`: float32 [T, end - start]; an index outside the episode is
  the first or last row when the slice is absolute (modality.json `absolute`, default true), else
  zeros;
- `annotation.<name>` (the "language" modality): a list of T strings, indices clamped;
- the modality names are GR00T's dispatch: "video", "state", "action", "language"; any other
  name, or a key that the lake's modality.json does not hold, is refused when the dataset is
  built (GR00T refuses it at its first sample or in its integrity check).

What is not the same: GR00T finds a step's video frame by the nearest frame time to the
parquet row's `timestamp`; the lake pairs step i with frame i (its ingest aligns a source whose
timestamps start later than its video, such as the PickNPlace demo whose rows start at 0.05 s,
to the frame of the same index). On such a source GR00T's own reader shows frame i + 1 for step
i; on a dataset whose timestamps start at its first frame (every `robolake export`) the two agree.
Only the task annotation is kept in a lake (`annotation.human.validity` and other per-step label
columns stay in the record), as `robolake export` writes them.

Frames come from the lake's `FrameReader` through the LeRobot adapter (the same reader, workers
and fork rule: start DataLoader workers with `multiprocessing_context="forkserver"`), and a
DataLoader batch is read in one call (`__getitems__`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from robolake.integrations.lerobot import LakeLeRobotDataset, LakeSource, MixtureSampler
from robolake.schemas import EmbodimentSpec

__all__ = ["LakeGr00tDataset", "ModalityConfig", "lake_modality_json"]

# GR00T's language key, the one annotation `robolake export` writes when a spec names none
TASK_ANNOTATION = "human.action.task_description"
MODALITIES = ("video", "state", "action", "language")


@dataclass(frozen=True)
class ModalityConfig:
    """GR00T's `ModalityConfig`: frame offsets from the sampled step and the keys to load.

    GR00T's own pydantic `ModalityConfig` (or any object with these two attributes, or a dict
    with these two keys) is accepted wherever this one is.
    """

    delta_indices: tuple[int, ...]
    modality_keys: tuple[str, ...]


def _config(value: Any, modality: str) -> ModalityConfig:
    if isinstance(value, Mapping):
        deltas, keys = value.get("delta_indices"), value.get("modality_keys")
    else:
        deltas, keys = getattr(value, "delta_indices", None), getattr(value, "modality_keys", None)
    if deltas is None or keys is None:
        raise ValueError(
            f"modality config {modality!r} is {value!r}; give delta_indices and modality_keys "
            "(GR00T's ModalityConfig, robolake.integrations.gr00t.ModalityConfig or a dict)"
        )
    return ModalityConfig(tuple(int(d) for d in deltas), tuple(str(k) for k in keys))


def lake_modality_json(spec: EmbodimentSpec, cameras: Sequence[str] | None = None) -> dict[str, Any]:
    """The modality.json a lake serves for `spec`: what `robolake export` writes beside the data.

    Slices as ingested (a spec without slices gets one slice named "state" / "action" over the
    whole vector), the cameras (`cameras`: those a selection has, default all of the spec's)
    under their own names, and the annotations the lake keeps: the task (a `*task_description*`
    annotation, or one read from `task_index`), else GR00T's default `human.action.task_description`.
    """
    modality = spec.to_modality_json()
    if cameras is not None:
        modality["video"] = {cam: {"original_key": spec.video_key(cam)} for cam in cameras}
    if not modality["state"]:
        modality["state"] = {"state": {"start": 0, "end": spec.state_dim}}
    if not modality["action"]:
        modality["action"] = {"action": {"start": 0, "end": spec.action_dim}}
    kept: dict[str, Any] = {
        name: {} for name, key in spec.annotations if key == "task_index" or "task_description" in name
    }
    modality["annotation"] = kept or {TASK_ANNOTATION: {}}
    return modality


class LakeGr00tDataset(torch.utils.data.Dataset):
    """`LeRobotSingleDataset`'s samples from a lake selection (map-style).

    Args:
        source: Which lake data (`LakeSource`: version, tag or split, `where`), or a lake URI.
        modality_configs: modality ("video", "state", "action", "language") -> ModalityConfig.
        embodiment_tag: GR00T's embodiment tag (its `EmbodimentTag` value, e.g. "gr1"; as
            `LeRobotSingleDataset` takes it), for `metadata`. Default "new_embodiment", GR00T's
            tag for a robot it was not pretrained on (a lake's own tags are not GR00T's).
        transforms: Applied to each sample as GR00T applies them (its `ComposedModalityTransform`,
            e.g. a data config's `transform()`). As GR00T's dataset does, its `set_metadata` is
            called once here with this dataset's `metadata()` (as GR00T's `DatasetMetadata` when
            Isaac-GR00T is importable, else the dict).
        exact_frames: Decode the record even where an access copy exists (bit-exact pixels).
        image_size: (height, width) to resize frames to while decoding (None: stored size).

    Raises:
        ValueError: a modality GR00T does not know, a key outside the lake's modality.json, or
            an annotation the lake does not keep; or the selection is not one embodiment.
    """

    def __init__(
        self,
        source: LakeSource | str,
        modality_configs: Mapping[str, Any],
        *,
        embodiment_tag: Any = None,
        transforms: Callable[[dict[str, Any]], Any] | None = None,
        exact_frames: bool = False,
        image_size: tuple[int, int] | None = None,
    ) -> None:
        self.frames = LakeLeRobotDataset(source, return_uint8=True, exact_frames=exact_frames, image_size=image_size)
        self.source = self.frames.source
        table = self.frames.table
        self.table = table
        self.modality_configs = {m: _config(c, m) for m, c in modality_configs.items()}
        self.modality_meta = lake_modality_json(table.spec, table.cameras)
        self._all_steps: list[tuple[int, int]] | None = None
        self.embodiment_tag = getattr(embodiment_tag, "value", embodiment_tag) or "new_embodiment"
        self.transforms = transforms
        self.delta_indices: dict[str, np.ndarray] = {}
        self._plan: dict[str, tuple[str, Any]] = {}  # key -> (modality, what to read)
        for modality, cfg in self.modality_configs.items():
            if modality not in MODALITIES:
                raise ValueError(f"modality {modality!r} is not one GR00T reads; use {list(MODALITIES)}")
            for key in cfg.modality_keys:
                self._plan[key] = (modality, self._resolve(modality, key))
                self.delta_indices[key] = np.asarray(cfg.delta_indices, dtype=np.int64)
        if transforms is not None and hasattr(transforms, "set_metadata"):
            transforms.set_metadata(self._gr00t_metadata())

    def _resolve(self, modality: str, key: str) -> Any:
        meta = self.modality_meta
        prefix = "annotation" if modality == "language" else modality
        head, _, sub = key.partition(".")
        if head != prefix or not sub:
            raise ValueError(f"{modality} key {key!r} must start with {prefix + '.'!r}")
        section = meta.get(prefix, {})
        if sub not in section:
            kept = "; the lake keeps only the task annotation" if modality == "language" else ""
            raise ValueError(
                f"key {key!r} is not in this lake's modality.json{kept}; its {prefix} keys are "
                f"{[f'{prefix}.{k}' for k in section]}"
            )
        if modality == "video":
            return sub  # the camera
        if modality == "language":
            return None
        body = section[sub]
        return (int(body["start"]), int(body["end"]), bool(body.get("absolute", True)))

    # --- LeRobotSingleDataset's attributes ---------------------------------------------------

    @property
    def trajectory_ids(self) -> np.ndarray:
        return np.arange(self.table.num_episodes, dtype=np.int64)

    @property
    def trajectory_lengths(self) -> np.ndarray:
        return self.table.lengths.copy()

    @property
    def all_steps(self) -> list[tuple[int, int]]:
        """(trajectory_id, base_index) of every step, in index order (built once, on first use)."""
        if self._all_steps is None:
            self._all_steps = [(e, i) for e, n in enumerate(self.table.lengths.tolist()) for i in range(n)]
        return self._all_steps

    @property
    def modality_keys(self) -> dict[str, list[str]]:
        return {m: list(c.modality_keys) for m, c in self.modality_configs.items()}

    @property
    def lerobot_modality_meta(self) -> dict[str, Any]:
        """The lake's modality.json (a dict; GR00T's `LeRobotModalityMetadata.model_validate` takes it)."""
        return self.modality_meta

    def __len__(self) -> int:
        return self.table.num_frames

    def __getitem__(self, index: int) -> Any:
        index = int(index)
        return self._transform(self.steps([index + len(self) if index < 0 else index])[0])

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A DataLoader batch in one read (torch's fetcher calls this when it exists)."""
        return [self._transform(s) for s in self.steps(indices)]

    def sampler(self, *, epoch: int = 0, shuffle: bool = True) -> MixtureSampler:
        """Each epoch's step indices by the source's mixture (`LakeSource(mix=...)`; every step
        once without one), shuffled by (seed, epoch): pass it to `DataLoader(sampler=...)` and
        call `set_epoch` each epoch. Steps are numbered as the LeRobot adapter numbers frames."""
        return self.frames.sampler(epoch=epoch, shuffle=shuffle)

    def get_step_data(self, trajectory_id: int, base_index: int) -> dict[str, Any]:
        """The raw sample of step `base_index` of trajectory `trajectory_id` (no transforms).

        Raises:
            IndexError: no such trajectory or step.
        """
        t = self.table
        if not 0 <= trajectory_id < t.num_episodes or not 0 <= base_index < int(t.lengths[trajectory_id]):
            raise IndexError(f"no step {base_index} in trajectory {trajectory_id} (trajectory_lengths holds the sizes)")
        return self.steps([int(t.starts[trajectory_id]) + base_index])[0]

    # --- building samples -------------------------------------------------------------------

    def steps(self, indices: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """Raw samples of global step indices (all_steps order), every frame read in one call.

        Raises:
            IndexError: an index outside [0, len(self)).
        """
        t = self.table
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError(f"step index out of range for a dataset of {len(self)} steps: {idx.min()}..{idx.max()}")
        ep = t.episode_of(idx)
        start, stop = t.starts[ep], t.starts[ep + 1]
        out: list[dict[str, Any]] = [{} for _ in range(idx.size)]
        for key, (modality, what) in self._plan.items():
            want = idx[:, None] + self.delta_indices[key][None, :]
            rows = np.clip(want, start[:, None], stop[:, None] - 1)  # GR00T clamps into the trajectory
            if modality == "video":
                flat = rows.reshape(-1)
                e = t.episode_of(flat)
                frames = self.frames.frames_of(what, list(zip(e.tolist(), (flat - t.starts[e]).tolist(), strict=True)))
                stacked = np.stack(frames).reshape(*rows.shape, *frames[0].shape)
                for n in range(idx.size):
                    out[n][key] = stacked[n]
            elif modality == "language":
                for n in range(idx.size):
                    out[n][key] = [t.tasks[int(i)] for i in t.task_index[rows[n]]]
            else:
                a, b, absolute = what
                vectors = t.state if modality == "state" else t.action
                values = vectors[rows, a:b].astype(np.float32, copy=True)
                if not absolute:  # GR00T pads a relative slice with zeros, not the edge row
                    pad = (want < start[:, None]) | (want >= stop[:, None])
                    values[pad] = 0.0
                for n in range(idx.size):
                    out[n][key] = values[n]
        return out

    def _transform(self, sample: dict[str, Any]) -> Any:
        return sample if self.transforms is None else self.transforms(sample)

    # --- GR00T's DatasetMetadata ------------------------------------------------------------

    def _gr00t_metadata(self) -> Any:
        """`metadata()` as GR00T's own `DatasetMetadata` where Isaac-GR00T is installed (its
        transforms read attributes of it), else the dict."""
        try:
            from gr00t.data.schema import DatasetMetadata  # optional: only where GR00T's transforms are used
        except ImportError:
            return self.metadata()
        return DatasetMetadata.model_validate(self.metadata())

    def metadata(self) -> dict[str, Any]:
        """What GR00T's `DatasetMetadata` holds (`DatasetMetadata.model_validate(ds.metadata())`):
        per-slice statistics (mean, std, min, max, q01, q99 of the selection), each slice's
        shape, `absolute`, `rotation_type` and `continuous`, each camera's resolution [W, H],
        channels and fps, and the embodiment tag."""
        stats = self.frames.meta.stats
        meta = self.modality_meta
        statistics: dict[str, Any] = {}
        modalities: dict[str, Any] = {}
        for modality, feature in (("state", "observation.state"), ("action", "action")):
            statistics[modality], modalities[modality] = {}, {}
            for name, body in meta[modality].items():
                a, b = int(body["start"]), int(body["end"])
                statistics[modality][name] = {
                    s: np.asarray(stats[feature][s], dtype=np.float64)[a:b].tolist()
                    for s in ("mean", "std", "min", "max", "q01", "q99")
                }
                dtype = np.dtype(body.get("dtype", "float32"))
                modalities[modality][name] = {
                    "absolute": bool(body.get("absolute", True)),
                    "rotation_type": body.get("rotation_type"),
                    "shape": [b - a],
                    "continuous": bool(np.issubdtype(dtype, np.floating)),
                }
        modalities["video"] = {}
        for camera, key in zip(self.table.cameras, self.table.camera_keys, strict=True):
            h, w, c = self.frames.meta.features[key]["shape"]
            modalities["video"][camera] = {"resolution": [w, h], "channels": c, "fps": float(self.table.fps)}
        return {"statistics": statistics, "modalities": modalities, "embodiment_tag": self.embodiment_tag}
