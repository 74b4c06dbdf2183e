"""EmbodimentSpec: what a robot's state and action vectors mean, GR00T `modality.json` compatible.

GR00T's `meta/modality.json` names slices of the flat `observation.state` and `action` vectors
(`{"state": {"left_arm": {"start": 0, "end": 7}, ...}, "video": {"ego_view": {"original_key":
"observation.images.ego_view"}}, "annotation": {...}}`). The spec keeps exactly that, plus what
the lake needs besides: the tag, the camera names in order, fps and the vector widths, so the
modality file can be written back unchanged and a dataset without one still gets a spec.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SliceSpec", "EmbodimentSpec"]


@dataclass(frozen=True, kw_only=True)
class SliceSpec:
    """A named slice [start, end) of a flat state or action vector.

    Attributes:
        name: Body part or quantity (`left_arm`, `gripper`, ...).
        start: First index, inclusive.
        end: Last index, exclusive.
        extra: Any other modality.json keys (`absolute`, `rotation_type`, `dtype`, ...), kept verbatim.
    """

    name: str
    start: int
    end: int
    extra: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not (0 <= self.start < self.end):
            raise ValueError(f"slice {self.name!r} has start={self.start}, end={self.end}; need 0 <= start < end")


def _parse_slices(section: Any, kind: str) -> tuple[SliceSpec, ...]:
    if not isinstance(section, dict):
        raise ValueError(
            f"modality.json {kind} is {type(section).__name__}, expected an object of named slices "
            f'like {{"arm": {{"start": 0, "end": 6}}}}'
        )
    slices = []
    for name, body in section.items():
        if not isinstance(body, dict) or "start" not in body or "end" not in body:
            raise ValueError(f"modality.json {kind}.{name} needs 'start' and 'end', got {body!r}")
        for bound in ("start", "end"):
            value = body[bound]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"modality.json {kind}.{name}.{bound} is {value!r}, expected an integer index")
        extra = tuple(sorted((k, v) for k, v in body.items() if k not in ("start", "end")))
        try:
            slices.append(SliceSpec(name=name, start=int(body["start"]), end=int(body["end"]), extra=extra))
        except ValueError as e:
            raise ValueError(f"modality.json {kind}.{name}: {e}") from None
    return tuple(sorted(slices, key=lambda s: s.start))


def _section(modality: Any, name: str) -> dict[str, Any]:
    """A named section of a modality dict (empty when absent), checked to be an object."""
    if not isinstance(modality, dict):
        raise ValueError(f"modality.json holds {type(modality).__name__}, expected an object with state/action/video")
    section = modality.get(name, {})
    if not isinstance(section, dict):
        raise ValueError(f"modality.json {name} is {type(section).__name__}, expected an object of named entries")
    return section


def _slices_json(slices: tuple[SliceSpec, ...]) -> dict[str, Any]:
    return {s.name: {"start": s.start, "end": s.end, **dict(s.extra)} for s in slices}


@dataclass(frozen=True, kw_only=True)
class EmbodimentSpec:
    """The layout of one embodiment's observations and actions.

    Attributes:
        tag: Embodiment tag, unique in a lake (`gr1_arms_only`, `so100`, ...).
        state_dim: Width of the flat state vector.
        action_dim: Width of the flat action vector.
        state: Named state slices (modality.json "state").
        action: Named action slices (modality.json "action").
        cameras: Camera names in order; the video modality keys.
        video_keys: Camera name -> source video key (modality.json "video" original_key).
        annotations: modality.json "annotation" section, kept verbatim.
        fps: Recording rate.
        robot_type: The source's robot_type string, if any.
    """

    tag: str
    state_dim: int
    action_dim: int
    state: tuple[SliceSpec, ...] = ()
    action: tuple[SliceSpec, ...] = ()
    cameras: tuple[str, ...] = ()
    video_keys: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = field(default=())
    fps: float = 0.0
    robot_type: str = ""

    def __post_init__(self) -> None:
        if not self.tag:
            raise ValueError("EmbodimentSpec.tag must be a non-empty string")
        if self.state_dim <= 0 or self.action_dim <= 0:
            raise ValueError(
                f"embodiment {self.tag!r}: state_dim={self.state_dim} and action_dim={self.action_dim} must be > 0"
            )
        for kind, slices, dim in (("state", self.state, self.state_dim), ("action", self.action, self.action_dim)):
            for s in slices:
                if s.end > dim:
                    raise ValueError(
                        f"embodiment {self.tag!r}: {kind} slice {s.name!r} ends at {s.end} but the "
                        f"{kind} vector has {dim} values; fix modality.json or the dataset"
                    )

    def video_key(self, camera: str) -> str:
        """The source video key of `camera`."""
        return dict(self.video_keys).get(camera, camera)

    # --- modality.json -------------------------------------------------------------------

    @classmethod
    def from_modality_json(
        cls,
        modality: dict[str, Any],
        *,
        tag: str,
        state_dim: int | None = None,
        action_dim: int | None = None,
        fps: float = 0.0,
        robot_type: str = "",
    ) -> EmbodimentSpec:
        """Build a spec from a parsed GR00T `meta/modality.json`.

        Widths default to the end of the last slice; pass the dataset's real widths to have a
        contradiction between the two reported here instead of at training time.

        Raises:
            ValueError: the modality dict is malformed or contradicts the given widths.
        """
        state = _parse_slices(_section(modality, "state"), "state")
        action = _parse_slices(_section(modality, "action"), "action")
        videos = _section(modality, "video")
        video_keys = tuple(
            (name, str(body.get("original_key", name)) if isinstance(body, dict) else name)
            for name, body in videos.items()
        )
        annotations = tuple(
            (name, str(body.get("original_key", f"annotation.{name}")) if isinstance(body, dict) else name)
            for name, body in _section(modality, "annotation").items()
        )
        s_dim = state_dim if state_dim is not None else max((s.end for s in state), default=0)
        a_dim = action_dim if action_dim is not None else max((s.end for s in action), default=0)
        return cls(
            tag=tag,
            state_dim=s_dim,
            action_dim=a_dim,
            state=state,
            action=action,
            cameras=tuple(name for name, _ in video_keys),
            video_keys=video_keys,
            annotations=annotations,
            fps=fps,
            robot_type=robot_type,
        )

    def to_modality_json(self) -> dict[str, Any]:
        """The GR00T `meta/modality.json` dict of this spec."""
        out: dict[str, Any] = {
            "state": _slices_json(self.state),
            "action": _slices_json(self.action),
            "video": {cam: {"original_key": self.video_key(cam)} for cam in self.cameras},
        }
        if self.annotations:
            out["annotation"] = {
                name: ({} if key == f"annotation.{name}" else {"original_key": key}) for name, key in self.annotations
            }
        return out

    # --- lake storage --------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(
            {
                "tag": self.tag,
                "state_dim": self.state_dim,
                "action_dim": self.action_dim,
                "fps": self.fps,
                "robot_type": self.robot_type,
                "cameras": list(self.cameras),
                "modality": self.to_modality_json(),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> EmbodimentSpec:
        d = json.loads(text)
        spec = cls.from_modality_json(
            d["modality"],
            tag=d["tag"],
            state_dim=d["state_dim"],
            action_dim=d["action_dim"],
            fps=d.get("fps", 0.0),
            robot_type=d.get("robot_type", ""),
        )
        if list(spec.cameras) != d.get("cameras", list(spec.cameras)):
            spec = dataclasses.replace(spec, cameras=tuple(d["cameras"]))
        return spec
