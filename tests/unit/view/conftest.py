"""View fixtures: small synthetic lakes built once per session, only ever read by the tests.

`view_lakes.jpeg` has three versions (create; an ingest with one episode quarantined for a
missing video; a delete of one episode, with a reason) and a tag "picked" narrowed to one of
its two episodes. `view_lakes.h264` holds the same source ingested with key-referenced h264
frames, the layout the viewer decodes (and sends as PNG) instead of passing bytes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class ViewLakes:
    jpeg: Path
    h264: Path
    deleted: str  # the episode version 3 removed
    tagged: tuple[str, ...]  # the episode tag "picked" keeps


@pytest.fixture(scope="session")
def view_lakes(tmp_path_factory: pytest.TempPathFactory) -> ViewLakes:
    from robolake.curate import delete
    from robolake.lake import Lake
    from robolake.lake.intake.ingest import IngestConfig, ingest
    from robolake.lake.protocol.tags import create_tag
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    root = tmp_path_factory.mktemp("view")
    generate_synthetic(root / "syn", SyntheticConfig.tiny(embodiments=("single_arm_7dof", "bimanual_14dof")))
    ingest(str(root / "syn"), str(root / "h264"), IngestConfig(video_frames="h264"))
    # One episode of the jpeg lake is quarantined: its video is gone.
    next((root / "syn" / "single_arm_7dof" / "videos").rglob("episode_000001.mp4")).unlink()
    ingest(str(root / "syn"), str(root / "jpeg"), IngestConfig(video_frames="jpeg"))  # the lossy, browser-ready layout
    ids = sorted(Lake.open(str(root / "jpeg")).episode_ids())
    delete(str(root / "jpeg"), episodes=[ids[0]], reason="operator saw a dropped gripper")
    lake = Lake.open(str(root / "jpeg"))
    kept = tuple(sorted(lake.episode_ids())[:1])
    create_tag(lake.uri, "picked", lake.version, episodes=kept, reason="one for the viewer")
    return ViewLakes(jpeg=root / "jpeg", h264=root / "h264", deleted=ids[0], tagged=kept)
