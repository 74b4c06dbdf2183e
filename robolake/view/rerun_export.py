"""`robolake view LAKE --rerun OUT.rrd`: chosen episodes as a Rerun recording.

Rerun's viewer is the tool many robotics teams already keep open; a `.rrd` file is how data
reaches it without a running robolake. Each episode becomes one subtree of the recording,
`episodes/<episode id>/` (the id escaped as one entity-path part), on two timelines that every
episode shares: `step` (the step index) and `time` (seconds from the episode's first step, the
lake's timestamps). Under it:

- `camera/<name>`: every frame as an `EncodedImage`, the bytes `frames.frame_bytes` gives (the
  lake's own JPEG/PNG where it has them, a lossless PNG of `FrameReader`'s decode otherwise);
  Rerun decodes them lazily, so the file is about the size of the lake's frames;
- `state/<slice>/<i>` and `action/<slice>/<i>`: one scalar series per joint, named by the
  embodiment's modality.json slices, sent as whole columns (`send_columns`: one call per joint,
  not one per step);
- `task`: the instruction, as a static text document.

The export reads through the same catalog as the web app and writes only the `.rrd` file.
`rerun-sdk` is imported here and nowhere else, on first use; without it the export says which
extra to install.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robolake.lake import Lake
from robolake.view.catalog import LakeCatalog
from robolake.view.episodes import EpisodeCatalog
from robolake.view.frames import FrameSource

__all__ = ["RerunExport", "export_rerun"]

_JOINT = re.compile(r"^(.*)\[(\d+)\]$")


@dataclass(frozen=True, kw_only=True)
class RerunExport:
    """What `export_rerun` wrote.

    Attributes:
        path: The .rrd file.
        episodes: Episode ids exported, in order.
        frames: Camera frames logged.
        scalars: Scalar values logged (steps x joints, state and action).
        entity_paths: The entity paths logged, sorted.
    """

    path: str
    episodes: tuple[str, ...]
    frames: int
    scalars: int
    entity_paths: tuple[str, ...]


def _rerun() -> Any:
    try:
        import rerun as rr
    except ImportError as e:
        raise ImportError(
            "the Rerun export needs rerun-sdk: pip install 'robolake[view]' (or pip install rerun-sdk)"
        ) from e
    return rr


def _joint_path(rr: Any, name: str) -> str:
    """`left_arm[3]` -> `left_arm/3` (each part escaped for an entity path)."""
    m = _JOINT.match(name)
    if m is None:
        return rr.escape_entity_path_part(name)
    return f"{rr.escape_entity_path_part(m.group(1))}/{m.group(2)}"


def export_rerun(
    lake: Lake,
    out: str | Path,
    episode_ids: Sequence[str] | None = None,
    *,
    progress: Callable[[str, int, int], None] | None = None,
) -> RerunExport:
    """Write the chosen episodes of `lake` (all of them when None) to the Rerun file `out`.

    Args:
        lake: The lake handle (at a version or tag).
        out: The .rrd file to write (its directory is created).
        episode_ids: Which episodes, in order; None for every episode of the handle.
        progress: Called as progress("rerun", done, total) after each episode.

    Returns:
        What was written.

    Raises:
        KeyError: an episode id is not in the lake (the message names it).
        ImportError: rerun-sdk is not installed.
    """
    rr = _rerun()
    catalog = LakeCatalog(lake)
    episodes = EpisodeCatalog(catalog)
    frames = FrameSource(lake)
    ids = list(episode_ids) if episode_ids is not None else episodes.index()["episode_id"].to_pylist()
    missing = [e for e in ids if not episodes.has(e)]
    if missing:
        raise KeyError(
            f"lake {lake.uri} version {lake.version} has no episode {missing[0]!r} ({len(missing)} unknown); "
            "list them with `robolake view LAKE` or `robolake inspect LAKE`"
        )
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = rr.RecordingStream("robolake", recording_id=f"{lake.uri}@{lake.version}")
    rec.save(str(path))
    n_frames = n_scalars = 0
    logged: set[str] = set()
    for done, eid in enumerate(ids, 1):
        detail = episodes.detail(eid)
        series = episodes.series(eid)
        if detail is None or series is None:  # checked by `has` above; the index is this handle's
            raise KeyError(f"lake {lake.uri} has no episode {eid!r}")
        ts, state, action = series
        base = f"/episodes/{rr.escape_entity_path_part(eid)}"
        steps = np.arange(len(ts), dtype=np.int64)
        times = [rr.TimeColumn("step", sequence=steps), rr.TimeColumn("time", duration=ts)]
        rec.log(f"{base}/task", rr.TextDocument(detail["task"]), static=True)
        logged.add(f"{base}/task")
        for kind, values in (("state", state), ("action", action)):
            for d, name in enumerate(detail[f"{kind}_names"]):
                entity = f"{base}/{kind}/{_joint_path(rr, name)}"
                rec.send_columns(
                    entity, indexes=times, columns=rr.Scalars.columns(scalars=values[:, d].astype(np.float64))
                )
                logged.add(entity)
                n_scalars += len(ts)
        for cam in detail["cameras"]:
            entity = f"{base}/camera/{rr.escape_entity_path_part(cam['name'])}"
            for step in range(detail["num_steps"]):
                data, mime = frames.get(eid, cam["name"], step)
                rec.set_time("step", sequence=step)
                rec.set_time("time", duration=float(ts[step]) if step < len(ts) else step / (detail["fps"] or 1.0))
                rec.log(entity, rr.EncodedImage(contents=data, media_type=mime))
                n_frames += 1
            logged.add(entity)
        if progress is not None:
            progress("rerun", done, len(ids))
    rec.flush()
    rec.disconnect()
    return RerunExport(
        path=str(path), episodes=tuple(ids), frames=n_frames, scalars=n_scalars, entity_paths=tuple(sorted(logged))
    )
